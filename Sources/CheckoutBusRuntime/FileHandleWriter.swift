#if canImport(Glibc)
import Glibc
#endif

/// Unbuffered writes to stdout and stderr, whole strings at a time, for executables.
/// `print` is for executables' help text only; library code writes through these or ``BusLogger``.
public enum FileHandleWriter {
    public static func standardOutput(_ text: String) { writeAll(1, text) }
    public static func standardError(_ text: String) { writeAll(2, text) }

    /// Writes bytes to a file descriptor, retrying short writes and `EINTR`.
    public static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        writeAll(fd, &bytes)
    }

    public static func writeAll(_ fd: Int32, _ bytes: inout [UInt8]) {
        bytes.withUnsafeBytes { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 {
                    if errno == EINTR { continue }
                    return
                }
                off += n
            }
        }
    }
}
