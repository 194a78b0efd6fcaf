import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// `checkoutbus bench`: benchmarks that print ratios and rates, never pass/fail thresholds.
public struct BenchCommand {
    public static let help = """
        checkoutbus bench — measure CheckoutBus on this machine, beside a baseline in the same run.

        USAGE: checkoutbus bench [--rounds N] [--warmup N] [--events N] [--latency-rate R]
                                 [--latency-events N] [--memory-checkouts N] [--daemon-args "ARGS"]
                                 [--producer-queue N] [--abuse-rate R] [--abuse-events N] [--abuse-rounds N]
               checkoutbus bench abuse [--abuse-rate R] [--abuse-events N] [--abuse-rounds N] [--abuse-prefill N]
               checkoutbus bench parse [--file PATH] [--iterations N] [--only-full-process]
               checkoutbus bench journal [--events N]

          (default)            starts checkoutbusd and a raw ZeroMQ PULL→PUB forwarder (zmq_proxy) on
                               ephemeral ports; drives both with the same producer and subscriber and
                               distinct ~1 KB snapshots in alternating rounds; prints each round with
                               the CPU time per message of the target and of the load driver, the
                               medians and the bus/raw ratio; then p50/p90/p99/p99.9 latency of both at
                               a fixed rate; then the daemon's RSS growth per tracked checkout; then
                               the abuse round (below)
          --rounds N           rounds per target (default 5)
          --warmup N           uncounted rounds per target first (default 1): the daemon's first
                               round also pays for growing its state table and journal
          --events N           events per round (default 200000)
          --latency-rate R     events per second for the latency run (default 10000)
          --latency-events N   events in the latency run (default 30000)
          --memory-checkouts N distinct checkouts for the memory run (default 1000000; 0 skips it)
          --daemon-args "ARGS" extra checkoutbusd flags for the throughput and latency runs,
                               space-separated (e.g. "--fsync-ms 10 --journal-cache-bytes kernel")
          --producer-queue N   messages the load driver's producer may queue ahead of either target
                               (default 10000; its subscriber's queue stays 1000000, so nothing is
                               dropped). A much larger queue slows the raw rounds more than the
                               daemon's and flatters the ratio

          abuse                (also the last part of the default run) live latency at a fixed rate
                               with no storm, with four clients replaying the journal's first
                               10,000 records in a loop, a /metrics scraper, a subscriber churning
                               20,000 subscriptions/s, 20 subscribers that never read, ten
                               multipart control requests/s of 100 x 64 KiB frames and 100 stalled
                               HTTP heads aimed at a twin daemon on a copy of the journal (the
                               host's CPU contention alone), and with the same storm aimed at the
                               measured daemon, alternating
          --abuse-rate R       live events per second (default 5000; 0 skips the round)
          --abuse-events N     live events per measurement (default 15000)
          --abuse-rounds N     twin/bus alternations (default 2)
          --abuse-prefill N    records written before the round, for the storm to replay (default 50000)

          parse                hot-path stages on one snapshot: tape scan, scan + canonical hash,
                               full processing (decode, rules, summary, redaction, envelope)
          --file PATH          the raw event to parse (default bench/snapshot-1k.json)
          --iterations N       repetitions per stage (default 1000000)
          --only-full-process  run only the full-processing stage (for profiling it alone)

          journal              writes N ~1 KB envelopes into a fresh journal, then reads them back:
                               Journal.read (checksums verified) beside a plain read(2) of the same
                               files, and paged replay over a spawned daemon's control socket
          --events N           records for the journal benchmark (default 1000000)

        bench/compare-parsers runs simdjson on the same file beside `bench parse`.
        """

    package enum Mode {
        case parse(file: String, iterations: Int, onlyFullProcess: Bool)
        case throughput(ThroughputBenchmark)
        case journal(JournalBenchmark)
        case abuse(AbuseBenchmark)
    }

    package let mode: Mode

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(
            arguments,
            valued: ["file", "iterations", "rounds", "warmup", "events", "latency-rate", "latency-events",
                     "memory-checkouts", "daemon-args", "producer-queue", "abuse-rate", "abuse-events", "abuse-rounds",
                     "abuse-prefill"],
            switches: ["only-full-process"])
        if args.positionals.first == "parse" {
            mode = .parse(file: args.value("file") ?? "bench/snapshot-1k.json",
                          iterations: try args.int("iterations", default: 1_000_000, in: 1...1_000_000_000),
                          onlyFullProcess: args.has("only-full-process"))
            return
        }
        if args.positionals.first == "journal" {
            var j = JournalBenchmark()
            j.events = try args.int("events", default: 1_000_000, in: 1000...100_000_000)
            mode = .journal(j)
            return
        }
        var abuse = AbuseBenchmark()
        abuse.rate = Double(try args.int("abuse-rate", default: 5000, in: 0...1_000_000))
        abuse.events = try args.int("abuse-events", default: 15_000, in: 100...100_000_000)
        abuse.rounds = try args.int("abuse-rounds", default: 2, in: 1...100)
        abuse.prefill = try args.int("abuse-prefill", default: 50_000, in: 1000...100_000_000)
        abuse.daemonArguments = (args.value("daemon-args") ?? "").split(separator: " ").map(String.init)
        abuse.producerQueue = Int32(try args.int("producer-queue", default: 10_000, in: 1...10_000_000))
        if args.positionals.first == "abuse" {
            mode = .abuse(abuse)
            return
        }
        guard args.positionals.isEmpty else { throw .init("unknown benchmark \(args.positionals[0])") }
        var b = ThroughputBenchmark()
        b.rounds = try args.int("rounds", default: 5, in: 1...1000)
        b.warmupRounds = try args.int("warmup", default: 1, in: 0...1000)
        b.daemonArguments = (args.value("daemon-args") ?? "").split(separator: " ").map(String.init)
        b.events = try args.int("events", default: 200_000, in: 1000...100_000_000)
        b.latencyRate = Double(try args.int("latency-rate", default: 10_000, in: 1...1_000_000))
        b.latencyEvents = try args.int("latency-events", default: 30_000, in: 100...100_000_000)
        b.memoryCheckouts = try args.int("memory-checkouts", default: 1_000_000, in: 0...100_000_000)
        b.producerQueue = Int32(try args.int("producer-queue", default: 10_000, in: 1...10_000_000))
        b.abuse = abuse
        mode = .throughput(b)
    }

    public func run() -> Int32 {
        switch mode {
        case .parse(let file, let iterations, let only):
            ParseBenchmark(file: file, iterations: iterations, onlyFullProcess: only).run()
        case .throughput(let b): b.run()
        case .journal(let j): j.run()
        case .abuse(let a): a.runAlone()
        }
    }
}
