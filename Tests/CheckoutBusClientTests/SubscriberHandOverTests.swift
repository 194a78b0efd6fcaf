import Testing

@testable import CheckoutBusClient
import CheckoutBusProtocol

/// The bounded queue between the async subscriber's poll thread and its consumer.
@Suite("subscriber hand-over")
struct SubscriberHandOverTests {
    static func envelope(_ seq: Int64) -> ReceivedEnvelope {
        let raw = BusEnvelope(seq: seq, kindSeq: seq, kind: .update, topic: Array("checkout.update".utf8),
                              bytes: Array("{\"v\":1,\"seq\":\(seq)}".utf8), origin: .live, shard: 0)
        return ReceivedEnvelope(raw: raw, position: 0)
    }

    /// A subscriber dropped with envelopes still queued releases its queue. (libdispatch traps when
    /// a semaphore is released holding fewer permits than it was created with: this test process
    /// died with SIGILL before the queue's semaphore was created empty and raised per slot.)
    @Test("dropped with envelopes queued, the queue goes away quietly; queued envelopes come out in order")
    func droppedWhileQueued() async throws {
        var handOver: SubscriberHandOver? = SubscriberHandOver(capacity: 4, cursors: [MemoryCursor()])
        #expect(handOver?.push(Self.envelope(1)) == true)
        #expect(handOver?.push(Self.envelope(2)) == true)
        #expect(handOver?.push(Self.envelope(3)) == true)
        let first = try await handOver?.next()
        #expect(first?.seq == 1)
        handOver = nil  // two envelopes still queued
        #expect(handOver == nil)
    }
}
