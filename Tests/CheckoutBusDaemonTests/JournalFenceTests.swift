import CheckoutBusRuntime
import Foundation
import Testing

@testable import CheckoutBusDaemon

/// Opening a journal a fenced daemon left (``JournalFence``): its `FENCED` marker names the last
/// synced seq; what follows is read back, checked and written again, and what is not intact cut.
@Suite("journal fence: the start after a failed sync")
struct JournalFenceTests {
    static func fence(_ root: String, durableSeq: UInt64) throws {
        let marker = JournalFence.Marker(durableSeq: durableSeq, reason: "fdatasync of the open journal segment failed: Input/output error",
                                         at: "2026-12-06T05:00:00.000Z")
        try AtomicFile.write(JournalFence.encode(marker), to: root + "/" + JournalFence.fileName, durable: true)
    }

    @Test("the intact records after the durable seq are kept (written again); the marker is cleared; numbering goes straight on")
    func intactTailIsRewritten() throws {
        let root = JournalRecoveryTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try JournalRecoveryTests.write(10, to: root, logger: logger)
        try Self.fence(root, durableSeq: 6)
        let journal = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger)
        defer { journal.close() }
        #expect(journal.recovery.fence?.durableSeq == 6)
        #expect(journal.recovery.fenceRedrivenRecords == 4)
        #expect(journal.recovery.fenceCutBytes == 0)
        #expect(journal.lastSeq == 10)
        #expect(try JournalRecoveryTests.seqs(in: journal) == Array(1...10))
        #expect(!FileManager.default.fileExists(atPath: root + "/" + JournalFence.fileName))
    }

    @Test("bytes after the intact run are cut and kept beside the segment; their seqs are never given again")
    func damagedTailIsCut() throws {
        let root = JournalRecoveryTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try JournalRecoveryTests.write(10, to: root, logger: logger)
        let segment = root + "/" + JournalFormat.segmentName(1)
        // Record 9 as the disk had it: a page the kernel dropped after the failed sync.
        let at = JournalFormat.segmentHeaderSize + (1...8).map { JournalRecoveryTests.recordSize($0) }.reduce(0, +)
        let fd = open(segment, O_RDWR)
        try #require(fd >= 0)
        var zeros = [UInt8](repeating: 0, count: 7)
        #expect(pwrite(fd, &zeros, zeros.count, off_t(at + 20)) == zeros.count)
        close(fd)
        try Self.fence(root, durableSeq: 6)
        let journal = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger)
        defer { journal.close() }
        #expect(journal.recovery.fenceRedrivenRecords == 2)
        #expect(journal.recovery.fenceCutBytes == JournalRecoveryTests.recordSize(9) + JournalRecoveryTests.recordSize(10))
        #expect(FileManager.default.fileExists(atPath: segment + ".fenced-after-\(at)"))
        #expect(try JournalRecoveryTests.seqs(in: journal) == Array(1...8))
        // 9 and 10 may have been published: the next event is numbered after the reservation.
        #expect(journal.lastSeq >= 10)
        #expect(journal.recovery.skippedSeqs >= 2)
        #expect(!FileManager.default.fileExists(atPath: root + "/" + JournalFence.fileName))
    }

    @Test("a marker that cannot be understood refuses the start")
    func unreadableMarker() throws {
        let root = JournalRecoveryTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try JournalRecoveryTests.write(3, to: root, logger: logger)
        try AtomicFile.write(Array("not json".utf8), to: root + "/" + JournalFence.fileName, durable: true)
        #expect(throws: JournalError.self) { _ = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger) }
    }
}
