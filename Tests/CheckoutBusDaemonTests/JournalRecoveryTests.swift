import CheckoutBusRuntime
import Foundation
import Testing

@testable import CheckoutBusDaemon

/// Opening a journal whose newest segment's tail is damaged (``JournalRecovery``), on real files
/// in a temporary directory.
@Suite("journal recovery: a torn or damaged tail is cut, and no seq is taken twice")
struct JournalRecoveryTests {
    static let topic = Array("checkout.update".utf8)
    static func envelope(_ seq: UInt64) -> [UInt8] { Array("{\"seq\":\(seq)}".utf8) }
    /// The bytes record `seq` takes in a segment.
    static func recordSize(_ seq: UInt64) -> Int {
        JournalFormat.recordHeaderSize + topic.count + envelope(seq).count + JournalFormat.checksumSize
    }

    static func options() -> Journal.Options {
        var options = Journal.Options()
        options.cacheBytes = nil
        return options
    }

    /// Writes records 1...`count` to a new journal in `directory` and closes it cleanly.
    static func write(_ count: UInt64, to directory: String, logger: BusLogger) throws {
        let journal = try Journal(directory: directory, options: options(), logger: logger)
        let batch = JournalBatch(journal: journal, measuresLatency: false, logger: logger)
        for seq in 1...count {
            topic.withUnsafeBytes { t in
                envelope(seq).withUnsafeBytes { e in
                    batch.append(seq: seq, kindSeq: seq, kind: 1, topic: t, envelope: e, arrival: 0)
                }
            }
        }
        try batch.flush()
        batch.close()
    }

    static func seqs(in journal: Journal) throws -> [UInt64] {
        var seqs: [UInt64] = []
        _ = try journal.read(from: 1, prefixes: [], limit: 1000) { seq, _, _ in seqs.append(seq) }
        return seqs
    }

    static func scratch() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("cb-recovery-\(UUID().uuidString)").path
    }

    @Test("a torn last record is cut; its seq is not reused after a clean stop had reserved it")
    func tornTail() throws {
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try Self.write(10, to: root, logger: logger)
        let segment = root + "/" + JournalFormat.segmentName(1)
        let size = try JournalFiles.fileSize(segment)
        #expect(truncate(segment, off_t(size - 5)) == 0)

        let journal = try Journal(directory: root, options: Self.options(), logger: logger)
        defer { journal.close() }
        #expect(journal.recovery.truncatedBytes == Self.recordSize(10) - 5)
        #expect(journal.recovery.skippedRecords == 0)
        #expect(journal.recovery.skippedSeqs == 1)
        #expect(journal.lastSeq == 10)
        #expect(try JournalFiles.fileSize(segment) == size - Self.recordSize(10))
        #expect(try Self.seqs(in: journal) == Array(1...9))
    }

    @Test("a corrupt record with intact ones after it: cut there, the rest set aside beside the segment, numbering after the highest")
    func damagedMiddle() throws {
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try Self.write(10, to: root, logger: logger)
        let segment = root + "/" + JournalFormat.segmentName(1)
        let damagedAt = JournalFormat.segmentHeaderSize + (1...4).map { Self.recordSize($0) }.reduce(0, +)
        let fd = open(segment, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0xFF
        #expect(pwrite(fd, &byte, 1, off_t(damagedAt + JournalFormat.recordHeaderSize + 3)) == 1)
        close(fd)

        let journal = try Journal(directory: root, options: Self.options(), logger: logger)
        defer { journal.close() }
        #expect(journal.recovery.truncatedBytes == (5...10).map { Self.recordSize($0) }.reduce(0, +))
        #expect(journal.recovery.skippedRecords == 5)
        #expect(journal.lastSeq == 10)
        #expect(FileManager.default.fileExists(atPath: segment + ".damaged-at-\(damagedAt)"))
        #expect(try JournalFiles.fileSize(segment) == damagedAt)
        #expect(try Self.seqs(in: journal) == Array(1...4))
        // New records go on after every seq that may have been published, in a new segment.
        #expect(FileManager.default.fileExists(atPath: root + "/" + JournalFormat.segmentName(11)))
    }

    @Test("a newest segment that cannot be read stops the open at its header's read, named by the call")
    func unreadableNewestSegment() throws {
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try Self.write(10, to: root, logger: logger)
        // A directory in the newest segment's place: `stat` and `open` succeed, every `pread`
        // fails (EISDIR). Before, the failed read was an empty header, taken for a torn one (then
        // a header to rebuild, or, on a file system where a directory's size is under 64 bytes,
        // a segment to remove).
        let segment = root + "/" + JournalFormat.segmentName(1)
        try FileManager.default.removeItem(atPath: segment)
        try FileManager.default.createDirectory(atPath: segment, withIntermediateDirectories: false)
        do {
            let journal = try Journal(directory: root, options: Self.options(), logger: logger)
            journal.close()
            Issue.record("the journal opened over a segment it cannot read")
        } catch let error as JournalError {
            #expect(error.code == .notReadable)
            // The header's own read, not a later scan of the records.
            #expect(error.description == "cannot read \(segment): \(String(cString: strerror(EISDIR)))", "\(error)")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: root).filter { $0.hasSuffix(".seg") }
        #expect(names == [JournalFormat.segmentName(1)])
    }

    @Test("the directory listing gives every name but . and ..; one that cannot be listed throws, never an empty list")
    func listing() throws {
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for name in ["b.seg", "a", ".hidden"] {
            #expect(FileManager.default.createFile(atPath: root + "/" + name, contents: Data()))
        }
        #expect(try JournalFiles.names(in: root).sorted() == [".hidden", "a", "b.seg"])
        #expect(throws: JournalError.self) { try JournalFiles.names(in: root + "/a") }  // ENOTDIR
        #expect(throws: JournalError.self) { try JournalFiles.names(in: root + "/missing") }  // ENOENT
        #expect(throws: JournalError.self) { try JournalFiles.fileSize(root + "/missing") }
        #expect(throws: JournalError.self) { try JournalFiles.readRange(root + "/missing", from: 0, count: 8) }
        #expect(try JournalFiles.readRange(root + "/a", from: 0, count: 8) == [])  // ends at once: no error
    }
}
