#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One timed event's stages up to its journaling, in ns (``ProcessingResult/stages``).
package struct EventStages: Sendable, Equatable {
    /// Scanning and decoding (``StageTimes/decode``).
    package var decode: UInt64
    /// The snapshot's hash and the lifecycle rules (``StageTimes/rules``).
    package var rules: UInt64
    /// Writing the envelope (``StageTimes/envelope``).
    package var envelope: UInt64
}

/// Where the pipeline thread's time goes, measured on a sample of events (about one in
/// ``StageTimes/sampleInterval``): nanoseconds summed over the sampled events, per stage. Read by
/// `stats` (`stages`) and by `checkoutbus bench`, which splits the pipeline thread's CPU by them.
///
/// The clock is the monotonic one (a read costs ~25 ns here, in user space). The thread's own CPU
/// clock would not count time the thread was preempted, but a read of it is a system call of
/// ~650 ns here, larger than some stages. Instead, a sampled event whose stages took more than
/// ``preemptedAfter`` in all is taken to have been preempted and is only counted in ``discarded``.
package struct StageTimes: Sendable, Equatable {
    /// One event in this many is timed, on average.
    package static let sampleInterval = 64
    /// A sampled event whose stages took longer than this (ns) in all is left out.
    package static let preemptedAfter: UInt64 = 100_000

    /// Events timed through every stage.
    package var samples: UInt64 = 0
    /// Sampled events left out: their stages took longer than ``preemptedAfter``.
    package var discarded: UInt64 = 0
    /// Reading the message off the ingest socket (`zmq_msg_recv`).
    package var receive: UInt64 = 0
    /// Scanning the JSON and decoding the raw shape into an event.
    package var decode: UInt64 = 0
    /// The lifecycle rules: the snapshot's canonical hash (noting redactions), the state table,
    /// the event-id window.
    package var rules: UInt64 = 0
    /// Writing the envelope and its topic.
    package var envelope: UInt64 = 0
    /// Copying the record into the journal's pending batch.
    package var journalAppend: UInt64 = 0
    /// Records whose publication was timed.
    package var publishSamples: UInt64 = 0
    /// Handing a record's two frames to the publish socket (`zmq_msg_send`).
    package var publish: UInt64 = 0
    /// Batches of messages prepared by several threads at once (`--pipeline-threads` above 1),
    /// and the messages in them.
    package var parallelBatches: UInt64 = 0
    package var parallelMessages: UInt64 = 0

    package init() {}

    /// Events until the next timed one: between 33 and 95, drawn from `state` (any non-zero seed)
    /// so that the sample does not fall on the same place in each batch the pipeline reads (the
    /// daemon reads 512 at a time: every eighth sample was a batch's first event, whose caches
    /// are cold after the batch before was journaled and published, and it cost twice the rest).
    @inline(__always)
    package static func nextInterval(_ state: inout UInt64) -> Int {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return 33 + Int(state % 63)
    }

    /// Monotonic nanoseconds, for the stage boundaries.
    @inline(__always)
    package static func now() -> UInt64 {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return UInt64(t.tv_sec) &* 1_000_000_000 &+ UInt64(t.tv_nsec)
    }

    /// Adds one sampled event's stages, unless they took so long in all that the thread must
    /// have been preempted.
    package mutating func add(receive: UInt64, decode: UInt64, rules: UInt64, envelope: UInt64, journalAppend: UInt64) {
        guard receive &+ decode &+ rules &+ envelope &+ journalAppend <= StageTimes.preemptedAfter else {
            discarded &+= 1
            return
        }
        samples &+= 1
        self.receive &+= receive
        self.decode &+= decode
        self.rules &+= rules
        self.envelope &+= envelope
        self.journalAppend &+= journalAppend
    }

    /// Adds one sampled publication (two frames), unless it was preempted.
    package mutating func addPublish(_ ns: UInt64) {
        guard ns <= StageTimes.preemptedAfter else {
            discarded &+= 1
            return
        }
        publishSamples &+= 1
        publish &+= ns
    }
}
