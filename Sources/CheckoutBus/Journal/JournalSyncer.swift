#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization

/// Group commit: a background thread that `fdatasync`s the journal's open segment at most every
/// `interval`, while there are written but unsynced records, and then advances ``durableSeq``.
///
/// `Sendable`: its state is atomics and one mutex. The pipeline thread stores ``writtenSeq``
/// after each `write`; the syncer reads it, syncs, and stores ``durableSeq``; the pipeline answers
/// acknowledged producers up to ``durableSeq``. The mutex guards the segment's file descriptor,
/// which the pipeline swaps when it rotates segments.
final class JournalSyncer: Sendable {
    let writtenSeq: Atomic<UInt64>
    let durableSeq: Atomic<UInt64>
    let fsyncCount = Atomic<UInt64>(0)
    let fsyncMaxMicros = Atomic<UInt64>(0)
    private let stopRequested = Atomic<Bool>(false)
    /// Every `fdatasync`'s duration, for metrics.
    let fsyncDurations = Mutex(Histogram.fsync())
    private let fd: Mutex<Int32>
    private let intervalNanos: UInt64
    private let finished = DispatchSemaphore(value: 0)

    init(fd: Int32, seq: UInt64, intervalMilliseconds: Int) {
        self.fd = Mutex(fd)
        writtenSeq = Atomic(seq)
        durableSeq = Atomic(seq)
        intervalNanos = UInt64(max(0, intervalMilliseconds)) * 1_000_000
    }

    var durable: UInt64 { durableSeq.load(ordering: .acquiring) }
    var fsyncs: UInt64 { fsyncCount.load(ordering: .relaxed) }
    var fsyncMaxMicroseconds: UInt64 { fsyncMaxMicros.load(ordering: .relaxed) }
    var fsyncHistogram: Histogram { fsyncDurations.withLock { $0 } }

    /// Sets both marks (after recovery, before the thread starts).
    func reset(seq: UInt64) {
        writtenSeq.store(seq, ordering: .releasing)
        durableSeq.store(seq, ordering: .releasing)
    }

    /// Records that every seq up to `seq` is in the file (not yet synced).
    func written(upTo seq: UInt64) { writtenSeq.store(seq, ordering: .releasing) }

    func start() {
        let thread = Thread { [self] in loop() }
        thread.name = "journal-sync"
        thread.start()
    }

    /// Stops the thread and waits for it; the caller then syncs one last time itself.
    func stop() {
        stopRequested.store(true, ordering: .releasing)
        finished.wait()
    }

    /// Replaces the segment being synced (after the caller synced the old one) and returns the old fd.
    func swapSegment(to newFD: Int32) -> Int32 {
        fd.withLock { current in
            let old = current
            current = newFD
            return old
        }
    }

    /// Syncs now on the calling thread (rotation, shutdown), then records `seq` as durable.
    func syncNow(upTo seq: UInt64) {
        fd.withLock { current in _ = fdatasync(current) }
        advanceDurable(to: seq)
    }

    private func advanceDurable(to seq: UInt64) {
        var current = durableSeq.load(ordering: .acquiring)
        while current < seq {
            let (exchanged, original) = durableSeq.compareExchange(expected: current, desired: seq, ordering: .acquiringAndReleasing)
            if exchanged { break }
            current = original
        }
    }

    private func loop() {
        while !stopRequested.load(ordering: .acquiring) {
            let written = writtenSeq.load(ordering: .acquiring)
            let start = BusClock.monotonicNanoseconds()
            if written > durableSeq.load(ordering: .acquiring) {
                fd.withLock { current in _ = fdatasync(current) }
                advanceDurable(to: written)
                let nanos = BusClock.monotonicNanoseconds() - start
                let micros = nanos / 1000
                fsyncDurations.withLock { $0.observe(nanoseconds: nanos) }
                fsyncCount.add(1, ordering: .relaxed)
                if micros > fsyncMaxMicros.load(ordering: .relaxed) { fsyncMaxMicros.store(micros, ordering: .relaxed) }
            }
            // At most one fdatasync per interval; poll for new writes at a fraction of it.
            let elapsed = BusClock.monotonicNanoseconds() - start
            let wait = max(intervalNanos > elapsed ? intervalNanos - elapsed : 0, 200_000)
            var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
            nanosleep(&ts, nil)
        }
        finished.signal()
    }
}
