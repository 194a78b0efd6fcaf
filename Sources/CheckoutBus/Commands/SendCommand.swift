#if canImport(Glibc)
import Glibc
#endif
import ZeroMQ

/// `checkoutbus send`: JSON Lines from files or stdin, one ZeroMQ message per non-empty line.
///
/// Not `Sendable`; runs on the calling thread.
public struct SendCommand {
    public static let help = """
        checkoutbus send — send raw events (JSON Lines) to a daemon's ingest socket.

        USAGE: checkoutbus send [--to ENDPOINT] [--timeout SECONDS] [FILE ...]

          FILE                 JSONL files; none or `-` reads stdin. Each non-empty line is one event,
                               sent as is (raw SDK payload or the ingest wrapper).
          --to ENDPOINT        the daemon's --ingest endpoint (default tcp://127.0.0.1:7700)
          --timeout SECONDS    give up if the daemon cannot be reached or does not take the
                               events within this time (default 10)

        Prints `sent=N` on stderr. Exits 1 if the daemon could not be reached in time.
        """

    public var endpoint = "tcp://127.0.0.1:7700"
    public var files: [String] = []
    public var timeoutSeconds = 10

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(arguments, valued: ["to", "timeout"], switches: [])
        if let v = args.value("to") { endpoint = v }
        timeoutSeconds = try args.int("timeout", default: 10, in: 1...86_400)
        files = args.positionals
    }

    /// Sends every line. - Returns: the process exit code.
    public func run() -> Int32 {
        do {
            let context = try ZMQContext()
            let push = try ZMQSocket(context: context, type: .push)
            try push.setOption(.sendTimeout, Int32(timeoutSeconds * 1000))
            try push.setOption(.linger, Int32(timeoutSeconds * 1000))
            try push.setOption(.sendHighWaterMark, 100_000)
            try push.connect(endpoint)
            var sent = 0
            let sources = files.isEmpty ? ["-"] : files
            for path in sources {
                let reader: LineReader
                if path == "-" {
                    reader = LineReader(fd: 0)
                } else {
                    let fd = open(path, O_RDONLY)
                    guard fd >= 0 else {
                        FileHandleWriter.standardError("checkoutbus send: cannot open \(path): \(String(cString: strerror(errno)))\n")
                        return 1
                    }
                    reader = LineReader(fd: fd)
                }
                defer { if path != "-" { close(reader.fd) } }
                while let line = reader.nextLine() {
                    if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                    guard try line.withUnsafeBytes({ try push.send($0) }) else {
                        FileHandleWriter.standardError("checkoutbus send: no daemon took events at \(endpoint) within \(timeoutSeconds)s; sent=\(sent)\n")
                        return 1
                    }
                    sent += 1
                }
            }
            FileHandleWriter.standardError("sent=\(sent)\n")
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus send: \(error)\n")
            return 1
        }
    }
}

/// Reads lines (without the newline) from a file descriptor through a 64 KiB buffer; lines of any
/// length are returned whole. Not `Sendable`.
public final class LineReader {
    public let fd: Int32
    private var buffer = [UInt8](repeating: 0, count: 65_536)
    private var start = 0
    private var end = 0
    private var eof = false

    public init(fd: Int32) { self.fd = fd }

    public func nextLine() -> [UInt8]? {
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
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                eof = true
                continue
            }
            start = 0
            end = n
        }
    }
}
