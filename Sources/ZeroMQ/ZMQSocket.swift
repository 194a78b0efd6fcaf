import CZeroMQ

/// A libzmq socket, closed in `deinit`.
///
/// Not `Sendable` and not thread-safe: libzmq sockets must be used from one thread at a time.
/// Every socket in this project is created, used and closed on one thread, which its owner names.
public final class ZMQSocket {
    /// The raw handle, for ``ZMQPoller`` and `zmq_proxy`.
    public let handle: UnsafeMutableRawPointer
    public let type: ZMQSocketType
    /// Kept alive until this socket is closed: `zmq_ctx_term` waits for every socket of its context.
    private let context: ZMQContext

    /// Creates a socket of `type` in `context`.
    /// - Throws: ``ZMQError`` if libzmq refuses (for example after the context was shut down).
    public init(context: ZMQContext, type: ZMQSocketType) throws {
        guard let handle = zmq_socket(context.handle, type.rawValue) else {
            throw ZMQError(code: zmq_errno(), function: "zmq_socket")
        }
        self.handle = handle
        self.type = type
        self.context = context
    }

    deinit {
        zmq_close(handle)
    }

    // MARK: Endpoints

    /// Binds to `endpoint` (`tcp://127.0.0.1:*` picks a free port; read ``lastEndpoint``).
    public func bind(_ endpoint: String) throws {
        try enableIPv6(for: endpoint)
        try zmqCheck("zmq_bind(\(endpoint))") { zmq_bind(handle, endpoint) }
    }

    /// An IPv6 address (`tcp://[::1]:…`) needs libzmq's IPv6 option, off by default.
    private func enableIPv6(for endpoint: String) throws {
        if endpoint.hasPrefix("tcp://[") { try setOption(.ipv6, 1) }
    }

    /// Connects to `endpoint`; libzmq connects in the background and reconnects on its own.
    public func connect(_ endpoint: String) throws {
        try enableIPv6(for: endpoint)
        try zmqCheck("zmq_connect(\(endpoint))") { zmq_connect(handle, endpoint) }
    }

    /// Stops listening on `endpoint`.
    public func unbind(_ endpoint: String) throws {
        try zmqCheck("zmq_unbind(\(endpoint))") { zmq_unbind(handle, endpoint) }
    }

    /// The endpoint last bound, as libzmq resolved it (`ZMQ_LAST_ENDPOINT`), with the real port.
    public var lastEndpoint: String {
        get throws { try stringOption(ZMQ_LAST_ENDPOINT) }
    }

    // MARK: Options

    /// Sets an integer socket option such as `ZMQ_SNDHWM` or `ZMQ_LINGER`.
    func setOption(_ option: Int32, _ value: Int32) throws {
        var v = value
        try zmqCheck("zmq_setsockopt(\(option))") {
            zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size)
        }
    }

    /// Sets a 64-bit integer socket option such as `ZMQ_MAXMSGSIZE`.
    /// Sets `ZMQ_MAXMSGSIZE`: larger inbound messages make libzmq drop the connection.
    public func setMaxMessageSize(_ value: Int64) throws { try setOption(ZMQ_MAXMSGSIZE, int64: value) }

    func setOption(_ option: Int32, int64 value: Int64) throws {
        var v = value
        try zmqCheck("zmq_setsockopt(\(option))") {
            zmq_setsockopt(handle, option, &v, MemoryLayout<Int64>.size)
        }
    }

    /// Sets a binary socket option such as `ZMQ_SUBSCRIBE`.
    func setOption(_ option: Int32, bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            _ = try zmqCheck("zmq_setsockopt(\(option))") {
                zmq_setsockopt(handle, option, buffer.baseAddress, buffer.count)
            }
        }
    }

    /// Reads an integer socket option.
    func intOption(_ option: Int32) throws -> Int32 {
        var v: Int32 = 0
        var size = MemoryLayout<Int32>.size
        try zmqCheck("zmq_getsockopt(\(option))") { zmq_getsockopt(handle, option, &v, &size) }
        return v
    }

    /// Reads a string socket option, growing the buffer until libzmq's value fits.
    func stringOption(_ option: Int32) throws -> String {
        var capacity = 256
        while true {
            var buffer = [UInt8](repeating: 0, count: capacity)
            var size = capacity
            let rc = buffer.withUnsafeMutableBytes { zmq_getsockopt(handle, option, $0.baseAddress, &size) }
            if rc == 0 {
                let end = buffer.prefix(size).firstIndex(of: 0) ?? size
                return String(decoding: buffer[..<end], as: UTF8.self)
            }
            let err = zmq_errno()
            guard err == EINVAL, capacity < 1 << 20 else { throw ZMQError(code: err, function: "zmq_getsockopt") }
            capacity *= 4
        }
    }

    /// Subscribes a SUB socket to a topic prefix (empty: everything).
    public func subscribe(_ prefix: String) throws {
        try setOption(ZMQ_SUBSCRIBE, bytes: Array(prefix.utf8))
    }

    /// Sets `ZMQ_LINGER` in milliseconds (-1: wait forever for queued messages on close).
    public func setLinger(milliseconds: Int32) throws { try setOption(ZMQ_LINGER, milliseconds) }

    // MARK: Sending

    /// Sends one frame; libzmq copies the bytes.
    /// - Parameters:
    ///   - more: another frame of the same message follows (`ZMQ_SNDMORE`).
    ///   - dontWait: return `false` instead of blocking at the high-water mark (`ZMQ_DONTWAIT`).
    /// - Returns: `true` if queued, `false` if it would have blocked.
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, more: Bool = false, dontWait: Bool = false) throws -> Bool {
        let flags = ZMQSocket.sendFlags(more: more, dontWait: dontWait)
        switch try zmqCall("zmq_send", { zmq_send(handle, bytes.baseAddress, bytes.count, flags) }) {
        case .done: return true
        case .wouldBlock: return false
        }
    }

    /// Sends one frame without copying it: libzmq reads `bytes` where they lie, on its I/O
    /// thread, until it calls `giveBack(bytes.baseAddress, hint)`. That call comes exactly once
    /// whatever happens, from any thread: when the last peer's copy is sent or dropped, at once
    /// when no peer takes the frame, when the send fails (this call gives the bytes back itself
    /// then, and when libzmq cannot take them at all and a copy is sent instead). The bytes must
    /// stay valid and unchanged until then.
    /// - Returns: `true` if queued, `false` if it would have blocked (the bytes are given back).
    @discardableResult
    public func send(
        lending bytes: UnsafeRawBufferPointer,
        giveBack: @escaping @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void,
        hint: UnsafeMutableRawPointer?, more: Bool = false, dontWait: Bool = false
    ) throws -> Bool {
        let data = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
        var message = zmq_msg_t()
        // An empty frame has no bytes to lend; without memory for libzmq's own record of the
        // frame (ENOMEM), nothing was taken either: a copy is sent.
        guard let data, zmq_msg_init_data(&message, data, bytes.count, giveBack, hint) == 0 else {
            defer { giveBack(data, hint) }
            return try send(bytes, more: more, dontWait: dontWait)
        }
        let flags = ZMQSocket.sendFlags(more: more, dontWait: dontWait)
        do {
            switch try zmqCall("zmq_msg_send", { zmq_msg_send(&message, handle, flags) }) {
            case .done: return true
            case .wouldBlock:
                ZMQSocket.close(&message)  // not sent: still ours, and closing it gives the bytes back
                return false
            }
        } catch {
            ZMQSocket.close(&message)
            throw error
        }
    }

    @inline(__always)
    static func sendFlags(more: Bool, dontWait: Bool) -> Int32 {
        (more ? ZMQ_SNDMORE : 0) | (dontWait ? ZMQ_DONTWAIT : 0)
    }

    /// Closes an unsent lent frame, which gives its bytes back. It fails only for a message that is
    /// not one (EFAULT): then the bytes would never come back, and their buffer could never be
    /// written again, so that is a stop, never a silent leak.
    private static func close(_ message: inout zmq_msg_t) {
        let status = zmq_msg_close(&message)
        precondition(status == 0,
                     "zmq_msg_close of an unsent lent frame failed: \(String(cString: zmq_strerror(zmq_errno())))")
    }

    /// Sends one frame from an array.
    @discardableResult
    public func send(_ bytes: [UInt8], more: Bool = false, dontWait: Bool = false) throws -> Bool {
        try bytes.withUnsafeBytes { try send($0, more: more, dontWait: dontWait) }
    }

    /// Sends one frame holding a string's UTF-8.
    @discardableResult
    public func send(_ string: String, more: Bool = false, dontWait: Bool = false) throws -> Bool {
        var s = string
        return try s.withUTF8 { try send(UnsafeRawBufferPointer($0), more: more, dontWait: dontWait) }
    }

    /// Sends a multipart message; all frames or, with `dontWait` at the high-water mark, none.
    @discardableResult
    public func sendMultipart(_ frames: [[UInt8]], dontWait: Bool = false) throws -> Bool {
        for (i, frame) in frames.enumerated() {
            let sent = try send(frame, more: i < frames.count - 1, dontWait: dontWait && i == 0)
            if !sent { return false }
        }
        return true
    }

    // MARK: Receiving

    /// Receives one frame into `message`, replacing what it held.
    /// - Returns: `false` if `dontWait` and nothing was queued.
    public func receive(into message: ZMQMessage, dontWait: Bool = false) throws -> Bool {
        let flags = dontWait ? ZMQ_DONTWAIT : 0
        switch try zmqCall("zmq_msg_recv", { zmq_msg_recv(message.pointer, handle, flags) }) {
        case .done: return true
        case .wouldBlock: return false
        }
    }

    /// Receives one whole multipart message as copied frames.
    /// - Returns: `nil` if `dontWait` and nothing was queued.
    public func receiveMultipart(dontWait: Bool = false) throws -> [[UInt8]]? {
        let message = ZMQMessage()
        guard try receive(into: message, dontWait: dontWait) else { return nil }
        var frames = [message.bytes]
        while message.hasMore {
            _ = try receive(into: message)
            frames.append(message.bytes)
        }
        return frames
    }

    /// Whether the last frame received has more parts (`ZMQ_RCVMORE`).
    public var receiveMore: Bool {
        get throws { try intOption(ZMQ_RCVMORE) != 0 }
    }
}

extension ZMQSocket {
    /// Sets a named integer option.
    public func setOption(_ option: ZMQOption, _ value: Int32) throws { try setOption(option.rawValue, value) }
    /// Reads a named integer option.
    public func option(_ option: ZMQOption) throws -> Int32 { try intOption(option.rawValue) }
}
