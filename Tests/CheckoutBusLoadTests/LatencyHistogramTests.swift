import Foundation
import Testing

import CheckoutBusLoad
import CheckoutBusTools

/// flood's latencies: fixed memory, quantiles within a bucket's width of the exact ones.
@Suite("latency histogram")
struct LatencyHistogramTests {
    @Test("quantiles within 3% of the exact ones, over nanoseconds to seconds; the maximum exact")
    func quantilesAgreeWithSorting() {
        var rng = SplitMix(seed: 3)
        var h = LatencyHistogram()
        var all: [UInt64] = []
        for _ in 0..<100_000 {
            // Log-uniform from 10 ns to 10 s, the range a load test meets.
            let v = UInt64(pow(10, 1 + Double(rng.next() % 1_000_000) / 1_000_000 * 9))
            h.record(v)
            all.append(v)
        }
        all.sort()
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = Double(all[Int((Double(all.count) * q).rounded(.up)) - 1])
            let got = Double(h.quantile(q))
            #expect(abs(got - exact) / exact < 0.035, "q \(q): \(got) against \(exact)")
        }
        #expect(h.quantile(1) == all.last)
        #expect(h.maximum == all.last)
        #expect(h.count == 100_000)
    }

    @Test("merging two histograms is recording into one")
    func merging() {
        var a = LatencyHistogram()
        var b = LatencyHistogram()
        var both = LatencyHistogram()
        for i in 1...5000 {
            let v = UInt64(i * 997 % 40_000_000)
            if i % 3 == 0 { a.record(v) } else { b.record(v) }
            both.record(v)
        }
        a.merge(b)
        #expect(a.count == both.count && a.sum == both.sum && a.maximum == both.maximum)
        for q in [0.1, 0.5, 0.99] { #expect(a.quantile(q) == both.quantile(q)) }
        #expect(LatencyHistogram().quantile(0.5) == 0)
    }

    /// SplitMix64, so the test needs nothing else.
    private struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }
}
