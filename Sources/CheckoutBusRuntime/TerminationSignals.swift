#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// SIGTERM and SIGINT as task cancellation, for the mains of async programs (the workers, the bridge).
///
/// ``run(_:)`` starts the program's work in a task of its own and cancels that task on the first
/// SIGTERM or SIGINT instead of letting the signal end the process: the work sees the cancellation
/// (the loop over an async subscriber's envelopes ends), drains, writes its last report and
/// returns, and the main exits as it chooses. The handlers run on a global dispatch queue.
public enum TerminationSignals {
    /// Runs `operation` in a new task, cancelled on SIGTERM or SIGINT; returns (or throws) what it
    /// does once it has ended. The signals are trapped until then.
    public static func run<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await operation() }
        var sources: [any DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { task.cancel() }
            source.resume()
            sources.append(source)
        }
        defer { for source in sources { source.cancel() } }
        return try await task.value
    }
}
