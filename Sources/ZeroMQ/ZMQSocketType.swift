import CZeroMQ

/// The socket types this project uses.
public struct ZMQSocketType: Sendable, Equatable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let pull = ZMQSocketType(rawValue: ZMQ_PULL)
    public static let push = ZMQSocketType(rawValue: ZMQ_PUSH)
    public static let pub = ZMQSocketType(rawValue: ZMQ_PUB)
    public static let sub = ZMQSocketType(rawValue: ZMQ_SUB)
    public static let xpub = ZMQSocketType(rawValue: ZMQ_XPUB)
    public static let xsub = ZMQSocketType(rawValue: ZMQ_XSUB)
    public static let router = ZMQSocketType(rawValue: ZMQ_ROUTER)
    public static let dealer = ZMQSocketType(rawValue: ZMQ_DEALER)
    public static let pair = ZMQSocketType(rawValue: ZMQ_PAIR)
    /// Raw TCP: `[connection id][bytes]`; an empty frame opens or closes a connection.
    public static let stream = ZMQSocketType(rawValue: ZMQ_STREAM)
}
