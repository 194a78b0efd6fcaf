import Foundation
import Testing
import CheckoutBusClient
import CheckoutBusProtocol

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

    @Test("prefixes the daemon would not take are bad_prefix; at the limits they are fine")
    func badPrefix() throws {
        let long = "checkout." + String(repeating: "x", count: TopicLimits.maxPrefixBytes - 8)
        #expect {
            try BusSubscriber.checkPrefixes([long])
        } throws: { error in
            (error as? SubscriberError).map { $0.code == .badPrefix && $0.description.contains("at most 64") } ?? false
        }
        #expect {
            try BusSubscriber.checkPrefixes((0...TopicLimits.maxReplayPrefixes).map { "checkout.\($0)" })
        } throws: { error in
            (error as? SubscriberError).map { $0.code == .badPrefix && $0.description.contains("at most 32") } ?? false
        }
        try BusSubscriber.checkPrefixes([String(long.dropLast())] + (1..<TopicLimits.maxReplayPrefixes).map { "checkout.\($0)" })
    }
}
