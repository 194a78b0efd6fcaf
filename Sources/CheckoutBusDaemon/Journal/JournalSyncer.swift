#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Synchronization
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Group commit: a background thread that `fdatasync`s the journal's open segment at most every
/// `interval`, while there are written but unsynced records, and then advances ``durableSeq``.
///
/// Every `fdatasync`'s result is checked: one that fails never advances ``durableSeq`` — under the
/// same lock, so a concurrent sync of the same file that returned 0 (the error is reported once)
/// cannot advance it either — and trips the ``JournalFence``, which ends the process
/// (failpoint `journal.fdatasync`).
///
/// `Sendable`: its state is atomics and one mutex. The pipeline thread stores ``writtenSeq``
/// after each `write`; the syncer reads it, syncs, and stores ``durableSeq``; the pipeline answers
/// acknowledged producers up to ``durableSeq``. The mutex guards the segment's file descriptor,
/// which the pipeline swaps when it rotates segments.
///
/// After each sync the syncer also drops the segment's synced pages from the page cache, all but
/// the newest `cacheBytes` (`POSIX_FADV_DONTNEED`), and a closed segment's at rotation. A journal
/// is written once and rarely read far back, so its pages would otherwise only grow the page
/// cache; the writes then take pages the kernel just freed instead of fresh ones, which on a
/// virtual machine whose balloon returns free memory to the host is several times cheaper
/// (docs/durability.md, "Page cache").
package final class JournalSyncer: Sendable {
    /// The open segment and how far its synced pages were dropped from the page cache.
    package struct Segment {
        var fd: Int32
        /// Counts segments swapped in, so a written extent of an earlier one is recognised.
        var generation: UInt64 = 0
        var droppedUpTo = 0
    }

    package let writtenSeq: Atomic<UInt64>
    package let durableSeq: Atomic<UInt64>
    /// `generation << 44 | bytes`: how much of which segment the pipeline has written.
    private let writtenExtent = Atomic<UInt64>(0)
    package let fsyncCount = Atomic<UInt64>(0)
    package let fsyncMaxMicros = Atomic<UInt64>(0)
    private let stopRequested = Atomic<Bool>(false)
    /// Every `fdatasync`'s duration, for metrics.
    package let fsyncDurations = Mutex(Histogram.fsync())
    private let segment: Mutex<Segment>
    /// What a failed sync trips: it ends the process.
    private let fence: JournalFence
    /// A sync failed: nothing is durable past ``durableSeq`` any more. Read and set under `segment`'s lock.
    private let failed = Atomic<Bool>(false)
    private let intervalNanos: UInt64
    /// Synced bytes of the open segment kept in the page cache (nil: never dropped).
    private let cacheBytes: Int?
    private let finished = DispatchSemaphore(value: 0)
    private static let offsetBits: UInt64 = 44

    package init(fd: Int32, seq: UInt64, intervalMilliseconds: Int, cacheBytes: Int?, fence: JournalFence) {
        segment = Mutex(Segment(fd: fd))
        self.fence = fence
        writtenSeq = Atomic(seq)
        durableSeq = Atomic(seq)
        intervalNanos = UInt64(max(0, intervalMilliseconds)) * 1_000_000
        self.cacheBytes = cacheBytes
    }

    package var durable: UInt64 { durableSeq.load(ordering: .acquiring) }
    package var fsyncs: UInt64 { fsyncCount.load(ordering: .relaxed) }
    package var fsyncMaxMicroseconds: UInt64 { fsyncMaxMicros.load(ordering: .relaxed) }
    package var fsyncHistogram: Histogram { fsyncDurations.withLock { $0 } }

    /// Sets both marks (after recovery, before the thread starts).
    package func reset(seq: UInt64) {
        writtenSeq.store(seq, ordering: .releasing)
        durableSeq.store(seq, ordering: .releasing)
    }

    /// Records that every seq up to `seq` is in the file (not yet synced), and that the segment
    /// of `generation` (``swapSegment(to:)``'s) is `bytes` long.
    package func written(upTo seq: UInt64, generation: UInt64, bytes: Int) {
        let mask: UInt64 = (1 << (64 - JournalSyncer.offsetBits)) - 1
        writtenExtent.store((generation & mask) << JournalSyncer.offsetBits | UInt64(bytes), ordering: .releasing)
        writtenSeq.store(seq, ordering: .releasing)
    }

    package func start() {
        NamedThread.start("journal-sync") { [self] in loop() }
    }

    /// Stops the thread and waits for it; the caller then syncs one last time itself.
    package func stop() {
        stopRequested.store(true, ordering: .releasing)
        finished.wait()
    }

    /// Replaces the segment being synced (after the caller synced the old one).
    /// - Returns: the old fd, and the new segment's generation for ``written(upTo:generation:bytes:)``.
    package func swapSegment(to newFD: Int32) -> (old: Int32, generation: UInt64) {
        segment.withLock { s in
            let old = s.fd
            s = Segment(fd: newFD, generation: s.generation &+ 1, droppedUpTo: 0)
            return (old, s.generation)
        }
    }

    /// Syncs now on the calling thread (rotation, shutdown), then records `seq` as durable.
    /// - Parameter closing: the segment is being closed: all of its pages leave the page cache.
    package func syncNow(upTo seq: UInt64, closing: Bool = false) {
        let synced = segment.withLock { s in
            guard sync(s.fd) else { return false }
            if closing && cacheBytes != nil { _ = posix_fadvise(s.fd, 0, 0, POSIX_FADV_DONTNEED) }
            advanceDurable(to: seq)
            return true
        }
        if !synced { tripFence() }
    }

    /// `fdatasync`s `fd`, under `segment`'s lock. A failure is recorded for good: this and every
    /// later call returns false, and the caller must not advance ``durableSeq``.
    private func sync(_ fd: Int32) -> Bool {
        if failed.load(ordering: .acquiring) { return false }
        let result: Int32
        if let injected = Failpoints.hit("journal.fdatasync") {
            result = injected
        } else {
            result = fdatasync(fd) == 0 ? 0 : errno
        }
        guard result == 0 else {
            failureReason.withLock { $0 = "fdatasync of the open journal segment failed: \(String(cString: strerror(result)))" }
            failed.store(true, ordering: .releasing)
            return false
        }
        return true
    }

    /// Why the first sync failed.
    private let failureReason = Mutex("")

    /// Hands a failed sync to the fence, which ends the process.
    private func tripFence() -> Never {
        fence.trip(failureReason.withLock { $0 }, durableSeq: durable)
    }

    /// Drops the synced pages of `s` older than the newest ``cacheBytes``, in steps of at least 1 MiB.
    private func dropSyncedPages(_ s: inout Segment, extent: UInt64) {
        guard let cacheBytes else { return }
        let mask: UInt64 = (1 << (64 - JournalSyncer.offsetBits)) - 1
        guard extent >> JournalSyncer.offsetBits == s.generation & mask else { return }
        let synced = Int(extent & ((1 << JournalSyncer.offsetBits) - 1))
        let end = (synced - cacheBytes) & ~4095
        guard end >= s.droppedUpTo + (1 << 20) else { return }
        _ = posix_fadvise(s.fd, off_t(s.droppedUpTo), off_t(end - s.droppedUpTo), POSIX_FADV_DONTNEED)
        s.droppedUpTo = end
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
                // Loaded before the sync: every byte it counts is in the file, and so synced after.
                let extent = writtenExtent.load(ordering: .acquiring)
                let synced = segment.withLock { s in
                    guard sync(s.fd) else { return false }
                    dropSyncedPages(&s, extent: extent)
                    advanceDurable(to: written)
                    return true
                }
                if !synced { tripFence() }
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
