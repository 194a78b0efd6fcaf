/// The positions an envelope starts with: `seq`, `kind_seq` and `shard`. `Sendable` (a value).
package struct LeadingPositions: Equatable, Sendable {
    package var seq: Int64
    package var kindSeq: Int64
    /// 0 when the envelope has no `shard` (written before shards existed).
    package var shard: Int

    /// `seq`, `kind_seq` and `shard` read from the start of an envelope written the daemon's way,
    /// `{"v":1,"seq":N,"kind_seq":M,"shard":I,…` (or without `shard`, as before shards existed),
    /// without parsing the rest; nil for any other layout, which is then parsed in full.
    package static func read(_ buf: UnsafeRawBufferPointer) -> LeadingPositions? {
        let head: StaticString = #"{"v":1,"seq":"#
        let middle: StaticString = #","kind_seq":"#
        let shardLabel: StaticString = #","shard":"#
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
