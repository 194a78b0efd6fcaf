import Foundation
import Synchronization
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
    /// died with SIGILL when the queue's free slots were a semaphore created full. The hand-over's
    /// one semaphore now starts empty and is raised only to wake the poll thread.)
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

/// Back-pressure by watermarks, and commits off the cooperative pool.
@Suite("subscriber hand-over: watermarks and commits")
struct SubscriberHandOverWatermarkTests {
    /// Returns once the poll thread (a thread of the test's) is waiting for room.
    static func untilPollerWaits(_ handOver: SubscriberHandOver) throws {
        let deadline = Date().addingTimeInterval(30)
        while handOver.pollerWaits == 0 {
            guard Date() < deadline else { throw CancellationError() }
            usleep(1_000)
        }
    }

    @Test("a full queue holds the poll thread until the consumer has taken it down to half, then lets it on")
    func watermarks() async throws {
        let handOver = SubscriberHandOver(capacity: 8, cursors: [MemoryCursor()])
        #expect(handOver.lowWatermark == 4)
        for seq in Int64(1)...8 { #expect(handOver.push(SubscriberHandOverTests.envelope(seq))) }
        #expect(handOver.pollerWaits == 0)
        // The ninth waits for room, on a thread of its own as the poll thread would.
        let pushed = DispatchSemaphore(value: 0)
        Thread { if handOver.push(SubscriberHandOverTests.envelope(9)) { pushed.signal() } }.start()
        try Self.untilPollerWaits(handOver)
        // Three taken: five left, above the low watermark — still held (it would have been let on
        // at the first free slot before).
        for seq in Int64(1)...3 { #expect(try await handOver.next()?.seq == seq) }
        #expect(pushed.wait(timeout: .now() + .milliseconds(300)) == .timedOut, "let on above the low watermark")
        #expect(handOver.pollerWaits == 1)
        // The fourth brings it to four: the ninth goes in.
        #expect(try await handOver.next()?.seq == 4)
        #expect(pushed.wait(timeout: .now() + .seconds(30)) == .success, "never let on at the low watermark")
        for seq in Int64(5)...9 { #expect(try await handOver.next()?.seq == seq) }
        #expect(handOver.pollerWaits == 1)
    }

    @Test("cancelled while the poll thread waits for room: it returns false at once")
    func cancelWhileWaiting() throws {
        let handOver = SubscriberHandOver(capacity: 2, cursors: [MemoryCursor()])
        #expect(handOver.push(SubscriberHandOverTests.envelope(1)))
        #expect(handOver.push(SubscriberHandOverTests.envelope(2)))
        let returned = DispatchSemaphore(value: 0)
        let result = Mutex<Bool?>(nil)
        Thread {
            let ok = handOver.push(SubscriberHandOverTests.envelope(3))
            result.withLock { $0 = ok }
            returned.signal()
        }.start()
        try Self.untilPollerWaits(handOver)
        handOver.cancel()
        #expect(returned.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(result.withLock { $0 } == false)
    }

    /// What a cursor saw of the thread that committed it.
    final class Seen: Sendable {
        let insideTask = Mutex<[Bool]>([])
    }

    final class RecordingCursor: SubscriberCursor {
        let seen: Seen
        let mayBlock: Bool
        init(_ seen: Seen, mayBlock: Bool) {
            self.seen = seen
            self.mayBlock = mayBlock
        }
        func load() -> Int64 { 0 }
        func commit(_ seq: Int64) {
            let inside = withUnsafeCurrentTask { $0 != nil }
            seen.insideTask.withLock { $0.append(inside) }
        }
        var commitMayBlock: Bool { mayBlock }
    }

    @Test("a cursor whose commit may block is committed outside any task (off the cooperative pool); a memory cursor in place")
    func commitsOffThePool() async throws {
        // Never connected: commit needs no socket.
        let options = BusSubscriber.Options(publish: "tcp://127.0.0.1:1", control: "tcp://127.0.0.1:2")
        for (mayBlock, expected) in [(true, false), (false, true)] {
            let seen = Seen()
            let subscriber = Subscriber(options: options, cursor: RecordingCursor(seen, mayBlock: mayBlock))
            for seq in Int64(1)...3 { try await subscriber.commit(ReceivedEnvelope(raw: SubscriberHandOverTests.envelope(seq).raw, position: 0)) }
            #expect(seen.insideTask.withLock { $0 } == [expected, expected, expected], "commitMayBlock \(mayBlock)")
        }
    }
}
