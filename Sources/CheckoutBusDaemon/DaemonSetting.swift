import CheckoutBusCore
import CheckoutBusRuntime

/// One setting of `checkoutbusd`: its flag (also its key in the configuration file), its help, and
/// how a value given for it applies to a ``DaemonConfiguration``.
///
/// ``all`` is the one list of the daemon's settings: the flag parser, `--help`, the configuration
/// file's reader and SIGHUP's reload all come from it. A setting's default is not written here: it
/// is what ``read`` finds in `DaemonConfiguration()`, whose property initialisers (and those of the
/// option structs it holds) declare each default once, so the help text, the parser and an
/// unconfigured daemon cannot disagree. A value, `Sendable`; read on whichever thread parses.
struct DaemonSetting: Sendable {
    /// Where a setting is listed in `--help` and docs/configuration.md.
    enum Section: CaseIterable, Sendable {
        case endpoints, storage, input, state, sharding, publishing, security, other

        var title: String {
            switch self {
            case .endpoints: "Endpoints (tcp://HOST:PORT, tcp://127.0.0.1:* for a free port, or ipc://PATH):"
            case .storage: "Storage (the journal: docs/durability.md):"
            case .input: "Input and privacy:"
            case .state: "Per-checkout state (suppression, repeat, after_complete):"
            case .sharding: "Sharding (docs/sharding.md):"
            case .publishing: "Publishing:"
            case .security: "Security (docs/security.md):"
            case .other: "Other:"
            }
        }
    }

    typealias UsageError = CommandLineArguments.UsageError

    /// The flag without dashes; the configuration file's key is the same name.
    let name: String
    /// What the value is called in `--help` (`ENDPOINT`, `N`); nil for a switch, which takes none.
    let argument: String?
    let section: Section
    /// What it does, for `--help`; the default is appended from ``read``.
    let help: String
    /// Whether the configuration file may set it (`config` itself may not).
    let inConfigFile: Bool
    /// An environment variable read when the flag is absent.
    let environment: String?
    /// Said in `--help` instead of the default's value when the default follows from another setting.
    let defaultNote: String?
    /// The setting's value in a configuration, as it would be written after the flag; nil: not set.
    let read: @Sendable (DaemonConfiguration) -> String?
    /// Applies a value given for the flag (for a switch, `true`).
    let apply: @Sendable (inout DaemonConfiguration, String) throws(UsageError) -> Void

    init(
        _ name: String, _ argument: String?, _ section: Section, help: String, inConfigFile: Bool = true,
        environment: String? = nil, defaultNote: String? = nil,
        read: @escaping @Sendable (DaemonConfiguration) -> String?,
        apply: @escaping @Sendable (inout DaemonConfiguration, String) throws(UsageError) -> Void
    ) {
        self.name = name
        self.argument = argument
        self.section = section
        self.help = help
        self.inConfigFile = inConfigFile
        self.environment = environment
        self.defaultNote = defaultNote
        self.read = read
        self.apply = apply
    }

    var isSwitch: Bool { argument == nil }

    /// The value an unconfigured daemon runs with; nil for a setting that is off unless given.
    var defaultValue: String? { read(DaemonConfiguration()) }

    /// Flags that take a value.
    static let valued = Set(all.filter { !$0.isSwitch }.map(\.name))
    /// Flags that take none.
    static let switches = Set(all.filter(\.isSwitch).map(\.name))

    /// An integer within `range`, with the parser's error otherwise.
    static func int(_ name: String, _ raw: String, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let v = Int(raw), range.contains(v) else {
            throw UsageError("--\(name) must be an integer in \(range.lowerBound)...\(range.upperBound), got \(raw)")
        }
        return v
    }

    /// Every setting, in the order of `--help`. Settings are applied in this order, so one whose
    /// check depends on another (`max-wire-bytes` on `max-message-bytes`) comes after it.
    static let all: [DaemonSetting] = [
        .init("ingest", "ENDPOINT", .endpoints, help: "fire-and-forget ingest, PULL",
              read: { $0.ingest }, apply: { c, v throws(UsageError) in c.ingest = try DaemonConfiguration.endpoint(v, "ingest") }),
        .init("ingest-acked", "ENDPOINT", .endpoints,
              help: "acknowledged ingest, ROUTER: one reply per event once it is on disk",
              read: { $0.ingestAcked },
              apply: { c, v throws(UsageError) in c.ingestAcked = try DaemonConfiguration.endpoint(v, "ingest-acked") }),
        .init("publish", "ENDPOINT", .endpoints, help: "typed topics out, XPUB",
              read: { $0.publish }, apply: { c, v throws(UsageError) in c.publish = try DaemonConfiguration.endpoint(v, "publish") }),
        .init("control", "ENDPOINT", .endpoints, help: "replay from the journal, stats, subscriber reports, ROUTER",
              read: { $0.control }, apply: { c, v throws(UsageError) in c.control = try DaemonConfiguration.endpoint(v, "control") }),
        .init("metrics", "HOST:PORT", .endpoints,
              help: "Prometheus text at /metrics and health at /healthz over HTTP; PORT may be *; off disables",
              read: { $0.metrics ?? "off" },
              apply: { c, v throws(UsageError) in
                  if v == "off" {
                      c.metrics = nil
                      return
                  }
                  guard let colon = v.lastIndex(of: ":"), colon != v.startIndex, !v[v.index(after: colon)...].isEmpty,
                      !v.contains("/")
                  else { throw UsageError("--metrics must be HOST:PORT (PORT may be *) or off, got \(v)") }
                  c.metrics = DaemonConfiguration.bindable(v)
              }),

        .init("data-dir", "PATH", .storage,
              help: "the daemon's files, created if missing; the journal lives in PATH/journal; one daemon per directory",
              read: { $0.dataDirectory }, apply: { c, v in c.dataDirectory = v }),
        .init("fsync-ms", "N", .storage,
              help: "group commit: at most one fdatasync per N ms; acked producers are answered after the "
                  + "fdatasync covering their event",
              read: { String($0.journal.fsyncMilliseconds) },
              apply: { c, v throws(UsageError) in c.journal.fsyncMilliseconds = try int("fsync-ms", v, in: 0...10_000) }),
        .init("segment-bytes", "N", .storage, help: "close a journal segment at this size",
              read: { String($0.journal.segmentBytes) },
              apply: { c, v throws(UsageError) in c.journal.segmentBytes = try int("segment-bytes", v, in: 4096...(1 << 40)) }),
        .init("journal-cache-bytes", "N", .storage,
              help: "keep only the newest N synced journal bytes in the page cache, dropping older pages after "
                  + "each fdatasync and a closed segment's at rotation, in steps of at least 1 MiB; kernel: never "
                  + "drop. 0: batches of 32 KiB or more are written with O_DIRECT, past the page cache, where the "
                  + "file system allows; smaller ones' pages are dropped, all but about the last MiB. Any other "
                  + "value writes every batch through the page cache",
              read: { $0.journal.cacheBytes.map(String.init) ?? "kernel" },
              apply: { c, v throws(UsageError) in
                  if v == "kernel" {
                      c.journal.cacheBytes = nil
                      return
                  }
                  guard let n = Int(v), (0...(1 << 40)).contains(n) else {
                      throw UsageError("--journal-cache-bytes must be a byte count (0...\(1 << 40)) or kernel, got \(v)")
                  }
                  c.journal.cacheBytes = n
              }),
        .init("retain-bytes", "N", .storage, help: "delete the oldest closed segments beyond this total",
              read: { String($0.journal.retainBytes) },
              apply: { c, v throws(UsageError) in c.journal.retainBytes = Int64(try int("retain-bytes", v, in: 4096...(1 << 50))) }),
        .init("retain-hours", "N", .storage, help: "delete closed segments older than this",
              read: { String($0.journal.retainSeconds / 3600) },
              apply: { c, v throws(UsageError) in c.journal.retainSeconds = try int("retain-hours", v, in: 1...87_600) * 3600 }),

        .init("buyer-data", "MODE", .input,
              help: "redacted: buyer and payment details become \"[redacted]\"; full: envelopes keep them",
              read: { $0.processor.keepBuyerData ? "full" : "redacted" },
              apply: { c, v throws(UsageError) in
                  switch v {
                  case "redacted": c.processor.keepBuyerData = false
                  case "full": c.processor.keepBuyerData = true
                  default: throw UsageError("--buyer-data must be redacted or full, got \(v)")
                  }
              }),
        .init("error-map", "FILE", .input,
              help: "raw code → stable code lines (optionally terminal or recoverable) that add to and override the built-in table (docs/error-codes.md); "
                  + "read at start and on SIGHUP, a bad file refused with its line; none: the built-in table alone",
              read: { $0.errorMapPath ?? "none" },
              apply: { c, v in c.errorMapPath = v == "none" ? nil : v }),
        .init("max-message-bytes", "N", .input, help: "larger messages are dead-lettered as `oversized`",
              read: { String($0.processor.maxMessageBytes) },
              apply: { c, v throws(UsageError) in
                  c.processor.maxMessageBytes = try int("max-message-bytes", v, in: 64...(256 << 20))
                  c.maxWireBytes = 2 * c.processor.maxMessageBytes
              }),
        .init("max-wire-bytes", "N", .input,
              help: "a message larger than this disconnects its producer as soon as its size arrives, before it "
                  + "is read: one connection holds at most (--ingest-hwm + 1) of them in the daemon",
              defaultNote: "twice --max-message-bytes",
              read: { String($0.maxWireBytes) },
              apply: { c, v throws(UsageError) in
                  let floor = c.processor.maxMessageBytes
                  c.maxWireBytes = try int("max-wire-bytes", v, in: floor...(512 << 20))
              }),
        .init("ingest-hwm", "N", .input,
              help: "messages taken in per producer connection ahead of processing; past it the daemon stops "
                  + "reading from that producer, whose own queue then fills: backpressure, never a drop",
              read: { String($0.ingestHighWaterMark) },
              apply: { c, v throws(UsageError) in c.ingestHighWaterMark = Int32(try int("ingest-hwm", v, in: 1...10_000_000)) }),
        .init("pipeline-threads", "N", .input,
              help: "threads that parse, decode and hash messages, the pipeline thread among them; order per "
                  + "checkout and seq order are the same with any number",
              defaultNote: "half the cores, 1 to 8",
              read: { String($0.pipelineThreads) },
              apply: { c, v throws(UsageError) in c.pipelineThreads = try int("pipeline-threads", v, in: 0...64) }),
        .init("dedupe-window", "N", .input,
              help: "remember the last N event ids (the wrapper's event_id): a retry of one is not published "
                  + "again, an acked producer gets the original seq with \"duplicate\":true; 0 turns it off",
              read: { String($0.processor.dedupeWindow) },
              apply: { c, v throws(UsageError) in c.processor.dedupeWindow = try int("dedupe-window", v, in: 0...50_000_000) }),

        .init("max-checkouts", "N", .state, help: "checkouts tracked at once, least recently used evicted",
              read: { String($0.processor.maxCheckouts) },
              apply: { c, v throws(UsageError) in c.processor.maxCheckouts = try int("max-checkouts", v, in: 1...100_000_000) }),
        .init("checkout-ttl", "SECONDS", .state, help: "forget a checkout idle this long",
              read: { String($0.processor.checkoutTTLSeconds) },
              apply: { c, v throws(UsageError) in
                  c.processor.checkoutTTLSeconds = UInt32(try int("checkout-ttl", v, in: 1...31_536_000))
              }),
        .init("restore-records", "N", .state,
              help: "at start, rebuild this state from the journal's last N records: a repeated complete keeps "
                  + "its idempotency key, an unchanged update stays suppressed across a restart",
              read: { String($0.restoreRecords) },
              apply: { c, v throws(UsageError) in c.restoreRecords = try int("restore-records", v, in: 0...100_000_000) }),

        .init("shard", "I/N", .sharding,
              help: "this daemon is shard I of N (0-based): it publishes the checkouts it owns (jump hash of "
                  + "checkout_id) and dead-letters the others as `wrong_shard`; its data dir keeps the I/N it began with",
              read: { $0.processor.shard.description },
              apply: { c, v throws(UsageError) in
                  guard let m = ShardMap(v) else {
                      throw UsageError("--shard must be I/N with 0 <= I < N <= \(ShardMap.maxCount) (shard 1 of 3 is 1/3), got \(v)")
                  }
                  c.processor.shard = m
              }),

        .init("publish-hwm", "N", .publishing, help: "messages queued per subscriber before ZeroMQ drops",
              read: { String($0.publishHighWaterMark) },
              apply: { c, v throws(UsageError) in c.publishHighWaterMark = Int32(try int("publish-hwm", v, in: 0...10_000_000)) }),
        .init("subscriber-memory", "N", .publishing,
              help: "bytes all subscribers' queues may hold together: the per-subscriber queue is "
                  + "--publish-hwm, or the share of this that max-subscribers full queues fit in (100 at least)",
              read: { String($0.subscriberMemoryBytes) },
              apply: { c, v throws(UsageError) in c.subscriberMemoryBytes = try int("subscriber-memory", v, in: (1 << 20)...(1 << 44)) }),
        .init("control-memory", "N", .publishing,
              help: "bytes the replay pages queued for control clients may hold together (and one record more): "
                  + "a client has at most 2 queued, each at most its share of half this (4 MiB at most, 4 KiB at "
                  + "least, always one record); past that, replays are answered busy",
              read: { String($0.controlMemoryBytes) },
              apply: { c, v throws(UsageError) in c.controlMemoryBytes = try int("control-memory", v, in: (1 << 20)...(1 << 44)) }),
        .init("max-subscribers", "N", .publishing,
              help: "subscribers (publish connections) kept; more are cut as they are accepted",
              read: { String($0.maxSubscribers) },
              apply: { c, v throws(UsageError) in c.maxSubscribers = try int("max-subscribers", v, in: 1...1_000_000) }),
        .init("max-connections", "N", .publishing,
              help: "connections each of the ingest, ingest-acked and control ports keeps (and publish, with "
                  + "max-subscribers); more are cut as they are accepted; lowered to fit the open-file limit",
              read: { String($0.maxConnectionsPerSocket) },
              apply: { c, v throws(UsageError) in c.maxConnectionsPerSocket = try int("max-connections", v, in: 1...1_000_000) }),
        .init("heartbeat-ms", "N", .publishing, help: "interval of bus.heartbeat",
              read: { String($0.heartbeatMilliseconds) },
              apply: { c, v throws(UsageError) in c.heartbeatMilliseconds = try int("heartbeat-ms", v, in: 10...60_000) }),
        .init("subscriber-gone-after", "SECONDS", .publishing,
              help: "a subscriber that has not reported (each heartbeat) for this long is gone: its lag is no longer exported "
                  + "(docs/observability.md); at least three heartbeats (--heartbeat-ms) whatever is set",
              read: { String($0.subscriberGoneAfterSeconds) },
              apply: { c, v throws(UsageError) in c.subscriberGoneAfterSeconds = try int("subscriber-gone-after", v, in: 1...86_400) }),
        .init("subscriber-expire-after", "SECONDS", .publishing,
              help: "a gone subscriber is forgotten (stats, metrics) this long after it went",
              read: { String($0.subscriberExpireAfterSeconds) },
              apply: { c, v throws(UsageError) in c.subscriberExpireAfterSeconds = try int("subscriber-expire-after", v, in: 0...31_536_000) }),

        .init("curve-secret-key", "FILE", .security, help: "CURVE: the daemon's secret key (checkoutbus keygen)",
              environment: "CHECKOUTBUS_CURVE_SECRET_KEY",
              read: { $0.curveSecretKeyPath }, apply: { c, v in c.curveSecretKeyPath = v }),
        .init("curve-producers", "DIR", .security,
              help: "CURVE: public keys (*.pub) allowed to send (ingest, ingest-acked); SIGHUP reloads it",
              environment: "CHECKOUTBUS_CURVE_PRODUCERS",
              read: { $0.curveProducersDirectory }, apply: { c, v in c.curveProducersDirectory = v }),
        .init("curve-subscribers", "DIR", .security,
              help: "CURVE: public keys allowed to subscribe and use control; SIGHUP reloads it",
              environment: "CHECKOUTBUS_CURVE_SUBSCRIBERS",
              read: { $0.curveSubscribersDirectory }, apply: { c, v in c.curveSubscribersDirectory = v }),
        .init("allow-insecure-remote", nil, .security,
              help: "permit plain text (no CURVE; and the metrics HTTP) on non-loopback addresses; without it the "
                  + "daemon refuses to start",
              read: { String($0.allowInsecureRemote) },
              apply: { c, v throws(UsageError) in
                  switch v {
                  case "true": c.allowInsecureRemote = true
                  case "false": c.allowInsecureRemote = false
                  default: throw UsageError("--allow-insecure-remote must be true or false, got \(v)")
                  }
              }),

        .init("config", "PATH", .other,
              help: "a file of `key = value` lines, keys named as these flags without dashes (`fsync-ms = 5`); "
                  + "flags on the command line win. SIGHUP re-reads it and applies what can change live: "
                  + "log-level (and the CURVE allowlist directories' contents)",
              inConfigFile: false,
              read: { $0.configPath }, apply: { c, v in c.configPath = v }),
        .init(BusLogger.Level.option.name, BusLogger.Level.option.argument, .other,
              help: BusLogger.Level.option.help + "; SIGHUP re-reads it from --config",
              read: { $0.logLevel.name },
              apply: { c, v throws(UsageError) in
                  guard let l = BusLogger.Level(name: v) else {
                      throw UsageError(.invalidValue, "--log-level must be debug, info, warning or error, got \(v)")
                  }
                  c.logLevel = l
              }),
    ]

    /// `checkoutbusd --help`, from ``all``.
    static var helpText: String {
        var out = """
            checkoutbusd — the CheckoutBus daemon: ingests raw checkout lifecycle events over ZeroMQ,
            applies the lifecycle rules and publishes typed topics.

            USAGE: checkoutbusd [flags]

            """
        for section in Section.allCases {
            out += "\n" + section.title + "\n"
            for setting in all where setting.section == section { out += setting.helpEntry }
            if section == .other {
                out += entry("--help", "this text") + entry("--version", "the version")
                    + entry("--check-config FILE", "read FILE (and any flags given) as a start would, and the error map and CURVE keys it names; print what it sets and exit 0, or the line that is wrong and exit 1; binds and writes nothing")
            }
        }
        out += """

            On start the first stdout line is one JSON object with the endpoints as bound:
              {"ready":true,"ingest":"tcp://127.0.0.1:40001","ingest_acked":"…","publish":"…","control":"…",…}
            SIGTERM or SIGINT: stop accepting, journal and publish what was received, sync, exit 0.
            """
        return out
    }

    /// This setting as a flag (``CommandOption``): a tool that takes the daemon's flag (`decode
    /// --buyer-data`) lists this, with the daemon's help and default.
    var option: CommandOption {
        CommandOption(name, argument, help: help, default: isSwitch ? nil : defaultValue, defaultNote: defaultNote,
                      environment: environment)
    }

    /// The setting named `name` as a flag.
    package static func option(_ name: String) -> CommandOption {
        guard let setting = all.first(where: { $0.name == name }) else { preconditionFailure("no daemon setting --\(name)") }
        return setting.option
    }

    /// This setting's lines in `--help`: the flag, its help, its default and its environment variable.
    var helpEntry: String { option.helpEntry }

    /// A flag and its text, as every `--help` lays them out (``HelpText/entry(_:_:)``).
    static func entry(_ flag: String, _ text: String) -> String { HelpText.entry(flag, text) }
}
