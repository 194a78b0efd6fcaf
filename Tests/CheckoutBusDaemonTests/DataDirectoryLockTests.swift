import CheckoutBusCore
import CheckoutBusRuntime
import Foundation
import Testing

@testable import CheckoutBusDaemon

#if canImport(Glibc)
import Glibc
#endif

/// Claiming a data directory (``DataDirectoryLock``) on real files in a temporary directory.
@Suite("data directory lock: one daemon per directory, one shard per journal")
struct DataDirectoryLockTests {
    static let logger = BusLogger(label: "test", level: .error)

    static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cb-lock-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("a second claim is refused with the holder's pid until the first is released")
    func exclusive() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try DataDirectoryLock(directory: dir, logger: Self.logger)
        let pid = try String(contentsOfFile: dir + "/LOCK", encoding: .utf8)
        #expect(pid == "\(getpid())\n")
        #expect {
            try DataDirectoryLock(directory: dir, logger: Self.logger)
        } throws: { error in
            guard let e = error as? JournalError else { return false }
            return e.code == .locked && e.description.contains("in use by another checkoutbusd (pid \(getpid()))")
        }
        first.release()
        _ = try DataDirectoryLock(directory: dir, logger: Self.logger)
    }

    @Test("the shard is recorded on first claim; another shard is refused; a journal without the file is 0/1")
    func shard() throws {
        let dir = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mine = try #require(ShardMap("1/2"))
        try DataDirectoryLock.claimShard(mine, dataDirectory: dir, journalHasRecords: false)
        #expect(try String(contentsOfFile: dir + "/shard", encoding: .utf8) == "1/2\n")
        try DataDirectoryLock.claimShard(mine, dataDirectory: dir, journalHasRecords: true)
        #expect {
            try DataDirectoryLock.claimShard(.single, dataDirectory: dir, journalHasRecords: true)
        } throws: { ($0 as? JournalError)?.code == .otherShard }
        let old = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: old) }
        #expect {
            try DataDirectoryLock.claimShard(mine, dataDirectory: old, journalHasRecords: true)
        } throws: { ($0 as? JournalError)?.code == .otherShard }
    }
}
