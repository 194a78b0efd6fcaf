import Foundation
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// Everything `checkoutbusd` can be told, with the embedded defaults of DESIGN §2. `Sendable`.
///
/// Each property's initialiser (or that of the option struct holding it) is the one declaration
/// of its default; ``DaemonSetting/all`` names the flag, the configuration key and the help of
/// each, and ``parse(_:)`` of no arguments is this value.
package struct DaemonConfiguration: Sendable {
    /// Fire-and-forget ingest (PULL, bound).
    package var ingest = DefaultEndpoints.ingest
    /// Acknowledged ingest (ROUTER, bound): a reply per event once it is durable.
    package var ingestAcked = DefaultEndpoints.ingestAcked
    /// Typed topics out (XPUB, bound).
    package var publish = DefaultEndpoints.publish
    /// Replay from the journal, stats, subscriber reports (ROUTER, bound).
    package var control = DefaultEndpoints.control
    /// Prometheus metrics and health over HTTP (`HOST:PORT`), or nil (`--metrics off`).
    package var metrics: String? = "127.0.0.1:7780"
    /// Segment size, retention and group commit of the journal under `<data-dir>/journal`.
    package var journal = Journal.Options()
    /// Where the daemon keeps its files; created if missing.
    package var dataDirectory = "./checkoutbus-data"
    /// Decoding limits, privacy and state bounds: `EventProcessor.Options`' defaults, but for the
    /// window of event ids, which the daemon keeps (`--dedupe-window`) and a bare processor (tests,
    /// offline tools) does not.
    package var processor: EventProcessor.Options = {
        var options = EventProcessor.Options()
        options.dedupeWindow = 200_000
        return options
    }()
    /// An operator's raw code → stable code map (`--error-map`), read at start and on SIGHUP.
    package var errorMapPath: String?

    /// Reads the `--error-map` file at `path`.
    /// - Throws: ``DaemonError`` naming the file and, for a bad line, the line.
    package static func loadErrorMap(_ path: String) throws -> ErrorMap {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw DaemonError(.badSetting, "--error-map \(path): cannot be read: \(error.localizedDescription)")
        }
        do {
            return try ErrorMap(parsing: text)
        } catch {
            throw DaemonError(.badSetting, "--error-map \(path):\(error.line): \(error.reason)")
        }
    }

    /// Messages queued per subscriber before ZeroMQ drops for that subscriber (`ZMQ_SNDHWM`); lowered
    /// while many subscribers share ``subscriberMemoryBytes``.
    package var publishHighWaterMark: Int32 = 100_000
    /// What all subscribers' queues may hold together (`--subscriber-memory`): the publish
    /// high-water mark per subscriber is lowered so that ``maxSubscribers`` subscribers, each at
    /// its mark, stay within it (docs/security.md, "One memory budget").
    package var subscriberMemoryBytes = 4 << 30
    /// Subscribers (connections to the publish socket) the daemon keeps (`--max-subscribers`); more
    /// are cut as they are accepted.
    package var maxSubscribers = 128
    /// What all control clients' queued replies may hold together (`--control-memory`): replay
    /// pages are sized so that every connected client's queue, full, fits.
    package var controlMemoryBytes = 256 << 20
    /// Connections each ZeroMQ port keeps at most (`--max-connections`); more are cut as they are
    /// accepted. Lowered at start to fit the open-file limit, so the journal and `/healthz` always
    /// have descriptors.
    package var maxConnectionsPerSocket = 4096
    /// The largest message the ingest sockets take off the wire (`ZMQ_MAXMSGSIZE`); a producer that
    /// sends a larger one is disconnected as its size arrives. Messages between
    /// `--max-message-bytes` and this are dead-lettered `oversized` (`--max-wire-bytes`; default
    /// twice `--max-message-bytes`).
    package var maxWireBytes = 2 * EventProcessor.Options().maxMessageBytes
    /// Messages received and queued per producer connection, on both ingest sockets, before the
    /// daemon stops reading from that producer (`ZMQ_RCVHWM`): backpressure, never a drop.
    package var ingestHighWaterMark: Int32 = 1000
    /// Threads that prepare messages (parse, decode, hash) for the pipeline, the pipeline thread
    /// among them (`--pipeline-threads`); 0: half the cores, 1 to 8 (``resolvedPipelineThreads``).
    package var pipelineThreads = 0

    /// ``pipelineThreads``, with 0 resolved from the core count.
    package var resolvedPipelineThreads: Int {
        pipelineThreads > 0 ? pipelineThreads : DaemonConfiguration.pipelineThreads(cores: DaemonConfiguration.onlineCores)
    }

    /// The default for `cores` processors: half of them, 1 to 8. The other half is for libzmq's
    /// I/O thread, the journal's threads and the producers and subscribers on the same host.
    package static func pipelineThreads(cores: Int) -> Int { min(8, max(1, cores / 2)) }

    package static var onlineCores: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
    /// Milliseconds between `bus.heartbeat` messages.
    package var heartbeatMilliseconds = 1000
    /// A subscriber that has not reported for this long is `gone` (`--subscriber-gone-after`).
    package var subscriberGoneAfterSeconds = 15
    /// A gone subscriber is forgotten this long after it went (`--subscriber-expire-after`).
    package var subscriberExpireAfterSeconds = 3600
    /// Journal records replayed at start to rebuild per-checkout state (`--restore-records`).
    package var restoreRecords = 1_000_000
    /// The least severe level logged (`--log-level`; SIGHUP re-reads it from `--config`).
    package var logLevel = BusLogger.Level.info
    /// The configuration file read at start and again on SIGHUP (`--config`).
    package var configPath: String?
    /// CURVE: the daemon's secret key file (`--curve-secret-key`, or `CHECKOUTBUS_CURVE_SECRET_KEY`).
    package var curveSecretKeyPath: String?
    /// CURVE: directory of producers' public keys (`--curve-producers`, or `CHECKOUTBUS_CURVE_PRODUCERS`).
    package var curveProducersDirectory: String?
    /// CURVE: directory of subscribers' public keys (`--curve-subscribers`, or `CHECKOUTBUS_CURVE_SUBSCRIBERS`).
    package var curveSubscribersDirectory: String?
    /// Plain text on a non-loopback address is refused unless this is set (`--allow-insecure-remote`).
    package var allowInsecureRemote = false

    /// Whether CURVE is configured.
    package var curveEnabled: Bool { curveSecretKeyPath != nil }

    package init() {}

    /// Reads a configuration file: one `key = value` per line, keys named as the flags without
    /// dashes (`fsync-ms = 5`), `#` comments, blank lines ignored, values optionally in quotes.
    /// - Returns: the equivalent flags, to be placed before the command line's (which win).
    package static func configArguments(path: String) throws(CommandLineArguments.UsageError) -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw .init("cannot read the configuration file \(path)")
        }
        let keys = Dictionary(uniqueKeysWithValues: DaemonSetting.all.filter(\.inConfigFile).map { ($0.name, $0) })
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
            guard let setting = keys[key] else {
                let hint = CommandLineArguments.closest(key, among: keys.keys).map { "; did you mean \($0)?" } ?? ""
                throw .init("\(path):\(n + 1): unknown key \(key)\(hint) (keys are the daemon's flags without dashes)")
            }
            if setting.isSwitch {
                switch value {
                case "true", "yes", "on": out.append("--" + key)
                case "false", "no", "off": break
                default: throw .init("\(path):\(n + 1): \(key) must be true or false")
                }
                continue
            }
            out += ["--" + key, value]
        }
        return out
    }

    /// What SIGHUP may change without a restart: the log level, from the configuration file.
    package static func reloadableLogLevel(path: String) throws(CommandLineArguments.UsageError) -> BusLogger.Level? {
        let args = try CommandLineArguments(
            try configArguments(path: path), valued: DaemonSetting.valued, switches: DaemonSetting.switches)
        guard let v = args.value("log-level") else { return nil }
        guard let l = BusLogger.Level(name: v) else { throw .init("\(path): log-level must be debug, info, warning or error") }
        return l
    }

    /// Parses the daemon's flags (``DaemonSetting/all``), after those of the `--config` file.
    /// With no arguments, the result is `DaemonConfiguration()`.
    /// `--help` and `--version` are accepted here and handled by the executable before parsing.
    package static func parse(_ arguments: [String]) throws(CommandLineArguments.UsageError) -> DaemonConfiguration {
        let valued = DaemonSetting.valued
        let switches = DaemonSetting.switches.union(["help", "version"])
        let first = try CommandLineArguments(arguments, valued: valued, switches: switches)
        var all = arguments
        if let path = first.value("config") { all = try configArguments(path: path) + arguments }
        let args = try CommandLineArguments(all, valued: valued, switches: switches)
        let env = ProcessInfo.processInfo.environment
        var c = DaemonConfiguration()
        for setting in DaemonSetting.all {
            let value = setting.isSwitch
                ? (args.has(setting.name) ? "true" : nil)
                : args.value(setting.name) ?? setting.environment.flatMap { env[$0] }
            if let value { try setting.apply(&c, value) }
        }
        let curveParts = [c.curveSecretKeyPath, c.curveProducersDirectory, c.curveSubscribersDirectory]
        if curveParts.contains(where: { $0 != nil }) && curveParts.contains(where: { $0 == nil }) {
            throw .init("CURVE needs all three: --curve-secret-key, --curve-producers and --curve-subscribers")
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

    static func endpoint(_ v: String, _ flag: String) throws(CommandLineArguments.UsageError) -> String {
        guard v.hasPrefix("tcp://") || v.hasPrefix("ipc://") || v.hasPrefix("inproc://") else {
            throw .init("--\(flag) must be tcp://HOST:PORT (PORT may be *) or ipc://PATH, got \(v)")
        }
        return v.hasPrefix("tcp://") ? "tcp://" + bindable(String(v.dropFirst(6))) : v
    }

    /// `HOST:PORT` as libzmq can bind it: libzmq binds interface names and addresses, not host
    /// names, so `localhost` is 127.0.0.1.
    static func bindable(_ hostAndPort: String) -> String {
        hostAndPort.hasPrefix("localhost:") ? "127.0.0.1:" + hostAndPort.dropFirst("localhost:".count) : hostAndPort
    }

    /// `checkoutbusd --check-config FILE [flags]`: reads the configuration file (and any flags after
    /// it) as a start would, and what it names — the error map, the CURVE key and allowlists —
    /// without binding a port or touching the data directory (docs/configuration.md, "Check a
    /// configuration").
    /// - Returns: a one-line summary of what a start with it would do.
    /// - Throws: the first thing wrong, its file and line where it has one.
    package static func check(configFile path: String, flags: [String]) throws -> String {
        let c: DaemonConfiguration
        do {
            c = try parse(["--config", path] + flags)
        } catch {
            // A value's error names its flag: point at the file's line that set it.
            let at = lineOf(error.description, in: path, flags: flags).map { "\(path):\($0): " } ?? ""
            throw CommandLineArguments.UsageError(error.code, at + error.description)
        }
        var parts = ["ingest \(c.ingest)", "ingest-acked \(c.ingestAcked)", "publish \(c.publish)", "control \(c.control)",
                     "metrics \(c.metrics ?? "off")", "data-dir \(c.dataDirectory)"]
        if let map = c.errorMapPath {
            let loaded = try loadErrorMap(map)
            parts.append("error map \(loaded.count) entr\(loaded.count == 1 ? "y" : "ies")")
        }
        if let key = c.curveSecretKeyPath, let producers = c.curveProducersDirectory, let subscribers = c.curveSubscribersDirectory {
            _ = try ZMQCurveKeyPair.readSecretKey(path: key)
            let lists = try CurveAllowlists(producersDirectory: producers, subscribersDirectory: subscribers)
            parts.append("CURVE on (\(lists.counts.producers) producer keys, \(lists.counts.subscribers) subscriber keys)")
        } else {
            parts.append("CURVE off")
        }
        return "\(path): ok: " + parts.joined(separator: ", ")
    }

    /// The line of the configuration file at `path` that sets the flag a message starts with
    /// (`--fsync-ms must be …`), if the file sets it.
    static func lineOf(_ message: String, in path: String, flags: [String] = []) -> Int? {
        guard message.hasPrefix("--"), let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let flag = String(message.dropFirst(2).prefix { $0 != " " && $0 != "," && $0 != ":" })
        // A flag given after the file is what was used: the file is not to blame.
        if flags.contains(where: { $0 == "--" + flag || $0.hasPrefix("--" + flag + "=") }) { return nil }
        var found: Int?
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            guard let eq = line.firstIndex(of: "=") else { continue }
            // The last line that sets it is the one in force.
            if line[..<eq].trimmingCharacters(in: .whitespaces) == flag { found = n + 1 }
        }
        return found
    }

    /// The daemon's setting `name` as a flag (``CommandOption``), for a tool that takes the same flag.
    package static func option(_ name: String) -> CommandOption { DaemonSetting.option(name) }

    /// Every setting as a flag, in the order of `--help` (without `--help`, `--version` and
    /// `--check-config`, which the executable handles).
    package static var options: [CommandOption] { DaemonSetting.all.map(\.option) }

    /// Applies a value given for the daemon's setting `name` exactly as the daemon would (its checks,
    /// its `none`), for a tool that takes the same flag.
    package mutating func apply(_ name: String, _ value: String) throws(CommandLineArguments.UsageError) {
        guard let setting = DaemonSetting.all.first(where: { $0.name == name }) else { preconditionFailure("no daemon setting --\(name)") }
        try setting.apply(&self, value)
    }

    /// `checkoutbusd --help`: every setting of ``DaemonSetting/all`` with its default.
    package static var help: String { DaemonSetting.helpText }
}
