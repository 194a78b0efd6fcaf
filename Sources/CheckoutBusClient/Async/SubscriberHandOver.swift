import Dispatch
import Synchronization
import CheckoutBusRuntime

/// The bounded queue between a ``Subscriber``'s poll thread and the task iterating its envelopes,
/// with the cursors, the stop flag and the counts they share.
///
/// `Sendable`: its state sits behind a `Mutex`. The poll thread blocks in ``push(_:)`` while the
/// queue is full — it reads no socket meanwhile, so ZeroMQ's high-water mark drops and the journal
/// fills the gap later, which is the design — and the consumer suspends in ``next()`` while it is
/// empty. The queue is a ``RingBuffer``: an envelope taken is released at once, and the storage
/// stays within twice the capacity however the consumer's pace compares with the poll thread's.
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
    }

    private let state = Mutex(State())
    /// One permit per free slot of the queue.
    private let space: DispatchSemaphore
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

    package init(capacity: Int, cursors: sending [any SubscriberCursor]) {
        // Created empty and raised once per slot: libdispatch traps when a semaphore is released
        // holding fewer permits than it was created with, as this one does whenever the
        // subscriber goes away with envelopes still queued.
        space = DispatchSemaphore(value: 0)
        for _ in 0..<max(1, capacity) { space.signal() }
        self.cursors = Mutex(cursors)
    }

    /// The slots the queue's storage holds, queued envelopes and free slots: what it costs in memory.
    package var storageSlots: Int { state.withLock { $0.queue.capacity } }

    /// Whether this call is the first: the poll thread is started once.
    package func claimStart() -> Bool {
        state.withLock { s in
            defer { s.started = true }
            return !s.started
        }
    }

    /// On the poll thread: waits for room, then queues `envelope` (or hands it straight to a
    /// waiting consumer).
    /// - Returns: false when the subscriber was cancelled meanwhile; the envelope was not delivered.
    package func push(_ envelope: ReceivedEnvelope) -> Bool {
        while space.wait(timeout: .now() + .milliseconds(100)) != .success {
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
        if let waiter {
            space.signal()
            waiter.resume(returning: envelope)
        }
        return !stop.isRaised
    }

    /// On the consumer's task: the next envelope, nil once cancelled or stopped.
    /// - Throws: what stopped the poll thread.
    package func next() async throws -> ReceivedEnvelope? {
        let envelope = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ReceivedEnvelope?, any Error>) in
                let ready = state.withLock { s -> Result<ReceivedEnvelope?, any Error>? in
                    if let envelope = s.queue.popFirst() { return .success(envelope) }
                    if s.cancelled { return .success(nil) }
                    if s.finished {
                        defer { s.failure = nil }
                        return s.failure.map { .failure($0) } ?? .success(nil)
                    }
                    s.waiter = continuation
                    return nil
                }
                guard let ready else { return }
                if case .success(.some) = ready { space.signal() }
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
