#if canImport(Glibc)
import Glibc
#endif
import CFileIO
import Foundation
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The append-only journal of every envelope that takes a `seq`, in segment files under
/// `<data-dir>/journal` (format and guarantees: `docs/durability.md`).
///
/// The pipeline's batches (``JournalBatch``) are written here: a run of records per segment,
/// on the calling thread (``writeRun(_:_:_:_:)``) or by a ``JournalWriter`` thread
/// (``post(_:count:room:)``, ``writerResult(wait:)``), rotating to a new segment when one is full. A
/// ``JournalSyncer`` thread `fdatasync`s behind.
/// What was written is read back by a ``JournalReader`` on its own descriptors: the control
/// thread's replays, and this journal's own reads at start (``read(from:prefixes:limit:maxExamined:_:)``),
/// both bounded by the ``catalog`` the pipeline updates as batches are written.
///
/// Not `Sendable`: owned by the pipeline thread.
package final class Journal {
    package struct Options: Sendable {
        /// A segment is closed once it holds this many bytes (`--segment-bytes`).
        package var segmentBytes = 64 << 20
        /// Closed segments are deleted, oldest first, while the journal is larger (`--retain-bytes`).
        package var retainBytes: Int64 = 4 << 30
        /// Closed segments whose newest record is older are deleted (`--retain-hours`).
        package var retainSeconds = 168 * 3600
        /// At most one `fdatasync` per this many milliseconds (`--fsync-ms`).
        package var fsyncMilliseconds = 2
        /// Synced journal bytes kept in the page cache, the newest; older pages are dropped after
        /// each sync (`--journal-cache-bytes`; nil leaves the page cache to the kernel).
        package var cacheBytes: Int? = 0
        package init() {}
    }

    /// What recovery found (``JournalRecovery``).
    package typealias Recovery = JournalRecovery

    /// Why a replay was refused.
    package enum ReplayError: Error, Sendable {
        case notRetained(firstSeq: UInt64)
    }

    package typealias Segment = JournalCatalog.Segment

    package let directory: String
    package let options: Options
    package internal(set) var recovery = Recovery()
    let logger: BusLogger
    /// Which closed segments are deleted.
    let retention: JournalRetention
    var segments: [Segment] = []
    /// The open segment's descriptor.
    var fd: Int32 = -1
    let syncer: JournalSyncer
    /// The open segment's generation at the syncer.
    var generation: UInt64 = 0
    let writer: JournalWriter
    /// Writes the open segment: the pipeline thread's runs, and the writer thread's with each job
    /// (handed over with it, used by one thread at a time).
    let appender: Exclusive<SegmentAppender>
    /// The appender's write mode, readable while the writer thread holds the appender.
    let writeMode: DirectWriteMode
    /// The write mode was logged as having fallen back.
    var fallbackLogged = false
    var writtenSeq: UInt64 = 0
    /// Each kind's last `kind_seq` in the file (pending records not included): a new segment's header.
    var kindSeqs: [UInt64]
    /// What is written, for readers on other threads (the control thread's replays).
    package let catalog = JournalCatalog()
    /// This thread's reader: recovery's scans and the state rebuild at start.
    let reader: JournalReader
    var closed = false
    /// The directory's `LOCK`, held for the journal's life.
    let lock: DataDirectoryLock
    /// The highest seq that may be published, durable ahead of publication.
    var reservation: SeqReservation!
    /// Ends the process when a durability call fails; its marker is read back at the next start.
    let fence: JournalFence

    /// Opens (creating if needed) the journal in `directory`, recovering from a crash: a torn or
    /// corrupt tail of the newest segment is truncated. `seq` and `kind_seq` continue from
    /// ``recovery``.
    /// - Throws: ``JournalError`` when the directory or a segment cannot be used.
    package init(directory: String, options: Options, logger: BusLogger) throws {
        self.directory = directory
        self.options = options
        self.logger = logger
        retention = JournalRetention(retainBytes: options.retainBytes, retainSeconds: options.retainSeconds)
        reader = JournalReader(catalog: catalog, logger: logger)
        kindSeqs = [UInt64](repeating: 0, count: JournalFormat.kindCount)
        try JournalFiles.makeDirectory(directory)
        lock = try DataDirectoryLock(directory: directory, logger: logger)
        do {
            segments = try JournalFiles.names(in: directory).compactMap { name in
                JournalFormat.firstSeq(fromName: name).map {
                    Segment(firstSeq: $0, path: directory + "/" + name, size: 0)
                }
            }.sorted { $0.firstSeq < $1.firstSeq }
            for i in segments.indices { segments[i].size = try JournalFiles.fileSize(segments[i].path) }
        } catch {
            lock.release()
            throw error
        }
        // Direct writes keep nothing in the page cache, which is what `--journal-cache-bytes 0`
        // asks; a cache of N bytes, or the kernel's choice, is the page cache's to keep.
        var direct = false
        if options.cacheBytes == 0 {
            switch JournalFiles.probeDirectWrites(in: directory) {
            case nil:
                direct = true
            case let (true, reason)?:
                logger.info("journal: the file system refuses direct writes; writing through the page cache", [
                    "directory": directory, "reason": reason,
                ])
            case let (false, reason)?:
                // Not a refusal (a full disk, a read-only directory): the page cache would fail the
                // same way, so direct writes are tried, and a refused one falls back as at any time.
                direct = true
                logger.warning("journal: the test of direct writes failed, not for want of them; trying them", [
                    "directory": directory, "reason": reason,
                ])
            }
        }
        let segmentAppender = SegmentAppender(direct: direct)
        writeMode = segmentAppender.mode
        appender = Exclusive(segmentAppender)
        // The short runs written through the page cache leave pages there, dropped as before.
        fence = JournalFence(directory: directory, logger: logger)
        syncer = JournalSyncer(fd: -1, seq: 0, intervalMilliseconds: options.fsyncMilliseconds,
                               cacheBytes: options.cacheBytes, fence: fence)
        writer = try JournalWriter()
        do {
            reservation = try SeqReservation(directory: directory)
            try recover()
        } catch {
            // The sync thread has not started yet; the writer's thread, the open segment and the
            // lock must not outlive us (recovery may have opened the segment before it failed).
            writer.stop()
            if fd >= 0 {
                Glibc.close(fd)
                fd = -1
            }
            lock.release()
            throw error
        }
        // Retention at start too: a restart with a smaller --retain-bytes frees space at once.
        enforceRetention(now: time(nil))
        catalog.replace(JournalCatalog.Contents(segments: segments, lastSeq: writtenSeq))
        syncer.reset(seq: writtenSeq)
        generation = syncer.swapSegment(to: fd).generation
        syncer.start()
    }

    /// The last seq written to the journal file (and so safe to publish and to replay).
    package var lastSeq: UInt64 { writtenSeq }
    /// The last seq known to be on disk (`fdatasync` done).
    package var durableSeq: UInt64 { syncer.durable }
    /// The oldest seq still retained (`lastSeq + 1` when the journal is empty).
    package var firstSeq: UInt64 { segments.first?.firstSeq ?? writtenSeq + 1 }
    package var segmentCount: Int { segments.count }
    package var totalBytes: Int64 { segments.reduce(0) { $0 + Int64($1.size) } }
    package var fsyncCount: UInt64 { syncer.fsyncs }
    package var fsyncMaxMicros: UInt64 { syncer.fsyncMaxMicroseconds }
    /// Durations of the sync thread's `fdatasync` calls.
    package var fsyncHistogram: Histogram { syncer.fsyncHistogram }
    /// Records go to the disk with `O_DIRECT`, past the page cache (stats: `journal.writes`).
    package var writesDirect: Bool { writeMode.isDirect }
    /// False from a failed write until the next successful one (`/healthz`).
    package private(set) var isWritable = true
    /// Readable when the writer thread has finished a batch (for the pipeline's poller).
    package var writerWakeFD: Int32 { writer.wakeFD }

    // MARK: Writing

    /// Makes the seq reservation cover `seq` before a record up to it is written.
    func reserve(through seq: UInt64) throws {
        try reservation.reserve(through: seq)
    }

    /// Splits `batch`'s unwritten records into runs, one per segment they go to, and writes every
    /// run but the last, closing the segment between two records when it is full.
    /// - Returns: the last run (never empty), for the caller to write or hand to the writer thread.
    func writeRunsBeforeLast(_ batch: inout JournalBatch.Buffer) throws -> (start: Int, bytes: Int) {
        // After a failed write, a retry starts at the first record not written.
        var runStart = batch.written
        var runBytes = 0
        var i = batch.written
        while i < batch.records.count {
            let size = batch.size(of: i)
            let active = segments[segments.count - 1]
            if active.size + runBytes > JournalFormat.segmentHeaderSize
                && active.size + runBytes + size > options.segmentBytes {
                if runBytes > 0 { try writeRun(&batch, runStart, i, runBytes) }
                try rotate(firstSeq: batch.records[i].seq)
                runStart = i
                runBytes = 0
            }
            runBytes += size
            i += 1
        }
        return (runStart, runBytes)
    }

    /// Writes `batch`'s records `from..<to` (`bytes` long) to the open segment with one `write`.
    /// - Throws: ``JournalError`` when the write fails (disk full, say); they stay unwritten.
    func writeRun(_ batch: inout JournalBatch.Buffer, _ from: Int, _ to: Int, _ bytes: Int) throws {
        let base = batch.base + batch.records[from].offset
        JournalFormat.seal(base, bytes)
        let room = batch.room(from, to)
        let failure = appender.withValue { $0.append(base, bytes, room: room) }
        noteFallback()
        guard failure == 0 else {
            isWritable = false
            throw JournalError(.notWritable, "journal write failed: \(String(cString: strerror(failure)))")
        }
        noteWritten(batch, from, to, bytes: bytes)
        batch.written = to
    }

    /// Hands `count` bytes of records at `base` to the writer thread, to append to the open
    /// segment, with the memory around them it may write over (``SegmentAppender/Room``). The
    /// memory must stay as it is until ``writerResult(wait:)`` returns its result.
    func post(_ base: UnsafeMutableRawPointer, count: Int, room: SegmentAppender.Room) {
        writer.post(JournalWriter.Job(appender: appender, address: Int(bitPattern: base), count: count, room: room))
    }

    /// Where in its block the open segment will end once `more` bytes are appended to it: where
    /// a batch that begins now places its first record (``JournalBatch``). A guess only; should
    /// the segment end elsewhere in its block when the batch is written (a rotation, the run
    /// before it failing), a direct write of the batch goes through the appender's staging buffer
    /// instead (a buffered one is still written in place when the block fits in front of it).
    func endInBlock(after more: Int) -> Int {
        (segments[segments.count - 1].size + more) & (SegmentAppender.blockSize - 1)
    }

    /// The writer thread's result for the run it was handed: 0 when written, else the `errno` of
    /// the failed write (the file is as before it).
    /// - Parameter wait: wait for it rather than return nil while it is being written.
    func writerResult(wait: Bool) -> Int32? {
        guard let result = wait ? writer.wait() : writer.poll() else { return nil }
        noteFallback()
        if result != 0 { isWritable = false }
        return result
    }

    /// Records that `batch`'s records `from..<to` were appended to the open segment.
    func noteWritten(_ batch: JournalBatch.Buffer, _ from: Int, _ to: Int, bytes: Int) {
        let active = segments.count - 1
        for r in batch.records[from..<to] {
            let header = batch.base + r.offset
            let kind = Int(JournalFormat.load(header, 24, as: UInt8.self))
            kindSeqs[kind] = max(kindSeqs[kind], JournalFormat.load(header, 16, as: UInt64.self))
        }
        segments[active].size += bytes
        isWritable = true
        writtenSeq = batch.records[to - 1].seq
        catalog.written(size: segments[active].size, lastSeq: writtenSeq)
        syncer.written(upTo: writtenSeq, generation: generation, bytes: segments[active].size)
    }

    func rotate(firstSeq: UInt64) throws {
        // The closed segment is synced here, on the pipeline thread, once per segment, without
        // the padding of its last direct write.
        finishSegment()
        syncer.syncNow(upTo: writtenSeq, closing: true)
        let old = fd
        try openNewSegment(firstSeq: firstSeq, replacing: true)
        Glibc.close(old)
        enforceRetention(now: time(nil))
    }

    /// Creates the segment whose first record is `firstSeq`; its header holds the kind_seqs of
    /// everything written before it.
    func openNewSegment(firstSeq: UInt64, replacing: Bool = false) throws {
        let path = directory + "/" + JournalFormat.segmentName(firstSeq)
        let newFD = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard newFD >= 0 else { throw JournalError(.notWritable, "cannot create journal segment \(path): \(String(cString: strerror(errno)))") }
        let header = JournalFormat.segmentHeader(firstSeq: firstSeq, kindSeqs: kindSeqs)
        let n = header.withUnsafeBytes { write(newFD, $0.baseAddress, $0.count) }
        guard n == header.count else {
            Glibc.close(newFD)
            unlink(path)
            throw JournalError(.notWritable, "cannot write journal segment header \(path): \(String(cString: strerror(errno)))")
        }
        // Its header and its name must be on disk before a record in it can be: a failure here is
        // the fence's at a rotation (the daemon has acknowledged from the segments before it), and
        // at start a refusal to start.
        let headerSync = Failpoints.hit("journal.segment-sync") ?? (fdatasync(newFD) == 0 ? nil : errno)
        let directorySync = headerSync == nil ? AtomicFile.syncDirectory(directory) : nil
        if let e = headerSync ?? directorySync {
            Glibc.close(newFD)
            unlink(path)
            let reason = "cannot sync " + (headerSync != nil ? "the header of journal segment \(path)" : "the journal directory \(directory)")
                + ": \(String(cString: strerror(e)))"
            if replacing { fence.trip(reason, durableSeq: syncer.durable) }
            throw JournalError(.notWritable, reason)
        }
        if let e = appender.withValue({ $0.open(path: path, fd: newFD, size: header.count) }) {
            Glibc.close(newFD)
            unlink(path)
            throw JournalError(.notReadable, "cannot read back journal segment header \(path): \(String(cString: strerror(e)))")
        }
        noteFallback()
        fd = newFD
        if replacing { generation = syncer.swapSegment(to: newFD).generation }
        let segment = Segment(firstSeq: firstSeq, path: path, size: JournalFormat.segmentHeaderSize)
        segments.append(segment)
        catalog.appendSegment(segment)
    }

    /// Syncs what was written and stops the sync thread (shutdown).
    package func close() {
        guard !closed else { return }
        closed = true
        // A batch still at the writer was collected (``JournalBatch/close()``): it is in the file.
        writer.stop()
        syncer.stop()
        finishSegment()
        syncer.syncNow(upTo: writtenSeq)
        // Every record is synced and nothing past the last was published: a restart (on any
        // boot) goes on after it, unless the file loses records after all.
        if syncer.durable >= writtenSeq {
            do {
                try reservation.markClean(lastSeq: writtenSeq)
            } catch {
                logger.warning("journal: the clean stop could not be recorded; the next start skips the reserved seqs",
                               ["error": String(describing: error)])
            }
        }
        Glibc.close(fd)
        reader.close()
        lock.release()
    }

    /// Deletes closed segments beyond the size or age limits, oldest first (``JournalRetention``).
    package func enforceRetention(now: time_t) {
        while segments.count > 1 {
            let oldest = segments[0]
            guard let age = retention.retires(oldest.path, journalBytes: totalBytes, now: now) else { break }
            // A segment that stays on the disk stays in the catalog: its bytes still count, and
            // its records can still be read. Tried again at the next pass (once a minute, and at
            // each rotation).
            let failure = Failpoints.hit("journal.retire") ?? (unlink(oldest.path) == 0 ? 0 : errno)
            if failure != 0 && failure != ENOENT {
                logger.error("journal: a segment due for retirement could not be deleted; retention waits", [
                    "path": oldest.path, "error": String(cString: strerror(failure)),
                ])
                break
            }
            segments.removeFirst()
            catalog.removeOldestSegment()
            logger.info("journal: segment retired", ["path": oldest.path, "bytes": String(oldest.size), "age_s": String(age)])
        }
    }

    // MARK: Reading

    /// Reads written records on the calling (pipeline) thread: the state rebuild at start. See
    /// ``JournalReader/read(from:prefixes:limit:maxExamined:maxBytes:_:)``.
    package func read(
        from: UInt64, prefixes: [[UInt8]], limit: Int, maxExamined: Int = .max,
        _ body: (UInt64, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws -> (next: UInt64, count: Int) {
        try reader.read(from: from, prefixes: prefixes, limit: limit, maxExamined: maxExamined, body)
    }

    /// Cuts the open segment's padding before it is closed; a failure is logged (the padding stays,
    /// read as the segment's end).
    func finishSegment() {
        if let e = appender.withValue({ $0.finish() }) {
            logger.warning("journal: the zero padding after a segment's last record could not be cut", [
                "segment": segments.last?.path ?? "", "error": String(cString: strerror(e)),
            ])
        }
    }

    /// Logs, once, that direct writes stopped and the journal writes through the page cache.
    func noteFallback() {
        guard !fallbackLogged, let reason = appender.withValue({ $0.fallbackReason }) else { return }
        fallbackLogged = true
        logger.warning("journal: direct writes refused; writing through the page cache from now on", ["reason": reason])
    }
}
