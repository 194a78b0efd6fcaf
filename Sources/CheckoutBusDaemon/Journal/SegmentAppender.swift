#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import CFileIO
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Appends journal records to the open segment file, a whole block at a time, and a long run
/// with `O_DIRECT` when the file system takes it: its bytes go from block-aligned memory to the
/// disk, with no copy into the page cache and no writeback later (docs/durability.md, "Direct
/// writes"). A short run — light load's batch of a few records — goes through the page cache, so
/// the pipeline does not wait for the device on each one.
///
/// Every append writes the segment's last partial block again, from its start: the bytes already
/// there, kept at the head of the staging buffer, then the new ones, and zeros to the block's
/// end. The journal's batches leave room for that block in front of their records, placed so that
/// it starts on a block boundary, so a run is usually written where it lies (``Room``). The rest
/// are copied into the staging buffer behind the block: a run that does not start its batch (a
/// retry of the records after the ones written, the run after a rotation), one that ends before
/// its batch's last record and needs padding, a direct one whose block would not start on a block
/// boundary (the batch's placement foreseen wrongly), and the first after a failed read of the
/// block. A direct write needs whole blocks; a buffered one that covers whole pages never has the
/// kernel read a page back from the disk first (which a direct write would have left uncached).
/// While a segment is open, its file may therefore end with up to 4095 zero bytes past the last
/// record; ``finish()`` cuts them when the segment is closed, and recovery after a crash cuts them
/// as padding (``JournalRecovery/paddingBytes``).
///
/// Not `Sendable`: one thread at a time uses it, handed over with a journal batch — the pipeline
/// thread while no batch is at the writer thread, the writer thread while one is
/// (``JournalWriter/Job``). The journal holds it in an ``Exclusive``, which checks that claim in a
/// debug build; every hand-over passes the writer's mutex and semaphores. What other threads may
/// read at any time, whether writes are direct, is in ``mode``.
package final class SegmentAppender {
    /// The unit of a direct write: its offset, length and buffer address are multiples of it.
    /// 4 KiB serves devices of 512-byte and of 4 KiB logical blocks.
    package static let blockSize = 4096
    /// The staging buffer's size: the most bytes one `pwrite` of a staged run carries (a run
    /// written in place goes in one `pwrite`, whatever its length).
    package static let chunkBytes = 1 << 20
    /// Runs at least this long are written directly; shorter ones through the page cache.
    package static let directMinimum = 32 << 10

    /// Whether long runs go through `O_DIRECT`: read by `stats` on the pipeline thread while the
    /// writer thread may be appending, hence its own type.
    package let mode: DirectWriteMode
    var isDirect: Bool { mode.isDirect }
    /// Why direct writes stopped after they had started (a `pwrite` refused with `EINVAL`), once.
    private(set) var fallbackReason: String?
    /// Direct writes refused with `EINVAL` in a row while the same bytes went through the page
    /// cache; at two, direct writes stop for good.
    private var refusedInARow = 0
    /// The open segment (opened by the journal, buffered): reads, truncation, buffered appends.
    private var fd: Int32 = -1
    /// The same file opened with `O_DIRECT`, or -1.
    private var directFD: Int32 = -1
    private let staging: UnsafeMutableRawPointer
    /// The block offset of the segment's last partial block, whose first ``tailBytes`` bytes are
    /// at the head of ``staging``; the segment's records end at `tailStart + tailBytes`.
    private var tailStart = 0
    private var tailBytes = 0
    /// The head of ``staging`` holds the last partial block's bytes.
    private var tailLoaded = false
    /// Runs written where they lay, and runs copied into the staging buffer (tests read them).
    package private(set) var runsInPlace = 0
    package private(set) var runsStaged = 0

    /// - Parameter direct: try `O_DIRECT` (see ``JournalFiles/probeDirectWrites(in:)``).
    package init(direct: Bool) {
        mode = DirectWriteMode(direct)
        staging = .allocate(byteCount: SegmentAppender.chunkBytes, alignment: SegmentAppender.blockSize)
    }

    deinit {
        if directFD >= 0 { close(directFD) }
        staging.deallocate()
    }

    /// The end of the records written so far.
    package var size: Int { tailStart + tailBytes }

    /// Appends to segment `fd` at `path` from now on; its records end at `size`.
    /// - Returns: nil, or why the segment's last partial block could not be read (`errno`).
    func open(path: String, fd: Int32, size: Int) -> Int32? {
        if directFD >= 0 { close(directFD) }
        directFD = -1
        self.fd = fd
        setEnd(size)
        if let e = loadTail() {
            // The journal closes `fd` after a failure: nothing may touch it again.
            self.fd = -1
            return e
        }
        if isDirect {
            directFD = Glibc.open(path, O_WRONLY | cb_o_direct() | O_CLOEXEC)
            if directFD < 0 { fallBack("open with O_DIRECT: \(String(cString: strerror(errno)))") }
        }
        return nil
    }

    /// Makes `end` the end of the segment's records: its block, and the bytes of it in use.
    private func setEnd(_ end: Int) {
        tailStart = end & ~(SegmentAppender.blockSize - 1)
        tailBytes = end - tailStart
    }

    /// Reads the bytes of the last partial block into the head of the staging buffer.
    /// - Returns: nil, or the `errno` of the failed read (appends fail until a read succeeds).
    private func loadTail() -> Int32? {
        tailLoaded = false
        var done = 0
        while done < tailBytes {
            let n = pread(fd, staging + done, tailBytes - done, off_t(tailStart + done))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return n < 0 ? errno : EIO }
            done += n
        }
        tailLoaded = true
        return nil
    }

    /// Memory around a run that is the caller's to write over while the run is appended: `before`
    /// bytes before its first byte and `after` bytes after its last.
    package struct Room: Sendable, Equatable {
        package var before: Int
        package var after: Int
        package static let none = Room(before: 0, after: 0)

        package init(before: Int, after: Int) {
            self.before = before
            self.after = after
        }
    }

    /// Appends `count` bytes at `base` at the end of the segment.
    ///
    /// When `room` holds the segment's last partial block before the run and the zero padding
    /// after it — and, for a direct write, that block would start on a block boundary — the run
    /// is written where it lies: the partial block is copied in front of it, and one write covers
    /// both (``writeInPlace(_:_:direct:)``). Otherwise it is copied into the staging buffer behind
    /// that block (``writeBlocks(_:_:direct:)``). The file's bytes are the same either way.
    /// - Returns: 0, or the `errno` of the failed write; the file then ends where it did before.
    package func append(_ base: UnsafeMutableRawPointer, _ count: Int, room: Room) -> Int32 {
        let direct = isDirect && count >= SegmentAppender.directMinimum
        let mask = SegmentAppender.blockSize - 1
        if tailLoaded && room.before >= tailBytes
            && room.after >= ((tailBytes + count + mask) & ~mask) - (tailBytes + count)
            && (!direct || Int(bitPattern: base - tailBytes) & mask == 0) {
            runsInPlace += 1
            return append(count) { writeInPlace(base, count, direct: direct) }
        }
        return append(UnsafeRawPointer(base), count)
    }

    /// Appends `count` bytes at `base` at the end of the segment, through the staging buffer.
    /// - Returns: 0, or the `errno` of the failed write; the file then ends where it did before.
    package func append(_ base: UnsafeRawPointer, _ count: Int) -> Int32 {
        runsStaged += 1
        return append(count) { writeBlocks(base, count, direct: isDirect && count >= SegmentAppender.directMinimum) }
    }

    /// Runs `write`, which appends a run, and cuts the file back to where it ended should it fail.
    private func append(_ count: Int, _ write: () -> Int32) -> Int32 {
        // The last block is written again from the head of the staging buffer: never without it.
        if !tailLoaded, let e = loadTail() { return e }
        let start = size
        let failure = Failpoints.hit("journal.write") ?? write()
        if failure != 0 {
            // Leave the file as it was: a partial run would be a torn tail. Should the cut fail,
            // nothing changes what happens next, so its result is not acted on: the bytes past
            // `start` are never read as records, the next append writes over them at `start`
            // (every write names its offset), and recovery cuts a torn tail. The tail block is
            // read again before that append (`tailLoaded`).
            _ = ftruncate(fd, off_t(start))
            setEnd(start)
            _ = loadTail()
        }
        return failure
    }

    /// Writes the run where it lies: the last partial block's bytes (the head of the staging
    /// buffer) copied just before it, then ``writeTail(_:used:direct:)``.
    private func writeInPlace(_ base: UnsafeMutableRawPointer, _ count: Int, direct: Bool) -> Int32 {
        let from = base - tailBytes
        from.copyMemory(from: staging, byteCount: tailBytes)
        switch writeTail(from, used: tailBytes + count, direct: direct) {
        case .written: return 0
        case .failed(let e): return e
        case .refused(let e): return refused(e) { writeInPlace(base, count, direct: false) }
        }
    }

    /// Writes the run through the staging buffer, behind the last partial block, a chunk at a time.
    private func writeBlocks(_ base: UnsafeRawPointer, _ count: Int, direct: Bool) -> Int32 {
        var from = 0
        while from < count {
            let n = min(count - from, SegmentAppender.chunkBytes - tailBytes)
            (staging + tailBytes).copyMemory(from: base + from, byteCount: n)
            switch writeTail(staging, used: tailBytes + n, direct: direct) {
            case .written: break
            case .failed(let e): return e
            case .refused(let e):
                let rest = from
                return refused(e) { writeBlocks(base + rest, count - rest, direct: false) }
            }
            from += n
        }
        return 0
    }

    /// Writes the `used` bytes at `p` — the segment's last partial block, then new bytes — padded
    /// with zeros to whole blocks, at that block; then keeps the new last partial block at the head
    /// of the staging buffer (where `p` may be already).
    private func writeTail(_ p: UnsafeMutableRawPointer, used: Int, direct: Bool) -> Outcome {
        let mask = SegmentAppender.blockSize - 1
        let padded = (used + mask) & ~mask
        (p + used).initializeMemory(as: UInt8.self, repeating: 0, count: padded - used)
        let outcome = writeOut(p, padded, direct: direct)
        guard case .written = outcome else { return outcome }
        let end = tailStart + used
        let newStart = end & ~mask
        let kept = p + (newStart - tailStart)
        // Overlapping when `p` is the staging buffer: `copyMemory` moves as `memmove` does.
        if kept != staging { staging.copyMemory(from: kept, byteCount: end - newStart) }
        setEnd(end)
        return .written
    }

    /// How one write of whole blocks went.
    private enum Outcome {
        case written
        /// Failed with this `errno`.
        case failed(Int32)
        /// A direct write refused with `EINVAL` before any of it was written.
        case refused(Int32)
    }

    /// Writes the `padded` bytes (whole blocks) at `p` at the segment's last partial block.
    private func writeOut(_ p: UnsafeRawPointer, _ padded: Int, direct: Bool) -> Outcome {
        let mask = SegmentAppender.blockSize - 1
        let target = direct ? directFD : fd
        var done = 0
        while done < padded {
            let injected = direct ? Failpoints.hit("journal.direct-write") : nil
            let w = injected == nil ? pwrite(target, p + done, padded - done, off_t(tailStart + done)) : -1
            if let injected { errno = injected }
            if w < 0 {
                if errno == EINTR { continue }
                let e = errno
                return direct && e == EINVAL && done == 0 ? .refused(e) : .failed(e)
            }
            if direct {
                // A short direct write ends on a block: go on from there.
                let step = w & ~mask
                if step == 0 { return .failed(EIO) }
                done += step
                refusedInARow = 0
            } else {
                // A short buffered one (a file size limit): the next call says why.
                done += w
            }
        }
        return .written
    }

    /// A direct write was refused with `EINVAL` (`e`): a file system that opened with O_DIRECT
    /// and yet refuses its writes (an alignment beyond 4 KiB) — or a write the file size limit
    /// cut short of a block. The same bytes through the page cache (`buffered`) tell which:
    /// refused, that error (`File too large`) is the run's, and direct writes go on once it
    /// passes; written, the next direct write is tried too, and only a second refusal in a row
    /// stops them for good (the limit may have been lifted between the two writes: a full disk
    /// that cleared must not turn direct writes off).
    private func refused(_ e: Int32, _ buffered: () -> Int32) -> Int32 {
        let result = buffered()
        if result == 0 {
            refusedInARow += 1
            if refusedInARow >= 2 { fallBack("pwrite with O_DIRECT: \(String(cString: strerror(e)))") }
        }
        return result
    }

    /// Cuts the zero padding past the last record (the segment is being closed, or the journal).
    /// - Returns: nil, or the `errno` of the failed `ftruncate` (the padding then stays; a reader
    ///   stops at it as at the end).
    package func finish() -> Int32? {
        guard fd >= 0 && tailBytes > 0 else { return nil }
        return ftruncate(fd, off_t(size)) == 0 ? nil : errno
    }

    /// Writes through the page cache from now on.
    private func fallBack(_ reason: String) {
        mode.stop()
        fallbackReason = reason
        if directFD >= 0 { close(directFD) }
        directFD = -1
    }
}

/// Whether a journal's long runs go through `O_DIRECT`: set by whichever thread holds the appender
/// (false, for good, when the file system refuses them), read by the pipeline thread at any time
/// (the stats snapshot, the start-up log line) — while the writer thread may hold the appender.
package final class DirectWriteMode: Sendable {
    private let direct: Atomic<Bool>

    init(_ direct: Bool) { self.direct = Atomic(direct) }

    /// Long runs go through `O_DIRECT`; false when the file system refused it.
    package var isDirect: Bool { direct.load(ordering: .relaxed) }

    /// Writes go through the page cache from now on.
    func stop() { direct.store(false, ordering: .relaxed) }
}
