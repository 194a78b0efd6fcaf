import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("event id window: a producer's retry is recognised")
struct EventIDWindowTests {
    /// An event id's key within one checkout.
    func k(_ id: String, checkout: String = "c-1") -> (UInt64, UInt64) {
        EventIDWindow.key(id, checkout: CheckoutStateTable.key(checkout))
    }

    @Test("an event id is keyed within its checkout: the same id of another checkout is another event")
    func keyedByCheckout() {
        var w = EventIDWindow(capacity: 100)
        w.insert(k("1", checkout: "ck-a"), seq: 5)
        #expect(w.lookup(k("1", checkout: "ck-a")) == 5)
        #expect(w.lookup(k("1", checkout: "ck-b")) == nil)
        #expect(w.lookup(k("1a", checkout: "ck-")) == nil)

        var options = EventProcessor.Options()
        options.dedupeWindow = 100
        let p = EventProcessor(options: options)
        func send(_ checkout: String) -> EventProcessor.Outcome {
            let text = #"{"event_id":"1","checkout_id":""# + checkout + #"","payload":{"event":"checkoutDidComplete","checkout":{"id":"x","status":"completed"}}}"#
            return Array(text.utf8).withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome }
        }
        #expect(send("ck-a") == .published(.complete))
        #expect(send("ck-b") == .published(.complete))
        #expect(send("ck-a") == .duplicate(1))
        #expect(send("ck-b") == .duplicate(2))
        p.rememberEventID("1", checkoutID: "ck-c", seq: 40)
        #expect(send("ck-c") == .duplicate(40))
    }

    @Test("ids are found with their seq; the oldest beyond capacity are forgotten; the rest are kept")
    func window() {
        var w = EventIDWindow(capacity: 1000)
        for i in 0..<1000 { w.insert(k("e-\(i)"), seq: UInt64(i + 1)) }
        #expect(w.lookup(k("e-0")) == 1)
        #expect(w.lookup(k("e-999")) == 1000)
        #expect(w.lookup(k("never")) == nil)
        // 2,500 more, each evicting the oldest: only the last 1,000 remain.
        for i in 1000..<3500 { w.insert(k("e-\(i)"), seq: UInt64(i + 1)) }
        #expect(w.count == 1000)
        #expect(w.lookup(k("e-2499")) == nil)
        #expect(w.lookup(k("e-2500")) == 2501)
        #expect((2500..<3500).allSatisfy { w.lookup(k("e-\($0)")) == UInt64($0 + 1) })
        #expect((0..<2500).allSatisfy { w.lookup(k("e-\($0)")) == nil })
    }

    @Test("evictions against a model: every live id found with its seq, an evicted one gone, one slot per live id",
          arguments: [1, 3, 64, 257, 1000])
    func evictionsAgainstAModel(capacity: Int) {
        var w = EventIDWindow(capacity: capacity)
        var rng = SplitMix64(seed: UInt64(capacity))
        // Few distinct home slots (the second hash's low bits: 0…7, or the table's last eight; in
        // the 16 slots of capacities 1 and 3 that is every slot), so runs are long and wrap around
        // the table's end, and each eviction has slots after it to move back; some ids inserted
        // twice (two entries). Capacity 1 never shifts (its one slot is taken out before the next
        // is placed): it checks the eviction alone.
        var ring: [(UInt64, UInt64)] = []
        var seqs: [UInt64] = []
        for n in 0..<(capacity * 12 + 40) {
            let key: (UInt64, UInt64) = n % 7 == 3 && !ring.isEmpty
                ? ring[Int(rng.next() % UInt64(ring.count))]
                : (rng.next(), rng.next() & ~0xFFFF_FFFF | rng.next() % 8 | (rng.next() % 3 == 0 ? 0xFFFF_FFF8 : 0))
            w.insert(key, seq: UInt64(n + 1))
            ring.append(key)
            seqs.append(UInt64(n + 1))
            if ring.count > capacity {
                ring.removeFirst()
                seqs.removeFirst()
            }
            #expect(w.count == ring.count)
            // An id held twice answers with its oldest live entry (placed first, found first), as
            // before evictions moved slots back: they keep the order of the slots in a run. Every
            // live id after every insert for the small windows; every 16th insert for the larger.
            guard capacity <= 64 || n % 16 == 0 else { continue }
            #expect(w.occupiedSlots == ring.count)
            var seen = Set<Pair>()
            for (k, key) in ring.enumerated() where seen.insert(Pair(a: key.0, b: key.1)).inserted {
                #expect(w.lookup(key) == seqs[k], "capacity \(capacity), insert \(n), entry \(k)")
            }
        }
        #expect(w.lookup((rng.next(), rng.next())) == nil)
        // An id inserted once and overwritten since is gone (its slot went with it).
        let once: (UInt64, UInt64) = (1, 0xDEAD_0000_0000_0005)
        var v = EventIDWindow(capacity: capacity)
        v.insert(once, seq: 1)
        #expect(v.lookup(once) == 1)
        for n in 0..<capacity { v.insert((rng.next(), rng.next() & ~0xFFFF_FFFF | 5), seq: UInt64(n + 2)) }
        #expect(v.lookup(once) == nil)
        #expect(v.occupiedSlots == capacity)
    }

    /// An id's two hashes, as a set's element.
    struct Pair: Hashable {
        let a: UInt64
        let b: UInt64
    }

    @Test("keys sharing a slot, a slot tag, or both are told apart by their full hashes")
    func collidingKeys() {
        var w = EventIDWindow(capacity: 64)
        // Second hashes equal in their low 32 bits (the slot's tag, and so its home slot), in the
        // high 32 bits, or in neither; the first hashes all equal.
        let a: (UInt64, UInt64) = (0x1234, 0xAAAA_AAAA_0000_0001)
        let sameTag: (UInt64, UInt64) = (0x1234, 0xBBBB_BBBB_0000_0001)
        let sameHigh: (UInt64, UInt64) = (0x1234, 0xAAAA_AAAA_0000_0002)
        w.insert(a, seq: 7)
        #expect(w.lookup(sameTag) == nil)
        #expect(w.lookup(sameHigh) == nil)
        w.insert(sameTag, seq: 8)
        w.insert(sameHigh, seq: 9)
        #expect(w.lookup(a) == 7)
        #expect(w.lookup(sameTag) == 8)
        #expect(w.lookup(sameHigh) == 9)
        #expect(w.lookup((0x1235, 0xAAAA_AAAA_0000_0001)) == nil)
    }

    @Test("a processor with a window publishes an event id once and answers its retry with the seq")
    func processorDedupe() {
        var options = EventProcessor.Options()
        options.dedupeWindow = 100
        let p = EventProcessor(options: options)
        let start = #"{"event_id":"r-1","checkout_id":"c-1","payload":{"event":"onCheckoutStarted"}}"#
        let first = Array(start.utf8).withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome }
        #expect(first == .published(.start))
        let retry = Array(start.utf8).withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome }
        #expect(retry == .duplicate(1))
        #expect(p.lastSeq == 1)
        #expect(p.counters.duplicates == 1)
        // Without an event id nothing is de-duplicated; another id is another event.
        let bare = Array(#"{"checkout_id":"c-1","payload":{"event":"onCheckoutDismissed"}}"#.utf8)
        #expect(bare.withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome } == .published(.dismiss))
        #expect(bare.withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome } == .published(.dismiss))
        // Off by default: the same id twice is two events.
        let off = EventProcessor()
        _ = Array(start.utf8).withUnsafeBytes { off.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome }
        #expect(Array(start.utf8).withUnsafeBytes { off.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1).outcome } == .published(.start))
    }
}
