/// How envelopes become JetStream messages: subjects, message ids, the shard of an envelope.
/// `Sendable` (no state).
public enum BridgeSubject {
    /// The subject for a bus topic: the topic itself (`checkout.start`, `checkout.fail.cart_expired`,
    /// `bus.deadletter`). Bytes a NATS subject cannot hold (space, tab, `*`, `>`, control bytes) and
    /// empty tokens, which the daemon never produces, become `_`.
    public static func subject(forTopic topic: [UInt8]) -> String {
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

    /// The envelope's `"shard"`, read from where the daemon writes it (after `seq` and `kind_seq`);
    /// 0 when absent (an envelope written before shards existed).
    public static func shard(of envelope: [UInt8]) -> Int {
        let key = Array(#","shard":"#.utf8)
        let end = min(envelope.count, 96)
        guard end >= key.count else { return 0 }
        var i = 0
        while i + key.count <= end {
            if envelope[i] == key[0], envelope[i..<(i + key.count)].elementsEqual(key) {
                var j = i + key.count
                var value = 0
                while j < envelope.count, j - i < key.count + 6, envelope[j] >= 0x30, envelope[j] <= 0x39 {
                    value = value * 10 + Int(envelope[j] - 0x30)
                    j += 1
                }
                return value
            }
            i += 1
        }
        return 0
    }

    /// `<shard>:<seq>` split, or nil for any other id.
    public static func parseID(_ id: String) -> (shard: Int, seq: Int64)? {
        guard let colon = id.firstIndex(of: ":"), let shard = Int(id[..<colon]),
            let seq = Int64(id[id.index(after: colon)...])
        else { return nil }
        return (shard, seq)
    }

    /// Orders ids by shard, then seq: retries go out in the order first published.
    static func idOrder(_ a: String, _ b: String) -> Bool {
        guard let x = parseID(a), let y = parseID(b) else { return a < b }
        return (x.shard, x.seq) < (y.shard, y.seq)
    }
}
