import Synchronization

/// A flag the signal handler raises and the pipeline loop polls. `Sendable` (atomic).
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    /// The signal sources of ``trapTerminationSignals()``, kept as long as the flag is.
    private let sources = Mutex<[any DispatchSourceSignal]>([])

    public init() {}

    public func raise() { flag.store(true, ordering: .releasing) }

    public var isRaised: Bool { flag.load(ordering: .acquiring) }
}

#if canImport(Glibc)
import Glibc
#endif
import Dispatch

extension StopSignal {
    /// Raises this flag on SIGTERM or SIGINT instead of letting them kill the process.
    ///
    /// The handlers run on a global dispatch queue. The flag keeps their sources: while it
    /// lives, those signals raise it (nothing for the caller to hold).
    public func trapTerminationSignals() {
        sources.withLock { kept in
            for sig in [SIGTERM, SIGINT] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler { [self] in self.raise() }
                source.resume()
                kept.append(source)
            }
        }
    }
}
