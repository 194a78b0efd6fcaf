#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import ZeroMQ
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

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

    package static func load(_ directory: String) throws -> Set<String> {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw DaemonError(.notReadable, "cannot read the key directory \(directory)")
        }
        var keys = Set<String>()
        for name in names.sorted() where name.hasSuffix(".pub") {
            let path = directory + "/" + name
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw DaemonError(.notReadable, "cannot read the key file \(path)")
            }
            let key = ZMQCurveKeyPair.readKey(text)
            guard ZMQCurveKeyPair.isZ85Key(key) else {
                throw DaemonError(.notReadable, "\(path) does not hold a CURVE public key (40 characters of Z85)")
            }
            keys.insert(key)
        }
        return keys
    }
}

/// The ZAP handler (RFC 27): answers libzmq's authentication requests for CURVE connections, on
/// `inproc://zeromq.zap.01`, polled by the pipeline thread.
///
/// Not `Sendable`: its REP socket lives on the pipeline thread.
package final class CurveAuthenticator {
    package let socket: ZMQSocket
    package let allowlists: CurveAllowlists
    package let logger: BusLogger
    private(set) var accepted: UInt64 = 0
    private(set) var refused: UInt64 = 0

    package init(context: ZMQContext, allowlists: CurveAllowlists, logger: BusLogger) throws {
        socket = try ZMQSocket(context: context, type: .rep)
        try socket.setLinger(milliseconds: 0)
        try socket.bind("inproc://zeromq.zap.01")
        self.allowlists = allowlists
        self.logger = logger
    }

    /// Answers every queued request.
    package func serve() throws {
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
