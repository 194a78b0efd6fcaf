import CZeroMQ

/// A libzmq context: the owner of I/O threads and the factory of sockets.
///
/// `Sendable`: libzmq documents contexts as thread-safe, so this is the one `@unchecked Sendable`
/// type in the module. Sockets made from it are not thread-safe (see ``ZMQSocket``).
/// The context is terminated in `deinit`, which blocks until every socket is closed and its
/// linger period has passed.
public final class ZMQContext: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    /// Creates a context.
    /// - Parameter ioThreads: libzmq I/O threads (`ZMQ_IO_THREADS`).
    /// - Throws: ``ZMQError`` if libzmq cannot create a context.
    public init(ioThreads: Int32 = 1) throws {
        guard let handle = zmq_ctx_new() else { throw ZMQError(code: zmq_errno(), function: "zmq_ctx_new") }
        guard zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) == 0 else {
            let code = zmq_errno()
            _ = zmq_ctx_term(handle)  // no socket yet: it ends at once
            throw ZMQError(code: code, function: "zmq_ctx_set(ZMQ_IO_THREADS, \(ioThreads))")
        }
        self.handle = handle
    }

    /// Makes every blocking call on this context's sockets return `ETERM`; sockets must still be closed.
    public func shutdown() {
        zmq_ctx_shutdown(handle)
    }

    deinit {
        while zmq_ctx_term(handle) == -1 && zmq_errno() == EINTR {}
    }

    /// The libzmq version as `major.minor.patch`.
    public static var version: String {
        var major: Int32 = 0
        var minor: Int32 = 0
        var patch: Int32 = 0
        zmq_version(&major, &minor, &patch)
        return "\(major).\(minor).\(patch)"
    }
}
