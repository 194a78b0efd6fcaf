import NATS
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Everything `checkoutbus-jetstream` is told on its command line. `Sendable`.
package struct BridgeOptions: Sendable {
    /// Each shard's `--publish` endpoint (`--from`, comma-separated), in shard order, or in the
    /// order of ``shardIDs`` when given.
    package var publish = [DefaultEndpoints.publish]
    /// Each shard's `--control` endpoint (`--control`), in the same order.
    package var control = [DefaultEndpoints.control]
    /// The shards the endpoints are (`--shard-ids`), of a bus of ``shardCount`` (`--shard-count`);
    /// nil: the endpoints are the whole bus, endpoint `i` being shard `i`.
    package var shardIDs: [Int]?
    /// The bus's number of shards when ``shardIDs`` is given.
    package var shardCount: Int?
    /// Put before every subject (`--subject-prefix`): `P.checkout.complete`; empty: none.
    package var subjectPrefix = ""
    /// The name the bridge reports under in the daemon's `stats`.
    package var name = "jetstream"
    /// The cursor file; with several shards, shard `i` of `N` has `PATH.i-of-N`
    /// (``FileCursor/paths(_:shards:)``).
    package var cursorPath = "checkoutbus-jetstream.cursor"
    package var receiveHighWaterMark: Int32 = 100_000
    package var curve: CurveClientKeys?
    package var logLevel = BusLogger.Level.info

    /// NATS server URLs (`--nats`, comma-separated).
    package var servers = ["nats://127.0.0.1:4222"]
    /// The stream's name (`--stream`).
    package var stream = "CHECKOUTS"
    /// Create the stream when it is missing (else refuse to start).
    package var createStream = true
    package var replicas = 1
    /// `--max-age`, nanoseconds; 0: no age limit.
    package var maxAgeNanoseconds: Int64 = 7 * 86_400 * 1_000_000_000
    /// `--max-bytes`; -1: no size limit.
    package var maxBytes: Int64 = -1
    /// `--duplicate-window`, nanoseconds.
    package var duplicateWindowNanoseconds: Int64 = 10 * 60 * 1_000_000_000
    /// Asynchronous publishes awaiting their acknowledgement, at most (`--window`).
    package var window = 4096
    /// How long one publish may wait for its acknowledgement before it is sent again (`--ack-wait`).
    package var ackWaitMilliseconds: Int64 = 5000

    package init() {}

    /// The subjects the stream takes without a subject prefix: every lifecycle subject and the dead letters.
    package static let streamSubjects = ["checkout.>", "bus.deadletter"]

    /// The subjects this bridge publishes to: ``streamSubjects``, each after ``subjectPrefix``.
    package var subjects: [String] { BridgeOptions.streamSubjects.map(prefixed) }

    /// `subject` after the ``subjectPrefix`` (`P.subject`), or unchanged without one.
    package func prefixed(_ subject: String) -> String { subjectPrefix.isEmpty ? subject : subjectPrefix + "." + subject }

    /// The shard each endpoint is: ``shardIDs``, or `0..<N` for the whole bus.
    package var bridgedShards: [Int] { shardIDs ?? Array(0..<publish.count) }

    /// The bus's number of shards: ``shardCount``, or the number of endpoints for the whole bus.
    package var busShardCount: Int { shardCount ?? publish.count }

    /// The stream this bridge creates when it is missing.
    package var streamConfiguration: StreamConfiguration {
        var c = StreamConfiguration(name: stream, subjects: subjects)
        c.storage = .file
        c.retention = .limits
        c.discard = .old
        c.replicas = replicas
        c.maxAgeNanoseconds = maxAgeNanoseconds
        c.maxBytes = maxBytes
        c.duplicateWindowNanoseconds = duplicateWindowNanoseconds
        return c
    }

    // The flags. Each default is the property's initial value above, written here as the flag
    // takes it; `BridgeOptionsTests` checks that parsing no flags gives `BridgeOptions()`.
    static let from = BusOptions.from.described("each shard's --publish endpoint, comma-separated in shard order")
    static let controlOption = BusOptions.controlShards.described("each shard's --control endpoint, in the same order")
    static let shardIDsOption = CommandOption(
        "shard-ids", "I,J,…",
        help: "bridge only these shards: --from and --control list shard I's endpoints, then J's, …; each is checked "
            + "before anything is published. Several bridges, each of different shards, share the bus",
        defaultNote: "the lists are every shard, in shard order 0…N-1")
    static let shardCountOption = CommandOption("shard-count", "N", help: "the bus's number of shards; required with --shard-ids")
    static let nameOption = CommandOption(
        "name", "NAME", help: "the name this bridge reports under in the daemons' stats", default: "jetstream")
    static let cursor = CommandOption(
        "cursor", "PATH", help: "the last seq JetStream acknowledged (with N shards PATH.I-of-N for each shard I bridged)",
        default: "checkoutbus-jetstream.cursor")
    static let receiveHWM = CommandOption(
        "receive-hwm", "N", help: "envelopes queued before ZeroMQ drops; drops are read again from the journal",
        default: "100000")
    /// `--nats`, also read by `verify` and `dump`.
    static let nats = CommandOption("nats", "URLS", help: "NATS server URLs, comma-separated", default: "nats://127.0.0.1:4222")
    /// `--stream`, also read by `verify` and `dump`.
    static let streamOption = CommandOption(
        "stream", "NAME", help: "the stream; subjects checkout.> and bus.deadletter", default: "CHECKOUTS")
    static let subjectPrefixOption = CommandOption(
        "subject-prefix", "P",
        help: "publish to P.checkout.complete, P.bus.deadletter, …; a created stream takes P.checkout.> and P.bus.deadletter",
        defaultNote: "no prefix")
    static let noCreate = CommandOption("no-create", help: "refuse to start when the stream is missing instead of creating it")
    static let replicasOption = CommandOption("replicas", "N", help: "replicas of a created stream, 1 to 5", default: "1")
    static let maxAge = CommandOption("max-age", "DURATION", help: "age limit of a created stream (0: none)", default: "7d")
    static let maxBytesOption = CommandOption("max-bytes", "N", help: "size limit of a created stream (-1: none)", default: "-1")
    static let duplicateWindow = CommandOption(
        "duplicate-window", "DURATION", help: "how long the stream remembers a Nats-Msg-Id", default: "10m")
    static let windowOption = CommandOption(
        "window", "N", help: "publishes awaiting their acknowledgement, at most", default: "4096")
    static let ackWait = CommandOption(
        "ack-wait", "DURATION", help: "a publish unacknowledged this long is sent again", default: "5s")

    package static let spec = CommandSpec(
        "checkoutbus-jetstream",
        summary: "publish every envelope of the bus into a NATS JetStream stream, exactly once.",
        groups: [
            .init("Bus:", [from, controlOption, shardIDsOption, shardCountOption, nameOption, cursor, receiveHWM,
                           BusLogger.Level.option]),
            .init(nil, CurveClientKeys.options),
            .init("JetStream:", [nats, streamOption, subjectPrefixOption, noCreate, replicasOption, maxAge, maxBytesOption,
                                 duplicateWindow, windowOption, ackWait]),
        ],
        notes: """
            Subjects are the bus's topics: checkout.start, checkout.update, checkout.complete,
            checkout.fail.<code>, checkout.dismiss, bus.deadletter (after P. with --subject-prefix P).
            Every message carries Nats-Msg-Id: <shard>:<seq>. See docs/jetstream.md.

            checkoutbus-jetstream verify (count the stream's messages and ids) and checkoutbus-jetstream dump
            (print its messages as JSON lines) read the stream back: checkoutbus-jetstream verify --help.
            """)
    package static var help: String { spec.help }

    /// Parses the bridge's flags.
    /// - Throws: a usage error naming the flag.
    package static func parse(_ arguments: [String]) throws(CommandLineArguments.UsageError) -> BridgeOptions {
        let args = try spec.parse(arguments)
        guard args.positionals.isEmpty else { throw .init("unexpected argument \(args.positionals[0])") }
        var o = BridgeOptions()
        o.publish = try BusOptions.endpoints(args, from)
        o.control = try BusOptions.endpoints(args, controlOption)
        guard o.publish.count == o.control.count else {
            throw .init("--from lists \(o.publish.count) endpoints and --control \(o.control.count): one of each per shard, in shard order")
        }
        switch (args.value(shardIDsOption), args.value(shardCountOption)) {
        case (nil, nil): break
        case (let ids?, let count?):
            let items = try list(ids, flag: "shard-ids")
            guard let count = Int(count) else { throw .init("--shard-count must be a number of shards, 1 to \(ShardLimits.maxShards)") }
            var parsed: [Int] = []
            for item in items {
                guard let id = Int(item) else { throw .init("--shard-ids must be shard numbers, comma-separated; got \(item)") }
                parsed.append(id)
            }
            do {
                try ShardedSubscriber.validate(shardIDs: parsed, of: count)
            } catch {
                throw .init("--shard-ids \(ids) --shard-count \(count): \(error)")
            }
            guard parsed.count == o.publish.count else {
                throw .init("--shard-ids names \(parsed.count) shards and --from lists \(o.publish.count) endpoints: one id per endpoint, in the same order")
            }
            o.shardIDs = parsed
            o.shardCount = count
        case (nil, _?): throw .init("--shard-count goes with --shard-ids (without them the endpoints are the whole bus)")
        case (_?, nil): throw .init("--shard-ids needs --shard-count N, the bus's number of shards")
        }
        if let v = args.value(subjectPrefixOption) {
            let tokens = v.split(separator: ".", omittingEmptySubsequences: false)
            let valid = !v.isEmpty && v.utf8.count <= 200
                && tokens.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { $0 > 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "*") && $0 != UInt8(ascii: ">") } }
            guard valid else {
                throw .init("--subject-prefix must be NATS subject tokens separated by dots (no spaces, *, > or empty tokens), up to 200 bytes; got \(v)")
            }
            o.subjectPrefix = v
        }
        let name = args.string(nameOption)
        guard !name.isEmpty, name.utf8.count <= 200 else { throw .init("--name must be 1 to 200 bytes") }
        o.name = name
        o.cursorPath = args.string(cursor)
        o.receiveHighWaterMark = Int32(try args.int(receiveHWM, in: 1...10_000_000))
        o.curve = try CurveClientKeys.parse(args)
        o.logLevel = try BusLogger.Level.parse(args)
        o.servers = try list(args.string(nats), flag: nats.name)
        do {
            let v = args.string(streamOption)
            guard !v.isEmpty, v.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
                throw .init("--stream must be letters, digits, _ and -")
            }
            o.stream = v
        }
        o.createStream = !args.has(noCreate)
        o.replicas = try args.int(replicasOption, in: 1...5)
        o.maxAgeNanoseconds = try duration(args.string(maxAge), flag: maxAge.name)
        let bytes = args.string(maxBytesOption)
        guard let n = Int64(bytes), n == -1 || n > 0 else { throw .init("--max-bytes must be -1 (no limit) or a positive integer") }
        o.maxBytes = n
        o.duplicateWindowNanoseconds = try duration(args.string(duplicateWindow), flag: duplicateWindow.name)
        guard o.duplicateWindowNanoseconds >= 1_000_000_000 else { throw .init("--duplicate-window must be at least 1s") }
        o.window = try args.int(windowOption, in: 1...1_000_000)
        o.ackWaitMilliseconds = try duration(args.string(ackWait), flag: ackWait.name) / 1_000_000
        guard o.ackWaitMilliseconds >= 100 else { throw .init("--ack-wait must be at least 100ms") }
        if o.maxAgeNanoseconds > 0 && o.duplicateWindowNanoseconds > o.maxAgeNanoseconds {
            throw .init("--duplicate-window must be at most --max-age (JetStream refuses such a stream)")
        }
        return o
    }

    static func list(_ value: String, flag: String) throws(CommandLineArguments.UsageError) -> [String] {
        let items = value.split(separator: ",", omittingEmptySubsequences: false).map {
            String($0.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
        }
        guard !items.isEmpty, !items.contains(where: \.isEmpty) else { throw .init("--\(flag) needs a comma-separated list") }
        return items
    }

    /// `0`, or a number with a unit: `ms`, `s`, `m`, `h`, `d` (`90s`, `10m`, `168h`, `7d`), in nanoseconds.
    package static func duration(_ value: String, flag: String) throws(CommandLineArguments.UsageError) -> Int64 {
        if value == "0" { return 0 }
        let units: [(String, Int64)] = [("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000),
                                        ("h", 3_600_000_000_000), ("d", 86_400_000_000_000)]
        for (suffix, scale) in units where value.hasSuffix(suffix) {
            if let n = Int64(value.dropLast(suffix.count)), n > 0, n <= Int64.max / scale { return n * scale }
        }
        throw .init("--\(flag) must be 0 or a duration such as 500ms, 90s, 10m, 168h, 7d; got \(value)")
    }

}
