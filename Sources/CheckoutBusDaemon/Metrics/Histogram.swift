import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// A cumulative histogram with fixed bucket bounds, in Prometheus's shape. `Sendable`; a value.
package struct Histogram: Sendable {
    /// Upper bounds in nanoseconds, ascending; an implicit `+Inf` bucket follows.
    package let boundsNanoseconds: [UInt64]
    /// Observations per bucket (not cumulative), `+Inf` last.
    package private(set) var counts: [UInt64]
    package private(set) var sumNanoseconds: UInt64 = 0
    package private(set) var count: UInt64 = 0

    package init(boundsMicroseconds: [UInt64]) {
        boundsNanoseconds = boundsMicroseconds.map { $0 * 1000 }
        counts = [UInt64](repeating: 0, count: boundsMicroseconds.count + 1)
    }

    /// Latencies inside the daemon: 25 µs to 100 ms.
    package static func pipeline() -> Histogram {
        Histogram(boundsMicroseconds: [25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 25_000, 100_000])
    }

    /// `fdatasync` durations: 100 µs to 1 s.
    package static func fsync() -> Histogram {
        Histogram(boundsMicroseconds: [100, 250, 500, 1000, 2500, 5000, 10_000, 50_000, 250_000, 1_000_000])
    }

    @inline(__always)
    package mutating func observe(nanoseconds v: UInt64) {
        var i = 0
        while i < boundsNanoseconds.count && v > boundsNanoseconds[i] { i += 1 }
        counts[i] &+= 1
        sumNanoseconds &+= v
        count &+= 1
    }

    /// The upper bound of the bucket holding the `quantile`-th observation (0 with none; the
    /// largest bound when it falls in the `+Inf` bucket): an upper estimate, as Prometheus's
    /// `histogram_quantile` would read it at a bucket's edge.
    package func upperBoundNanoseconds(quantile: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = UInt64((Double(count) * quantile).rounded(.up))
        var cumulative: UInt64 = 0
        for (i, bound) in boundsNanoseconds.enumerated() {
            cumulative += counts[i]
            if cumulative >= rank { return bound }
        }
        return boundsNanoseconds.last ?? 0
    }

    /// Appends the Prometheus text of this histogram as `name` (seconds), with `help`.
    package func write(name: String, help: String, to out: inout String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        var cumulative: UInt64 = 0
        for (i, bound) in boundsNanoseconds.enumerated() {
            cumulative += counts[i]
            out += "\(name)_bucket{le=\"\(Histogram.seconds(bound))\"} \(cumulative)\n"
        }
        cumulative += counts[counts.count - 1]
        out += "\(name)_bucket{le=\"+Inf\"} \(cumulative)\n"
        out += "\(name)_sum \(Histogram.seconds(sumNanoseconds))\n\(name)_count \(count)\n"
    }

    /// Nanoseconds as decimal seconds without floating-point noise (`0.000025`).
    package static func seconds(_ nanos: UInt64) -> String {
        let whole = nanos / 1_000_000_000
        var frac = String(nanos % 1_000_000_000)
        frac = String(repeating: "0", count: 9 - frac.count) + frac
        while frac.hasSuffix("0") { frac.removeLast() }
        return frac.isEmpty ? "\(whole)" : "\(whole).\(frac)"
    }
}
