import CheckoutBusJSON

/// How every envelope the daemon writes begins, declared once for its writer (`EnvelopeWriter`),
/// the subscribers' and recordings' fast path (``LeadingPositions/read(_:)``) and the control
/// socket's checkout filter: `{"v":1,"seq":N,"kind_seq":M,"shard":I,` then, for a lifecycle event,
/// `"kind":"K","checkout_id":…` — the envelope's first `"checkout_id":` outside a string. A
/// heartbeat begins `{"v":1,"kind":"heartbeat","seq":N,"shard":I,"shards":C,`. The golden envelopes
/// (`Tests/Golden/envelopes.jsonl`) hold the bytes.
public enum EnvelopeHead {
    // Computed, not stored: an envelope's writer inlines them as constants (a stored static in
    // another module is reached through a once-guarded accessor on every event).
    @inlinable static var opening: StaticString { #"{"v":1,"seq":"# }
    @inlinable static var kindSeqLabel: StaticString { #","kind_seq":"# }
    @inlinable static var shardLabel: StaticString { #","shard":"# }
    /// What follows a lifecycle event's kind name: its `checkout_id` member's key.
    @inlinable public static var afterKindName: StaticString { #"","checkout_id":"# }
    /// The `checkout_id` key as it stands in the head (``afterKindName`` without the kind's closing quote and comma).
    package static let checkoutIDKey: [UInt8] = Array(UnsafeBufferPointer(start: afterKindName.utf8Start + 2,
                                                                          count: afterKindName.utf8CodeUnitCount - 2))
    @inlinable static var heartbeatOpening: StaticString { #"{"v":1,"kind":"heartbeat","seq":"# }
    @inlinable static var shardsLabel: StaticString { #","shards":"# }

    /// Writes an event's or dead letter's numbering: `{"v":1,"seq":…,"kind_seq":…,"shard":…`.
    @inlinable @inline(__always)
    public static func write(seq: UInt64, kindSeq: UInt64, shard: Int, to w: inout JSONWriter) {
        w.append(opening)
        w.append(int: Int64(bitPattern: seq))
        w.append(kindSeqLabel)
        w.append(int: Int64(bitPattern: kindSeq))
        w.append(shardLabel)
        w.append(int: Int64(shard))
    }

    /// Writes a heartbeat's head: `{"v":1,"kind":"heartbeat","seq":…,"shard":…,"shards":…`.
    @inlinable
    package static func writeHeartbeat(seq: UInt64, shard: Int, shards: Int, to w: inout JSONWriter) {
        w.append(heartbeatOpening)
        w.append(int: Int64(bitPattern: seq))
        w.append(shardLabel)
        w.append(int: Int64(shard))
        w.append(shardsLabel)
        w.append(int: Int64(shards))
    }
}

/// The positions an envelope starts with: `seq`, `kind_seq` and `shard`. `Sendable` (a value).
package struct LeadingPositions: Equatable, Sendable {
    package var seq: Int64
    package var kindSeq: Int64
    /// 0 when the envelope has no `shard` (written before shards existed).
    package var shard: Int

    package init(seq: Int64, kindSeq: Int64, shard: Int) {
        self.seq = seq
        self.kindSeq = kindSeq
        self.shard = shard
    }

    /// `seq`, `kind_seq` and `shard` read from the start of an envelope written the daemon's way
    /// (``EnvelopeHead``; or without `shard`, as before shards existed), without parsing the rest;
    /// nil for any other layout, which is then parsed in full.
    package static func read(_ buf: UnsafeRawBufferPointer) -> LeadingPositions? {
        let head = EnvelopeHead.opening
        let middle = EnvelopeHead.kindSeqLabel
        let shardLabel = EnvelopeHead.shardLabel
        var i = 0
        func literal(_ text: StaticString) -> Bool {
            let n = text.utf8CodeUnitCount
            guard i + n <= buf.count else { return false }
            for k in 0..<n where buf[i + k] != text.utf8Start[k] { return false }
            i += n
            return true
        }
        func number() -> Int64? {
            let start = i
            var value: Int64 = 0
            while i < buf.count, i - start < 18, buf[i] >= 0x30, buf[i] <= 0x39 {
                value = value * 10 + Int64(buf[i] - 0x30)
                i += 1
            }
            guard i > start, i < buf.count, buf[i] == UInt8(ascii: ",") || buf[i] == UInt8(ascii: "}") else { return nil }
            return value
        }
        guard literal(head), let seq = number(), literal(middle), let kindSeq = number() else { return nil }
        let afterKindSeq = i
        if literal(shardLabel), let shard = number() { return LeadingPositions(seq: seq, kindSeq: kindSeq, shard: Int(shard)) }
        i = afterKindSeq
        // A `shard` further on (another writer's layout) must not be missed: parse in full then.
        let rest = UnsafeRawBufferPointer(rebasing: buf[i...])
        if LeadingPositions.contains(rest, shardLabel) { return nil }
        return LeadingPositions(seq: seq, kindSeq: kindSeq, shard: 0)
    }

    private static func contains(_ buf: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        let n = text.utf8CodeUnitCount
        guard buf.count >= n else { return false }
        var i = 0
        while i + n <= buf.count {
            var k = 0
            while k < n && buf[i + k] == text.utf8Start[k] { k += 1 }
            if k == n { return true }
            i += 1
        }
        return false
    }

}
