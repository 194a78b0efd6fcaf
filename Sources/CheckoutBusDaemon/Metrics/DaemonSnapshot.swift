import CheckoutBusCore
import Synchronization
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Everything `stats`, `/metrics` and `/healthz` report about the pipeline, copied at one instant
/// by the pipeline thread: the counters, seqs and journal figures agree with each other.
/// `Sendable`; a value (its arrays and dictionary are copied on write, so taking one costs the
/// pipeline a few reference counts, not a copy of the data).
package struct DaemonSnapshot: Sendable {
    /// When it was taken (monotonic ns).
    package var takenAt: UInt64
    package var counters: EventProcessor.Counters
    /// Each kind's last `kind_seq`: start, update, complete, fail, dismiss, then dead letters.
    package var kindSeqs: [UInt64]
    /// The last seq journaled and published.
    package var lastSeq: UInt64
    package var durableSeq: UInt64
    package var firstSeq: UInt64
    package var journalSegments: Int
    package var journalBytes: Int64
    package var fsyncs: UInt64
    package var fsyncMaxMicros: UInt64
    package var fsyncHistogram: Histogram
    package var writesDirect: Bool
    /// False from a failed journal write until the next successful one (ingest is paused meanwhile).
    package var journalWritable: Bool
    package var trackedCheckouts: Int
    package var evictedCheckouts: UInt64
    package var expiredCheckouts: UInt64
    /// Bytes the state table holds in use (``CheckoutStateTable/approximateBytes``).
    package var stateBytes = 0
    /// From an event's arrival to its publication (with `--metrics` on).
    package var pipelineLatency: Histogram
    /// The pipeline thread's time by stage, over a sample of events.
    package var stages: StageTimes
    /// This run began by recovering the journal of a fenced run (``JournalFence``): that run's
    /// marker (its last synced seq and why it stopped).
    package var recoveredFence: JournalFence.Marker? = nil
    /// Failed `fdatasync`s of the suppressed-id log (logged; they fence nothing).
    package var suppressedLogSyncFailures = 0
    /// Acknowledgements dropped for producers that did not read them (or had gone).
    package var ackRepliesDropped: UInt64 = 0
    /// The publish high-water mark per subscriber in force: `--publish-hwm`, or the subscribers'
    /// share of `--subscriber-memory` when that is lower.
    package var publishHighWaterMark: Int32 = 0
    /// The endpoints as bound (nil before they are), for `stats` → `daemon` and `checkoutbus ping`.
    package var endpoints: BusDaemon.BoundEndpoints? = nil
}

