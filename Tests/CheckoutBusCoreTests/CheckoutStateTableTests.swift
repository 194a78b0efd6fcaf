import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("CheckoutStateTable: bounded per-checkout state")
struct CheckoutStateTableTests {
    @Test("touch creates once, then finds the same entry")
    func touchFinds() {
        var t = CheckoutStateTable(capacity: 10, idleTTL: 100)
        let (a, aNew) = t.touch("ck-a", now: 1)
        #expect(aNew)
        t.setSnapshotHash(0xABCD, a)
        let (a2, a2New) = t.touch("ck-a", now: 2)
        #expect(!a2New)
        #expect(a2 == a)
        #expect(t.flags(a2).contains(.hasSnapshot))
        #expect(t.snapshotHash(a2) == 0xABCD)
        #expect(t.count == 1)
    }

    @Test("at capacity the least recently used checkout is evicted")
    func lruEviction() {
        var t = CheckoutStateTable(capacity: 3, idleTTL: 1_000)
        for id in ["a", "b", "c"] {
            let (e, _) = t.touch(id, now: 0)
            t.setCompleteKey(id, checkoutID: id, e)
        }
        _ = t.touch("a", now: 1)  // a becomes most recently used: LRU order is now b, c, a
        let (d, dNew) = t.touch("d", now: 2)  // evicts b
        #expect(dNew)
        #expect(t.flags(d).isEmpty)
        #expect(t.count == 3)
        #expect(t.evicted == 1)

        let (a, aNew) = t.touch("a", now: 3)
        #expect(!aNew)
        #expect(t.flags(a).contains(.completed))
        let (c, cNew) = t.touch("c", now: 4)
        #expect(!cNew)
        #expect(t.flags(c).contains(.completed))
        let (b, bNew) = t.touch("b", now: 5)  // forgotten; coming back evicts d (now the LRU)
        #expect(bNew)
        #expect(t.flags(b).isEmpty)
        #expect(t.evicted == 2)
        #expect(!t.touch("a", now: 6).isNew)
        #expect(!t.touch("c", now: 7).isNew)
        #expect(t.touch("d", now: 8).isNew)
    }

    @Test("eviction at scale keeps exactly the most recent checkouts findable")
    func evictionAtScale() {
        let capacity = 100
        var t = CheckoutStateTable(capacity: capacity, idleTTL: 1_000_000)
        for i in 0..<1_000 {
            let (e, isNew) = t.touch("checkout-\(i)", now: UInt32(i))
            #expect(isNew)
            t.setSnapshotHash(UInt64(i), e)
        }
        #expect(t.count == capacity)
        #expect(t.evicted == 900)
        var lost = 0
        for i in 900..<1_000 {
            let (e, isNew) = t.touch("checkout-\(i)", now: 2_000)
            if isNew || t.snapshotHash(e) != UInt64(i) { lost += 1 }
        }
        #expect(lost == 0)
        #expect(t.count == capacity)
        #expect(t.touch("checkout-0", now: 2_001).isNew)
    }

    @Test("an entry idle longer than the TTL is reset when touched")
    func idleTTLOnTouch() {
        var t = CheckoutStateTable(capacity: 10, idleTTL: 10)
        let (e, _) = t.touch("ck", now: 100)
        t.setSnapshotHash(42, e)
        t.setCompleteKey("O-1", checkoutID: "ck", e)

        let (e2, new2) = t.touch("ck", now: 110)  // exactly the TTL: still alive
        #expect(!new2)
        #expect(t.flags(e2).contains(.completed))
        #expect(t.completeKey(e2, checkoutID: "ck") == "O-1")

        let (e3, new3) = t.touch("ck", now: 121)  // 11 s after the last touch
        #expect(new3)
        #expect(t.flags(e3).isEmpty)
        #expect(t.snapshotHash(e3) == 0)
        #expect(t.completeKey(e3, checkoutID: "ck") == nil)
        #expect(t.expired == 1)
        #expect(t.count == 1)
    }

    @Test("expire(now:) removes idle entries, oldest first, and keeps the rest")
    func expireRemovesIdle() {
        var t = CheckoutStateTable(capacity: 10, idleTTL: 10)
        _ = t.touch("a", now: 0)
        _ = t.touch("b", now: 5)
        let (c, _) = t.touch("c", now: 8)
        t.setCompleteKey("c", checkoutID: "c", c)

        t.expire(now: 10)  // nobody idle more than 10 s
        #expect(t.count == 3)
        #expect(t.expired == 0)

        t.expire(now: 12)  // a idle 12 s
        #expect(t.count == 2)
        #expect(t.expired == 1)

        t.expire(now: 16)  // b idle 11 s; c idle 8 s
        #expect(t.count == 1)
        #expect(t.expired == 2)

        let (c2, cNew) = t.touch("c", now: 17)
        #expect(!cNew)
        #expect(t.flags(c2).contains(.completed))
        #expect(t.touch("a", now: 17).isNew)
        #expect(t.touch("b", now: 17).isNew)
        #expect(t.count == 3)
    }

    @Test("a touch refreshes the idle clock, so expire keeps recently touched entries")
    func touchRefreshes() {
        var t = CheckoutStateTable(capacity: 10, idleTTL: 10)
        _ = t.touch("a", now: 0)
        _ = t.touch("b", now: 1)
        _ = t.touch("a", now: 9)
        t.expire(now: 15)  // b idle 14 s, a idle 6 s
        #expect(t.count == 1)
        #expect(!t.touch("a", now: 15).isNew)
    }

    @Test("expire everything, then the table is reusable")
    func expireAll() {
        var t = CheckoutStateTable(capacity: 50, idleTTL: 5)
        for i in 0..<40 { _ = t.touch("x\(i)", now: 0) }
        t.expire(now: 100)
        #expect(t.count == 0)
        #expect(t.expired == 40)
        for i in 0..<40 { #expect(t.touch("x\(i)", now: 100).isNew) }
        for i in 0..<40 { #expect(!t.touch("x\(i)", now: 101).isNew) }
        #expect(t.count == 40)
    }

    @Test("a recycled entry does not inherit the evicted checkout's order id or flags")
    func recycledEntryIsClean() {
        var t = CheckoutStateTable(capacity: 1, idleTTL: 100)
        let (a, _) = t.touch("a", now: 0)
        t.setCompleteKey("O-a", checkoutID: "a", a)
        let (b, bNew) = t.touch("b", now: 1)
        #expect(bNew)
        #expect(t.completeKey(b, checkoutID: "b") == nil)
        #expect(t.flags(b).isEmpty)
        #expect(t.count == 1)
        #expect(t.evicted == 1)
    }

    @Test("a failure's hash and a complete's key share a word: either alone, both when a checkout failed and completed")
    func failureAndKeyShareAWord() {
        var t = CheckoutStateTable(capacity: 10, idleTTL: 1_000)
        let (e, _) = t.touch("ck", now: 1)
        t.setFailureHash(7, e)
        #expect(t.failureHash(e) == 7)
        #expect(t.completeKey(e, checkoutID: "ck") == nil)
        // The complete after the failure: the key takes the word, the failure's hash is kept.
        t.setCompleteKey("gid://shopify/Order/42", checkoutID: "ck", e)
        #expect(t.failureHash(e) == 7)
        #expect(t.completeKey(e, checkoutID: "ck") == "gid://shopify/Order/42")
        // A failure after the complete, then a start that forgets it: the key stays.
        t.setFailureHash(9, e)
        #expect(t.failureHash(e) == 9)
        t.clearFailure(e)
        #expect(t.failureHash(e) == nil)
        #expect(t.completeKey(e, checkoutID: "ck") == "gid://shopify/Order/42")
        // Another checkout: failed, then a start, then failed again, never completed.
        let (f, _) = t.touch("other", now: 2)
        t.setFailureHash(11, f)
        t.clearFailure(f)
        #expect(t.failureHash(f) == nil)
        t.setFailureHash(12, f)
        #expect(t.failureHash(f) == 12)
        #expect(t.completeKey(f, checkoutID: "other") == nil)
        #expect(t.completeKey(e, checkoutID: "ck") == "gid://shopify/Order/42")
        // Forgotten and reused: nothing of either is inherited.
        let (g, isNew) = t.touch("other", now: 2_000)
        #expect(isNew)
        #expect(t.failureHash(g) == nil)
        #expect(t.completeKey(g, checkoutID: "other") == nil)
    }

    @Test("capacity and TTL are at least 1")
    func minimums() {
        let t = CheckoutStateTable(capacity: 0, idleTTL: 0)
        #expect(t.capacity == 1)
        #expect(t.idleTTL == 1)
    }

    @Test("the processor's table is bounded by maxCheckouts")
    func processorBound() {
        var options = EventProcessor.Options()
        options.maxCheckouts = 2
        let p = EventProcessor(options: options)
        let done = { (id: String) in #"{"event":"onComplete","checkout":{"id":""# + id + #"","order":{"id":"O-"# + id + #""}}}"# }
        p.feed(done("a"))
        p.feed(done("b"))
        p.feed(done("c"))  // evicts a
        #expect(p.state.count == 2)
        #expect(p.state.evicted == 1)
        #expect(p.feed(done("c"))["repeat"] == true)
        #expect(p.feed(done("a"))["repeat"] == false)  // forgotten: bounded state accepts this
    }

    @Test("a prefetched, hashed key finds the same entry as the id, also when the touch evicts")
    func hashedKeyAndPrefetch() {
        var t = CheckoutStateTable(capacity: 4, idleTTL: 100)
        var entries: [String: CheckoutStateTable.Entry] = [:]
        for id in ["a", "b", "c", "d"] {
            let key = CheckoutStateTable.key(id)
            t.prefetch(key)
            let (e, isNew) = t.touch(key, now: 1)
            #expect(isNew)
            t.setSnapshotHash(UInt64(id.utf8.first!), e)
            entries[id] = e
        }
        // Full: prefetching a new id reads ahead the entry it will evict ("a", least recently used).
        let key = CheckoutStateTable.key("e")
        t.prefetch(key)
        #expect(t.touch(key, now: 2).isNew)
        #expect(t.evicted == 1)
        #expect(t.touch("a", now: 3).isNew)  // "a" was the one forgotten
        let (b, bNew) = t.touch(CheckoutStateTable.key("d"), now: 4)
        #expect(!bNew)
        #expect(b == entries["d"])
        #expect(t.snapshotHash(b) == UInt64(UInt8(ascii: "d")))
    }

    @Test("a copy of the table is a value: changing one leaves the other as it was")
    func copyIsAValue() {
        var t = CheckoutStateTable(capacity: 100, idleTTL: 1_000)
        var entries: [Int: CheckoutStateTable.Entry] = [:]
        for i in 0..<40 {  // past the columns' first growth
            let (e, _) = t.touch("ck-\(i)", now: 1)
            t.setSnapshotHash(UInt64(i), e)
            entries[i] = e
        }
        let saved = t
        // Change the original: new hashes, flags, new checkouts (the index grows), a completion.
        for i in 0..<40 { t.setSnapshotHash(UInt64(1_000 + i), entries[i]!) }
        t.setCompleteKey("O-3", checkoutID: "ck-3", entries[3]!)
        for i in 40..<90 { _ = t.touch("ck-\(i)", now: 2) }
        #expect(t.count == 90)
        var copy = saved
        #expect(copy.count == 40)
        for i in 0..<40 {
            #expect(copy.snapshotHash(entries[i]!) == UInt64(i))
            #expect(!copy.flags(entries[i]!).contains(.completed))
        }
        #expect(copy.touch("ck-50", now: 3).isNew)
        #expect(!copy.touch("ck-7", now: 3).isNew)
        // And changing the copy leaves the original alone.
        copy.setSnapshotHash(7, entries[0]!)
        #expect(t.snapshotHash(entries[0]!) == 1_000)
        #expect(t.flags(entries[3]!).contains(.completed))
        #expect(!t.touch("ck-89", now: 4).isNew)
    }

    @Test("random touches, expiries and evictions agree with a plain LRU model")
    func agreesWithModel() {
        var rng = SplitMix64(seed: 0x5eed)
        for (capacity, ttl) in [(1, UInt32(5)), (7, 3), (64, 50), (300, 1_000)] {
            var t = CheckoutStateTable(capacity: capacity, idleTTL: ttl)
            // The model: ids most recently used last, with their last-seen time and hash.
            var order: [String] = []
            var seen: [String: UInt32] = [:]
            var hashes: [String: UInt64] = [:]
            var now: UInt32 = 0
            var evicted: UInt64 = 0
            for step in 0..<4_000 {
                if rng.next() % 8 == 0 { now &+= UInt32(rng.next() % 4) }
                if step % 97 == 0 {
                    t.expire(now: now)
                    while let first = order.first, now &- seen[first]! > ttl {
                        order.removeFirst()
                        seen[first] = nil
                        hashes[first] = nil
                    }
                    #expect(t.count == order.count)
                }
                let id = "ck-\(rng.next() % UInt64(capacity * 2 + 3))"
                let (e, isNew) = t.touch(id, now: now)
                var modelNew = false
                if let at = seen[id] {
                    order.removeAll { $0 == id }
                    if now &- at > ttl {
                        modelNew = true
                        hashes[id] = nil
                    }
                } else {
                    modelNew = true
                    if order.count >= capacity {
                        let lru = order.removeFirst()
                        seen[lru] = nil
                        hashes[lru] = nil
                        evicted += 1
                    }
                }
                order.append(id)
                seen[id] = now
                #expect(isNew == modelNew, "\(id) at step \(step), capacity \(capacity)")
                #expect(t.snapshotHash(e) == (hashes[id] ?? 0))
                #expect(t.flags(e).contains(.hasSnapshot) == (hashes[id] != nil))
                if rng.next() % 2 == 0 {
                    let h = rng.next() | 1
                    t.setSnapshotHash(h, e)
                    hashes[id] = h
                }
            }
            #expect(t.count == order.count)
            #expect(t.evicted == evicted)
        }
    }
}
