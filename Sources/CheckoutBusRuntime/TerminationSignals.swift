#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// SIGTERM and SIGINT as task cancellation, for the mains of async programs (the workers, the bridge).
///
/// ``run(_:)`` starts the program's work in a task of its own and cancels that task on the first
/// SIGTERM or SIGINT instead of letting the signal end the process: the work sees the cancellation
/// (the loop over an async subscriber's envelopes ends), drains, writes its last report and
/// returns, and the main exits as it chooses. The handlers run on a global dispatch queue.
public enum TerminationSignals {
    /// Runs `operation` in a new task, cancelled on SIGTERM or SIGINT; returns (or throws) what it
    /// does once it has ended. The signals are trapped until then.
    ///
    /// The signals are trapped before the task starts: a signal that came between the two (on a
    /// loaded host the task can be well under way — subscribed, even — before this thread runs
    /// again) was lost while the disposition was already `SIG_IGN` and the handler not yet armed,
    /// and the program then never stopped. One that comes before the task exists cancels it as it
    /// is made.
    public static func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let target = CancellationTarget()
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { target.signalled() }
            source.resume()
            sources.append(source)
        }
        defer { for source in sources { source.cancel() } }
        let task = Task { try await operation() }
        target.started(task)
        return try await task.value
    }

    /// The task a signal cancels, and whether one came before it existed.
    private final class CancellationTarget: Sendable {
        private let state = Mutex<(cancel: (@Sendable () -> Void)?, signalled: Bool)>((nil, false))

        func signalled() {
            let cancel = state.withLock { s -> (@Sendable () -> Void)? in
                s.signalled = true
                return s.cancel
            }
            cancel?()
        }

        func started<T: Sendable>(_ task: Task<T, any Error>) {
            let early = state.withLock { s -> Bool in
                s.cancel = { task.cancel() }
                return s.signalled
            }
            if early { task.cancel() }
        }
    }
}
