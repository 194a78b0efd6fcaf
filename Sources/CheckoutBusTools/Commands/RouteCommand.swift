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
public struct RouteCommand {
    public static let help = """
        checkoutbus route — forward producers' events to the shard that owns each checkout.

        USAGE: checkoutbus route --shards E0,E1,… [--listen ENDPOINT]
                                 [--shards-acked A0,A1,… [--listen-acked ENDPOINT]]
                                 [--hwm N] [--ack-timeout SECONDS] [--linger SECONDS]
                                 [--max-message-bytes N] [--stats-interval SECONDS] [--log-level LEVEL]
                                 [--allow-insecure-remote] [--curve-key FILE --curve-server FILE]

          --shards E0,E1,…       the shards' --ingest endpoints, in shard order (shard 0 first): one
                                 PUSH per shard
          --listen ENDPOINT      PULL for fire-and-forget producers (default tcp://127.0.0.1:7710)
          --shards-acked A0,…    the shards' --ingest-acked endpoints, in shard order: one DEALER per shard
          --listen-acked ENDPOINT
                                 ROUTER for acknowledged producers (default tcp://127.0.0.1:7711 when
                                 --shards-acked is given): each event goes to its owner's acknowledged
                                 socket and the owner's reply, sent once the event is on disk, comes back
          --hwm N                events queued per socket before route pushes back (default 100000)
          --ack-timeout SECONDS  an acknowledged event whose shard has not answered after this long is
                                 given up: its producer gets no reply and retries (default 30)
          --linger SECONDS       after SIGTERM/SIGINT, how long in all to keep delivering what was
                                 received and relaying the replies still due (default 10)
          --max-message-bytes N  larger events are not decoded (the shards' --max-message-bytes;
                                 default 1048576)
          --stats-interval SECONDS
                                 log the counts this often, 0 only at exit (default 10)
          --log-level LEVEL      debug, info, warning, error (default info); key=value lines on stderr
          --allow-insecure-remote
                                 permit a non-loopback --listen/--listen-acked (route has no CURVE server)
        \(CurveClientKeys.help)
          (the key is used for every shard connection: every shard must list it and share one server key)

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
        """

    package var options = ShardRelay.Options()
    package var logLevel = BusLogger.Level.info

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(
            arguments,
            valued: Set(["listen", "shards", "listen-acked", "shards-acked", "hwm", "ack-timeout", "linger",
                         "max-message-bytes", "stats-interval", "log-level"]).union(CurveClientKeys.flags),
            switches: ["allow-insecure-remote"])
        options.curve = try CurveClientKeys.parse(args)
        if let list = args.value("shards") {
            options.shards = try ShardRouter.parseEndpoints(list, flag: "shards")
            options.listen = args.value("listen") ?? "tcp://127.0.0.1:7710"
        } else if args.value("listen") != nil {
            throw .init("--listen needs --shards (the shards' --ingest endpoints)")
        }
        if let list = args.value("shards-acked") {
            options.shardsAcked = try ShardRouter.parseEndpoints(list, flag: "shards-acked")
            options.listenAcked = args.value("listen-acked") ?? "tcp://127.0.0.1:7711"
        } else if args.value("listen-acked") != nil {
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
            if !args.has("allow-insecure-remote") && !DaemonConfiguration.isLoopback(endpoint) {
                throw .init("--\(flag) \(endpoint) is not a loopback address and would carry plain text; "
                    + "pass --allow-insecure-remote")
            }
        }
        options.highWaterMark = Int32(try args.int("hwm", default: 100_000, in: 1...10_000_000))
        options.ackTimeoutNanos = UInt64(try args.int("ack-timeout", default: 30, in: 1...86_400)) * 1_000_000_000
        options.lingerMilliseconds = Int32(try args.int("linger", default: 10, in: 0...3600) * 1000)
        options.maxMessageBytes = try args.int("max-message-bytes", default: 1 << 20, in: 1...(1 << 30))
        options.statsIntervalNanos = UInt64(try args.int("stats-interval", default: 10, in: 0...86_400)) * 1_000_000_000
        if let v = args.value("log-level") {
            guard let level = BusLogger.Level(name: v) else { throw .init("--log-level must be debug, info, warning or error") }
            logLevel = level
        }
    }

    /// Relays until `stop` is raised. - Returns: the process exit code.
    public func run(stop: StopSignal) -> Int32 {
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
