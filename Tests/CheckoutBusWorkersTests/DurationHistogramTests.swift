import Testing

import CheckoutBusWorkers

/// The analytics worker's time-to-complete histogram: exact below 1024 ms, ten significant bits
/// above, nearest-rank percentiles.
@Suite("duration histogram")
struct DurationHistogramTests {
    @Test("values below 1024 are their own bucket; above, the top ten bits are kept")
    func buckets() {
        #expect(DurationHistogram.bucket(-5) == 0)
        #expect(DurationHistogram.bucket(0) == 0)
        #expect(DurationHistogram.bucket(1023) == 1023)
        #expect(DurationHistogram.bucket(1024) == 1024)
        #expect(DurationHistogram.bucket(1025) == 1024)
        #expect(DurationHistogram.bucket(2047) == 2046)
        for v: Int64 in [1024, 5000, 123_456, 86_400_000, 1 << 40] {
            let b = DurationHistogram.bucket(v)
            #expect(b <= v && Double(v - b) / Double(v) < 1.0 / 512, "\(v) → \(b)")
        }
    }

    @Test("nearest-rank percentiles over recorded samples; none without samples")
    func percentiles() {
        var h = DurationHistogram()
        #expect(h.percentile(50) == nil)
        for v: Int64 in 1...100 { h.record(v) }
        #expect(h.count == 100)
        #expect(h.percentile(50) == 50)
        #expect(h.percentile(99) == 99)
        #expect(h.percentile(100) == 100)
        #expect(h.percentile(1) == 1)
        h.record(10_000)
        #expect(h.maximum == 10_000)
        #expect(h.percentile(100) == DurationHistogram.bucket(10_000))
    }
}
