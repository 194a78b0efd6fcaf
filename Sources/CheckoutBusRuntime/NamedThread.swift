import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts a thread the operating system knows by `name` (`/proc/PID/task/TID/comm`, `top -H`,
/// `perf`): Foundation's `Thread.name` on Linux does not reach the kernel. `checkoutbus bench`
/// reads each thread's CPU by that name. Names longer than 15 bytes are cut by the kernel.
public enum NamedThread {
    @discardableResult
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) -> Thread {
        let thread = Thread {
            #if canImport(Glibc)
            // pthread_setname_np is not visible to Swift here (a _GNU_SOURCE declaration);
            // the calling thread's own comm file is the same thing.
            let fd = open("/proc/thread-self/comm", O_WRONLY)
            if fd >= 0 {
                let bytes = Array(name.utf8.prefix(15))
                _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                close(fd)
            }
            #endif
            body()
        }
        thread.name = name
        thread.start()
        return thread
    }
}
