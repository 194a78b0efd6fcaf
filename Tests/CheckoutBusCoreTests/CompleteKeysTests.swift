import Testing

@testable import CheckoutBusCore

/// Completed checkouts' idempotency keys, packed (``CompleteKeys``): every shape comes back as it
/// went in, the packable ones without their bytes, and the arena's forgotten bytes are reclaimed.
extension CompleteKeys {
    /// ``pack(_:checkoutID:)`` of strings.
    mutating func pack(_ key: String, checkoutID: String) -> UInt64 {
        var key = key
        var id = checkoutID
        return key.withUTF8 { k in id.withUTF8 { pack(UnsafeRawBufferPointer(k), checkoutID: UnsafeRawBufferPointer($0)) } }
    }
}

@Suite("complete keys: packed into 64 bits, every key back as it was")
struct CompleteKeysTests {
    /// Keys of every shape beside the checkout id they were packed with, and whether their bytes
    /// go to the arena.
    static let cases: [(key: String, checkoutID: String, inArena: Bool)] = [
        ("c-1", "c-1", false),  // the checkout id itself
        ("gid://shopify/Order/flood7-0001234-c42", "flood7-0001234-c42", false),  // a prefix, then the id
        ("ord-c-9", "c-9", false),
        ("gid://shopify/Order/5678901234567", "c-2", false),  // a prefix, then a number
        ("10042", "c-3", false),  // a number alone
        ("0", "c-4", false),
        ("ORD-0042", "c-5", true),  // a leading zero: kept as bytes
        ("gid://shopify/Order/123456789012345", "c-6", true),  // 15 digits: more than 2^48 may hold
        ("7f9c2b1e-3d4a-4b5c-9e8f-0a1b2c3d4e5f", "c-7", true),  // a UUID ends in letters
        ("", "c-8", true),  // an empty key is not the checkout id
        ("commande-é-ü", "ü", false),  // UTF-8: the prefix ends where the id begins
        ("x", "", true),  // no checkout id to share a suffix with
        (String(repeating: "k", count: 300), "c-10", true),  // longer than a one-byte length
        (String(repeating: "p", count: 65) + "c-11", "c-11", true),  // a prefix past 64 bytes
        ("gid://shopify/Order/12345678901234", "c-12", false),  // 14 digits: the most a number may have
        ("7f9c2b1e-3d4a-4b5c-9e8f-0a1b2c3d4e57", "c-13", true),  // a UUID ending in digits: no prefix of its own
        ("ABC-1234567", "7", false),  // ends in the checkout id, but not at a separator: a prefix and a number
        ("order1234", "c-14", true),  // a number without a separator before it
    ]

    @Test("every shape unpacks to the key it packed; packable shapes keep no bytes")
    func roundTrip() {
        var keys = CompleteKeys()
        var packed: [UInt64] = []
        for c in Self.cases {
            let before = keys.arena.count
            let p = keys.pack(c.key, checkoutID: c.checkoutID)
            #expect(p != CompleteKeys.none)
            #expect((keys.arena.count > before) == c.inArena, "\(c.key)")
            packed.append(p)
        }
        for (c, p) in zip(Self.cases, packed) {
            #expect(keys.unpack(p, checkoutID: c.checkoutID) == c.key, "\(c.key)")
        }
        #expect(keys.unpack(CompleteKeys.none, checkoutID: "c-1") == nil)
        // One prefix each: "", "gid://shopify/Order/", "ord-", "commande-é-", "ABC-".
        #expect(keys.prefixCount == 5)
    }

    @Test("prefixes are interned up to the limit; past it, keys go to the arena and still come back")
    func prefixLimit() {
        var keys = CompleteKeys()
        var packed: [(UInt64, String)] = []
        for i in 0..<(CompleteKeys.maxPrefixes + 10) {
            let key = "p\(i)x-7"
            packed.append((keys.pack(key, checkoutID: "id"), key))
        }
        #expect(keys.prefixCount == CompleteKeys.maxPrefixes)
        #expect(!keys.arena.isEmpty)
        for (p, key) in packed { #expect(keys.unpack(p, checkoutID: "id") == key) }
    }

    @Test("compaction moves keys only: a failed checkout's hash in the same word is left as it is")
    func compactionLeavesFailures() {
        var t = CheckoutStateTable(capacity: 100, idleTTL: 1_000_000)
        // Checkouts failed and never completed: their failure hashes hold the word a key would.
        // A hash read as an arena key's offset would be moved (or trap).
        var failed: [(CheckoutStateTable.Entry, UInt64)] = []
        for i in 0..<50 {
            let (e, _) = t.touch("f\(i)", now: 1)
            let hash = UInt64.max - UInt64(i)  // tag bits 11: what an arena key's would be
            t.setFailureHash(hash, e)
            failed.append((e, hash))
        }
        // Then enough arena keys evicted through the other 50 entries to compact many times.
        func key(_ i: Int) -> String { "order#" + String(repeating: "z", count: 200) + "\(i)x" }
        for i in 0..<5_000 {
            let (e, _) = t.touch("c\(i)", now: 1)
            t.setCompleteKey(key(i), checkoutID: "c\(i)", e)
            // Keep the failed checkouts most recently used: the completed ones are evicted.
            if i % 40 == 0 { for (j, _) in failed.enumerated() { _ = t.touch("f\(j)", now: 1) } }
        }
        for (j, (e, hash)) in failed.enumerated() {
            let (found, isNew) = t.touch("f\(j)", now: 2)
            #expect(!isNew && found == e)
            #expect(t.failureHash(e) == hash)
            #expect(t.completeKey(e, checkoutID: "f\(j)") == nil)
        }
        let (last, isNew) = t.touch("c4999", now: 2)
        #expect(!isNew)
        #expect(t.completeKey(last, checkoutID: "c4999") == key(4999))
    }

    @Test("a table's arena is compacted once most of it is forgotten, and the live keys survive")
    func compaction() {
        var t = CheckoutStateTable(capacity: 1_000, idleTTL: 1_000_000)
        // Keys of no packable shape: their bytes go to the arena. 20,000 checkouts through a
        // table of 1,000: 19,000 evicted, their keys forgotten.
        func key(_ i: Int) -> String { "order-\(i)-" + String(repeating: "z", count: 40) }
        for i in 0..<20_000 {
            let (e, _) = t.touch("c\(i)", now: 1)
            t.setCompleteKey(key(i), checkoutID: "c\(i)", e)
        }
        #expect(t.evicted == 19_000)
        // Without compaction the arena would hold 20,000 keys of about 55 bytes (over 1 MB).
        #expect(t.approximateBytes < 1_000 * 200 + 200_000)
        for i in 19_000..<20_000 {
            let (e, isNew) = t.touch("c\(i)", now: 2)
            #expect(!isNew)
            #expect(t.completeKey(e, checkoutID: "c\(i)") == key(i))
        }
    }
}
