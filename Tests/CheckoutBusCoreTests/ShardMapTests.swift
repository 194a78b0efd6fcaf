import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("Shards: jump hash of checkout_id, wrong_shard dead letters")
struct ShardMapTests {
    /// The vectors docs/sharding.md publishes, computed by its Python reference.
    @Test("owners match the documented vectors", arguments: [
        ("gid://shopify/Checkout/tour-1", 0x191b_3752_023b_8dfb as UInt64, [0, 0, 2, 2, 4, 8]),
        ("c-1", 0xf6e5_4a19_0dc0_0ad4, [0, 1, 1, 3, 3, 3]),
        ("checkout-42", 0xf3de_7a22_b73f_c93e, [0, 1, 1, 1, 1, 1]),
        ("order:1001", 0x5e16_7465_20ca_ee69, [0, 1, 1, 1, 1, 1]),
        ("", 0xcbf2_9ce4_8422_2325, [0, 1, 1, 1, 1, 13]),
    ])
    func vectors(id: String, fnv: UInt64, owners: [Int]) {
        var copy = id
        #expect(copy.withUTF8 { ShardMap.fnv1a64(UnsafeRawBufferPointer($0)) } == fnv)
        #expect([1, 2, 3, 4, 8, 16].map { ShardMap.owner(of: id, count: $0) } == owners)
    }

    @Test("ownership is spread evenly and moves only ~1/(N+1) of checkouts from N to N+1 shards")
    func spreadAndStability() {
        let ids = (0..<30_000).map { "gid://shopify/Checkout/\($0)" }
        var perShard = [0, 0, 0]
        for id in ids { perShard[ShardMap.owner(of: id, count: 3)] += 1 }
        for n in perShard { #expect((9_000...11_000).contains(n), "per shard: \(perShard)") }
        let moved = ids.filter { ShardMap.owner(of: $0, count: 3) != ShardMap.owner(of: $0, count: 4) }
        // Jump hashing moves exactly the keys that land on the new shard, about a quarter.
        #expect((6_500...8_500).contains(moved.count), "moved \(moved.count)")
        #expect(moved.allSatisfy { ShardMap.owner(of: $0, count: 4) == 3 })
    }

    @Test("I/N parses only with 0 <= I < N", arguments: [
        ("0/1", true), ("2/3", true), ("1023/1024", true), ("3/3", false), ("-1/3", false), ("1/0", false),
        ("1", false), ("1/3/4", false), ("a/b", false), ("0/1025", false), ("", false),
    ])
    func parsing(text: String, valid: Bool) {
        #expect((ShardMap(text) != nil) == valid)
        if valid { #expect(ShardMap(text)?.description == text) }
    }

    @Test("a shard publishes the checkouts it owns, with its index, and dead-letters the others as wrong_shard")
    func wrongShard() {
        var options = EventProcessor.Options()
        options.shard = ShardMap("1/3")!
        let p = EventProcessor(options: options)
        let owned = (0..<100).map { "ck-\($0)" }.first { ShardMap.owner(of: $0, count: 3) == 1 }!
        let foreign = (0..<100).map { "ck-\($0)" }.first { ShardMap.owner(of: $0, count: 3) == 2 }!

        let ok = p.feed(wrap(#"{"event":"start"}"#, checkoutID: owned))
        #expect(ok.outcome == .published(.start))
        #expect(ok["shard"] == 1)
        #expect(ok["seq"] == 1)

        let text = wrap(#"{"event":"start"}"#, checkoutID: foreign)
        let out = p.feed(text)
        DeadLetterTests.expectDeadLetter(out, .wrongShard, size: text.utf8.count)
        #expect(out["shard"] == 1)
        #expect(out["raw"] == .string(text))
        #expect(out["detail"]?.stringValue?.contains("belongs to shard 2/3, not 1/3") == true)
        #expect(p.counters.deadLettered["wrong_shard"] == 1)
        // The foreign checkout was never tracked: it is the owner's state, not ours.
        #expect(p.state.count == 1)
    }

    @Test("an unsharded daemon owns everything and says shard 0")
    func single() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"event":"start"}"#, checkoutID: "c-1"))
        #expect(out.outcome == .published(.start))
        #expect(out["shard"] == 0)
        let bad = p.feed("{")
        #expect(bad["shard"] == 0)
    }
}
