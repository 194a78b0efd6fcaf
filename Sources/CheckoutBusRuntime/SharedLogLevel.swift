#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A log level several loggers share and a signal handler may change (SIGHUP). `Sendable` (atomic).
public final class SharedLogLevel: Sendable {
    private let raw: Atomic<Int>
    public init(_ level: BusLogger.Level) { raw = Atomic(level.rawValue) }
    public var level: BusLogger.Level {
        get { BusLogger.Level(rawValue: raw.load(ordering: .relaxed)) ?? .info }
        set { raw.store(newValue.rawValue, ordering: .relaxed) }
    }
}
