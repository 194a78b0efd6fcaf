import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Reads `ok` and `event_id` from a shard's acknowledgement reply with the daemon's own parser.
/// Not `Sendable`; reuses one document.
package final class JSONReplyReader {
    private let document = JSONDocument()

    /// (`ok`, `event_id`) of a reply; (false, nil) when it is not a JSON object.
    package func read(_ reply: [UInt8]) -> (ok: Bool, eventID: String?) {
        reply.withUnsafeBytes { bytes in
            guard (try? document.parse(bytes)) != nil, document.kind(document.root) == .object else { return (false, nil) }
            let root = document.root
            let ok = document.member(root, "ok").map { document.kind($0) == .true } ?? false
            let id = document.member(root, "event_id").flatMap { document.string($0) }
            return (ok, id)
        }
    }
}
