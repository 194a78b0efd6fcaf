import Synchronization

/// A flag the signal handler raises and the pipeline loop polls. `Sendable` (atomic).
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)

    public init() {}

    public func raise() { flag.store(true, ordering: .releasing) }

    public var isRaised: Bool { flag.load(ordering: .acquiring) }
}
