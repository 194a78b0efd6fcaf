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
package final class CurveAllowlists: Sendable {
    package static let producersDomain = "producers"
    package static let subscribersDomain = "subscribers"

    package let producersDirectory: String
    package let subscribersDirectory: String
    private let sets: Mutex<(producers: Set<String>, subscribers: Set<String>)>

    /// Reads both directories.
    /// - Throws: ``DaemonError`` naming a directory that cannot be read or a file that is not a key.
    package init(producersDirectory: String, subscribersDirectory: String) throws {
        self.producersDirectory = producersDirectory
        self.subscribersDirectory = subscribersDirectory
        let p = try CurveAllowlists.load(producersDirectory)
        let s = try CurveAllowlists.load(subscribersDirectory)
        sets = Mutex((p, s))
    }

    /// Reads both directories again; on any error the current lists stay.
    /// - Returns: how many producer and subscriber keys are now allowed.
    @discardableResult
    package func reload() throws -> (producers: Int, subscribers: Int) {
        let p = try CurveAllowlists.load(producersDirectory)
        let s = try CurveAllowlists.load(subscribersDirectory)
        sets.withLock { $0 = (p, s) }
        return (p.count, s.count)
    }

    /// Whether `key` (Z85) may connect to sockets of `domain`.
    package func allows(domain: String, key: String) -> Bool {
        sets.withLock { s in
            switch domain {
            case CurveAllowlists.producersDomain: s.producers.contains(key)
            case CurveAllowlists.subscribersDomain: s.subscribers.contains(key)
            default: false
            }
        }
    }

    package var counts: (producers: Int, subscribers: Int) { sets.withLock { ($0.producers.count, $0.subscribers.count) } }

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
