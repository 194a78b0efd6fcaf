import CZeroMQ

/// One message frame owned by libzmq (`zmq_msg_t`), kept at a stable heap address.
///
/// Not `Sendable`: use it on the thread of the socket that filled it. A `zmq_msg_t` must never be
/// copied bitwise, so the struct lives behind a pointer this class allocates once; receiving into
/// the same ``ZMQMessage`` again reuses it without a Swift allocation. The frame is always received
/// whole: libzmq sizes it, never a fixed buffer of ours.
public final class ZMQMessage {
    let pointer: UnsafeMutablePointer<zmq_msg_t>

    /// An empty frame, ready to receive into.
    public init() {
        pointer = .allocate(capacity: 1)
        zmq_msg_init(pointer)
    }

    deinit {
        zmq_msg_close(pointer)
        pointer.deallocate()
    }

    /// Size of the frame in bytes.
    public var count: Int { zmq_msg_size(pointer) }

    /// Whether more frames of the same multipart message follow this one.
    public var hasMore: Bool { zmq_msg_more(pointer) != 0 }

    /// Calls `body` with the frame's bytes; the pointer is valid only inside `body`.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let size = zmq_msg_size(pointer)
        guard size > 0, let data = zmq_msg_data(pointer) else {
            return try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
        return try body(UnsafeRawBufferPointer(start: data, count: size))
    }

    /// A copy of the frame's bytes.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}
