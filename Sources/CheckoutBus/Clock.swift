#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore

/// Wall-clock and monotonic time for the pipeline, read with `clock_gettime` (a vDSO call).
public enum BusClock {
    /// Now, in milliseconds since the Unix epoch.
    public static func wallClock() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
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

/// The three times the pipeline takes per event — arrival (monotonic ns), `received_at` (wall
/// clock, ms) and idle-TTL seconds — from one `clock_gettime`: the wall clock is re-read once the
/// monotonic clock has moved a millisecond past the last reading and held in between, so a
/// `received_at` is at most a millisecond behind.
/// Not `Sendable`; one per pipeline.
struct EventClock {
    private var wallMilliseconds: Int64 = 0
    private var readAt: UInt64 = 0
    private var hasReading = false

    mutating func now() -> (arrival: UInt64, receivedAt: Timestamp, seconds: UInt32) {
        let mono = BusClock.monotonicNanoseconds()
        if !hasReading || mono &- readAt >= 1_000_000 {
            wallMilliseconds = BusClock.wallClock().milliseconds
            readAt = mono
            hasReading = true
        }
        return (mono, Timestamp(milliseconds: wallMilliseconds), UInt32(truncatingIfNeeded: mono / 1_000_000_000))
    }
}
