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
}
