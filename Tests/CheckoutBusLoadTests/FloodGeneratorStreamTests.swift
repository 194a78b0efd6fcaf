import Foundation
import Testing

import CheckoutBusLoad
import CheckoutBusTools

/// flood's generator made as it sends: the same lifecycles whatever the number of producers.
@Suite("flood generator stream")
struct FloodGeneratorStreamTests {
    static func byCheckout(_ events: [FloodGenerator.Event]) -> [String: [String]] {
        var out: [String: [String]] = [:]
        for e in events {
            // The event number differs with the producer count; the rest is the lifecycle.
            let text = String(decoding: e.bytes, as: UTF8.self)
            let afterID = text[text.range(of: #"","checkout_id""#)!.lowerBound...]
            out[e.checkoutID, default: []].append(String(afterID))
        }
        return out
    }

    @Test("three producers' streams hold every checkout's lifecycle exactly once, in order, with unique event ids")
    func producersSplitTheCheckouts() {
        let generator = FloodGenerator(checkouts: 500, seed: 9, runID: "s")
        let whole = generator.makeEvents()
        var parts: [FloodGenerator.Event] = []
        for p in 0..<3 {
            var stream = FloodGenerator.Stream(generator, producer: p, of: 3)
            var mine = Set<String>()
            while let e = stream.next() {
                parts.append(e)
                mine.insert(e.checkoutID)
            }
            #expect(mine.count == 500 / 3 + (p < 500 % 3 ? 1 : 0))
        }
        #expect(parts.count == whole.count)
        #expect(Self.byCheckout(parts) == Self.byCheckout(whole))
        let ids = parts.map { e in String(decoding: e.bytes[..<e.stampOffset], as: UTF8.self) }
        #expect(Set(ids).count == ids.count)
    }
}
