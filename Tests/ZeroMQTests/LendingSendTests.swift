import Synchronization
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// `ZMQSocket.send(lending:giveBack:hint:)`: the bytes go out where they lie, and libzmq gives them
/// back exactly once, whatever happens to the frame.
@Suite("ZeroMQ binding: sending lent bytes", .serialized, .timeLimit(.minutes(4)))
struct LendingSendTests {
    /// A count of give-backs that a `@convention(c)` callback reaches through its hint.
    final class GiveBacks {
        let counter: UnsafeMutablePointer<Atomic<Int>>
        init() {
            counter = .allocate(capacity: 1)
            counter.initialize(to: Atomic(0))
        }
        deinit {
            counter.deinitialize(count: 1)
            counter.deallocate()
        }
        var hint: UnsafeMutableRawPointer { UnsafeMutableRawPointer(counter) }
        var count: Int { counter.pointee.load(ordering: .acquiring) }
        static let giveBack: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, hint in
            hint?.assumingMemoryBound(to: Atomic<Int>.self).pointee.wrappingAdd(1, ordering: .releasing)
        }

        /// Waits up to 10 s for `n` give-backs.
        func wait(for n: Int) -> Bool {
            for _ in 0..<10_000 {
                if count >= n { return true }
                usleep(1_000)
            }
            return count >= n
        }
    }

    @Test("a lent frame arrives whole over TCP, and its bytes are given back once after")
    func deliveredThenGivenBack() throws {
        let context = try ZMQContext()
        let (push, pull) = try ZeroMQTests().pair(context)
        let backs = GiveBacks()
        // Memory of our own, valid until the end: libzmq reads it on its I/O thread after the calls.
        let sizes = (0..<50).map { 100 + 97 * $0 }
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: sizes.reduce(0, +), alignment: 8)
        defer { memory.deallocate() }
        var payloads: [UnsafeRawBufferPointer] = []
        var at = 0
        for (i, size) in sizes.enumerated() {
            let payload = UnsafeMutableRawBufferPointer(rebasing: memory[at..<at + size])
            for k in 0..<size { payload[k] = UInt8(truncatingIfNeeded: k &* 31 &+ i) }
            payloads.append(UnsafeRawBufferPointer(payload))
            at += size
        }
        for payload in payloads {
            #expect(try push.send(lending: payload, giveBack: GiveBacks.giveBack, hint: backs.hint, more: true))
            #expect(try push.send(Array("tail".utf8)))
        }
        for payload in payloads {
            #expect(try pull.receiveMultipart() == [Array(payload), Array("tail".utf8)])
        }
        #expect(backs.wait(for: payloads.count))
        withExtendedLifetime(push) {}
        usleep(50_000)
        #expect(backs.count == payloads.count, "each frame's bytes given back exactly once")
    }

    @Test("a frame no peer takes is given back at once; one that would block is given back and not sent")
    func notTaken() throws {
        let context = try ZMQContext()
        let bytes = Array(repeating: UInt8(ascii: "x"), count: 1_000)
        // A PUB without subscribers drops the frame inside the call.
        let pub = try ZMQSocket(context: context, type: .pub)
        try pub.setLinger(milliseconds: 0)
        try pub.bind("tcp://127.0.0.1:*")
        let dropped = GiveBacks()
        let taken = try bytes.withUnsafeBytes { b in
            try pub.send(lending: b, giveBack: GiveBacks.giveBack, hint: dropped.hint)
        }
        #expect(taken)
        #expect(dropped.count == 1)
        // A PUSH without a peer would block: false, given back, nothing queued.
        let push = try ZMQSocket(context: context, type: .push)
        try push.setLinger(milliseconds: 0)
        try push.bind("tcp://127.0.0.1:*")
        let blocked = GiveBacks()
        let queued = try bytes.withUnsafeBytes { b in
            try push.send(lending: b, giveBack: GiveBacks.giveBack, hint: blocked.hint, dontWait: true)
        }
        #expect(!queued)
        #expect(blocked.count == 1)
        // An empty frame has nothing to lend: it is sent as a copy, and given back here.
        let empty = GiveBacks()
        let nothing = UnsafeRawBufferPointer(start: nil, count: 0)
        let sentEmpty = try pub.send(lending: nothing, giveBack: GiveBacks.giveBack, hint: empty.hint)
        #expect(sentEmpty)
        #expect(empty.count == 1)
    }

    @Test("frames queued for a peer that never reads are given back when the sockets and context go")
    func queuedThenClosed() throws {
        let backs = GiveBacks()
        let bytes = Array(repeating: UInt8(ascii: "y"), count: 4_000)
        var sent = 0
        try bytes.withUnsafeBytes { b throws in
            // Sockets close in deinit, and the context's deinit waits for them (zmq_ctx_term):
            // all three are gone when this function returns.
            func sendToAPeerThatNeverReads() throws {
                let context = try ZMQContext()
                let pull = try ZMQSocket(context: context, type: .pull)
                try pull.setLinger(milliseconds: 0)
                try pull.setOption(.receiveHighWaterMark, 10)
                try pull.bind("tcp://127.0.0.1:*")
                let push = try ZMQSocket(context: context, type: .push)
                try push.setLinger(milliseconds: 0)
                try push.setOption(.sendHighWaterMark, 1_000)
                try push.connect(try pull.lastEndpoint)
                for _ in 0..<500 {
                    let queued = try push.send(lending: b, giveBack: GiveBacks.giveBack, hint: backs.hint, dontWait: true)
                    if queued { sent += 1 }
                }
            }
            try sendToAPeerThatNeverReads()
        }
        #expect(sent > 0)
        #expect(backs.count == 500, "sent \(sent); given back \(backs.count): every frame, sent, refused or dropped")
    }
}
