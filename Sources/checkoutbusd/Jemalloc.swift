import CJemalloc
import CheckoutBusDaemon

/// jemalloc, linked into this executable (the `CJemalloc` system library target): it serves every
/// allocation of the process, libzmq's included. With glibc's malloc the pipeline thread and
/// ZeroMQ's I/O thread each free, on every message, a buffer the other allocated — the envelope
/// frame one way, the received batch the other — and so take each other's arena lock, often
/// contended, a futex call and a context switch each time. jemalloc gives every thread a cache
/// for such sizes (docs/performance.md, "One allocator per thread, not one lock per message").
enum Jemalloc {
    /// The allocator when jemalloc serves this process's allocations (it holds allocated bytes
    /// once the daemon is built), else nil: linked but not interposed, the daemon says `glibc`.
    static func allocator() -> MemoryAllocator? {
        // A new epoch refreshes the statistics read below.
        var epoch: UInt64 = 1
        _ = mallctl("epoch", nil, nil, &epoch, MemoryLayout<UInt64>.size)
        var allocated = 0
        var allocatedSize = MemoryLayout<Int>.size
        guard mallctl("stats.allocated", &allocated, &allocatedSize, nil, 0) == 0, allocated > 0 else { return nil }
        var version: UnsafePointer<CChar>? = nil
        var versionSize = MemoryLayout<UnsafePointer<CChar>?>.size
        let name = mallctl("version", &version, &versionSize, nil, 0) == 0 && version != nil
            ? "jemalloc " + String(cString: version!) : "jemalloc"
        // Every arena's unused dirty pages back to the system (4096 is MALLCTL_ARENAS_ALL).
        return MemoryAllocator(name: name) { _ = mallctl("arena.4096.purge", nil, nil, nil, 0) }
    }
}
