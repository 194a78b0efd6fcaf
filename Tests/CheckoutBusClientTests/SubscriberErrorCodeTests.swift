import Foundation
import Testing
import CheckoutBusClient

/// A subscriber's failures carry a code for programs beside the message for people.
@Suite("SubscriberError: codes")
struct SubscriberErrorCodeTests {
    @Test("a bad shard list is bad_shard_list, with its message")
    func badShardList() {
        #expect {
            try ShardedSubscriber.validate(shardIDs: [0, 0], of: 2)
        } throws: { error in
            (error as? SubscriberError).map { $0.code == .badShardList && $0.description == "shard ids 0,0 name a shard twice" } ?? false
        }
    }

    @Test("a cursor file that cannot be opened is cursor_unusable; one locked by another subscriber is cursor_in_use")
    func cursorCodes() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cb-suberr-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect {
            _ = try FileCursor(path: dir + "/missing/cursor")
        } throws: { error in
            (error as? SubscriberError).map { $0.code == .cursorUnusable && $0.description.hasPrefix("cannot open cursor file ") } ?? false
        }
        let held = try FileCursor(path: dir + "/cursor")
        #expect {
            _ = try FileCursor(path: dir + "/cursor")
        } throws: { error in
            (error as? SubscriberError).map { $0.code == .cursorInUse } ?? false
        }
        _ = held
    }
}
