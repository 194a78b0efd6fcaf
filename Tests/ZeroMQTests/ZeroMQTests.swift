import Testing
import ZeroMQ

@Suite("ZeroMQ binding", .serialized, .timeLimit(.minutes(5)))
struct ZeroMQTests {
    /// A bound PULL and a connected PUSH on an ephemeral loopback port.
    func pair(_ context: ZMQContext) throws -> (push: ZMQSocket, pull: ZMQSocket) {
        let pull = try ZMQSocket(context: context, type: .pull)
        try pull.setLinger(milliseconds: 0)
        try pull.bind("tcp://127.0.0.1:*")
        let push = try ZMQSocket(context: context, type: .push)
        try push.setLinger(milliseconds: 0)
        try push.connect(try pull.lastEndpoint)
        return (push, pull)
    }

    @Test("lastEndpoint resolves the ephemeral port")
    func lastEndpoint() throws {
        let context = try ZMQContext()
        let s = try ZMQSocket(context: context, type: .pull)
        try s.setLinger(milliseconds: 0)
        try s.bind("tcp://127.0.0.1:*")
        let endpoint = try s.lastEndpoint
        #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))
        #expect(!endpoint.hasSuffix(":*"))
    }

    @Test("multipart messages round-trip frame by frame")
    func multipart() throws {
        let context = try ZMQContext()
        let (push, pull) = try pair(context)
        let frames: [[UInt8]] = [Array("checkout.start".utf8), [], Array("{\"v\":1}".utf8)]
        #expect(try push.sendMultipart(frames))
        #expect(try pull.receiveMultipart() == frames)
    }

    @Test("a 5 MiB message arrives whole: no fixed receive buffer, no truncation")
    func largeMessage() throws {
        let context = try ZMQContext()
        let (push, pull) = try pair(context)
        let big = (0..<(5 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        #expect(try push.send(big))
        let message = ZMQMessage()
        #expect(try pull.receive(into: message))
        #expect(message.count == big.count)
        #expect(message.bytes == big)
        #expect(!message.hasMore)
    }

    @Test("dontWait on an empty socket reports would-block instead of blocking")
    func dontWait() throws {
        let context = try ZMQContext()
        let (_, pull) = try pair(context)
        #expect(try pull.receive(into: ZMQMessage(), dontWait: true) == false)
        #expect(try pull.receiveMultipart(dontWait: true) == nil)
    }

    @Test("poll reports readiness and times out when idle")
    func poller() throws {
        let context = try ZMQContext()
        let (push, pull) = try pair(context)
        let poller = ZMQPoller()
        let index = poller.addReadable(pull)
        #expect(try poller.poll(timeoutMilliseconds: 50) == 0)
        try push.send("hello")
        #expect(try poller.poll(timeoutMilliseconds: 5000) == 1)
        #expect(poller.isReadable(index))
    }

    @Test("errors carry errno and zmq_strerror's text")
    func errors() throws {
        let context = try ZMQContext()
        let s = try ZMQSocket(context: context, type: .pull)
        try s.setLinger(milliseconds: 0)
        let error = try #require(throws: ZMQError.self) { try s.bind("tcp://not-an-address:*:*") }
        #expect(error.code != 0)
        #expect(error.function.hasPrefix("zmq_bind"))
        #expect(error.description.contains("errno \(error.code)"))
        let second = try ZMQSocket(context: context, type: .pull)
        try second.setLinger(milliseconds: 0)
        try s.bind("tcp://127.0.0.1:*")
        let inUse = try #require(throws: ZMQError.self) { try second.bind(try s.lastEndpoint) }
        #expect(inUse.description.contains("Address already in use"))
    }

    @Test("socket options read back what was set")
    func options() throws {
        let context = try ZMQContext()
        let s = try ZMQSocket(context: context, type: .xpub)
        try s.setOption(.sendHighWaterMark, 1234)
        #expect(try s.option(.sendHighWaterMark) == 1234)
        try s.setLinger(milliseconds: 0)
        #expect(try s.option(.linger) == 0)
    }
}
