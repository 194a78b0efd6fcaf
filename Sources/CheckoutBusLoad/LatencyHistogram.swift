/// Latencies in nanoseconds, counted in log-linear buckets: exact below 32 ns, then 16 buckets per
/// power of two (every bucket within about 3% of the values in it). Recording is O(1) and the
/// memory fixed (about 8 KB), whatever the number of events — flood keeps one per second of a run
/// and one per run, never a list of every latency.
///
/// `Sendable`: a value; each thread records into its own and they are merged afterwards.
package struct LatencyHistogram: Sendable {
    private static let subBits = 4
    private static let linear = 2 << subBits  // 32: exact values below this
    private static let bucketCount = linear + (64 - subBits - 1) * (1 << subBits)

    private var counts: [UInt64]
    package private(set) var count: UInt64 = 0
    package private(set) var maximum: UInt64 = 0
    package private(set) var sum: UInt64 = 0

    package init() { counts = [UInt64](repeating: 0, count: LatencyHistogram.bucketCount) }

    package var isEmpty: Bool { count == 0 }

    @inline(__always)
    static func index(_ v: UInt64) -> Int {
        if v < UInt64(linear) { return Int(v) }
        let msb = 63 - v.leadingZeroBitCount  // ≥ subBits + 1
        let shift = msb - subBits
        let top = Int(v >> UInt64(shift)) - (1 << subBits)  // 0 ..< 16
        return linear + (shift - 1) * (1 << subBits) + top
    }

    /// The middle of bucket `i`'s values.
    static func value(_ i: Int) -> UInt64 {
        if i < linear { return UInt64(i) }
        let shift = (i - linear) / (1 << subBits) + 1
        let top = UInt64((i - linear) % (1 << subBits) + (1 << subBits))
        let low = top << UInt64(shift)
        return low + ((UInt64(1) << UInt64(shift)) - 1) / 2
    }

    @inline(__always)
    package mutating func record(_ nanoseconds: UInt64) {
        counts[LatencyHistogram.index(nanoseconds)] &+= 1
        count &+= 1
        sum &+= nanoseconds
        if nanoseconds > maximum { maximum = nanoseconds }
    }

    package mutating func merge(_ other: LatencyHistogram) {
        guard other.count > 0 else { return }
        for i in counts.indices where other.counts[i] != 0 { counts[i] &+= other.counts[i] }
        count &+= other.count
        sum &+= other.sum
        maximum = max(maximum, other.maximum)
    }

    /// The latency at quantile `q` (0...1) in nanoseconds (0 with no observations); the maximum is exact.
    package func quantile(_ q: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = max(1, UInt64((Double(count) * q).rounded(.up)))
        if rank >= count { return maximum }
        var seen: UInt64 = 0
        for (i, c) in counts.enumerated() where c != 0 {
            seen += c
            if seen >= rank { return min(LatencyHistogram.value(i), maximum) }
        }
        return maximum
    }

    /// ``quantile(_:)`` in microseconds.
    package func micros(_ q: Double) -> Double { Double(quantile(q)) / 1000 }
}
