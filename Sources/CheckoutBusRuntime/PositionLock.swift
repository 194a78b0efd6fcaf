#if canImport(Glibc)
import Glibc
#endif

/// An exclusive `flock` on a file that holds (or stands for) a subscriber's position: a worker
/// holds its store's for as long as it runs, and `checkoutbus cursor set` takes it before moving a
/// position, so a position is never moved under a running worker (docs/commands.md, "cursor").
///
/// `flock` locks are independent of SQLite's own (`fcntl`) locks on the same file, and are released
/// when the holder exits, even by `kill -9`. Not `Sendable`: owned by whoever took it; the
/// descriptor is closed in `deinit`.
public final class PositionLock {
    public let path: String
    private let fd: Int32

    /// Why a lock was not taken. `Sendable`.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        /// Another process holds it (as opposed to the file not opening).
        public let held: Bool
        public let description: String
    }

    /// Takes the lock on `path` (created if missing, mode 0644), waiting up to `waitMilliseconds`
    /// for a holder to let go (a worker restarted right after `kill -9` of the last one may start
    /// while the old process is still exiting).
    /// - Parameter what: how the holder is named in the error (`the fulfilment store`).
    /// - Throws: ``Failure`` when the file cannot be opened or another process holds the lock.
    public init(path: String, what: String, waitMilliseconds: Int = 0) throws(Failure) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw Failure(held: false, description: "cannot open \(path) to lock \(what): \(String(cString: strerror(errno)))")
        }
        var waited = 0
        var code: Int32 = 0
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { break }
            code = errno
            guard (code == EWOULDBLOCK || code == EINTR) && waited < waitMilliseconds else { break }
            // A sleep cut short by a signal only means the next try comes sooner.
            var pause = timespec(tv_sec: 0, tv_nsec: 50_000_000)
            var left = timespec()
            while nanosleep(&pause, &left) != 0 && errno == EINTR { pause = left }
            waited += 50
            code = 0
        }
        guard code == 0 else {
            PositionLock.closeChecked(fd)
            throw Failure(held: code == EWOULDBLOCK,
                          description: code == EWOULDBLOCK ? "\(what) \(path) is in use by a running process (it holds its lock)"
                              : "cannot lock \(what) \(path): \(String(cString: strerror(code)))")
        }
        self.fd = fd
    }

    /// Whether ``path`` still names the file this lock holds open: nil when it does, else why not.
    ///
    /// A store removed under its holder (its directory deleted, the file renamed or replaced) keeps
    /// taking writes into a file nobody can open again, while a second holder can lock whatever is
    /// at the path now. A holder checks this before it writes and stops when it is not so.
    public func pathStillNamesLockedFile() -> String? {
        var held = stat()
        guard fstat(fd, &held) == 0 else {
            return "cannot fstat the lock of \(path): \(String(cString: strerror(errno)))"
        }
        var named = stat()
        guard stat(path, &named) == 0 else {
            let code = errno
            return code == ENOENT ? "\(path) was removed (or a directory above it) while this process held it"
                : "cannot stat \(path): \(String(cString: strerror(code)))"
        }
        guard held.st_dev == named.st_dev && held.st_ino == named.st_ino else {
            return "\(path) was replaced by another file while this process held it"
        }
        return nil
    }

    /// Closing also lets the lock go; a failed close (EIO, EBADF) changes nothing we can act on,
    /// and the lock goes with the process anyway.
    private static func closeChecked(_ fd: Int32) {
        if close(fd) != 0 && errno != EINTR {
            FileHandleWriter.standardError("PositionLock: close: \(String(cString: strerror(errno)))\n")
        }
    }

    deinit { PositionLock.closeChecked(fd) }
}
