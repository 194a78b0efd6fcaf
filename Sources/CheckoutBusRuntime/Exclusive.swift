import Synchronization

/// A value handed from thread to thread and used by one at a time: a parallel batch's slot (the
/// pipeline thread fills it, a prepare thread decodes it, the pipeline thread commits it), the
/// journal's segment appender (the pipeline thread, then the writer thread with a batch).
///
/// The hand-overs themselves pass a lock or a semaphore, which orders the memory; what this type
/// adds is the check of the claim that makes it `Sendable`. In a debug build (every test run)
/// each ``withValue(_:)`` marks the value in use and fails at once if another thread is inside
/// it, naming the type: a hand-over that lets two threads in is caught where it happens, not as
/// a corrupted event later. A release build skips the mark (two atomics per access on the hot
/// path), so its one `@unchecked Sendable` is this type's, as `NIOLoopBound`'s is in swift-nio.
public final class Exclusive<Value>: @unchecked Sendable {
    @usableFromInline var value: Value
    @usableFromInline let inUse = Atomic<Bool>(false)

    public init(_ value: Value) { self.value = value }

    /// Runs `body` with the value; in a debug build, traps if another thread is using it now.
    @inlinable
    public func withValue<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        #if DEBUG
        precondition(!inUse.exchange(true, ordering: .acquiring), "Exclusive<\(Value.self)> used by two threads at once")
        defer { inUse.store(false, ordering: .releasing) }
        #endif
        return try body(&value)
    }
}
