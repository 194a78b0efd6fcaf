import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import NATS

/// How envelopes become JetStream messages: subjects and message ids.
/// `Sendable` (no state).
package enum BridgeSubject {
    /// The subject for a bus topic: the topic itself (`checkout.start`, `checkout.fail.cart_expired`,
    /// `bus.deadletter`). Bytes a NATS subject cannot hold (space, tab, `*`, `>`, control bytes) and
    /// empty tokens, which the daemon never produces, become `_`.
    package static func subject(forTopic topic: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(topic.count)
        var tokenStart = true
        for b in topic {
            if b == UInt8(ascii: ".") {
                if tokenStart { out.append(UInt8(ascii: "_")) }
                out.append(b)
                tokenStart = true
                continue
            }
            let bad = b <= 0x20 || b == 0x7F || b == UInt8(ascii: "*") || b == UInt8(ascii: ">")
            out.append(bad ? UInt8(ascii: "_") : b)
            tokenStart = false
        }
        if tokenStart { out.append(UInt8(ascii: "_")) }
        return String(decoding: out, as: UTF8.self)
    }

    /// `<shard>:<seq>` split, or nil for any other id.
    package static func parseID(_ id: String) -> (shard: Int, seq: Int64)? {
        guard let colon = id.firstIndex(of: ":"), let shard = Int(id[..<colon]),
            let seq = Int64(id[id.index(after: colon)...]), shard >= 0, seq >= 1
        else { return nil }
        return (shard, seq)
    }

    /// Orders ids by shard, then seq: retries go out in the order first published.
    static func idOrder(_ a: String, _ b: String) -> Bool {
        guard let x = parseID(a), let y = parseID(b) else { return a < b }
        return (x.shard, x.seq) < (y.shard, y.seq)
    }
}
