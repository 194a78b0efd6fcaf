import CZeroMQ

/// An error reported by libzmq: the `errno` value and the libzmq function that returned it.
///
/// `Sendable`; a value type that can grow more fields without breaking callers.
public struct ZMQError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The `errno` value libzmq reported (`zmq_errno()`).
    public let code: Int32
    /// The libzmq function that failed, such as `zmq_bind`.
    public let function: String

    public init(code: Int32, function: String) {
        self.code = code
        self.function = function
    }

    /// `zmq_strerror`'s text for `code`, prefixed by the failing function.
    public var description: String {
        "\(function): \(String(cString: zmq_strerror(code))) (errno \(code))"
    }

    /// The context was terminated while the call was blocked (`ETERM`).
    public var isContextTerminated: Bool { code == ETERM }
}

/// What a non-blocking libzmq call did: completed with a return value, or would have blocked.
public enum ZMQCallResult: Sendable, Equatable {
    case done(Int32)
    case wouldBlock
}

/// Calls a libzmq function the way every call in this module does, like swift-nio's `syscall`.
///
/// On -1 it reads `zmq_errno()`: `EINTR` retries, `EAGAIN` becomes `.wouldBlock` (only meaningful
/// for `ZMQ_DONTWAIT` calls), anything else throws ``ZMQError``.
@inline(__always)
func zmqCall(_ function: String, _ body: () -> Int32) throws -> ZMQCallResult {
    while true {
        let rc = body()
        if rc != -1 { return .done(rc) }
        let err = zmq_errno()
        if err == EINTR { continue }
        if err == EAGAIN { return .wouldBlock }
        throw ZMQError(code: err, function: function)
    }
}

/// ``zmqCall(_:_:)`` for calls that must not block-fail: `EAGAIN` is an error here.
@inline(__always)
@discardableResult
func zmqCheck(_ function: String, _ body: () -> Int32) throws -> Int32 {
    switch try zmqCall(function, body) {
    case .done(let rc): return rc
    case .wouldBlock: throw ZMQError(code: EAGAIN, function: function)
    }
}
