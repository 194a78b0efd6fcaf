#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock and monotonic time for the pipeline, read with `clock_gettime` (a vDSO call).
public enum BusClock {
    /// Now, in milliseconds since the Unix epoch.
    public static func wallMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Monotonic nanoseconds, for intervals and latency.
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Monotonic whole seconds, for idle TTLs.
    public static func monotonicSeconds() -> UInt32 {
        UInt32(truncatingIfNeeded: monotonicNanoseconds() / 1_000_000_000)
    }
}
