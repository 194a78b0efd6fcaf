#if canImport(Glibc)
import Glibc
#endif
import ZeroMQ
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// A PUSH connection to a daemon's ingest socket that gives up after a timeout instead of blocking
/// forever when no daemon is there. Used by `send` and `replay`. Not `Sendable`.
package final class IngestPusher {
    package let endpoint: String
    package let timeoutSeconds: Int
    private let socket: ZMQSocket
    private let usesCurve: Bool

    package init(endpoint: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil) throws {
        self.endpoint = endpoint
        self.timeoutSeconds = timeoutSeconds
        usesCurve = curve != nil
        socket = try ZMQSocket(context: try ZMQContext(), type: .push)
        try curve?.apply(to: socket)
        // Queue only on a completed connection: a daemon that refuses us (a CURVE key it does not
        // list) makes `send` fail after the timeout instead of queueing into the void.
        try socket.setOption(.immediate, 1)
        try socket.setOption(.sendTimeout, Int32(timeoutSeconds * 1000))
        try socket.setOption(.linger, Int32(timeoutSeconds * 1000))
        try socket.setOption(.sendHighWaterMark, 100_000)
        try socket.connect(endpoint)
    }

    /// Sends one event. - Returns: `false` when no daemon took it within the timeout.
    package func send(_ bytes: [UInt8]) throws -> Bool {
        try bytes.withUnsafeBytes { try socket.send($0) }
    }

    /// The message for a daemon that did not take events.
    package func unreachable(command: String, sent: Int) -> String {
        "checkoutbus \(command): no daemon took events at \(endpoint) within \(timeoutSeconds)s"
            + (usesCurve ? CurveClientKeys.refusalHint : "")
            + "; sent=\(sent)\n"
    }
}
