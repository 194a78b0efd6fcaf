#if canImport(Glibc)
import Glibc
#endif
import ZeroMQ
import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus send`: JSON Lines from files or stdin, one ZeroMQ message per non-empty line.
///
/// Not `Sendable`; runs on the calling thread.
public struct SendCommand {
    public static let help: String = """
        checkoutbus send — send raw events (JSON Lines) to a daemon's ingest socket.

        USAGE: checkoutbus send [--to ENDPOINT | --shards E0,E1,…] [--timeout SECONDS] [FILE ...]
               checkoutbus send --acked [--to ENDPOINT | --shards A0,A1,…] [--ack-log PATH] [--window N]
                                [--timeout SECONDS] [FILE ...]

          FILE                 JSONL files; none or `-` reads stdin. Each non-empty line is one event,
                               sent as is (raw SDK payload or the ingest wrapper).
          --to ENDPOINT        the daemon's --ingest endpoint (default tcp://127.0.0.1:7700), or with
                               --acked its --ingest-acked endpoint (default tcp://127.0.0.1:7701)
          --shards E0,E1,…     send each event to the shard that owns its checkout (docs/sharding.md):
                               the shards' --ingest endpoints, or with --acked their --ingest-acked
                               endpoints, in shard order (shard 0 first). Input that does not decode
                               goes to the shard given by a hash of its bytes, which dead-letters it
          --timeout SECONDS    give up if the daemon cannot be reached, does not take the events, or
                               (--acked) sends no acknowledgement for this long (default 10)
          --acked              wait for the daemon to answer each event once it is on disk: with
                               its seq, or with the dead-letter reason (docs/durability.md)
          --ack-log PATH       with --acked: one line `<seq> <event_id>` per acknowledged event
                               (`-` for a suppressed duplicate's seq or a missing event_id); with
                               --shards `<shard>:<seq> <event_id>`, seq being per shard
          --window N           with --acked: events in flight at most (default 1000)
        \(CurveClientKeys.help)

        Without --acked, `sent=N` counts events handed to ZeroMQ, delivered as long as the daemon takes
        them within --timeout when send exits; nothing confirms they were journaled. With --acked, each
        one is confirmed on disk (or rejected with its reason).

        Prints `sent=N` on stderr; with --acked `sent=N acked=M rejected=K`, counting every shard; with
        --shards followed by ` by_shard=N0,N1,…` (events sent to each shard). Exits 1 if a daemon could
        not be reached in time, or (--acked) if any event was rejected or left unanswered.
        """

    public var endpoint = "tcp://127.0.0.1:7700"
    public var files: [String] = []
    public var timeoutSeconds = 10
    public var acked = false
    public var ackLog: String?
    public var window = 1000
    /// CURVE client keys (`--curve-key`, `--curve-server`), when the daemon requires them.
    public var curve: CurveClientKeys?
    /// With `--shards`: every shard's endpoint, in shard order; each event goes to its owner.
    public var shards: [String]?

    /// Where events go: the one `--to` endpoint, or every shard's.
    package var endpoints: [String] { shards ?? [endpoint] }

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(arguments, valued: Set(["to", "shards", "timeout", "ack-log", "window"]).union(CurveClientKeys.flags),
                                            switches: ["acked"])
        curve = try CurveClientKeys.parse(args)
        acked = args.has("acked")
        if acked { endpoint = "tcp://127.0.0.1:7701" }
        if let v = args.value("to") { endpoint = v }
        if let list = args.value("shards") {
            guard args.value("to") == nil else { throw .init("give --to (one daemon) or --shards (every shard), not both") }
            shards = try ShardRouter.parseEndpoints(list, flag: "shards")
        }
        timeoutSeconds = try args.int("timeout", default: 10, in: 1...86_400)
        window = try args.int("window", default: 1000, in: 1...1_000_000)
        ackLog = args.value("ack-log")
        if ackLog != nil && !acked { throw .init("--ack-log needs --acked") }
        files = args.positionals
    }

    /// Opens every source as a line reader, in order; nil (after a message) when one cannot be opened.
    package func openSources() -> [LineReader]? {
        var readers: [LineReader] = []
        for path in files.isEmpty ? ["-"] : files {
            if path == "-" {
                readers.append(LineReader(fd: 0))
                continue
            }
            let fd = open(path, O_RDONLY)
            guard fd >= 0 else {
                FileHandleWriter.standardError("checkoutbus send: cannot open \(path): \(String(cString: strerror(errno)))\n")
                return nil
            }
            readers.append(LineReader(fd: fd))
        }
        return readers
    }

    /// Sends every line. - Returns: the process exit code.
    public func run() -> Int32 {
        guard let readers = openSources() else { return 1 }
        if acked { return AckedSender(command: self).run(readers) }
        defer { for r in readers where r.fd != 0 { close(r.fd) } }
        do {
            let pushers = try endpoints.map { try IngestPusher(endpoint: $0, timeoutSeconds: timeoutSeconds, curve: curve) }
            let router = ShardRouter(count: pushers.count)
            var sentByShard = [Int](repeating: 0, count: pushers.count)
            var sent = 0
            for reader in readers {
                while let line = reader.nextLine() {
                    if LineReader.isBlank(line) { continue }
                    let shard = router.route(line).shard
                    guard try pushers[shard].send(line) else {
                        FileHandleWriter.standardError(pushers[shard].unreachable(command: "send", sent: sent))
                        return 1
                    }
                    sent += 1
                    sentByShard[shard] += 1
                }
            }
            let byShard = shards == nil ? "" : " by_shard=" + sentByShard.map(String.init).joined(separator: ",")
            FileHandleWriter.standardError("sent=\(sent)\(byShard)\n")
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus send: \(error)\n")
            return 1
        }
    }
}

/// A PUSH connection to a daemon's ingest socket that gives up after a timeout instead of blocking
/// forever when no daemon is there. Used by `send` and `replay`. Not `Sendable`.
package final class IngestPusher {
    package let endpoint: String
    package let timeoutSeconds: Int
    private let socket: ZMQSocket
    private let usesCurve: Bool

    package init(endpoint: String, timeoutSeconds: Int, curve: CurveClientKeys? = nil) throws {
        self.endpoint = endpoint
        self.timeoutSeconds = timeoutSeconds
        usesCurve = curve != nil
        socket = try ZMQSocket(context: try ZMQContext(), type: .push)
        try curve?.apply(to: socket)
        // Queue only on a completed connection: a daemon that refuses us (a CURVE key it does not
        // list) makes `send` fail after the timeout instead of queueing into the void.
        try socket.setOption(.immediate, 1)
        try socket.setOption(.sendTimeout, Int32(timeoutSeconds * 1000))
        try socket.setOption(.linger, Int32(timeoutSeconds * 1000))
        try socket.setOption(.sendHighWaterMark, 100_000)
        try socket.connect(endpoint)
    }

    /// Sends one event. - Returns: `false` when no daemon took it within the timeout.
    package func send(_ bytes: [UInt8]) throws -> Bool {
        try bytes.withUnsafeBytes { try socket.send($0) }
    }

    /// The message for a daemon that did not take events.
    package func unreachable(command: String, sent: Int) -> String {
        "checkoutbus \(command): no daemon took events at \(endpoint) within \(timeoutSeconds)s"
            + (usesCurve ? CurveClientKeys.refusalHint : "")
            + "; sent=\(sent)\n"
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

    /// Whether a line holds only spaces, tabs or a carriage return (skipped by `send` and `replay`).
    public static func isBlank(_ line: [UInt8]) -> Bool {
        line.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
    }

    private var pushedBack: [UInt8]?

    /// Returns `line` again from the next ``nextLine()`` (a send that has to wait).
    public func pushBack(_ line: [UInt8]) { pushedBack = line }

    /// Whether every line was read.
    public var isExhausted: Bool { eof && start >= end && pushedBack == nil }

    public func nextLine() -> [UInt8]? {
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
