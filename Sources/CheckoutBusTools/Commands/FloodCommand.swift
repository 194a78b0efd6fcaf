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
                                 [--rate EVENTS_PER_SECOND] [--count N] [--duration SECONDS] [--json]

          --to ENDPOINT        the daemon's --ingest endpoint (default tcp://127.0.0.1:7700), or a
                               `checkoutbus route` front's --listen endpoint
          --shards E0,E1,…     route each event to the shard owning its checkout (docs/sharding.md):
                               the shards' --ingest endpoints, in shard order (instead of --to)
          --from P[,P1,…]      the daemon's --publish endpoint (default tcp://127.0.0.1:7702); with
                               shards, every shard's, comma-separated (any order): the subscriber
                               waits for a heartbeat from each, and counts what all of them publish
          --checkouts N        checkouts to generate (default 10000); each is a whole lifecycle drawn from
                               every raw family and platform spelling: starts, updates with identical
                               repeats (to be suppressed), completes and repeated completes, failures,
                               failures before start, dismissals, Primer retries
          --seed S             generator seed (default 1): the same seed, the same events
          --rate R             events per second (default: flat out)
          --count N            send at most N events
          --duration SECONDS   stop sending after this long
          --json               print the report as one JSON object

        The report gives sent, published by kind and suppressed — each against what the generator
        expects — dead letters, throughput and end-to-end latency percentiles measured by a subscriber.
        With shards the counts are the sum over every shard; a dead letter (a wrong_shard among them:
        an event that reached a shard not owning its checkout) makes the run fail.
        A live progress line goes to stderr on a terminal. Exits 1 on any unexpected loss or extra.
        \(CurveClientKeys.help)
          (flood's one key is used by its producer and its subscriber: list it in both directories)
        """

    package var ingest = ["tcp://127.0.0.1:7700"]
    package var publish = ["tcp://127.0.0.1:7702"]
    package var checkouts = 10_000
    package var seed: UInt64 = 1
    package var rate: Double?
    package var count: Int?
    package var duration: Double?
    package var json = false
    package var curve: CurveClientKeys?

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(
            arguments, valued: Set(["to", "shards", "from", "checkouts", "seed", "rate", "count", "duration"]).union(CurveClientKeys.flags),
            switches: ["json"])
        curve = try CurveClientKeys.parse(args)
        if let v = args.value("to") { ingest = [v] }
        if let list = args.value("shards") {
            guard args.value("to") == nil else { throw .init("give --to (one daemon or a route) or --shards (every shard), not both") }
            ingest = try ShardRouter.parseEndpoints(list, flag: "shards")
        }
        if let list = args.value("from") { publish = try ShardRouter.parseEndpoints(list, flag: "from", ordered: false) }
        checkouts = try args.int("checkouts", default: 10_000, in: 1...50_000_000)
        seed = UInt64(try args.int("seed", default: 1, in: 0...Int.max))
        if args.value("rate") != nil { rate = Double(try args.int("rate", default: 0, in: 1...10_000_000)) }
        if args.value("count") != nil { count = try args.int("count", default: 0, in: 1...Int.max) }
        if args.value("duration") != nil { duration = Double(try args.int("duration", default: 0, in: 1...86_400)) }
        json = args.has("json")
    }

    public func run() -> Int32 {
        var generator = FloodGenerator(checkouts: checkouts, seed: seed, runID: "flood\(seed)-\(getpid())")
        if let rate, let duration { generator.checkouts = max(checkouts, Int(rate * duration / 5) + 1) }
        var events = generator.makeEvents()
        if let count, count < events.count { events.removeLast(events.count - count) }
        let kinds = events.map { $0.expected }
        do {
            let driver = try LoadDriver(ingest: ingest, publish: publish, target: .daemon, curve: curve)
            if isatty(2) == 1 && !json {
                driver.progress = { sent, received in
                    FileHandleWriter.standardError("\rflood: sent \(sent)  published \(received)   ")
                }
            }
            try driver.synchronize()
            let result = try driver.run(&events, rate: rate, expected: { sent in
                kinds.prefix(sent).reduce(0) { $0 + ($1 == nil ? 0 : 1) }
            }, sendLimitSeconds: duration)
            if isatty(2) == 1 && !json { FileHandleWriter.standardError("\r\u{1B}[K") }
            let report = FloodReport(result: result, expected: Array(events.prefix(result.sent)))
            FileHandleWriter.standardOutput(json ? report.json + "\n" : report.text)
            return report.ok ? 0 : 1
        } catch {
            FileHandleWriter.standardError("checkoutbus flood: \(error)\n")
            return 1
        }
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
