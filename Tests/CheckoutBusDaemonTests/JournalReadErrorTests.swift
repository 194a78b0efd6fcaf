import CheckoutBusCore
import CheckoutBusRuntime
import Foundation
import Testing

@testable import CheckoutBusDaemon

/// A segment the catalog lists that cannot be opened or read is an error of the read, named with
/// the file and errno: never an empty page (a client pages on it for ever) and never damage (whose
/// seqs a client counts as lost). (Before, each case below read as 0 records and `next == from`.)
@Suite("journal read errors: thrown, never an empty page")
struct JournalReadErrorTests {
    /// How the segment is made unreadable after the journal has opened it and listed it.
    enum Breakage: String, CaseIterable, CustomStringConvertible {
        /// Unlinked: `open` fails with ENOENT.
        case removed
        /// A directory in its place: `open` succeeds, `pread` fails with EISDIR.
        case directory
        /// Cut to its header: the file ends before the bytes the catalog says were written.
        case truncated
        var description: String { rawValue }
    }

    static func breakSegment(_ path: String, _ how: Breakage) throws {
        switch how {
        case .removed: try FileManager.default.removeItem(atPath: path)
        case .directory:
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        case .truncated: #expect(truncate(path, off_t(JournalFormat.segmentHeaderSize)) == 0)
        }
    }

    static func expectedDetail(_ how: Breakage) -> String {
        switch how {
        case .removed: "(errno \(ENOENT))"
        case .directory: "(errno \(EISDIR))"
        case .truncated: "ends at byte \(JournalFormat.segmentHeaderSize)"
        }
    }

    @Test("read throws notReadable naming the segment", arguments: Breakage.allCases)
    func readThrows(how: Breakage) throws {
        let root = JournalRecoveryTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try JournalRecoveryTests.write(10, to: root, logger: logger)
        let journal = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger)
        defer { journal.close() }
        let segment = root + "/" + JournalFormat.segmentName(1)
        try Self.breakSegment(segment, how)

        // Any reader: the journal's own (the state rebuild's) and the control thread's.
        let reader = JournalReader(catalog: journal.catalog, logger: logger)
        for read in [{ try journal.read(from: 1, prefixes: [], limit: 100) { _, _, _ in } },
                     { try reader.read(from: 3, prefixes: [], limit: 100) { _, _, _ in } }] {
            do {
                let page = try read()
                Issue.record("read returned \(page.count) records, next \(page.next), instead of throwing")
            } catch let error as JournalError {
                #expect(error.code == .notReadable)
                #expect(error.description.contains(segment), "\(error)")
                #expect(error.description.contains(Self.expectedDetail(how)), "\(error)")
            }
        }
    }

    @Test("a replay that reaches an unreadable segment is refused journal_unreadable with the detail",
          arguments: [Breakage.removed, .truncated])
    func replayRefused(how: Breakage) throws {
        let root = JournalRecoveryTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try JournalRecoveryTests.write(10, to: root, logger: logger)
        let journal = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger)
        defer { journal.close() }
        let service = ControlService(reader: JournalReader(catalog: journal.catalog, logger: logger), shard: .single,
                                     exchange: try SnapshotExchange(), reports: SubscriberReportBook(),
                                     counters: ServiceCounters())
        defer { service.exchange.requests.close() }
        func replay() throws -> [String: Any] {
            guard case .reply(let reply) = service.handle(Array(#"{"op":"replay","from":4,"limit":100,"req":9}"#.utf8)) else {
                Issue.record("a replay waited for a snapshot")
                return [:]
            }
            let status = try #require(try JSONSerialization.jsonObject(with: Data(reply.status)) as? [String: Any])
            // A refused replay carries no records; a page carries as many as its status counts.
            #expect(reply.page.count == (status["count"] as? Int ?? 0))
            return status
        }
        #expect(try replay()["count"] as? Int == 7, "readable first")
        try Self.breakSegment(root + "/" + JournalFormat.segmentName(1), how)
        service.reader.close()
        let reply = try replay()
        #expect(reply["ok"] as? Bool == false)
        #expect(reply["error"] as? String == "journal_unreadable", "\(reply)")
        #expect((reply["detail"] as? String)?.contains(Self.expectedDetail(how)) == true, "\(reply)")
        #expect(reply["req"] as? Int == 9)
        #expect(reply["from"] as? Int == 4)
        #expect(reply["last_seq"] as? Int == 10)
    }
}
