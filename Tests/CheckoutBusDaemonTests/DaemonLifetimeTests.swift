import Foundation
import Testing

import CheckoutBusDaemon
import CheckoutBusRuntime

/// A daemon opens its journal when it is made, reads its error map first, and closes the journal
/// when it goes away without running.
@Suite("daemon lifetime: journal opened at init", .serialized)
struct DaemonLifetimeTests {
    static func scratch() -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifetime-\(UUID().uuidString)").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test("a daemon made and dropped without running releases its journal: another opens the same data directory")
    func droppedReleases() throws {
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let configuration = try DaemonConfiguration.parse(["--data-dir", root + "/data"])
        let logger = BusLogger(label: "test", level: .error)
        var first: BusDaemon? = try BusDaemon(configuration: configuration, logger: logger)
        #expect(first != nil)
        // While it lives, its journal's lock is held.
        #expect(throws: (any Error).self) { _ = try BusDaemon(configuration: configuration, logger: logger) }
        first = nil
        _ = try BusDaemon(configuration: configuration, logger: logger)
    }

    @Test("a bad error map stops the start before the journal is made")
    func badMapFirst() throws {
        let root = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let map = root + "/map.txt"
        try "this is not a mapping\n".write(toFile: map, atomically: true, encoding: .utf8)
        let configuration = try DaemonConfiguration.parse(["--data-dir", root + "/data", "--error-map", map])
        #expect(throws: (any Error).self) { _ = try BusDaemon(configuration: configuration, logger: BusLogger(label: "test", level: .error)) }
        #expect(!FileManager.default.fileExists(atPath: root + "/data/journal"))
    }
}
