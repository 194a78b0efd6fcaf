#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus send`: JSON Lines from files or stdin, one ZeroMQ message per non-empty line.
///
/// Not `Sendable`; runs on the calling thread.
package struct SendCommand {
    static let to = BusOptions.to.defaulting(
        to: nil, note: "\(DefaultEndpoints.ingest); with --acked \(DefaultEndpoints.ingestAcked)").described(
        "the daemon's --ingest endpoint, or with --acked its --ingest-acked endpoint")
    static let shards = CommandOption(
        "shards", "E0,E1,…",
        help: "send each event to the shard that owns its checkout (docs/sharding.md): the shards' --ingest endpoints, "
            + "or with --acked their --ingest-acked endpoints, in shard order (shard 0 first); instead of --to. Input "
            + "that does not decode goes to the shard given by a hash of its bytes, which dead-letters it")
    static let timeout = BusOptions.timeout(
        10, "give up if the daemon cannot be reached, does not take the events, or (--acked) sends no acknowledgement for this long")
    static let acked = CommandOption(
        "acked", help: "wait for the daemon to answer each event once it is on disk: with its seq, or with the "
            + "dead-letter reason (docs/durability.md)")
    static let ackLog = CommandOption(
        "ack-log", "PATH",
        help: "with --acked: one line `<seq> <event_id>` per acknowledged event (`-` for a suppressed duplicate's seq "
            + "or a missing event_id); with --shards `<shard>:<seq> <event_id>`, seq being per shard")
    static let window = CommandOption(
        "window", "N", help: "with --acked: events in flight at most (1 to 10000, the acknowledgements the daemon "
            + "queues for one producer)", default: "1000")

    package static let spec = CommandSpec(
        "checkoutbus send", summary: "send raw events (JSON Lines) to a daemon's ingest socket.",
        operands: "[FILE …]",
        operandHelp: [.init("FILE", "JSONL files; none or `-` reads stdin. Each non-empty line is one event, sent as is "
                            + "(raw SDK payload or the ingest wrapper).")],
        options: [to, shards, timeout, acked, ackLog, window] + CurveClientKeys.options,
        notes: """
            Without --acked, `sent=N` counts events handed to ZeroMQ, delivered as long as the daemon takes
            them within --timeout when send exits; nothing confirms they were journaled. With --acked, each
            one is confirmed on disk (or rejected with its reason).

            Prints `sent=N` on stderr; with --acked `sent=N acked=M rejected=K`, counting every shard; with
            --shards followed by ` by_shard=N0,N1,…` (events sent to each shard). Exits 1 if a daemon could
            not be reached in time, or (--acked) if any event was rejected or left unanswered.
            """)
    package static var help: String { spec.help }

    package var endpoint: String
    package var files: [String]
    package var timeoutSeconds: Int
    package var acked: Bool
    package var ackLog: String?
    package var window: Int
    /// CURVE client keys (`--curve-key`, `--curve-server`), when the daemon requires them.
    package var curve: CurveClientKeys?
    /// With `--shards`: every shard's endpoint, in shard order; each event goes to its owner.
    package var shards: [String]?

    /// Where events go: the one `--to` endpoint, or every shard's.
    package var endpoints: [String] { shards ?? [endpoint] }

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        acked = args.has(Self.acked)
        endpoint = args.value(Self.to) ?? (acked ? DefaultEndpoints.ingestAcked : DefaultEndpoints.ingest)
        if let list = args.value(Self.shards) {
            guard !args.given(Self.to) else { throw .init("give --to (one daemon) or --shards (every shard), not both") }
            shards = try BusOptions.endpoints(list, flag: "shards")
        }
        timeoutSeconds = try args.int(Self.timeout, in: 1...86_400)
        window = try args.int(Self.window, in: 1...AcknowledgedProducer.Options.maxWindow)
        ackLog = args.value(Self.ackLog)
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
            readers.append(LineReader(fd: fd, name: path))
        }
        return readers
    }

    /// Sends every line. - Returns: the process exit code.
    package func run() -> Int32 {
        guard let readers = openSources() else { return 1 }
        if acked { return AckedSender(command: self).run(readers) }
        defer { for r in readers where r.fd != 0 { close(r.fd) } }
        do {
            let pushers = try endpoints.map { try IngestPusher(endpoint: $0, timeoutSeconds: timeoutSeconds, curve: curve) }
            let router = ShardRouter(count: pushers.count)
            var sentByShard = [Int](repeating: 0, count: pushers.count)
            var sent = 0
            for reader in readers {
                while let line = try reader.nextLine() {
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

