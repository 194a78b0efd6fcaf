import Dispatch
import Synchronization
import CheckoutBusRuntime

/// The bounded queue between a ``Subscriber``'s poll thread and the task iterating its envelopes,
/// with the cursors, the stop flag and the counts they share.
///
/// `Sendable`: its state sits behind a `Mutex`. Back-pressure works by watermarks: the poll thread
/// blocks in ``push(_:)`` once the queue holds `capacity` envelopes (the high watermark) and goes
/// on only when the consumer has taken it down to ``lowWatermark`` — it reads no socket meanwhile,
/// so ZeroMQ's high-water mark drops and the journal fills the gap later, which is the design — so
/// a consumer a little slower than the bus wakes the poll thread once per half a queue, not once
/// per envelope. The consumer suspends in ``next()`` while the queue is empty. The queue is a
/// ``RingBuffer``: an envelope taken is released at once, and the storage stays within twice the
/// capacity however the consumer's pace compares with the poll thread's. Cursors are committed on
/// ``commits``, a serial queue of their own, never on the consumer's cooperative thread.
package final class SubscriberHandOver: Sendable {
    private struct State {
        var queue = RingBuffer<ReceivedEnvelope>()
        /// The consumer suspended in next().
        var waiter: CheckedContinuation<ReceivedEnvelope?, any Error>?
        var started = false
        var cancelled = false
        /// The poll thread has returned: with `failure` when it threw (handed over once).
        var finished = false
        var failure: (any Error)?
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
        /// The poll thread found the queue full and waits until it is down to the low watermark.
        var pollerWaiting = false
        /// Times the poll thread had to wait for room (tests read it).
        var pollerWaits = 0
    }

    private let state = Mutex(State())
    /// Envelopes queued at most: the high watermark.
    package let capacity: Int
    /// Once full, the poll thread goes on when the queue is down to this many (half the capacity).
    package let lowWatermark: Int
    /// Raised by the consumer when the queue it drains reaches ``lowWatermark``, and on cancellation.
    private let room = DispatchSemaphore(value: 0)
    /// Where ``Subscriber/commit(_:)`` writes cursors: a file's `pwrite` (and `fdatasync` for a
    /// durable one) blocks, which a cooperative-pool thread must not.
    package let commits = DispatchQueue(label: "checkoutbus.subscriber.commit")
    /// Each cursor's ``SubscriberCursor/commitMayBlock``, read once.
    package let commitMayBlock: [Bool]
    /// Raised on cancellation: the poll loop returns at its next round.
    package let stop = StopSignal()
    /// Each shard's cursor, in endpoint order; committed by the consumer, loaded by the poll thread.
    package let cursors: Mutex<[any SubscriberCursor]>
    /// The poll loop's counts, copied after each round.
    package let statistics = Mutex(BusSubscriber.Statistics())
    /// Each shard's parked envelopes as the application last said (``Subscriber/reportRejected(_:position:)``);
    /// nil until it does.
    package let rejected = Mutex([Int: Int]())
    /// The positions of the shards whose heartbeats have stopped (``BusSubscriber/isSilent``).
    package let silent = Mutex(Set<Int>())
    /// Each shard's position as the consumer last committed it (loaded from its cursor at the
    /// start): what reports say, rather than what was queued ahead of the consumer.
    package let committed = Mutex([Int: Int64]())
    /// The consumer stopped on an error (``Subscriber/abandon()``): the last report is not final.
    package let abandoned = Atomic<Bool>(false)

    package init(capacity: Int, cursors: sending [any SubscriberCursor]) {
        commitMayBlock = cursors.map(\.commitMayBlock)
        self.capacity = max(1, capacity)
        lowWatermark = self.capacity / 2
        self.cursors = Mutex(cursors)
    }

    /// Times the poll thread waited for the consumer to make room.
    package var pollerWaits: Int { state.withLock { $0.pollerWaits } }

    /// The slots the queue's storage holds, queued envelopes and free slots: what it costs in memory.
    package var storageSlots: Int { state.withLock { $0.queue.capacity } }

    /// Whether this call is the first: the poll thread is started once.
    package func claimStart() -> Bool {
        state.withLock { s in
            defer { s.started = true }
            return !s.started
        }
    }

    /// On the poll thread: queues `envelope` (or hands it straight to a waiting consumer); with the
    /// queue full, first waits until the consumer has taken it down to ``lowWatermark``.
    /// - Returns: false when the subscriber was cancelled meanwhile; the envelope was not delivered.
    package func push(_ envelope: ReceivedEnvelope) -> Bool {
        let capacity = capacity
        while true {
            let mustWait = state.withLock { s -> Bool in
                // Still waiting: the consumer clears the flag at the low watermark.
                if s.pollerWaiting { return !s.cancelled }
                guard s.queue.count >= capacity, !s.cancelled else { return false }
                s.pollerWaiting = true
                s.pollerWaits += 1
                return true
            }
            guard mustWait else { break }
            _ = room.wait(timeout: .now() + .milliseconds(100))
            if stop.isRaised { return false }
        }
        let waiter = state.withLock { s -> CheckedContinuation<ReceivedEnvelope?, any Error>? in
            if s.cancelled { return nil }
            if let waiter = s.waiter {
                s.waiter = nil
                return waiter
            }
            s.queue.append(envelope)
            return nil
        }
        waiter?.resume(returning: envelope)
        return !stop.isRaised
    }

    /// On the consumer's task: the next envelope, nil once cancelled or stopped.
    /// - Throws: what stopped the poll thread.
    package func next() async throws -> ReceivedEnvelope? {
        let envelope = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ReceivedEnvelope?, any Error>) in
                let (ready, wake) = state.withLock { s -> (Result<ReceivedEnvelope?, any Error>?, Bool) in
                    if let envelope = s.queue.popFirst() {
                        // The poll thread waits for the low watermark: this envelope reached it.
                        guard s.pollerWaiting, s.queue.count <= lowWatermark else { return (.success(envelope), false) }
                        s.pollerWaiting = false
                        return (.success(envelope), true)
                    }
                    if s.cancelled { return (.success(nil), false) }
                    if s.finished {
                        defer { s.failure = nil }
                        return (s.failure.map { .failure($0) } ?? .success(nil), false)
                    }
                    s.waiter = continuation
                    return (nil, false)
                }
                if wake { room.signal() }
                guard let ready else { return }
                continuation.resume(with: ready)
            }
        } onCancel: {
            cancel()
        }
        if envelope == nil { await finished() }
        return envelope
    }

    /// Stops the poll thread at its next round and ends the iteration.
    package func cancel() {
        stop.raise()
        room.signal()
        let waiter = state.withLock { s -> CheckedContinuation<ReceivedEnvelope?, any Error>? in
            s.cancelled = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// On the poll thread, as it returns: ends the iteration, with `failure` when it threw.
    package func finish(failure: (any Error)?) {
        let (waiter, waiters) = state.withLock { s in
            s.finished = true
            s.failure = s.cancelled ? nil : failure
            defer {
                s.waiter = nil
                s.finishWaiters = []
            }
            return (s.waiter, s.finishWaiters)
        }
        if let waiter {
            if let failure = state.withLock({ s in defer { s.failure = nil }; return s.failure }) {
                waiter.resume(throwing: failure)
            } else {
                waiter.resume(returning: nil)
            }
        }
        for w in waiters { w.resume() }
    }

    /// Returns once the poll thread has closed its sockets (at once if it never started).
    package func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s in
                if s.finished || !s.started { return true }
                s.finishWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
