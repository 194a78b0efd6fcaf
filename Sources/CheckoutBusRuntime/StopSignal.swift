#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A flag the signal handler raises and the pipeline loop polls. `Sendable` (atomic).
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    /// Whether ``trapTerminationSignals()`` tied this flag to the process's SIGTERM and SIGINT.
    private let followsTermination = Atomic<Bool>(false)

    public init() {}

    public func raise() { flag.store(true, ordering: .releasing) }

    public var isRaised: Bool {
        flag.load(ordering: .acquiring)
            || (followsTermination.load(ordering: .relaxed) && terminationRequested.load(ordering: .acquiring))
    }
}

extension StopSignal {
    /// Raises this flag on SIGTERM or SIGINT instead of letting them kill the process.
    ///
    /// A handler installed with `sigaction` stores one process-wide atomic flag (what a handler may
    /// do, whichever thread the signal interrupts), and every trapped ``StopSignal`` reads it in
    /// ``isRaised``. Call it from the main thread before starting others: it unblocks both signals
    /// there, in case the process was started with them blocked. Nothing is lost in between: before the handler, a signal ends the process (its
    /// default action); after it, every signal raises the flag. (A dispatch signal source, with the
    /// disposition `SIG_IGN` until it was armed, could lose a SIGTERM that came in between.) The
    /// flag is the process's: once a signal came, every trapped ``StopSignal`` reads raised, those
    /// trapped later too (a command runs once per process).
    public func trapTerminationSignals() {
        // The global is made here, never for the first time inside the handler.
        _ = terminationRequested.load(ordering: .relaxed)
        followsTermination.store(true, ordering: .releasing)
        TerminationSignals.catchTermination { _ in
            terminationRequested.store(true, ordering: .releasing)
        }
    }
}

/// Raised by the handler ``StopSignal/trapTerminationSignals()`` installs; lock-free.
private let terminationRequested = Atomic<Bool>(false)
