import Foundation
import Testing

import CheckoutBusRuntime

/// Whole-file replacement on a real file system: what a cursor or checkpoint relies on.
@Suite("atomic files")
struct AtomicFileTests {
    static func scratch() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cb-atomic-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test("a missing file reads as nil; a written one reads back; a second write replaces it whole")
    func roundTrip() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/cursor"
        #expect(try AtomicFile.read(path) == nil)
        try AtomicFile.write(Array("seq 41\n".utf8), to: path, durable: true)
        #expect(try AtomicFile.read(path) == Array("seq 41\n".utf8))
        try AtomicFile.write(Array("7".utf8), to: path, durable: false)
        #expect(try AtomicFile.read(path) == Array("7".utf8))
        // The temporary the write goes through is renamed away, never left beside the file.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["cursor"])
    }

    @Test("a write into a directory that does not exist fails with the path in its reason")
    func unwritable() throws {
        let path = "/nonexistent-\(UUID().uuidString)/cursor"
        do {
            try AtomicFile.write([1, 2, 3], to: path, durable: true)
            Issue.record("the write succeeded")
        } catch {
            #expect(error.description.contains(path))
        }
    }

    @Test("resolved: a link is the file it names, there or not yet (a relative link from its own directory); a loop or a plain path as given")
    func resolvedPaths() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let real = AtomicFile.resolved(dir)
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        try AtomicFile.write(Array("x".utf8), to: dir + "/sub/state", durable: false)
        try FileManager.default.createSymbolicLink(atPath: dir + "/link", withDestinationPath: "sub/state")
        #expect(AtomicFile.resolved(dir + "/link") == real + "/sub/state")
        // Not there yet: the link still names it, and a write through the resolved path keeps the link.
        try FileManager.default.createSymbolicLink(atPath: dir + "/later", withDestinationPath: dir + "/sub/later-state")
        let later = AtomicFile.resolved(dir + "/later")
        #expect(later == real + "/sub/later-state")
        try AtomicFile.write(Array("y".utf8), to: later, durable: false)
        #expect((try FileManager.default.attributesOfItem(atPath: dir + "/later")[.type] as? FileAttributeType) == .typeSymbolicLink)
        // A file not there in a real directory; a loop of links ends.
        #expect(AtomicFile.resolved(dir + "/sub/none") == real + "/sub/none")
        try FileManager.default.createSymbolicLink(atPath: dir + "/a", withDestinationPath: dir + "/b")
        try FileManager.default.createSymbolicLink(atPath: dir + "/b", withDestinationPath: dir + "/a")
        _ = AtomicFile.resolved(dir + "/a")
    }
}
