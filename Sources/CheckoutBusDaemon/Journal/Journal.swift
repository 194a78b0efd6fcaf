#if canImport(Glibc)
import Glibc
#endif
import CFileIO
import Foundation
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// The append-only journal of every envelope that takes a `seq`, in segment files under
/// `<data-dir>/journal` (format and guarantees: `docs/durability.md`).
///
/// The pipeline's batches (``JournalBatch``) are written here: a run of records per segment,
/// on the calling thread (``writeRun(_:_:_:_:)``) or by a ``JournalWriter`` thread
/// (``post(_:count:)``, ``writerResult(wait:)``), rotating to a new segment when one is full. A
/// ``JournalSyncer`` thread `fdatasync`s behind.
/// What was written is read back by a ``JournalReader`` on its own descriptors: the control
/// thread's replays, and this journal's own reads at start (``read(from:prefixes:limit:maxExamined:_:)``),
/// both bounded by the ``catalog`` the pipeline updates as batches are written.
///
/// Not `Sendable`: owned by the pipeline thread.
public final class Journal {
    public struct Options: Sendable {
        /// A segment is closed once it holds this many bytes (`--segment-bytes`).
        public var segmentBytes = 64 << 20
        /// Closed segments are deleted, oldest first, while the journal is larger (`--retain-bytes`).
        public var retainBytes: Int64 = 4 << 30
        /// Closed segments whose newest record is older are deleted (`--retain-hours`).
        public var retainSeconds = 168 * 3600
        /// At most one `fdatasync` per this many milliseconds (`--fsync-ms`).
        public var fsyncMilliseconds = 2
        /// Synced journal bytes kept in the page cache, the newest; older pages are dropped after
        /// each sync (`--journal-cache-bytes`; nil leaves the page cache to the kernel).
        public var cacheBytes: Int? = 0
        public init() {}
    }

    /// What recovery found (``JournalRecovery``).
    public typealias Recovery = JournalRecovery

    /// Why a replay was refused.
    public enum ReplayError: Error, Sendable {
        case notRetained(firstSeq: UInt64)
    }

    package typealias Segment = JournalCatalog.Segment

    public let directory: String
    public let options: Options
    public private(set) var recovery = Recovery()
    private let logger: BusLogger
    /// Which closed segments are deleted.
    private let retention: JournalRetention
    private var segments: [Segment] = []
    /// The open segment's descriptor.
    private(set) var fd: Int32 = -1
    private let syncer: JournalSyncer
    /// The open segment's generation at the syncer.
    private var generation: UInt64 = 0
    private let writer: JournalWriter
    /// Writes the open segment (the pipeline's runs, and the writer thread's with each job).
    private let appender: SegmentAppender
    /// The write mode was logged as having fallen back.
    private var fallbackLogged = false
    private var writtenSeq: UInt64 = 0
    /// Each kind's last `kind_seq` in the file (pending records not included): a new segment's header.
    private var kindSeqs: [UInt64]
    /// What is written, for readers on other threads (the control thread's replays).
    package let catalog = JournalCatalog()
    /// This thread's reader: recovery's scans and the state rebuild at start.
    private let reader: JournalReader
    private var closed = false
    /// The directory's `LOCK`, held for the journal's life.
    private let lock: DataDirectoryLock
    /// The highest seq that may be published, durable ahead of publication.
    private var reservation: SeqReservation!

    /// Opens (creating if needed) the journal in `directory`, recovering from a crash: a torn or
    /// corrupt tail of the newest segment is truncated. `seq` and `kind_seq` continue from
    /// ``recovery``.
    /// - Throws: ``JournalError`` when the directory or a segment cannot be used.
    public init(directory: String, options: Options, logger: BusLogger) throws {
        self.directory = directory
        self.options = options
        self.logger = logger
        retention = JournalRetention(retainBytes: options.retainBytes, retainSeconds: options.retainSeconds)
        reader = JournalReader(catalog: catalog, logger: logger)
        kindSeqs = [UInt64](repeating: 0, count: JournalFormat.kindCount)
        try JournalFiles.makeDirectory(directory)
        lock = try DataDirectoryLock(directory: directory)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        segments = names.compactMap { name in
            JournalFormat.firstSeq(fromName: name).map { Segment(firstSeq: $0, path: directory + "/" + name, size: 0) }
        }.sorted { $0.firstSeq < $1.firstSeq }
        for i in segments.indices { segments[i].size = JournalFiles.fileSize(segments[i].path) }
        // Direct writes keep nothing in the page cache, which is what `--journal-cache-bytes 0`
        // asks; a cache of N bytes, or the kernel's choice, is the page cache's to keep.
        var direct = false
        if options.cacheBytes == 0 {
            if let refusal = JournalFiles.probeDirectWrites(in: directory) {
                logger.info("journal: the file system refuses direct writes; writing through the page cache", [
                    "directory": directory, "reason": refusal,
                ])
            } else {
                direct = true
            }
        }
        appender = SegmentAppender(direct: direct)
        // The short runs written through the page cache leave pages there, dropped as before.
        syncer = JournalSyncer(fd: -1, seq: 0, intervalMilliseconds: options.fsyncMilliseconds,
                               cacheBytes: options.cacheBytes)
        writer = try JournalWriter()
        do {
            reservation = try SeqReservation(directory: directory)
            try recover()
        } catch {
            // The sync thread has not started yet; the writer's thread and the lock must not outlive us.
            writer.stop()
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
    public var lastSeq: UInt64 { writtenSeq }
    /// The last seq known to be on disk (`fdatasync` done).
    public var durableSeq: UInt64 { syncer.durable }
    /// The oldest seq still retained (`lastSeq + 1` when the journal is empty).
    public var firstSeq: UInt64 { segments.first?.firstSeq ?? writtenSeq + 1 }
    public var segmentCount: Int { segments.count }
    public var totalBytes: Int64 { segments.reduce(0) { $0 + Int64($1.size) } }
    public var fsyncCount: UInt64 { syncer.fsyncs }
    public var fsyncMaxMicros: UInt64 { syncer.fsyncMaxMicroseconds }
    /// Durations of the sync thread's `fdatasync` calls.
    public var fsyncHistogram: Histogram { syncer.fsyncHistogram }
    /// Records go to the disk with `O_DIRECT`, past the page cache (stats: `journal.writes`).
    public var writesDirect: Bool { appender.isDirect }
    /// False from a failed write until the next successful one (`/healthz`).
    public private(set) var isWritable = true
    /// Readable when the writer thread has finished a batch (for the pipeline's poller).
    public var writerWakeFD: Int32 { writer.wakeFD }

    // MARK: Recovery

    private func recover() throws {
        // Drop newest segments whose header never made it to disk.
        while let last = segments.last {
            let header = JournalFiles.readRange(last.path, from: 0, count: JournalFormat.segmentHeaderSize)
            let read = header.withUnsafeBytes { JournalFormat.readSegmentHeader($0) }
            if let read, read.firstSeq == last.firstSeq { break }
            // A header is written before any record: records after a bad one mean the header was
            // damaged later (a corrupt byte), not torn by a crash. The records are kept.
            if last.size > JournalFormat.segmentHeaderSize {
                try repairHeader(of: segments.count - 1, damaged: header)
                break
            }
            logger.warning("journal: removing a segment with a torn header", ["path": last.path, "bytes": String(last.size)])
            unlink(last.path)
            segments.removeLast()
        }
        guard let last = segments.last else {
            try openNewSegment(firstSeq: 1)
            return
        }
        let header = JournalFiles.readRange(last.path, from: 0, count: JournalFormat.segmentHeaderSize)
        let (firstSeq, startKinds) = header.withUnsafeBytes { JournalFormat.readSegmentHeader($0)! }
        kindSeqs = startKinds
        var seq = firstSeq - 1
        var intact = JournalFormat.segmentHeaderSize
        reader.scanRecords(path: last.path, from: JournalFormat.segmentHeaderSize, size: last.size) { h, offset, _ in
            guard h.seq == seq + 1 else { return false }
            seq = h.seq
            kindSeqs[Int(h.kind)] = max(kindSeqs[Int(h.kind)], h.kindSeq)
            intact = offset + h.recordSize
            return true
        }
        let i = segments.count - 1
        fd = open(last.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw JournalError(.notReadable, "cannot open journal segment \(last.path): \(String(cString: strerror(errno)))") }
        // Intact records past the damage mean it was no torn append: a corrupt byte, or a hole a
        // power loss left. Their seqs may have been published, so new events must not take them
        // again: numbering goes on after the highest, in a new segment, and the cut bytes are
        // kept beside the segment for inspection.
        var beyond = (count: 0, maxSeq: UInt64(0), kindSeqs: [UInt64](repeating: 0, count: JournalFormat.kindCount))
        let tail = intact < last.size ? JournalFiles.readRange(last.path, from: intact, count: last.size - intact) : []
        if JournalRecovery.isPadding(tail, end: last.size) {
            // The zeros a direct write put after the last record (a stop without ``close()``).
            recovery.paddingBytes = tail.count
        } else if intact < last.size {
            recovery.truncatedBytes = last.size - intact
            beyond = JournalRecovery.intactRecords(in: tail)
            if beyond.count > 0 {
                let aside = last.path + ".damaged-at-\(intact)"
                try? AtomicFile.write(tail, to: aside, durable: true)
                logger.error("journal: a damaged record with intact records after it; they are set aside and their seqs not reused", [
                    "segment": last.path, "offset": String(intact), "intact_after": String(beyond.count),
                    "highest_seq_after": String(beyond.maxSeq), "set_aside": aside,
                ])
            }
        }
        // Padding or a torn tail: either way the file ends at the last intact record.
        if intact < last.size {
            guard ftruncate(fd, off_t(intact)) == 0 else {
                throw JournalError(.notWritable, "cannot truncate the tail of \(last.path): \(String(cString: strerror(errno)))")
            }
            _ = fdatasync(fd)
        }
        _ = lseek(fd, off_t(intact), SEEK_SET)
        segments[i].size = intact
        var newSegment = false
        if beyond.count > 0 && beyond.maxSeq > seq {
            recovery.skippedRecords = beyond.count
            seq = beyond.maxSeq
            for k in kindSeqs.indices { kindSeqs[k] = max(kindSeqs[k], beyond.kindSeqs[k]) }
            newSegment = true
        }
        // Records past the intact ones that a subscriber may have seen (a cut tail, or unsynced
        // records a crash of the machine took): new events are numbered after every seq that may
        // have been published, and each kind_seq after every one that may have been.
        if reservation.damaged {
            logger.error("journal: a slot of the seq reservation is damaged; the other is used", ["file": directory + "/" + SeqReservation.fileName])
        } else if reservation.previous == nil && seq > 0 {
            logger.warning("journal: no seq reservation beside an existing journal (written before it existed, or deleted); numbering goes on from the last record", [
                "file": directory + "/" + SeqReservation.fileName,
            ])
        }
        let resume = SeqReservation.resumeAfter(intact: seq, cutTail: recovery.truncatedBytes > 0 && beyond.count == 0,
                                                previous: reservation.previous, damaged: reservation.damaged,
                                                boot: reservation.boot)
        if resume > seq {
            let skipped = resume - seq
            logger.warning("journal: records after the last intact one may have been published before the stop; their seqs are not reused", [
                "last_intact_seq": String(seq), "resume_after_seq": String(resume), "skipped_seqs": String(skipped),
                "previous_stop": reservation.previous?.clean == true ? "clean" : "unclean",
            ])
            recovery.skippedSeqs = skipped
            for k in kindSeqs.indices { kindSeqs[k] += skipped }
            seq = resume
            newSegment = true
        }
        if newSegment {
            Glibc.close(fd)
            try openNewSegment(firstSeq: seq + 1)
        } else if let e = appender.open(path: last.path, fd: fd, size: intact) {
            throw JournalError(.notReadable, "cannot read the end of journal segment \(last.path): \(String(cString: strerror(e)))")
        }
        writtenSeq = seq
        recovery.lastSeq = seq
        recovery.kindSeqs = kindSeqs
        recovery.segments = segments.count
        if recovery.truncatedBytes > 0 {
            logger.warning("journal recovered", ["last_seq": String(seq), "truncated_bytes": String(recovery.truncatedBytes),
                                                 "set_aside_records": String(recovery.skippedRecords),
                                                 "skipped_seqs": String(recovery.skippedSeqs), "segment": last.path])
        }
    }

    /// Rewrites the damaged header of segment `i` (which holds records): its first seq from the
    /// file name, each `kind_seq` before it from the segment's own records (the first of a kind,
    /// less one) or, for a kind it lacks, from the segment before it. The damaged bytes are kept
    /// beside it.
    private func repairHeader(of i: Int, damaged: [UInt8]) throws {
        let seg = segments[i]
        var before = [UInt64](repeating: 0, count: JournalFormat.kindCount)
        if i > 0 {
            let prev = segments[i - 1]
            let h = JournalFiles.readRange(prev.path, from: 0, count: JournalFormat.segmentHeaderSize)
            if let (_, kinds) = h.withUnsafeBytes({ JournalFormat.readSegmentHeader($0) }) { before = kinds }
            reader.scanRecords(path: prev.path, from: JournalFormat.segmentHeaderSize, size: prev.size) { r, _, _ in
                before[Int(r.kind)] = max(before[Int(r.kind)], r.kindSeq)
                return true
            }
        }
        var seen = [Bool](repeating: false, count: JournalFormat.kindCount)
        reader.scanRecords(path: seg.path, from: JournalFormat.segmentHeaderSize, size: seg.size) { r, _, _ in
            let k = Int(r.kind)
            if !seen[k] {
                seen[k] = true
                before[k] = r.kindSeq &- 1
            }
            return true
        }
        try? AtomicFile.write(damaged, to: seg.path + ".damaged-header", durable: true)
        let header = JournalFormat.segmentHeader(firstSeq: seg.firstSeq, kindSeqs: before)
        let rfd = open(seg.path, O_RDWR | O_CLOEXEC)
        guard rfd >= 0 else { throw JournalError(.notReadable, "cannot open journal segment \(seg.path): \(String(cString: strerror(errno)))") }
        defer { Glibc.close(rfd) }
        let n = header.withUnsafeBytes { pwrite(rfd, $0.baseAddress, $0.count, 0) }
        guard n == header.count, fdatasync(rfd) == 0 else {
            throw JournalError(.notWritable, "cannot rewrite the header of \(seg.path): \(String(cString: strerror(errno)))")
        }
        logger.error("journal: the newest segment's header was damaged; rebuilt from its name and records", [
            "segment": seg.path, "first_seq": String(seg.firstSeq), "damaged_header": seg.path + ".damaged-header",
        ])
    }

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
        let failure = appender.append(base, bytes)
        noteFallback()
        guard failure == 0 else {
            isWritable = false
            throw JournalError(.notWritable, "journal write failed: \(String(cString: strerror(failure)))")
        }
        noteWritten(batch, from, to, bytes: bytes)
        batch.written = to
    }

    /// Hands `count` bytes of records at `base` to the writer thread, to append to the open
    /// segment. The memory must stay as it is until ``writerResult(wait:)`` returns its result.
    func post(_ base: UnsafeMutableRawPointer, count: Int) {
        writer.post(JournalWriter.Job(appender: appender, address: Int(bitPattern: base), count: count))
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

    private func rotate(firstSeq: UInt64) throws {
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
    private func openNewSegment(firstSeq: UInt64, replacing: Bool = false) throws {
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
        _ = fdatasync(newFD)
        JournalFiles.syncDirectory(directory)
        if let e = appender.open(path: path, fd: newFD, size: header.count) {
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
    public func close() {
        guard !closed else { return }
        closed = true
        // A batch still at the writer was collected (``JournalBatch/close()``): it is in the file.
        writer.stop()
        syncer.stop()
        finishSegment()
        syncer.syncNow(upTo: writtenSeq)
        // Every record is synced and nothing past the last was published: a restart (on any
        // boot) goes on after it, unless the file loses records after all.
        if syncer.durable >= writtenSeq { reservation.markClean(lastSeq: writtenSeq) }
        Glibc.close(fd)
        reader.close()
        lock.release()
    }

    /// Deletes closed segments beyond the size or age limits, oldest first (``JournalRetention``).
    public func enforceRetention(now: time_t) {
        while segments.count > 1 {
            let oldest = segments[0]
            guard let age = retention.retires(oldest.path, journalBytes: totalBytes, now: now) else { break }
            unlink(oldest.path)
            segments.removeFirst()
            catalog.removeOldestSegment()
            logger.info("journal: segment retired", ["path": oldest.path, "bytes": String(oldest.size), "age_s": String(age)])
        }
    }

    // MARK: Reading

    /// Reads written records on the calling (pipeline) thread: the state rebuild at start. See
    /// ``JournalReader/read(from:prefixes:limit:maxExamined:maxBytes:_:)``.
    public func read(
        from: UInt64, prefixes: [[UInt8]], limit: Int, maxExamined: Int = .max,
        _ body: (UInt64, UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Void
    ) throws -> (next: UInt64, count: Int) {
        try reader.read(from: from, prefixes: prefixes, limit: limit, maxExamined: maxExamined, body)
    }

    /// Cuts the open segment's padding before it is closed; a failure is logged (the padding stays,
    /// read as the segment's end).
    private func finishSegment() {
        if let e = appender.finish() {
            logger.warning("journal: the zero padding after a segment's last record could not be cut", [
                "segment": segments.last?.path ?? "", "error": String(cString: strerror(e)),
            ])
        }
    }

    /// Logs, once, that direct writes stopped and the journal writes through the page cache.
    private func noteFallback() {
        guard !fallbackLogged, let reason = appender.fallbackReason else { return }
        fallbackLogged = true
        logger.warning("journal: direct writes refused; writing through the page cache from now on", ["reason": reason])
    }
}
