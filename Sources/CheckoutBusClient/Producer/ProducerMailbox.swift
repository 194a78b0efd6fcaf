#if canImport(Glibc)
import Glibc
#endif
import Synchronization

import CheckoutBusRuntime

/// What the tasks calling an ``AcknowledgedProducer`` hand to its socket thread: new sends,
/// cancellations and the close, behind a `Mutex`, plus a pipe that wakes the thread from
/// `zmq_poll`.
///
/// `Sendable`: its state sits behind the mutex, and the pipe is written and read with single
/// system calls (a full pipe already means "woken"). The pipe is closed in `deinit`, once neither
/// the producer nor its thread holds the mailbox, so no write can reach a closed descriptor.
final class ProducerMailbox: Sendable {
    /// One call of `send`: its events, and the continuation its answers resume.
    struct Request: Sendable {
        let id: UInt64
        let events: [[UInt8]]
        let continuation: CheckedContinuation<[Acknowledgement], any Error>
    }

    struct Taken {
        var requests: [Request] = []
        var cancelled: [UInt64] = []
        var closed = false
    }

    private struct State {
        var taken = Taken()
        var nextID: UInt64 = 0
        /// The thread has closed its socket and answered every request.
        var finished = false
        var finishWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    /// Readable while a wake-up is pending; the thread polls it beside its sockets.
    var wakeFD: Int32 { wake.readFD }
    private let wake: WakePipe

    /// - Throws: ``AcknowledgedProducerError`` (``AcknowledgedProducerError/Code/closed``) when no
    ///   pipe can be made (out of file descriptors).
    init() throws(AcknowledgedProducerError) {
        do {
            wake = try WakePipe("producer's wake")
        } catch {
            throw AcknowledgedProducerError(.closed, error.description)
        }
    }

    deinit {
        wake.close()
    }

    /// A fresh id for a request, to cancel it by.
    func makeID() -> UInt64 {
        state.withLock { s in
            s.nextID += 1
            return s.nextID
        }
    }

    /// Queues a request for the thread; false once the producer is closed (nothing was queued).
    func submit(_ request: Request) -> Bool {
        let accepted = state.withLock { s in
            if s.taken.closed || s.finished { return false }
            s.taken.requests.append(request)
            return true
        }
        if accepted { wakeThread() }
        return accepted
    }

    /// Asks the thread to give up request `id` (its task was cancelled).
    func cancel(_ id: UInt64) {
        state.withLock { $0.taken.cancelled.append(id) }
        wakeThread()
    }

    /// Asks the thread to fail what it holds with ``AcknowledgedProducerError/Code/closed`` and stop.
    func close() {
        state.withLock { $0.taken.closed = true }
        wakeThread()
    }

    /// On the thread: everything handed over since the last call, and the pending wake-ups read.
    func take() -> Taken {
        wake.drain()
        return state.withLock { s in
            let taken = s.taken
            s.taken = Taken(closed: s.taken.closed)
            return taken
        }
    }

    /// On the thread, as it returns: fails requests that arrived too late and releases ``finished()``.
    func finish(closing description: String) {
        let (late, waiters) = state.withLock { s in
            s.finished = true
            defer {
                s.taken.requests = []
                s.finishWaiters = []
            }
            return (s.taken.requests, s.finishWaiters)
        }
        for request in late { request.continuation.resume(throwing: AcknowledgedProducerError(.closed, description)) }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the thread has closed its socket.
    func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s in
                if s.finished { return true }
                s.finishWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    private func wakeThread() {
        wake.signal()
    }
}
