#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Reads records back from the journal's segment files: replay pages for the control socket, the
/// state rebuild at start, and recovery's scans.
///
/// Not `Sendable`: one reader per thread, with its own file descriptor, read buffer and seek
/// index. It learns what is written from a ``JournalCatalog`` (taken once per ``read(from:prefixes:limit:maxExamined:maxBytes:deadline:_:)``)
/// and never reads past a segment's recorded size, so it runs beside the pipeline's appends
/// without a lock on the files: a retired segment it still has open stays readable until it
/// moves on (unlinked, not truncated).
package final class JournalReader {
    /// Why a read was refused.
    package typealias ReplayError = Journal.ReplayError

    /// Every `indexStride`-th record's (seq, offset) of one segment, from its start to the
    /// frontier: built by the reads themselves as they pass it, never by a pass of its own. The
    /// frontier never passes a damaged record, so every read beyond one meets it and tells its
    /// seqs apart as not retained.
    private struct SegmentIndex {
        var entries: [(seq: UInt64, offset: Int)] = []
        /// Where the first record not yet indexed starts.
        var frontier = JournalFormat.segmentHeaderSize
        /// The seqs before this one lie before ``frontier``.
        var frontierSeq: UInt64 = 0
        var records = 0

        /// Notes the record at `offset` if it is the one at the frontier.
        mutating func pass(_ h: JournalFormat.RecordHeader, at offset: Int) {
            guard offset == frontier else { return }
            if records % JournalReader.indexStride == 0 { entries.append((h.seq, offset)) }
            records += 1
            frontier = offset + h.recordSize
            frontierSeq = h.seq + 1
        }

        /// Where to start reading for `seq`: the indexed record at or before it when it lies
        /// before the frontier, else the frontier.
        func start(for seq: UInt64) -> Int {
            guard seq < frontierSeq, let at = entries.lastIndex(where: { $0.seq <= seq }) else { return frontier }
            return entries[at].offset
        }
    }

    package static let indexStride = 256

    private let catalog: JournalCatalog
    private let logger: BusLogger
    private var buffer: UnsafeMutableRawPointer
    private var capacity = 1 << 20
    private var openFile: (path: String, fd: Int32)?
    private var indexes: [String: SegmentIndex] = [:]
    /// Damage already logged (segment path and offset), so a replay that meets it again is quiet.
    private var damageLogged: Set<String> = []
    /// Read errors already logged, so a client retrying the same page is quiet.
    private var unreadableLogged: Set<String> = []

    package init(catalog: JournalCatalog, logger: BusLogger) {
        self.catalog = catalog
        self.logger = logger
        buffer = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit {
        close()
        buffer.deallocate()
    }

    /// The oldest seq retained and the last written, as the catalog says now.
    package var bounds: (first: UInt64, last: UInt64) {
        let c = catalog.contents
        return (c.firstSeq, c.lastSeq)
    }

    /// Closes the file this reader has open (it reopens one when it next reads).
    package func close() {
        if let f = openFile { Glibc.close(f.fd) }
        openFile = nil
    }

    /// Calls `body` with each written record from `from` whose topic starts with one of
    /// `prefixes` (all when empty), at most `limit` of them.
    /// - Parameters:
    ///   - maxExamined: at most this many records are read, matched or not, so a narrow prefix
    ///     over a long journal takes several short pages rather than one long scan.
    ///   - maxBytes: the page ends before a record that would take its records' topics and
    ///     envelopes past this many bytes (it always holds at least one record, which may alone be
    ///     larger).
    ///   - deadline: the page ends once the monotonic clock passes this (looked at every 256
    ///     records examined), so one page holds the reading thread a bounded time whatever the
    ///     prefixes and the machine; at least 256 records are examined.
    /// - Returns: the seq the next page starts at, and how many records matched.
    /// - Throws: ``Journal/ReplayError/notRetained(firstSeq:)`` when `from` is older than the
    ///   journal, or falls in seqs a recovery set aside (`firstSeq` is then where the journal goes on);
    ///   ``JournalError`` ``JournalError/Code/notReadable`` when a segment the catalog lists cannot be
    ///   opened, a read of it fails, or it ends before the bytes the catalog says were written: never
    ///   an empty page, and never taken for a damaged record.
    package func read(
        from: UInt64, prefixes: [[UInt8]], limit: Int, maxExamined: Int = .max, maxBytes: Int = .max,
        deadline: UInt64 = .max, _ body: (UInt64, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws -> (next: UInt64, count: Int) {
        let journal = catalog.contents
        let segments = journal.segments
        forgetRetired(segments)
        let start = max(from, 1)
        if start > journal.lastSeq { return (start, 0) }
        guard let first = segments.first, start >= first.firstSeq else {
            throw ReplayError.notRetained(firstSeq: journal.firstSeq)
        }
        var s = segments.lastIndex { $0.firstSeq <= start }!
        var next = start
        var count = 0
        var examined = 0
        var bytes = 0
        func full() -> Bool {
            count >= limit || examined >= maxExamined || bytes >= maxBytes
                || (examined & 255 == 0 && examined > 0 && deadline != .max && BusClock.monotonicNanoseconds() >= deadline)
        }
        while s < segments.count && !full() && next <= journal.lastSeq {
            let seg = segments[s]
            let rfd = try descriptor(seg.path)
            var index = indexes[seg.path] ?? SegmentIndex()
            defer { indexes[seg.path] = index }
            var offset = index.start(for: next)
            var window = ReadWindow()
            var endPage = false
            while offset < seg.size {
                var found = try record(rfd, at: offset, size: seg.size, &window, path: seg.path)
                if found == nil {
                    // A damaged record (a corrupt byte in a closed segment): the reader goes on at
                    // the next intact record rather than losing the rest of the segment.
                    guard let (at, r) = try nextIntactRecord(rfd, after: offset, size: seg.size, &window, path: seg.path)
                    else { break }
                    noteDamage(seg.path, from: offset, to: at, nextSeq: r.0.seq)
                    offset = at
                    found = r
                    if r.0.seq > next {
                        // The damaged records' seqs: told as not retained, as for a recovery's gap.
                        if examined == 0 { throw ReplayError.notRetained(firstSeq: r.0.seq) }
                        endPage = true
                        break
                    }
                }
                guard let (h, p) = found else { break }
                index.pass(h, at: offset)
                offset += h.recordSize
                guard h.seq >= next else { continue }
                if h.seq > journal.lastSeq { break }
                let topic = UnsafeRawBufferPointer(start: p + JournalFormat.recordHeaderSize, count: h.topicLength)
                if prefixes.isEmpty || prefixes.contains(where: { topic.starts(with: $0) }) {
                    if count > 0 && bytes + h.bodyLength > maxBytes {
                        endPage = true
                        break
                    }
                    let envelope = UnsafeRawBufferPointer(start: p + JournalFormat.recordHeaderSize + h.topicLength,
                                                          count: h.bodyLength - h.topicLength)
                    try body(h.seq, topic, envelope)
                    count += 1
                    bytes += h.bodyLength
                }
                next = h.seq + 1
                examined += 1
                if full() { break }
            }
            if full() || endPage { break }
            s += 1
            if s < segments.count && next < segments[s].firstSeq {
                // A gap: seqs set aside by a recovery (records past damage). A page ends before it;
                // a read starting in it is told where the journal goes on, as for seqs no longer
                // retained, so a reader counts them as lost rather than skipping them unnoticed.
                if examined == 0 { throw ReplayError.notRetained(firstSeq: segments[s].firstSeq) }
                break
            }
        }
        return (next, count)
    }

    /// Reads records of the segment at `path` from `from` to `size`, calling `body` with each
    /// valid one and its offset until it returns false or a record is torn or corrupt.
    /// - Throws: ``JournalError`` ``JournalError/Code/notReadable`` when the segment cannot be opened
    ///   or read: recovery must not take a read error for a torn tail and cut good records.
    package func scanRecords(
        path: String, from: Int, size: Int,
        _ body: (JournalFormat.RecordHeader, Int, UnsafeRawPointer) -> Bool
    ) throws {
        let rfd = open(path, O_RDONLY | O_CLOEXEC)
        guard rfd >= 0 else { throw unreadable("cannot open journal segment \(path): " + JournalReader.describe(errno)) }
        defer { Glibc.close(rfd) }
        try scan(rfd, path: path, from: from, size: size, body)
    }

    private func scan(
        _ rfd: Int32, path: String, from: Int, size: Int,
        _ body: (JournalFormat.RecordHeader, Int, UnsafeRawPointer) -> Bool
    ) throws {
        var window = ReadWindow()
        var offset = from
        while offset < size {
            guard let (h, p) = try record(rfd, at: offset, size: size, &window, path: path) else { return }
            guard body(h, offset, p) else { return }
            offset += h.recordSize
        }
    }

    /// Drops the indexes (and the open file) of segments retention has retired.
    private func forgetRetired(_ segments: [JournalCatalog.Segment]) {
        guard indexes.count > segments.count || (openFile != nil && !segments.contains { $0.path == openFile!.path })
        else { return }
        let live = Set(segments.map(\.path))
        indexes = indexes.filter { live.contains($0.key) }
        if let f = openFile, !live.contains(f.path) { close() }
    }

    // MARK: Bytes

    /// The bytes of the file currently in ``buffer``.
    package struct ReadWindow {
        var start = 0
        var count = 0
    }

    /// Makes `[offset, offset + n)` of the file available in ``buffer``; nil past `size`.
    /// - Throws: ``JournalError`` ``JournalError/Code/notReadable`` when `pread` fails, or the file
    ///   ends before `size` (bytes written, as far as the caller knows, are gone).
    private func bytes(_ rfd: Int32, at offset: Int, _ n: Int, size: Int, _ w: inout ReadWindow, path: String) throws
        -> UnsafeRawPointer?
    {
        guard offset + n <= size else { return nil }
        if offset >= w.start && offset + n <= w.start + w.count { return UnsafeRawPointer(buffer + (offset - w.start)) }
        if n > capacity {
            buffer.deallocate()
            capacity = n
            buffer = .allocate(byteCount: n, alignment: 8)
        }
        let want = min(capacity, size - offset)
        var got = 0
        w = ReadWindow()
        while got < want {
            let r = pread(rfd, buffer + got, want - got, off_t(offset + got))
            if r < 0 && errno == EINTR { continue }
            if r < 0 {
                throw unreadable("cannot read journal segment \(path) at byte \(offset + got): "
                                 + JournalReader.describe(errno))
            }
            if r == 0 {
                throw unreadable("journal segment \(path) ends at byte \(offset + got), before the \(size) bytes "
                                 + "written to it (truncated or replaced under the daemon)")
            }
            got += r
        }
        w = ReadWindow(start: offset, count: got)
        return UnsafeRawPointer(buffer)
    }

    /// The valid record at `offset`, or nil when it is torn, corrupt or past `size`.
    private func record(_ rfd: Int32, at offset: Int, size: Int, _ w: inout ReadWindow, path: String) throws
        -> (JournalFormat.RecordHeader, UnsafeRawPointer)?
    {
        guard let head = try bytes(rfd, at: offset, JournalFormat.recordHeaderSize, size: size, &w, path: path)
        else { return nil }
        let body = Int(JournalFormat.load(head, 4, as: UInt32.self))
        guard body <= JournalFormat.maxBodySize else { return nil }
        let total = JournalFormat.recordHeaderSize + body + JournalFormat.checksumSize
        guard let p = try bytes(rfd, at: offset, total, size: size, &w, path: path),
            let h = JournalFormat.readRecord(p, available: total)
        else { return nil }
        return (h, p)
    }

    /// The first intact record after the damaged one at `offset` (found by its magic and checksum),
    /// and its offset; nil when none follows in the segment.
    private func nextIntactRecord(_ rfd: Int32, after offset: Int, size: Int, _ w: inout ReadWindow, path: String) throws
        -> (Int, (JournalFormat.RecordHeader, UnsafeRawPointer))?
    {
        var at = offset + 1
        while at + JournalFormat.recordHeaderSize <= size {
            guard let p = try bytes(rfd, at: at, 4, size: size, &w, path: path) else { return nil }
            if JournalFormat.isRecordMagic(JournalFormat.load(p, 0, as: UInt32.self)),
                let r = try record(rfd, at: at, size: size, &w, path: path)
            {
                return (at, r)
            }
            at += 1
        }
        return nil
    }

    private func noteDamage(_ path: String, from: Int, to: Int, nextSeq: UInt64) {
        guard damageLogged.insert("\(path)@\(from)").inserted else { return }
        logger.error("journal: a damaged record in a segment; read on at the next intact record", [
            "segment": path, "offset": String(from), "skipped_bytes": String(to - from), "next_seq": String(nextSeq),
        ])
    }

    /// The descriptor of the segment at `path`, opened when it is not the one open.
    /// - Throws: ``Journal/ReplayError/notRetained(firstSeq:)`` when retention retired the segment
    ///   since the catalog was read (it is gone from the catalog now), else ``JournalError``
    ///   ``JournalError/Code/notReadable`` naming the file and the error.
    private func descriptor(_ path: String) throws -> Int32 {
        if let f = openFile, f.path == path { return f.fd }
        close()
        let rfd = open(path, O_RDONLY | O_CLOEXEC)
        guard rfd >= 0 else {
            let code = errno
            let now = catalog.contents
            if code == ENOENT && !now.segments.contains(where: { $0.path == path }) {
                throw ReplayError.notRetained(firstSeq: now.firstSeq)
            }
            throw unreadable("cannot open journal segment \(path): \(JournalReader.describe(code))")
        }
        openFile = (path, rfd)
        return rfd
    }

    /// A ``JournalError/Code/notReadable`` error, logged the first time this reader meets it (a
    /// client retrying the same page does not fill the log).
    private func unreadable(_ description: String) -> JournalError {
        if unreadableLogged.insert(description).inserted {
            logger.error("journal: a segment cannot be read; replays that reach it are refused", ["error": description])
        }
        return JournalError(.notReadable, description)
    }

    /// `strerror` and the number, as in `No such file or directory (errno 2)`.
    static func describe(_ code: Int32) -> String {
        "\(String(cString: strerror(code))) (errno \(code))"
    }
}
