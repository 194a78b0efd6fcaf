#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The event ids of suppressed updates, kept beside the journal (which holds only what was
/// published) so that a producer's retry of one after a restart is still recognised as a retry —
/// not compared with a snapshot that has moved on since and published as a stale one.
///
/// `<data-dir>/suppressed.log`, renamed to `suppressed.log.1` when it passes `rotateBytes` (the
/// previous `.1` is dropped). Each record: magic `CBS1`, the checkout id's and the event id's
/// lengths (u16 each), the `seq` last published before the suppression (u64), the two ids, and a
/// checksum (``JournalFormat/checksumV1(_:_:)``) over all of it; little-endian. Damaged bytes are
/// skipped (records are found again by magic and checksum) and a torn tail is cut, both logged.
/// Records are buffered and written by the pipeline before the journal is given anything
/// processed after them (so after `kill -9` the log is never behind the journal, and a record is
/// written before its producer's acknowledgement is sent), and `fdatasync`ed with each heartbeat:
/// a power loss forgets at most the last second's. Not `Sendable`: the pipeline's.
package final class SuppressedLog {
    package struct Entry: Equatable {
        package var seq: UInt64
        package var checkoutID: String
        package var eventID: String
    }

    package static let magic: UInt32 = 0x3153_4243  // "CBS1" read little-endian
    package static let headerSize = 16

    package let path: String
    private let rotateBytes: Int
    private var fd: Int32 = -1
    private var size = 0
    private var buffer: [UInt8] = []
    private var unsynced = false
    /// Failed writes, for logging one in a thousand.
    private var failures = 0
    /// A rotation's rename failed, and it was said (once).
    private var rotationFailed = false
    private let logger: BusLogger

    /// The records found at start, oldest first (`.1`, then the current file), for the daemon to
    /// refill its event-id window with; ``takeRecovered()`` hands them over once.
    private var recovered: [Entry] = []

    /// Reads the log once: its records are kept for ``takeRecovered()``, a torn tail is cut,
    /// damaged bytes are reported, and records past `journalSeq` — the journal's last seq (the log
    /// is written ahead of the journal, and a `kill -9` may leave it so) — are dropped from the
    /// file, as the journal will number new events with those seqs.
    package init(directory: String, journalSeq: UInt64, rotateBytes: Int = 16 << 20, logger: BusLogger) throws {
        path = directory + "/suppressed.log"
        self.rotateBytes = rotateBytes
        self.logger = logger
        // A log that cannot be read stops the start: taken for an empty one, its records would be
        // cut away below (the file is truncated to what was read).
        let read: SuppressedLog.Contents
        let older: SuppressedLog.Contents
        do {
            read = try SuppressedLog.readFile(path)
            older = try SuppressedLog.readFile(path + ".1")
        } catch {
            throw JournalError(.notReadable, error.description)
        }
        if read.skippedBytes > 0 {
            logger.warning("suppressed-id log: skipped damaged bytes; the ids in them are not remembered",
                           ["path": path, "bytes": String(read.skippedBytes), "records_kept": String(read.entries.count)])
        }
        let kept = read.entries.filter { $0.seq <= journalSeq }
        var intactBytes = read.intactBytes
        if kept.count < read.entries.count {
            for e in kept { append(seq: e.seq, checkoutID: e.checkoutID, eventID: e.eventID) }
            do { try AtomicFile.write(buffer, to: path, durable: true) } catch {
                throw JournalError(.notWritable, "cannot rewrite \(path): \(error)")
            }
            logger.info("suppressed-id log: dropped records past the journal's end",
                        ["dropped": String(read.entries.count - kept.count)])
            intactBytes = buffer.count
            buffer.removeAll()
        }
        recovered = older.entries.filter { $0.seq <= journalSeq } + kept
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw JournalError(.notReadable, "cannot open \(path): \(String(cString: strerror(errno)))") }
        // Records end where the last intact one does: new ones follow it.
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            // `deinit` runs after a throw here (every property is set) and closes what is open.
            Glibc.close(fd)
            fd = -1
            throw JournalError(.notReadable, "cannot stat \(path): \(String(cString: strerror(code)))")
        }
        size = Int(st.st_size)
        if intactBytes < size {
            let torn = size - intactBytes
            if ftruncate(fd, off_t(intactBytes)) == 0 {
                size = intactBytes
                logger.warning("suppressed-id log: cut a torn tail", ["path": path, "bytes": String(torn)])
            } else {
                // New records follow the torn bytes; a later read skips them as damage.
                logger.warning("suppressed-id log: a torn tail could not be cut", [
                    "path": path, "bytes": String(torn), "error": String(cString: strerror(errno)),
                ])
            }
        }
    }

    /// The records read at start (see ``init(directory:journalSeq:rotateBytes:logger:)``), once.
    package func takeRecovered() -> [Entry] {
        defer { recovered = [] }
        return recovered
    }

    deinit { close() }

    /// Buffers one record; ids longer than 65,535 bytes are not kept.
    package func append(seq: UInt64, checkoutID: String, eventID: String) {
        var (checkoutID, eventID) = (checkoutID, eventID)
        checkoutID.withUTF8 { c in
            eventID.withUTF8 { e in
                append(seq: seq, checkoutID: UnsafeRawBufferPointer(c), eventID: UnsafeRawBufferPointer(e))
            }
        }
    }

    /// Buffers one record of the ids' UTF-8; ids longer than 65,535 bytes are not kept.
    package func append(seq: UInt64, checkoutID: UnsafeRawBufferPointer, eventID: UnsafeRawBufferPointer) {
        let c = checkoutID.count
        let e = eventID.count
        guard c <= 0xFFFF, e <= 0xFFFF else { return }
        let start = buffer.count
        // The ids (UTF-8 bytes) appended as typed bytes: `Array.append(contentsOf:)` copies those in
        // one go, where a raw buffer went byte by byte. The integers are stored into room made for
        // them.
        func put(_ raw: UnsafeRawBufferPointer) {
            let typed = raw.baseAddress?.assumingMemoryBound(to: UInt8.self)
            buffer.append(contentsOf: UnsafeBufferPointer(start: typed, count: raw.count))
        }
        func put<T: FixedWidthInteger>(_ v: T) {
            let at = buffer.count
            buffer.append(contentsOf: repeatElement(0, count: MemoryLayout<T>.size))
            buffer.withUnsafeMutableBytes { $0.storeBytes(of: v.littleEndian, toByteOffset: at, as: T.self) }
        }
        put(SuppressedLog.magic)
        put(UInt16(c))
        put(UInt16(e))
        put(seq)
        put(checkoutID)
        put(eventID)
        let sum = buffer.withUnsafeBytes { JournalFormat.checksumV1($0.baseAddress! + start, buffer.count - start) }
        put(sum)
    }

    /// Writes what is buffered (one `write`), rotating first when the file is full. A failed write
    /// (a full disk) is logged and its records are dropped: a retry of one is then compared by its
    /// snapshot, as before this log existed.
    package func flush() {
        guard !buffer.isEmpty, fd >= 0 else { return }
        if size + buffer.count > rotateBytes { rotate() }
        let n = buffer.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n == buffer.count {
            size += n
            unsynced = true
        } else {
            let error = String(cString: strerror(errno))
            if failures % 1000 == 0 {
                logger.warning("suppressed-id log write failed; those ids are not remembered across a restart",
                               ["error": error, "failures": String(failures + 1)])
            }
            failures += 1
            if n > 0, ftruncate(fd, off_t(size)) != 0 { size += n }
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// `fdatasync`s what was written since the last call.
    ///
    /// The log promises no producer anything (acknowledgements wait for the journal, not for it),
    /// so a failed sync does not fence the daemon: it is logged, counted (``syncFailures``), and the
    /// ids written since the last good sync are taken as forgettable — as after a power loss.
    package func sync() {
        guard unsynced, fd >= 0 else { return }
        let failure = Failpoints.hit("suppressed.fdatasync") ?? (fdatasync(fd) == 0 ? 0 : errno)
        if failure != 0 {
            if syncFailures % 1000 == 0 {
                logger.error("suppressed-id log: fdatasync failed; the ids written since the last good sync may be "
                             + "forgotten by a crash (retries of them are then compared by snapshot)",
                             ["error": String(cString: strerror(failure)), "failures": String(syncFailures + 1)])
            }
            syncFailures += 1
        }
        unsynced = false
    }

    /// `fdatasync`s of the log that failed.
    package private(set) var syncFailures = 0

    package func close() {
        guard fd >= 0 else { return }
        flush()
        sync()
        _ = Glibc.close(fd)
        fd = -1
    }

    private func rotate() {
        sync()
        // Keep appending to the full file rather than lose it; said once.
        guard rename(path, path + ".1") == 0 else {
            if !rotationFailed {
                rotationFailed = true
                logger.warning("suppressed-id log: cannot rotate; appending to the full file", [
                    "path": path, "error": String(cString: strerror(errno)),
                ])
            }
            return
        }
        let newFD = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0o644)
        guard newFD >= 0 else {
            logger.warning("cannot reopen the suppressed-id log", ["path": path, "error": String(cString: strerror(errno))])
            return
        }
        _ = Glibc.close(fd)
        fd = newFD
        size = 0
    }

    /// What ``readFile(_:)`` found in a file.
    package typealias Contents = (entries: [Entry], intactBytes: Int, skippedBytes: Int, totalBytes: Int)

    /// A file's intact records; damaged bytes between them are skipped (found again by magic and
    /// checksum). `intactBytes` is where the last intact record ends, `skippedBytes` what was
    /// skipped before it, `totalBytes` the file's size. A file that does not exist has none.
    /// - Throws: ``AtomicFileError`` when it exists and cannot be read: never taken for an empty one.
    package static func readFile(_ path: String) throws(AtomicFileError) -> Contents {
        guard let bytes = try AtomicFile.read(path) else { return ([], 0, 0, 0) }
        if let injected = Failpoints.hit("suppressed.read") {
            throw AtomicFileError(.unreadable, "cannot read \(path): \(String(cString: strerror(injected)))")
        }
        var entries: [Entry] = []
        var offset = 0
        var intact = 0
        var skipped = 0
        bytes.withUnsafeBytes { raw in
            guard let p = raw.baseAddress else { return }
            while offset + headerSize + 8 <= raw.count {
                if let (entry, size) = record(p, at: offset, count: raw.count) {
                    entries.append(entry)
                    skipped += offset - intact
                    offset += size
                    intact = offset
                } else {
                    offset += 1
                }
            }
        }
        return (entries, intact, skipped, bytes.count)
    }

    /// The intact record at `offset` and its size, or nil.
    private static func record(_ p: UnsafeRawPointer, at offset: Int, count: Int) -> (Entry, Int)? {
        guard JournalFormat.load(p, offset, as: UInt32.self) == magic else { return nil }
        let c = Int(JournalFormat.load(p, offset + 4, as: UInt16.self))
        let e = Int(JournalFormat.load(p, offset + 6, as: UInt16.self))
        let covered = headerSize + c + e
        guard offset + covered + 8 <= count,
            JournalFormat.load(p, offset + covered, as: UInt64.self) == JournalFormat.checksumV1(p + offset, covered)
        else { return nil }
        let ids = UnsafeRawBufferPointer(start: p + offset + headerSize, count: c + e)
        let entry = Entry(seq: JournalFormat.load(p, offset + 8, as: UInt64.self),
                          checkoutID: String(decoding: ids.prefix(c), as: UTF8.self),
                          eventID: String(decoding: ids.dropFirst(c), as: UTF8.self))
        return (entry, covered + 8)
    }
}
