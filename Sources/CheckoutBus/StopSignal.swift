import Synchronization

/// A flag the signal handler raises and the pipeline loop polls. `Sendable` (atomic).
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)

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
    /// The handlers run on a global dispatch queue; the returned sources must be kept alive.
    public func trapTerminationSignals() -> [any DispatchSourceSignal] {
        [SIGTERM, SIGINT].map { sig in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [self] in self.raise() }
            source.resume()
            return source
        }
    }
}
