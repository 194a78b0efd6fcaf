import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus route`: a stateless front for producers that cannot shard themselves. Each event is
/// forwarded unchanged to the shard that owns its checkout (``ShardRelay``, docs/sharding.md).
///
/// Not `Sendable`; runs on the calling thread until the stop signal.
package struct RouteCommand {
    static let shards = CommandOption(
        "shards", "E0,E1,…", help: "the shards' --ingest endpoints, in shard order (shard 0 first): one PUSH per shard")
    static let listen = CommandOption(
        "listen", "ENDPOINT", help: "PULL for fire-and-forget producers (with --shards)", default: "tcp://127.0.0.1:7710")
    static let shardsAcked = CommandOption(
        "shards-acked", "A0,A1,…", help: "the shards' --ingest-acked endpoints, in shard order: one DEALER per shard")
    static let listenAcked = CommandOption(
        "listen-acked", "ENDPOINT",
        help: "ROUTER for acknowledged producers (with --shards-acked): each event goes to its owner's acknowledged "
            + "socket and the owner's reply, sent once the event is on disk, comes back",
        default: "tcp://127.0.0.1:7711")
    static let hwm = CommandOption("hwm", "N", help: "events queued per socket before route pushes back", default: "100000")
    static let ackTimeout = CommandOption(
        "ack-timeout", "SECONDS",
        help: "an acknowledged event whose shard has not answered after this long is given up: its producer gets no "
            + "reply and retries", default: "30")
    static let linger = CommandOption(
        "linger", "SECONDS",
        help: "after SIGTERM/SIGINT, how long in all to keep delivering what was received and relaying the replies still due",
        default: "10")
    /// The shards' own flag and default.
    static let maxMessageBytes = DaemonConfiguration.option("max-message-bytes").described(
        "larger events are not decoded (the shards' --max-message-bytes)")
    static let statsInterval = CommandOption(
        "stats-interval", "SECONDS", help: "log the counts this often, 0 only at exit", default: "10")
    static let allowInsecureRemote = CommandOption(
        "allow-insecure-remote", help: "permit a non-loopback --listen/--listen-acked (route has no CURVE server)")

    package static let spec = CommandSpec(
        "checkoutbus route", summary: "forward producers' events to the shard that owns each checkout.",
        groups: [
            .init(nil, [shards, listen, shardsAcked, listenAcked]),
            .init(nil, [hwm, ackTimeout, linger, maxMessageBytes, statsInterval, BusLogger.Level.option, allowInsecureRemote]),
            .init("CURVE (one key for every shard connection: each shard lists it, and all share one server key):",
                  CurveClientKeys.options),
        ],
        notes: """
            The owner of an event is found exactly as the shards find it: the event is decoded by the
            daemon's own decoder and its checkout_id mapped by the shard function of docs/sharding.md.
            Input that does not decode (invalid JSON, no checkout id, unknown event, several frames) has no
            owner: it goes to the shard given by the jump hash of its bytes, which dead-letters it with the
            real reason. Nothing is dropped: a shard that is down or slow fills its queue (--hwm), then route
            stops reading and producers are pushed back — the other shards' events wait too. Events queued
            for a shard are delivered when it comes back; stopping route while a shard is still down loses
            the events queued for it once --linger runs out, and route then logs an error for each shard
            whose queue may not have drained ("up to N" events: ZeroMQ does not say how many of those
            handed to it were delivered) and exits 1. With the acknowledged front, events in flight
            to a shard that breaks its connection or exceeds --ack-timeout get no reply: their producers
            retry (a retry with the same event_id is not published twice).

            Prints one JSON ready line on stdout with the endpoints as bound, e.g.
              {"ready":true,"listen":"tcp://127.0.0.1:7710","listen_acked":null,"shards":3,"pid":4242}
            and logs the counts per shard (forwarded_by_shard=…) every --stats-interval and at exit.
            SIGTERM/SIGINT: stop reading the acknowledged front at once (events not read get no reply; their
            producers retry), keep reading fire-and-forget input until it has been quiet for 200 ms, forward
            what was received, relay the replies still due, let the shards' queues drain, and exit 0 — all
            within --linger; exit 1 if the linger ran out with events possibly undelivered or unanswered.
            """)
    package static var help: String { spec.help }

    package var options = ShardRelay.Options()
    package var logLevel = BusLogger.Level.info

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        options.curve = try CurveClientKeys.parse(args)
        if let list = args.value(Self.shards) {
            options.shards = try BusOptions.endpoints(list, flag: "shards")
            options.listen = args.string(Self.listen)
        } else if args.given(Self.listen) {
            throw .init("--listen needs --shards (the shards' --ingest endpoints)")
        }
        if let list = args.value(Self.shardsAcked) {
            options.shardsAcked = try BusOptions.endpoints(list, flag: "shards-acked")
            options.listenAcked = args.string(Self.listenAcked)
        } else if args.given(Self.listenAcked) {
            throw .init("--listen-acked needs --shards-acked (the shards' --ingest-acked endpoints)")
        }
        guard !options.shards.isEmpty || !options.shardsAcked.isEmpty else {
            throw .init("route needs --shards (and/or --shards-acked): the shards' endpoints in shard order")
        }
        if !options.shards.isEmpty && !options.shardsAcked.isEmpty && options.shards.count != options.shardsAcked.count {
            throw .init("--shards lists \(options.shards.count) shards but --shards-acked \(options.shardsAcked.count)")
        }
        for (flag, endpoint) in [("listen", options.listen), ("listen-acked", options.listenAcked)] {
            guard let endpoint else { continue }
            guard endpoint.hasPrefix("tcp://") || endpoint.hasPrefix("ipc://") else {
                throw .init("--\(flag) must be tcp://HOST:PORT or ipc://PATH, got \(endpoint)")
            }
            if !args.has(Self.allowInsecureRemote) && !DaemonConfiguration.isLoopback(endpoint) {
                throw .init("--\(flag) \(endpoint) is not a loopback address and would carry plain text; "
                    + "pass --allow-insecure-remote")
            }
        }
        options.highWaterMark = Int32(try args.int(Self.hwm, in: 1...10_000_000))
        options.ackTimeoutNanos = UInt64(try args.int(Self.ackTimeout, in: 1...86_400)) * 1_000_000_000
        options.lingerMilliseconds = Int32(try args.int(Self.linger, in: 0...3600) * 1000)
        options.maxMessageBytes = try args.int(Self.maxMessageBytes, in: 1...(1 << 30))
        options.statsIntervalNanos = UInt64(try args.int(Self.statsInterval, in: 0...86_400)) * 1_000_000_000
        logLevel = try BusLogger.Level.parse(args)
    }

    /// Relays until `stop` is raised. - Returns: the process exit code.
    package func run(stop: StopSignal) -> Int32 {
        let logger = BusLogger(label: "route", level: logLevel)
        do {
            let relay = ShardRelay(options: options, logger: logger)
            let delivered = try relay.run(stop: stop) { bound in FileHandleWriter.standardOutput(bound.readyLine) }
            return delivered ? 0 : 1
        } catch {
            logger.error("fatal", ["error": "\(error)"])
            return 1
        }
    }
}
