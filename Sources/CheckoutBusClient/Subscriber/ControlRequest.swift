import ZeroMQ
import CheckoutBusProtocol

/// One request to a daemon's control socket and its reply, for tools (`stats`, `seek`, `forget`):
/// a DEALER of its own, connected, sent once, read once. `Sendable` (no state).
public enum ControlRequest {
    /// Sends `body` (a request as ``ControlRequestWire`` writes it) to the daemon at `control`.
    /// - Returns: the reply's first frame, or nil when none came within `timeoutSeconds`.
    /// - Throws: a ``ZMQError`` when the socket cannot be made or connected.
    public static func send(_ body: [UInt8], to control: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil) throws -> [UInt8]? {
        let context = try ZMQContext()
        let dealer = try ZMQSocket(context: context, type: .dealer)
        try dealer.setLinger(milliseconds: 0)
        try dealer.setOption(.receiveTimeout, Int32(timeoutSeconds * 1000))
        try curve?.apply(to: dealer)
        try dealer.connect(control)
        _ = try dealer.send(body)
        return try dealer.receiveMultipart()?.first
    }

    /// ``send(_:to:timeoutSeconds:curve:)`` of a request written as text.
    public static func send(_ body: String, to control: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil) throws -> [UInt8]? {
        try send(Array(body.utf8), to: control, timeoutSeconds: timeoutSeconds, curve: curve)
    }
}
