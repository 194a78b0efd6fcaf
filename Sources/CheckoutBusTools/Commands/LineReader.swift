#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Reads lines (without the newline) from a file descriptor through a 64 KiB buffer; lines of any
/// length are returned whole. A descriptor in non-blocking mode (a standard input inherited so from
/// a shell or a parent process) is waited on with `poll` when it has nothing yet, as a blocking
/// one would wait in `read`. Not `Sendable`.
package final class LineReader {
    package let fd: Int32
    /// What the input is called in an error: its path, or `standard input`.
    private let name: String
    private var buffer = [UInt8](repeating: 0, count: 65_536)
    private var start = 0
    private var end = 0
    private var eof = false

    package init(fd: Int32, name: String? = nil) {
        self.fd = fd
        self.name = name ?? (fd == 0 ? "standard input" : "the input")
    }

    /// Whether a line holds only spaces, tabs or a carriage return (skipped by `send` and `replay`).
    package static func isBlank(_ line: [UInt8]) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }

    private var pushedBack: [UInt8]?

    /// Returns `line` again from the next ``nextLine()`` (a send that has to wait).
    package func pushBack(_ line: [UInt8]) { pushedBack = line }

    /// Whether every line was read.
    package var isExhausted: Bool { eof && start >= end && pushedBack == nil }

    /// The next line, nil at the end of the input.
    /// - Throws: ``ToolError`` when the input cannot be read: an error is never taken for the end,
    ///   which would send part of a file and exit as if all of it went.
    package func nextLine() throws(ToolError) -> [UInt8]? {
        if let line = pushedBack {
            pushedBack = nil
            return line
        }
        var line: [UInt8] = []
        while true {
            if start < end {
                if let nl = buffer[start..<end].firstIndex(of: 0x0A) {
                    line.append(contentsOf: buffer[start..<nl])
                    start = nl + 1
                    return line
                }
                line.append(contentsOf: buffer[start..<end])
                start = end
            }
            if eof { return line.isEmpty ? nil : line }
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK {
                    try waitReadable()
                    continue
                }
                throw ToolError("cannot read \(name): \(String(cString: strerror(code)))")
            }
            if n == 0 {
                eof = true
                continue
            }
            start = 0
            end = n
        }
    }

    /// Waits until a non-blocking descriptor can be read (data, its end, or an error that the next
    /// `read` reports).
    private func waitReadable() throws(ToolError) {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&entry, 1, -1) < 0 {
            let code = errno
            guard code == EINTR else { throw ToolError("cannot wait for \(name): \(String(cString: strerror(code)))") }
        }
    }
}
