import Foundation
import Testing
@testable import CheckoutBusClient

/// The async subscriber's thread obeys task cancellation, with no daemon at the other end.
@Suite("Subscriber: cancellation", .serialized, .timeLimit(.minutes(5)))
struct SubscriberCancellationTests {
    @Test func cancellingTheIteratingTaskEndsTheLoop() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("cb-cancel-\(UUID().uuidString).cursor").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        // Nobody listens there: the subscriber waits for envelopes that never come.
        let endpoint = "ipc://" + path + ".none"
        let subscriber = Subscriber(options: BusSubscriber.Options(publish: endpoint, control: endpoint),
                                    cursor: try FileCursor(path: path))
        let consumer = Task {
            var received = 0
            for try await _ in subscriber.envelopes { received += 1 }
            return received
        }
        consumer.cancel()
        #expect(try await consumer.value == 0)
        // Without cancellation reaching the poll thread, the loop above would never end.
        #expect(subscriber.statistics.handled == 0)
    }
}
