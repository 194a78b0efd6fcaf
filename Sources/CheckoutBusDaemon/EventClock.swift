import CheckoutBusProtocol
import CheckoutBusRuntime

/// The three times the pipeline takes per event — arrival (monotonic ns), `received_at` (wall
/// clock, ms) and idle-TTL seconds — from one `clock_gettime`: the wall clock is re-read once the
/// monotonic clock has moved a millisecond past the last reading and held in between, so a
/// `received_at` is at most a millisecond behind.
/// Not `Sendable`; one per pipeline.
package struct EventClock {
    private var wallMilliseconds: Int64 = 0
    private var readAt: UInt64 = 0
    private var hasReading = false

    package mutating func now() -> (arrival: UInt64, receivedAt: Timestamp, seconds: UInt32) {
        let mono = BusClock.monotonicNanoseconds()
        if !hasReading || mono &- readAt >= 1_000_000 {
            wallMilliseconds = BusClock.wallMilliseconds()
            readAt = mono
            hasReading = true
        }
        return (mono, Timestamp(milliseconds: wallMilliseconds), UInt32(truncatingIfNeeded: mono / 1_000_000_000))
    }
}
