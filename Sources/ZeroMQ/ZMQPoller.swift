import CZeroMQ

/// Waits for readiness on several sockets at once (`zmq_poll`).
///
/// Not `Sendable`: use it on the thread that owns its sockets. The sockets must outlive the poller.
public final class ZMQPoller {
    private var items: [zmq_pollitem_t] = []

    public init() {}

    /// Adds a socket to wait for input on; returns its index for ``isReadable(_:)``.
    @discardableResult
    public func addReadable(_ socket: ZMQSocket) -> Int {
        items.append(zmq_pollitem_t(socket: socket.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0))
        return items.count - 1
    }

    /// Adds a plain file descriptor (an eventfd, a pipe) to wait for input on; returns its index.
    @discardableResult
    public func addReadable(fileDescriptor: Int32) -> Int {
        items.append(zmq_pollitem_t(socket: nil, fd: fileDescriptor, events: Int16(ZMQ_POLLIN), revents: 0))
        return items.count - 1
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever) for any socket to be readable.
    /// - Returns: how many sockets are ready; 0 on timeout or interruption by a signal.
    @discardableResult
    public func poll(timeoutMilliseconds: Int) throws -> Int {
        let count = items.count
        let rc = items.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32(count), timeoutMilliseconds) }
        if rc == -1 {
            let err = zmq_errno()
            if err == EINTR { return 0 }
            throw ZMQError(code: err, function: "zmq_poll")
        }
        return Int(rc)
    }

    /// Whether the socket at `index` was readable in the last ``poll(timeoutMilliseconds:)``.
    public func isReadable(_ index: Int) -> Bool {
        items[index].revents & Int16(ZMQ_POLLIN) != 0
    }
}

/// Runs libzmq's built-in proxy between `frontend` and `backend` until the context terminates.
///
/// Blocks the calling thread; used by the raw baseline forwarder.
public func zmqProxy(frontend: ZMQSocket, backend: ZMQSocket) {
    _ = zmq_proxy(frontend.handle, backend.handle, nil)
}
