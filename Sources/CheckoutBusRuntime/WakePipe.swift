#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking pipe that one thread writes a byte to and another polls: wakes a thread that
/// sleeps in `poll`/`zmq_poll` (the pipeline, the control thread, the HTTP thread, a producer's
/// socket thread).
///
/// `Sendable`: two file descriptors, written and read with single system calls. ``signal()`` never
/// blocks (a full pipe already means "woken"). Closed by ``close()``, once no thread uses it.
public final class WakePipe: Sendable {
    /// Readable while a signal is pending; poll it.
    public let readFD: Int32
    private let writeFD: Int32

    /// - Throws: ``WakePipeError`` when no pipe can be made (out of file descriptors).
    public init(_ purpose: String) throws(WakePipeError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw WakePipeError(errno: errno, description: "cannot create the \(purpose) pipe: \(String(cString: strerror(errno)))")
        }
        // Non-blocking, checked: ``drain()`` relies on it (a blocking read of an empty pipe would
        // hang its thread for good).
        for fd in fds {
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
                let code = errno
                Glibc.close(fds[0])
                Glibc.close(fds[1])
                let reason = String(cString: strerror(code))
                throw WakePipeError(errno: code, description: "cannot set up the \(purpose) pipe: \(reason)")
            }
        }
        readFD = fds[0]
        writeFD = fds[1]
    }

    /// Makes ``readFD`` readable.
    public func signal() {
        var one: UInt8 = 1
        _ = write(writeFD, &one, 1)
    }

    /// Reads every pending signal, so ``readFD`` polls quiet again.
    public func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while bytes.withUnsafeMutableBytes({ read(readFD, $0.baseAddress, 64) }) > 0 {}
    }

    public func close() {
        Glibc.close(readFD)
        Glibc.close(writeFD)
    }
}

/// No pipe could be made: the system's `errno` (`EMFILE`, `ENFILE`) and what it was for. `Sendable`.
public struct WakePipeError: Error, CustomStringConvertible, Sendable {
    public let errno: Int32
    public let description: String
}
