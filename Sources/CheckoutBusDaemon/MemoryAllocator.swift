#if canImport(Glibc)
import Glibc
#endif

/// The allocator serving the daemon's process, as the executable set it up: its name for the start
/// log, and how to hand freed memory back to the system once input has stopped for a while.
///
/// `checkoutbusd` links jemalloc (docs/performance.md, "One allocator per thread, not one lock
/// per message"); a process without it — a test, a tool running the daemon in-process — keeps
/// glibc's malloc, ``system``. `Sendable`: a name and a thread-safe function.
package struct MemoryAllocator: Sendable {
    /// What the start log calls it: `jemalloc 5.3.0-…`, or `glibc`.
    package let name: String
    /// Returns what the allocator holds freed to the system (called from the pipeline thread,
    /// once per idle spell, never per event).
    package let releaseFreed: @Sendable () -> Void

    package init(name: String, releaseFreed: @escaping @Sendable () -> Void) {
        self.name = name
        self.releaseFreed = releaseFreed
    }

    /// glibc's malloc; freed memory goes back through `malloc_trim`, which the Glibc module does
    /// not import (looked up instead; a no-op on another libc).
    package static let system = MemoryAllocator(name: "glibc") {
        _ = MemoryAllocator.mallocTrim?(0)
    }

    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()
}
