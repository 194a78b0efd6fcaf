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

    /// A consumer always a little behind: the queue never drains. (Before the ring, the queue was
    /// compacted only when fully drained, so it kept every envelope ever delivered: 20,002 here.)
    @Test("a consumer that never lets the queue drain: storage stays within twice the capacity, order kept")
    func neverDrained() async throws {
        let capacity = 8
        let handOver = SubscriberHandOver(capacity: capacity, cursors: [MemoryCursor()])
        #expect(handOver.push(Self.envelope(1)))
        #expect(handOver.push(Self.envelope(2)))
        var most = handOver.storageSlots
        for seq in Int64(3)...20_002 {
            #expect(handOver.push(Self.envelope(seq)))
            let taken = try await handOver.next()
            if taken?.seq != seq - 2 {
                Issue.record("got \(taken?.seq ?? -1), expected \(seq - 2)")
                return
            }
            most = max(most, handOver.storageSlots)
        }
        #expect(most <= 2 * capacity, "storage slots: at most \(most) for a capacity of \(capacity)")
        #expect(try await handOver.next()?.seq == 20_001)
        #expect(try await handOver.next()?.seq == 20_002)
    }
}
