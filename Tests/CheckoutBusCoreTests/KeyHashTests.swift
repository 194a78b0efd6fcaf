import Testing

@testable import CheckoutBusCore

/// The state table's and the event-id window's keys hash an id's bytes under two seeds in one
/// pass: the same two values as two ``CanonicalHash/hashBytes(_:_:seed:)`` calls, at every length.
@Suite("two-seed key hash")
struct KeyHashTests {
    @Test("hashBytes(_:_:seeds:) is hashBytes under each seed, at every length and offset")
    func sameAsTwoHashes() {
        var state: UInt64 = 0x1234_5678_9abc_def0
        func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
        let bytes = (0..<200).map { _ in UInt8(truncatingIfNeeded: next()) }
        bytes.withUnsafeBytes { raw in
            for n in 0...90 {
                for offset in [0, 1, 3, 7, 100] {
                    let p = raw.baseAddress! + offset
                    for _ in 0..<3 {
                        let (a, b) = (next(), next())
                        let pair = CanonicalHash.hashBytes(p, n, seeds: a, b)
                        #expect(pair.0 == CanonicalHash.hashBytes(p, n, seed: a), "length \(n)")
                        #expect(pair.1 == CanonicalHash.hashBytes(p, n, seed: b), "length \(n)")
                    }
                }
            }
        }
    }

    @Test("an id's keys are its hashes under the table's and the window's seeds")
    func keysOfIDs() {
        for id in ["", "a", "r-5", "r:5:0000000000000000000", "caf\u{E9}", String(repeating: "x", count: 41)] {
            var copy = id
            copy.withUTF8 { u in
                let raw = UnsafeRawBufferPointer(u)
                let k = CheckoutStateTable.key(utf8: raw)
                #expect(k.lo == CheckoutStateTable.key(id).lo && k.hi == CheckoutStateTable.key(id).hi)
                #expect(k.lo != k.hi)
                let w = EventIDWindow.key(utf8: raw, checkout: k)
                #expect(w == EventIDWindow.key(id, checkout: k))
            }
        }
    }
}
