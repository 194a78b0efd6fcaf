import Glibc
import ZeroMQ
import CheckoutBusJSON
import CheckoutBusProtocol
import CheckoutBusRuntime

/// One request to a daemon's control socket and its reply, for tools (`stats`, `seek`, `forget`):
/// a DEALER of its own, connected, sent (again after a `busy`), read. `Sendable` (no state).
public enum ControlRequest {
    /// Sends `body` (a request as ``ControlRequestWire`` writes it) to the daemon at `control`.
    /// - Returns: the reply's first frame, or nil when none came within `timeoutSeconds`.
    /// - Throws: a ``ZMQError`` when the socket cannot be made or connected.
    ///
    /// A `busy` answer (the daemon's queued replies at `--control-memory`, or its pipeline not
    /// answering `stats` yet: docs/security.md) is asked again after 20 ms, the pause doubling up to
    /// 1 s, until `timeoutSeconds` have passed since the first send; the last answer is returned.
    /// `retryBusy: false` returns the first answer whatever it is.
    public static func send(_ body: [UInt8], to control: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil,
                            retryBusy: Bool = true) throws -> [UInt8]? {
        let context = try ZMQContext()
        let dealer = try ZMQSocket(context: context, type: .dealer)
        try dealer.setLinger(milliseconds: 0)
        try curve?.apply(to: dealer)
        try dealer.connect(control)
        let deadline = BusClock.monotonicNanoseconds() &+ UInt64(max(0, timeoutSeconds)) &* 1_000_000_000
        let document = JSONDocument()
        var pause: UInt64 = 20_000_000
        // The last `busy`, answered when the next ask goes unanswered before the deadline.
        var busy: [UInt8]?
        while true {
            let now = BusClock.monotonicNanoseconds()
            let left = deadline > now ? (deadline - now) / 1_000_000 : 0
            try dealer.setOption(.receiveTimeout, Int32(clamping: max(1, left)))
            _ = try dealer.send(body)
            guard let reply = try dealer.receiveMultipart()?.first else { return busy }
            busy = reply
            guard retryBusy, isBusy(reply, document),
                BusClock.monotonicNanoseconds() &+ pause < deadline
            else { return reply }
            usleep(UInt32(pause / 1000))
            pause = min(pause * 2, 1_000_000_000)
        }
    }

    /// Whether `reply` is the daemon's `busy`: a good request it cannot answer now.
    static func isBusy(_ reply: [UInt8], _ document: JSONDocument) -> Bool {
        guard ControlReplyWire.parse(reply, into: document) else { return false }
        let head = ControlReplyWire.read(document)
        return !head.ok && head.error == "busy"
    }

    /// ``send(_:to:timeoutSeconds:curve:)`` of a request written as text.
    public static func send(_ body: String, to control: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil,
                            retryBusy: Bool = true) throws -> [UInt8]? {
        try send(Array(body.utf8), to: control, timeoutSeconds: timeoutSeconds, curve: curve, retryBusy: retryBusy)
    }
}
