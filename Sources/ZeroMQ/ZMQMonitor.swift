import CZeroMQ

/// A socket event libzmq's monitor reports (`zmq_socket_monitor`): what happened, and its value
/// (a file descriptor, or an error number for failures). `Sendable`; a value.
public struct ZMQMonitorEvent: Sendable, Equatable {
    public let event: UInt16
    public let value: UInt32

    public static let accepted = UInt16(ZMQ_EVENT_ACCEPTED)
    public static let disconnected = UInt16(ZMQ_EVENT_DISCONNECTED)
    public static let handshakeFailedNoDetail = UInt16(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    public static let handshakeFailedProtocol = UInt16(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
    public static let handshakeFailedAuth = UInt16(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    public static let handshakeSucceeded = UInt16(ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
    public static let connectRetried = UInt16(ZMQ_EVENT_CONNECT_RETRIED)

    /// The events a client watches its connection by: the handshake done or refused, a connect
    /// retried (nothing listening), a disconnect.
    public static let clientEvents = Int32(
        ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED
            | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

    /// The events a server counts connections by: accepted, disconnected, handshakes failed.
    public static let connectionEvents = Int32(
        ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

    /// Reads the first frame of a monitor message (16-bit event, 32-bit value, native order);
    /// nil when it is not one.
    public init?(frame: [UInt8]) {
        guard frame.count >= 6 else { return nil }
        event = UInt16(frame[0]) | UInt16(frame[1]) << 8
        value = UInt32(frame[2]) | UInt32(frame[3]) << 8 | UInt32(frame[4]) << 16 | UInt32(frame[5]) << 24
    }
}

extension ZMQSocket {
    /// Starts reporting `events` of this socket on a PAIR socket bound at `endpoint` (`inproc://…`),
    /// which another socket of the same context connects to and reads (``ZMQMonitorEvent``).
    /// Call on the thread that owns this socket, and connect the reader before this socket binds.
    ///
    /// - Important: libzmq sends each event with a *blocking* send from whichever thread saw it
    ///   (often its I/O thread): the reader must connect with no receive high-water mark
    ///   (`ZMQ_RCVHWM` 0, which makes the inproc pipe unbounded) so that a burst of connections
    ///   never blocks libzmq while the reader is busy, and ``stopMonitor()`` must run before the
    ///   reader closes.
    public func monitor(_ endpoint: String, events: Int32 = ZMQMonitorEvent.connectionEvents) throws {
        try zmqCheck("zmq_socket_monitor(\(endpoint))") { zmq_socket_monitor(handle, endpoint, events) }
    }

    /// Stops this socket's monitor. Call before its reader closes: libzmq sends events to the
    /// monitor's PAIR socket with a blocking send, which would wait forever once no reader is there.
    public func stopMonitor() throws {
        try zmqCheck("zmq_socket_monitor(stop)") { zmq_socket_monitor(handle, nil, 0) }
    }

    /// Disconnects a peer whose handshake has not finished in `milliseconds` (`ZMQ_HANDSHAKE_IVL`;
    /// libzmq's default is 30 s; 0 never).
    public func setHandshakeTimeout(milliseconds: Int32) throws { try setOption(ZMQ_HANDSHAKE_IVL, milliseconds) }
}
