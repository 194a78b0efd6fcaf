#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import ZeroMQ

/// The client public keys allowed in, per ZAP domain: `producers` (ingest and acknowledged
/// ingest) and `subscribers` (publish and control). Each is a directory of key files, one Z85
/// public key (40 characters) on the first line of each `*.pub` file, as `checkoutbus keygen`
/// writes them.
///
/// `Sendable`: the sets sit behind a mutex; the pipeline thread's ZAP handler reads them and the
/// SIGHUP handler replaces them (``reload()``).
public final class CurveAllowlists: Sendable {
    public static let producersDomain = "producers"
    public static let subscribersDomain = "subscribers"

    public let producersDirectory: String
    public let subscribersDirectory: String
    private let sets: Mutex<(producers: Set<String>, subscribers: Set<String>)>

    /// Reads both directories.
    /// - Throws: ``DaemonError`` naming a directory that cannot be read or a file that is not a key.
    public init(producersDirectory: String, subscribersDirectory: String) throws {
        self.producersDirectory = producersDirectory
        self.subscribersDirectory = subscribersDirectory
        let p = try CurveAllowlists.load(producersDirectory)
        let s = try CurveAllowlists.load(subscribersDirectory)
        sets = Mutex((p, s))
    }

    /// Reads both directories again; on any error the current lists stay.
    /// - Returns: how many producer and subscriber keys are now allowed.
    @discardableResult
    public func reload() throws -> (producers: Int, subscribers: Int) {
        let p = try CurveAllowlists.load(producersDirectory)
        let s = try CurveAllowlists.load(subscribersDirectory)
        sets.withLock { $0 = (p, s) }
        return (p.count, s.count)
    }

    /// Whether `key` (Z85) may connect to sockets of `domain`.
    public func allows(domain: String, key: String) -> Bool {
        sets.withLock { s in
            switch domain {
            case CurveAllowlists.producersDomain: s.producers.contains(key)
            case CurveAllowlists.subscribersDomain: s.subscribers.contains(key)
            default: false
            }
        }
    }

    public var counts: (producers: Int, subscribers: Int) { sets.withLock { ($0.producers.count, $0.subscribers.count) } }

    static func load(_ directory: String) throws -> Set<String> {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw DaemonError("cannot read the key directory \(directory)")
        }
        var keys = Set<String>()
        for name in names.sorted() where name.hasSuffix(".pub") {
            let path = directory + "/" + name
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw DaemonError("cannot read the key file \(path)")
            }
            let key = readKey(text)
            guard ZMQCurveKeyPair.isZ85Key(key) else {
                throw DaemonError("\(path) does not hold a CURVE public key (40 characters of Z85)")
            }
            keys.insert(key)
        }
        return keys
    }

    /// Reads a secret key file (`checkoutbus keygen`'s `.key`) and derives its public key.
    /// - Throws: ``DaemonError`` when the file cannot be read or holds no secret key.
    public static func readSecretKey(path: String) throws -> ZMQCurveKeyPair {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw DaemonError("cannot read the CURVE secret key \(path)")
        }
        guard let keys = try? ZMQCurveKeyPair(secretKey: readKey(text)) else {
            throw DaemonError("\(path) does not hold a CURVE secret key (40 characters of Z85)")
        }
        return keys
    }

    /// Reads a public key file (`.pub`).
    /// - Throws: ``DaemonError`` when the file cannot be read or holds no public key.
    public static func readPublicKey(path: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw DaemonError("cannot read the CURVE public key \(path)")
        }
        let key = readKey(text)
        guard ZMQCurveKeyPair.isZ85Key(key) else { throw DaemonError("\(path) does not hold a CURVE public key") }
        return key
    }

    /// The key in a key file: its first line that is not a `#` comment, trimmed.
    public static func readKey(_ text: String) -> String {
        for line in text.split(separator: "\n") {
            let t = line.trimmingCharacters(in: .whitespaces)
            if !t.isEmpty && !t.hasPrefix("#") { return t }
        }
        return ""
    }
}

/// The ZAP handler (RFC 27): answers libzmq's authentication requests for CURVE connections, on
/// `inproc://zeromq.zap.01`, polled by the pipeline thread.
///
/// Not `Sendable`: its REP socket lives on the pipeline thread.
final class CurveAuthenticator {
    let socket: ZMQSocket
    let allowlists: CurveAllowlists
    let logger: Logger
    private(set) var accepted: UInt64 = 0
    private(set) var refused: UInt64 = 0

    init(context: ZMQContext, allowlists: CurveAllowlists, logger: Logger) throws {
        socket = try ZMQSocket(context: context, type: .rep)
        try socket.setLinger(milliseconds: 0)
        try socket.bind("inproc://zeromq.zap.01")
        self.allowlists = allowlists
        self.logger = logger
    }

    /// Answers every queued request.
    func serve() throws {
        while let frames = try socket.receiveMultipart(dontWait: true) {
            // version, request id, domain, address, identity, mechanism, credentials…
            guard frames.count >= 6 else {
                _ = try socket.sendMultipart([Array("1.0".utf8), [], Array("400".utf8), Array("malformed".utf8), [], []])
                continue
            }
            let requestID = frames[1]
            let domain = String(decoding: frames[2], as: UTF8.self)
            let address = String(decoding: frames[3], as: UTF8.self)
            let mechanism = String(decoding: frames[5], as: UTF8.self)
            var key = ""
            if mechanism == "CURVE", frames.count >= 7, let k = ZMQCurveKeyPair.z85(frames[6]) { key = k }
            let ok = !key.isEmpty && allowlists.allows(domain: domain, key: key)
            if ok {
                accepted += 1
                logger.debug("curve: accepted", ["domain": domain, "key": key, "address": address])
            } else {
                refused += 1
                logger.warning("curve: refused", ["domain": domain, "key": key.isEmpty ? "-" : key, "address": address,
                                                  "mechanism": mechanism])
            }
            _ = try socket.sendMultipart([
                Array("1.0".utf8), requestID, Array((ok ? "200" : "400").utf8),
                Array((ok ? "OK" : "key not allowed for \(domain)").utf8), Array((ok ? key : "").utf8), [],
            ])
        }
    }
}
