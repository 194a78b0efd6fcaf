import CZeroMQ

/// CURVE keys (Z85 text, 40 characters) and the socket options that use them. `Sendable`.
public struct ZMQCurveKeyPair: Sendable, Equatable {
    public let publicKey: String
    public let secretKey: String

    /// A fresh key pair from libzmq (`zmq_curve_keypair`).
    /// - Throws: ``ZMQError`` when libzmq was built without CURVE.
    public static func generate() throws -> ZMQCurveKeyPair {
        var pub = [CChar](repeating: 0, count: 41)
        var sec = [CChar](repeating: 0, count: 41)
        try zmqCheck("zmq_curve_keypair") { zmq_curve_keypair(&pub, &sec) }
        return ZMQCurveKeyPair(publicKey: z85Text(pub), secretKey: z85Text(sec))
    }

    /// The pair of a secret key (`zmq_curve_public`).
    /// - Throws: ``ZMQError`` when `secretKey` is not 40 characters of Z85.
    public init(secretKey: String) throws {
        guard ZMQCurveKeyPair.isZ85Key(secretKey) else { throw ZMQError(code: EINVAL, function: "zmq_curve_public") }
        var pub = [CChar](repeating: 0, count: 41)
        try zmqCheck("zmq_curve_public") { zmq_curve_public(&pub, secretKey) }
        self.publicKey = ZMQCurveKeyPair.z85Text(pub)
        self.secretKey = secretKey
    }

    init(publicKey: String, secretKey: String) {
        self.publicKey = publicKey
        self.secretKey = secretKey
    }

    /// A NUL-terminated Z85 buffer as a string.
    static func z85Text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `key` is 40 characters of Z85 (a 32-byte CURVE key).
    public static func isZ85Key(_ key: String) -> Bool {
        let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)
        return key.utf8.count == 40 && key.utf8.allSatisfy { alphabet.contains($0) }
    }

    /// A 32-byte binary key (as ZAP requests carry it) in Z85.
    public static func z85(_ binary: [UInt8]) -> String? {
        guard binary.count == 32 else { return nil }
        var out = [CChar](repeating: 0, count: 41)
        guard binary.withUnsafeBufferPointer({ zmq_z85_encode(&out, $0.baseAddress, 32) }) != nil else { return nil }
        return z85Text(out)
    }
}

extension ZMQSocket {
    /// Makes this (bound) socket a CURVE server with `secretKey`, authenticated by the ZAP handler
    /// under `domain`. Set before `bind`.
    public func makeCurveServer(secretKey: String, domain: String) throws {
        try setOption(ZMQ_CURVE_SERVER, 1)
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
        try setOption(ZMQ_ZAP_DOMAIN, bytes: Array(domain.utf8))
    }

    /// Makes this socket a CURVE client of the server whose public key is `serverKey`. Set before `connect`.
    public func makeCurveClient(_ keys: ZMQCurveKeyPair, serverKey: String) throws {
        try setOption(ZMQ_CURVE_SERVERKEY, bytes: Array(serverKey.utf8))
        try setOption(ZMQ_CURVE_PUBLICKEY, bytes: Array(keys.publicKey.utf8))
        try setOption(ZMQ_CURVE_SECRETKEY, bytes: Array(keys.secretKey.utf8))
    }

    /// Sets a string option such as `ZMQ_ZAP_DOMAIN`.
    public func setOption(_ option: ZMQOption, string: String) throws { try setOption(option.rawValue, bytes: Array(string.utf8)) }
}

extension ZMQSocketType {
    /// Request-reply, the ZAP handler's side.
    public static let rep = ZMQSocketType(rawValue: ZMQ_REP)
}
