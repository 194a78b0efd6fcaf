import CheckoutBusCore
import Synchronization
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// How threads that serve clients get a ``DaemonSnapshot`` from the pipeline without ever making
/// it wait: they ask (``request()``: a flag and a byte on a pipe the pipeline polls), the pipeline
/// answers between two batches (``publish(_:)``) and wakes every registered reader's pipe.
///
/// `Sendable`: one mutex around the latest snapshot and the reader list; the pipeline holds it
/// only to store a value. A reader that needs a snapshot newer than its request waits on its own
/// pipe, serving its other clients meanwhile.
package final class SnapshotExchange: Sendable {
    private struct State {
        var latest: DaemonSnapshot?
        /// How many snapshots were published (0: none yet).
        var generation: UInt64 = 0
        var requested = false
        var readers: [WakePipe] = []
    }

    private let state = Mutex(State())
    /// Readable while a request waits: the pipeline's poller watches it.
    package let requests: WakePipe

    package init() throws {
        requests = try WakePipe("snapshot request")
    }

    /// A pipe that becomes readable after each publication, for a reader thread's poller.
    package func register(_ pipe: WakePipe) { state.withLock { $0.readers.append(pipe) } }

    /// Takes a reader's pipe off the list; once this returns the pipeline never writes to it, so
    /// the reader may close it (a closed pipe's descriptor numbers can be reused by any file the
    /// daemon opens next, a journal segment among them).
    package func unregister(_ pipe: WakePipe) { state.withLock { $0.readers.removeAll { $0 === pipe } } }

    /// The latest snapshot and its generation (nil before the first).
    package var latest: (snapshot: DaemonSnapshot?, generation: UInt64) { state.withLock { ($0.latest, $0.generation) } }

    /// Asks the pipeline for a fresh snapshot (requests made before it answers share one).
    package func request() {
        let first = state.withLock { s in
            defer { s.requested = true }
            return !s.requested
        }
        if first { requests.signal() }
    }

    /// Pipeline thread: whether a reader is waiting (the request pipe is drained here).
    package func takeRequest() -> Bool {
        requests.drain()
        return state.withLock { $0.requested }
    }

    /// Pipeline thread: stores a snapshot and wakes every reader. The readers are woken under the
    /// lock (a non-blocking one-byte write each), so a reader that has unregistered is never written to.
    package func publish(_ snapshot: DaemonSnapshot) {
        state.withLock { s in
            s.latest = snapshot
            s.generation += 1
            s.requested = false
            for r in s.readers { r.signal() }
        }
    }

    /// How many reader pipes are registered.
    package var readerCount: Int { state.withLock { $0.readers.count } }
}
