import Foundation
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// Everything `checkoutbusd` can be told, with the embedded defaults of DESIGN §2. `Sendable`.
public struct DaemonConfiguration: Sendable {
    /// Fire-and-forget ingest (PULL, bound).
    public var ingest = "tcp://127.0.0.1:7700"
    /// Acknowledged ingest (ROUTER, bound): a reply per event once it is durable.
    public var ingestAcked = "tcp://127.0.0.1:7701"
    /// Typed topics out (XPUB, bound).
    public var publish = "tcp://127.0.0.1:7702"
    /// Replay from the journal, stats, subscriber reports (ROUTER, bound).
    public var control = "tcp://127.0.0.1:7703"
    /// Prometheus metrics and health over HTTP (`HOST:PORT`), or nil (`--metrics off`).
    public var metrics: String? = "127.0.0.1:7780"
    /// Segment size, retention and group commit of the journal under `<data-dir>/journal`.
    public var journal = Journal.Options()
    /// Where the daemon keeps its files; created if missing.
    public var dataDirectory = "./checkoutbus-data"
    /// Decoding limits, privacy and state bounds.
    public var processor = EventProcessor.Options()
    /// Messages queued per subscriber before ZeroMQ drops for that subscriber (`ZMQ_SNDHWM`).
    public var publishHighWaterMark: Int32 = 100_000
    /// The largest message the ingest sockets take off the wire (`ZMQ_MAXMSGSIZE`); a producer that
    /// sends a larger one is disconnected as its size arrives. Messages between
    /// `--max-message-bytes` and this are dead-lettered `oversized` (`--max-wire-bytes`; default
    /// twice `--max-message-bytes`).
    public var maxWireBytes = 2 << 20
    /// Messages received and queued per producer connection, on both ingest sockets, before the
    /// daemon stops reading from that producer (`ZMQ_RCVHWM`): backpressure, never a drop.
    public var ingestHighWaterMark: Int32 = 1000
    /// Milliseconds between `bus.heartbeat` messages.
    public var heartbeatMilliseconds = 1000
    /// Journal records replayed at start to rebuild per-checkout state (`--restore-records`).
    public var restoreRecords = 1_000_000
    public var logLevel = BusLogger.Level.info
    /// The configuration file read at start and again on SIGHUP (`--config`).
    public var configPath: String?
    /// CURVE: the daemon's secret key file (`--curve-secret-key`, or `CHECKOUTBUS_CURVE_SECRET_KEY`).
    public var curveSecretKeyPath: String?
    /// CURVE: directory of producers' public keys (`--curve-producers`, or `CHECKOUTBUS_CURVE_PRODUCERS`).
    public var curveProducersDirectory: String?
    /// CURVE: directory of subscribers' public keys (`--curve-subscribers`, or `CHECKOUTBUS_CURVE_SUBSCRIBERS`).
    public var curveSubscribersDirectory: String?
    /// Plain text on a non-loopback address is refused unless this is set (`--allow-insecure-remote`).
    public var allowInsecureRemote = false

    /// Whether CURVE is configured.
    public var curveEnabled: Bool { curveSecretKeyPath != nil }

    package static let switchKeys: Set<String> = ["allow-insecure-remote"]

    public init() {}

    /// Reads a configuration file: one `key = value` per line, keys named as the flags without
    /// dashes (`fsync-ms = 5`), `#` comments, blank lines ignored, values optionally in quotes.
    /// - Returns: the equivalent flags, to be placed before the command line's (which win).
    public static func configArguments(path: String) throws(CommandLineArguments.UsageError) -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw .init("cannot read the configuration file \(path)")
        }
        var out: [String] = []
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            guard let eq = trimmed.firstIndex(of: "=") else {
                throw .init("\(path):\(n + 1): expected `key = value`, got \(trimmed)")
            }
            let key = trimmed[..<eq].trimmingCharacters(in: .whitespaces)
            var value = trimmed[trimmed.index(after: eq)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            if switchKeys.contains(key) {
                switch value {
                case "true", "yes", "on": out.append("--" + key)
                case "false", "no", "off": break
                default: throw .init("\(path):\(n + 1): \(key) must be true or false")
                }
                continue
            }
            guard valued.contains(key), key != "config" else {
                throw .init("\(path):\(n + 1): unknown key \(key) (keys are the daemon's flags without dashes)")
            }
            out += ["--" + key, value]
        }
        return out
    }

    /// What SIGHUP may change without a restart: the log level, from the configuration file.
    public static func reloadableLogLevel(path: String) throws(CommandLineArguments.UsageError) -> BusLogger.Level? {
        let args = try CommandLineArguments(try configArguments(path: path), valued: valued, switches: switchKeys)
        guard let v = args.value("log-level") else { return nil }
        guard let l = BusLogger.Level(name: v) else { throw .init("\(path): log-level must be debug, info, warning or error") }
        return l
    }

    package static let valued: Set<String> = [
        "ingest", "ingest-acked", "publish", "control", "data-dir", "buyer-data", "max-message-bytes",
        "max-checkouts", "checkout-ttl", "publish-hwm", "ingest-hwm", "heartbeat-ms", "log-level", "fsync-ms", "segment-bytes",
        "journal-cache-bytes", "retain-bytes", "retain-hours", "metrics", "config", "curve-secret-key", "curve-producers",
        "curve-subscribers", "dedupe-window", "shard", "restore-records", "max-wire-bytes",
    ]

    /// Parses the daemon's flags.
    /// `--help` and `--version` are accepted here and handled by the executable before parsing.
    public static func parse(_ arguments: [String]) throws(CommandLineArguments.UsageError) -> DaemonConfiguration {
        let switches = switchKeys.union(["help", "version"])
        let first = try CommandLineArguments(arguments, valued: valued, switches: switches)
        var c = DaemonConfiguration()
        var all = arguments
        if let path = first.value("config") {
            c.configPath = path
            all = try configArguments(path: path) + arguments
        }
        let args = try CommandLineArguments(all, valued: valued, switches: switches)
        let env = ProcessInfo.processInfo.environment
        c.curveSecretKeyPath = args.value("curve-secret-key") ?? env["CHECKOUTBUS_CURVE_SECRET_KEY"]
        c.curveProducersDirectory = args.value("curve-producers") ?? env["CHECKOUTBUS_CURVE_PRODUCERS"]
        c.curveSubscribersDirectory = args.value("curve-subscribers") ?? env["CHECKOUTBUS_CURVE_SUBSCRIBERS"]
        let curveParts = [c.curveSecretKeyPath, c.curveProducersDirectory, c.curveSubscribersDirectory]
        if curveParts.contains(where: { $0 != nil }) && curveParts.contains(where: { $0 == nil }) {
            throw .init("CURVE needs all three: --curve-secret-key, --curve-producers and --curve-subscribers")
        }
        c.allowInsecureRemote = args.has("allow-insecure-remote")
        if let v = args.value("ingest") { c.ingest = try endpoint(v, "ingest") }
        if let v = args.value("ingest-acked") { c.ingestAcked = try endpoint(v, "ingest-acked") }
        if let v = args.value("publish") { c.publish = try endpoint(v, "publish") }
        if let v = args.value("control") { c.control = try endpoint(v, "control") }
        if let v = args.value("metrics") {
            if v == "off" {
                c.metrics = nil
            } else {
                guard let colon = v.lastIndex(of: ":"), colon != v.startIndex, !v[v.index(after: colon)...].isEmpty,
                    !v.contains("/")
                else { throw .init("--metrics must be HOST:PORT (PORT may be *) or off, got \(v)") }
                c.metrics = bindable(v)
            }
        }
        c.journal.fsyncMilliseconds = try args.int("fsync-ms", default: 2, in: 0...10_000)
        c.journal.segmentBytes = try args.int("segment-bytes", default: 64 << 20, in: 4096...(1 << 40))
        switch args.value("journal-cache-bytes") {
        case nil: break
        case "kernel": c.journal.cacheBytes = nil
        case let v?:
            guard let n = Int(v), (0...(1 << 40)).contains(n) else {
                throw .init("--journal-cache-bytes must be a byte count (0...\(1 << 40)) or kernel, got \(v)")
            }
            c.journal.cacheBytes = n
        }
        c.journal.retainBytes = Int64(try args.int("retain-bytes", default: 4 << 30, in: 4096...(1 << 50)))
        c.journal.retainSeconds = try args.int("retain-hours", default: 168, in: 1...87_600) * 3600
        if let v = args.value("data-dir") { c.dataDirectory = v }
        switch args.value("buyer-data") {
        case nil, "redacted": c.processor.keepBuyerData = false
        case "full": c.processor.keepBuyerData = true
        case let other?: throw .init("--buyer-data must be redacted or full, got \(other)")
        }
        c.processor.maxMessageBytes = try args.int("max-message-bytes", default: 1 << 20, in: 64...(256 << 20))
        let maxMessage = c.processor.maxMessageBytes
        c.maxWireBytes = try args.int("max-wire-bytes", default: 2 * maxMessage, in: maxMessage...(512 << 20))
        c.processor.maxCheckouts = try args.int("max-checkouts", default: 1_000_000, in: 1...100_000_000)
        c.processor.checkoutTTLSeconds = UInt32(try args.int("checkout-ttl", default: 86_400, in: 1...31_536_000))
        c.processor.dedupeWindow = try args.int("dedupe-window", default: 200_000, in: 0...50_000_000)
        c.restoreRecords = try args.int("restore-records", default: 1_000_000, in: 0...100_000_000)
        if let v = args.value("shard") {
            guard let m = ShardMap(v) else {
                throw .init("--shard must be I/N with 0 <= I < N <= \(ShardMap.maxCount) (shard 1 of 3 is 1/3), got \(v)")
            }
            c.processor.shard = m
        }
        c.publishHighWaterMark = Int32(try args.int("publish-hwm", default: 100_000, in: 0...10_000_000))
        c.ingestHighWaterMark = Int32(try args.int("ingest-hwm", default: 1000, in: 1...10_000_000))
        c.heartbeatMilliseconds = try args.int("heartbeat-ms", default: 1000, in: 10...60_000)
        if let v = args.value("log-level") {
            guard let l = BusLogger.Level(name: v) else { throw .init("--log-level must be debug, info, warning or error") }
            c.logLevel = l
        }
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
        if !c.allowInsecureRemote {
            var plain: [(String, String)] = []
            if !c.curveEnabled {
                plain += [("ingest", c.ingest), ("ingest-acked", c.ingestAcked), ("publish", c.publish), ("control", c.control)]
            }
            if let m = c.metrics { plain.append(("metrics", "tcp://" + m)) }
            for (flag, endpoint) in plain where !isLoopback(endpoint) {
                // CURVE does not cover the metrics' HTTP: only the flag can allow it off loopback.
                let remedy = flag == "metrics" && c.curveEnabled
                    ? "bind it to loopback, or pass --allow-insecure-remote"
                    : "enable CURVE (--curve-secret-key, --curve-producers, --curve-subscribers) or pass --allow-insecure-remote"
                throw .init("--\(flag) \(endpoint) is not a loopback address and would carry plain text\(flag == "metrics" ? " (HTTP)" : ""); "
                    + remedy)
            }
        }
        return c
    }

    /// Whether an endpoint is reachable only from this host: ipc, inproc, or tcp on a loopback address.
    package static func isLoopback(_ endpoint: String) -> Bool {
        guard endpoint.hasPrefix("tcp://") else { return true }
        var host = String(endpoint.dropFirst(6))
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return host.hasPrefix("127.") || host == "localhost" || host == "::1"
    }

    package static func endpoint(_ v: String, _ flag: String) throws(CommandLineArguments.UsageError) -> String {
        guard v.hasPrefix("tcp://") || v.hasPrefix("ipc://") || v.hasPrefix("inproc://") else {
            throw .init("--\(flag) must be tcp://HOST:PORT (PORT may be *) or ipc://PATH, got \(v)")
        }
        return v.hasPrefix("tcp://") ? "tcp://" + bindable(String(v.dropFirst(6))) : v
    }

    /// `HOST:PORT` as libzmq can bind it: libzmq binds interface names and addresses, not host
    /// names, so `localhost` is 127.0.0.1.
    package static func bindable(_ hostAndPort: String) -> String {
        hostAndPort.hasPrefix("localhost:") ? "127.0.0.1:" + hostAndPort.dropFirst("localhost:".count) : hostAndPort
    }

    public static let help = """
        checkoutbusd — the CheckoutBus daemon: ingests raw checkout lifecycle events over ZeroMQ,
        applies the lifecycle rules and publishes typed topics.

        USAGE: checkoutbusd [flags]

        Endpoints (tcp://HOST:PORT, tcp://127.0.0.1:* for a free port, or ipc://PATH):
          --ingest ENDPOINT          fire-and-forget ingest, PULL        (default tcp://127.0.0.1:7700)
          --ingest-acked ENDPOINT    acknowledged ingest, ROUTER: one reply per event once it is on
                                     disk                               (default tcp://127.0.0.1:7701)
          --publish ENDPOINT         typed topics out, XPUB             (default tcp://127.0.0.1:7702)
          --control ENDPOINT         replay from the journal, stats, ROUTER (default tcp://127.0.0.1:7703)
          --metrics HOST:PORT        Prometheus text at /metrics and health at /healthz over HTTP
                                     (default 127.0.0.1:7780; PORT may be *; off disables)

        Storage (the journal: docs/durability.md):
          --data-dir PATH            the daemon's files, created if missing (default ./checkoutbus-data);
                                     the journal lives in PATH/journal
          --fsync-ms N               group commit: at most one fdatasync per N ms (default 2); acked
                                     producers are answered after the fdatasync covering their event
          --segment-bytes N          close a journal segment at this size (default 67108864)
          --journal-cache-bytes N    keep only the newest N synced journal bytes in the page cache,
                                     dropping older pages after each fdatasync and a closed
                                     segment's at rotation, in steps of at least 1 MiB; kernel:
                                     never drop. Default 0: batches of 32 KiB or more are written
                                     with O_DIRECT, past the page cache, where the file system
                                     allows; smaller ones' pages are dropped, all but about the
                                     last MiB. Any other value writes every batch through the
                                     page cache
          --retain-bytes N           delete the oldest closed segments beyond this total (default 4294967296)
          --retain-hours N           delete closed segments older than this (default 168)

        Input and privacy:
          --buyer-data MODE          redacted (default): buyer and payment details become "[redacted]";
                                     full: envelopes keep them
          --max-message-bytes N      larger messages are dead-lettered as `oversized` (default 1048576)
          --max-wire-bytes N         a message larger than this disconnects its producer as soon as
                                     its size arrives, before it is read (default twice
                                     --max-message-bytes): one connection holds at most
                                     (--ingest-hwm + 1) of them in the daemon
          --ingest-hwm N             messages taken in per producer connection ahead of processing;
                                     past it the daemon stops reading from that producer, whose own
                                     queue then fills: backpressure, never a drop (default 1000)
          --dedupe-window N          remember the last N event ids (the wrapper's event_id): a retry of
                                     one is not published again, an acked producer gets the original
                                     seq with "duplicate":true (default 200000; 0 turns it off)

        Per-checkout state (suppression, repeat, after_complete):
          --max-checkouts N          checkouts tracked at once, least recently used evicted (default 1000000)
          --checkout-ttl SECONDS     forget a checkout idle this long (default 86400)
          --restore-records N        at start, rebuild this state from the journal's last N records:
                                     a repeated complete keeps its idempotency key, an unchanged
                                     update stays suppressed across a restart (default 1000000)

        Sharding (docs/sharding.md):
          --shard I/N                this daemon is shard I of N (0-based; default 0/1): it publishes
                                     the checkouts it owns (jump hash of checkout_id) and dead-letters
                                     the others as `wrong_shard`; its data dir keeps the I/N it began with

        Publishing:
          --publish-hwm N            messages queued per subscriber before ZeroMQ drops (default 100000)
          --heartbeat-ms N           interval of bus.heartbeat (default 1000)

        Security (docs/security.md):
          --curve-secret-key FILE    CURVE: the daemon's secret key (checkoutbus keygen); also
                                     $CHECKOUTBUS_CURVE_SECRET_KEY
          --curve-producers DIR      public keys (*.pub) allowed to send (ingest, ingest-acked); also
                                     $CHECKOUTBUS_CURVE_PRODUCERS
          --curve-subscribers DIR    public keys allowed to subscribe and use control; also
                                     $CHECKOUTBUS_CURVE_SUBSCRIBERS. SIGHUP reloads both directories
          --allow-insecure-remote    permit plain text (no CURVE; and the metrics HTTP) on non-loopback
                                     addresses; without it the daemon refuses to start

        Other:
          --config PATH              a file of `key = value` lines, keys named as these flags without
                                     dashes (`fsync-ms = 5`); flags on the command line win. SIGHUP
                                     re-reads it and applies what can change live: log-level (and
                                     the CURVE allowlist directories' contents)
          --log-level LEVEL          debug, info (default), warning, error; logs are key=value on stderr
          --help                     this text
          --version                  the version

        On start the first stdout line is one JSON object with the endpoints as bound:
          {"ready":true,"ingest":"tcp://127.0.0.1:40001","ingest_acked":"…","publish":"…","control":"…",…}
        SIGTERM or SIGINT: stop accepting, journal and publish what was received, sync, exit 0.
        """
}
