#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// `checkoutbus flood`: synthetic lifecycles against a running daemon, checked against what the
/// generator knows the daemon must publish. Not `Sendable`; runs on the calling thread.
public struct FloodCommand {
    public static let help = """
        checkoutbus flood — drive a running daemon with synthetic checkout lifecycles and check the result.

        USAGE: checkoutbus flood [--to ENDPOINT | --shards E0,E1,…] [--from P[,P1,…]] [--checkouts N] [--seed S]
                                 [--rate EVENTS_PER_SECOND] [--count N] [--duration SECONDS]
                                 [--producers N] [--acked] [--window N] [--subscribers N]
                                 [--metrics HOST:PORT] [--timeline FILE] [--report FILE.html] [--json]

          --to ENDPOINT        the daemon's --ingest endpoint (default tcp://127.0.0.1:7700; with --acked
                               its --ingest-acked endpoint, default tcp://127.0.0.1:7701), or a
                               `checkoutbus route` front's --listen endpoint
          --shards E0,E1,…     route each event to the shard owning its checkout (docs/sharding.md):
                               the shards' --ingest (--ingest-acked) endpoints, in shard order (instead of --to)
          --from P[,P1,…]      the daemon's --publish endpoint (default tcp://127.0.0.1:7702); with
                               shards, every shard's, comma-separated (any order): the subscriber
                               waits for a heartbeat from each, and counts what all of them publish
          --checkouts N        checkouts to generate (default 10000); each is a whole lifecycle drawn from
                               every raw family and platform spelling: starts, updates with identical
                               repeats (to be suppressed), completes and repeated completes, failures,
                               failures before start, dismissals, Primer retries. Generated as sent:
                               any number costs the same memory
          --seed S             generator seed (default 1): the same seed, the same lifecycles
          --rate R             events per second over all producers (default: flat out)
          --count N            send at most N events
          --duration SECONDS   stop sending after this long
          --producers N        connections sending at once, each its own thread and share of the
                               checkouts (default 1; a checkout's events always use one connection)
          --acked              send on the acknowledged ingest (DEALER) and report acknowledgement latency
          --window N           events in flight per acknowledged producer (default 1000)
          --subscribers N      subscribers, each receiving everything (default 1); every one must
                               receive what the generator expects
          --metrics HOST:PORT  the daemon's --metrics address: its own arrival-to-publication histogram
                               over the run is reported beside flood's figures
          --timeline FILE      one JSON object per second of the run (docs/commands.md)
          --report FILE.html   the timeline as a self-contained page of SVG charts
          --json               print the report as one JSON object

        The report gives sent, published by kind and suppressed — each against what the generator
        expects — dead letters, throughput, end-to-end latency percentiles measured by the subscribers
        (and acknowledgement latency with --acked), flood's own CPU per event, how far its producers
        fell behind their schedule and how busy its subscribers were, and who limited the run: the
        bus, the requested rate, or flood itself (then its figures describe the tool, not the bus).
        With shards the counts are the sum over every shard; a dead letter (a wrong_shard among them:
        an event that reached a shard not owning its checkout) makes the run fail.
        A live progress line goes to stderr on a terminal. SIGINT or SIGTERM stops sending, waits up
        to 2 s for what is in flight and prints the report so far, marked interrupted (exit 130).
        Exits 1 on any unexpected loss or extra.
        \(CurveClientKeys.help)
          (flood's one key is used by its producers and its subscribers: list it in both directories)
        """

    /// The run the flags describe.
    package var configuration: FloodRun.Configuration
    package var metrics: String?
    package var timeline: String?
    package var htmlReport: String?
    package var json = false

    /// Exit status of a run stopped by SIGINT or SIGTERM.
    public static let interruptedStatus: Int32 = 130

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(
            arguments, valued: Set(["to", "shards", "from", "checkouts", "seed", "rate", "count", "duration", "producers",
                                    "subscribers", "window", "metrics", "timeline", "report"]).union(CurveClientKeys.flags),
            switches: ["json", "acked"])
        let acked = args.has("acked")
        var ingest = [acked ? "tcp://127.0.0.1:7701" : "tcp://127.0.0.1:7700"]
        var publish = ["tcp://127.0.0.1:7702"]
        if let v = args.value("to") { ingest = [v] }
        if let list = args.value("shards") {
            guard args.value("to") == nil else { throw .init("give --to (one daemon or a route) or --shards (every shard), not both") }
            ingest = try ShardRouter.parseEndpoints(list, flag: "shards")
        }
        if let list = args.value("from") { publish = try ShardRouter.parseEndpoints(list, flag: "from", ordered: false) }
        let checkouts = try args.int("checkouts", default: 10_000, in: 1...50_000_000)
        let seed = UInt64(try args.int("seed", default: 1, in: 0...Int.max))
        var rate: Double?
        var duration: Double?
        if args.value("rate") != nil { rate = Double(try args.int("rate", default: 0, in: 1...10_000_000)) }
        if args.value("duration") != nil { duration = Double(try args.int("duration", default: 0, in: 1...86_400)) }
        var generator = FloodGenerator(checkouts: checkouts, seed: seed, runID: "flood\(seed)-\(getpid())")
        if let rate, let duration { generator.checkouts = max(checkouts, Int(rate * duration / 5) + 1) }
        configuration = FloodRun.Configuration(ingest: ingest, publish: publish, generator: generator)
        configuration.curve = try CurveClientKeys.parse(args)
        configuration.acked = acked
        configuration.rate = rate
        configuration.duration = duration
        if args.value("count") != nil { configuration.count = try args.int("count", default: 0, in: 1...Int.max) }
        configuration.producers = try args.int("producers", default: 1, in: 1...256)
        configuration.subscribers = try args.int("subscribers", default: 1, in: 1...64)
        configuration.window = try args.int("window", default: 1000, in: 1...1_000_000)
        metrics = args.value("metrics")
        timeline = args.value("timeline")
        htmlReport = args.value("report")
        json = args.has("json")
    }

    /// How long an ingest endpoint may take to answer before the flood says nobody is there.
    static let answerSeconds = 10

    public func run() -> Int32 {
        let stop = StopSignal()
        stop.trapTerminationSignals()
        // Nobody taking events at an ingest endpoint is said as `send` says it, before anything
        // is generated, not measured as a bus that publishes nothing.
        for endpoint in configuration.ingest {
            let probe = PingCommand.handshake(endpoint, type: configuration.acked ? .dealer : .push, curve: configuration.curve,
                                              timeoutSeconds: FloodCommand.answerSeconds)
            if !probe.ok {
                FileHandleWriter.standardError("checkoutbus flood: no daemon took events at \(endpoint) within \(FloodCommand.answerSeconds)s"
                    + " (\(probe.detail))" + (configuration.curve == nil ? "" : CurveClientKeys.refusalHint) + "; sent=0\n")
                return 1
            }
        }
        do {
            let flood = try FloodRun(configuration)
            let before = try metrics.map { try FloodCommand.daemonHistogram($0) }
            let cpu0 = FloodCommand.cpuSeconds()
            let showProgress = isatty(2) == 1 && !json
            let outcome = try flood.run(stop: stop, progress: showProgress ? { sent, received in
                FileHandleWriter.standardError("\rflood: sent \(sent)  published \(received)   ")
            } : nil)
            let cpu = FloodCommand.cpuSeconds() - cpu0
            if showProgress { FileHandleWriter.standardError("\r\u{1B}[K") }
            var daemon: DaemonHistogram?
            if let metrics, let before {
                daemon = (try? FloodCommand.daemonHistogram(metrics)).map { $0.since(before) }
            }
            let report = FloodReport(outcome: outcome, cpuSeconds: cpu, daemonPipeline: daemon)
            if let timeline { try FloodTimeline(outcome).writeJSONLines(to: timeline) }
            if let htmlReport { try FloodTimeline(outcome).writeHTML(to: htmlReport, report: report) }
            FileHandleWriter.standardOutput(json ? report.json + "\n" : report.text)
            if outcome.interrupted { return FloodCommand.interruptedStatus }
            return report.ok ? 0 : 1
        } catch {
            FileHandleWriter.standardError("checkoutbus flood: \(error)\n")
            return stop.isRaised ? FloodCommand.interruptedStatus : 1
        }
    }

    /// The daemon's pipeline histogram from its `/metrics`.
    static func daemonHistogram(_ address: String) throws -> DaemonHistogram {
        let (status, body) = try ClientStorm.httpGet(address, "/metrics")
        guard status == 200, let h = DaemonHistogram(metrics: body) else {
            throw DaemonError("no checkoutbus_pipeline_latency_seconds histogram at http://\(address)/metrics (status \(status))")
        }
        return h
    }

    /// This process's CPU seconds so far, user and system, every thread.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}

extension FloodReport {
    /// `{"start":n,"update":n,…}` from counts indexed by ``LifecycleKind/rawValue``.
    package static func appendByKind(_ counts: [Int], to w: inout JSONWriter) {
        w.append("{")
        for k in LifecycleKind.allCases {
            if k.rawValue > 0 { w.append(",") }
            w.append("\"")
            w.append(k.name)
            w.append("\":")
            w.append(int: counts[Int(k.rawValue)])
        }
        w.append("}")
    }
}

extension String {
    /// A number with one decimal, without Foundation's formatter.
    package init(format2 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(abs(tenths % 10))"
    }

    package func padded(_ width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}
