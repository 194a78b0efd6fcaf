#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Unbuffered writes to stdout and stderr, whole strings at a time, for executables.
/// `print` is for executables' help text only; library code writes through these or ``BusLogger``.
public enum FileHandleWriter {
    /// Set by a command-line tool at start: a write to standard output that fails (a full disk, a
    /// closed pipe when `SIGPIPE` is ignored) ends the process with status 1 and the reason on
    /// standard error, where it was dropped and the tool exited 0 with its output lost. Off for the
    /// daemon and the workers, whose standard output is their ready line and nothing they depend on.
    public static func exitOnStandardOutputFailure() { exitsOnStandardOutputFailure.store(true, ordering: .relaxed) }
    private static let exitsOnStandardOutputFailure = Atomic<Bool>(false)

    public static func standardOutput(_ text: String) { writeAll(1, text) }
    public static func standardError(_ text: String) { writeAll(2, text) }

    /// Writes bytes to a file descriptor, retrying short writes and `EINTR`.
    public static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        writeAll(fd, &bytes)
    }

    public static func writeAll(_ fd: Int32, _ bytes: inout [UInt8]) {
        let failure: Int32? = bytes.withUnsafeBytes { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    return code
                }
                off += n
            }
            return nil
        }
        if let failure, fd == 1, exitsOnStandardOutputFailure.load(ordering: .relaxed) {
            let program = CommandLine.arguments.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
            standardError("\(program): cannot write to standard output: \(String(cString: strerror(failure)))\n")
            exit(1)
        }
    }
}
