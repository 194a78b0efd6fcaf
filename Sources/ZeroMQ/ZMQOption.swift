import CZeroMQ

/// Integer socket options this project sets, by name. `Sendable`.
public struct ZMQOption: Sendable, Equatable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let sendHighWaterMark = ZMQOption(rawValue: ZMQ_SNDHWM)
    public static let receiveHighWaterMark = ZMQOption(rawValue: ZMQ_RCVHWM)
    public static let linger = ZMQOption(rawValue: ZMQ_LINGER)
    public static let sendTimeout = ZMQOption(rawValue: ZMQ_SNDTIMEO)
    public static let receiveTimeout = ZMQOption(rawValue: ZMQ_RCVTIMEO)
    public static let xpubVerbose = ZMQOption(rawValue: ZMQ_XPUB_VERBOSE)
    public static let immediate = ZMQOption(rawValue: ZMQ_IMMEDIATE)
    public static let routerMandatory = ZMQOption(rawValue: ZMQ_ROUTER_MANDATORY)
    /// The kernel's receive buffer for the socket's connections (`SO_RCVBUF`), in bytes; -1: the OS default.
    public static let receiveBuffer = ZMQOption(rawValue: ZMQ_RCVBUF)
    /// IPv6 on the socket (libzmq's default is IPv4 only): needed to bind or connect `tcp://[::1]:…`.
    public static let ipv6 = ZMQOption(rawValue: ZMQ_IPV6)
}
