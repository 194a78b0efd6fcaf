import CheckoutBusTools
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// `checkoutbus bench`: benchmarks that print ratios and rates, never pass/fail thresholds.
package struct BenchCommand {
    /// `--events`' default: per round of the default run, and for `bench journal`.
    static let roundEvents = 200_000
    static let journalEvents = 1_000_000

    static let rounds = CommandOption("rounds", "N", help: "rounds per target", default: "5")
    static let warmup = CommandOption(
        "warmup", "N", help: "uncounted rounds per target first: the daemon's first round also pays for growing its "
            + "state table and journal", default: "1")
    static let events = CommandOption(
        "events", "N", help: "events per round; with journal: records for the journal benchmark",
        defaultNote: "\(roundEvents); journal: \(journalEvents)")
    static let latencyRate = CommandOption("latency-rate", "R", help: "events per second for the latency run", default: "10000")
    static let latencyEvents = CommandOption("latency-events", "N", help: "events in the latency run", default: "30000")
    static let memoryCheckouts = CommandOption(
        "memory-checkouts", "N", help: "distinct checkouts for the memory run (0 skips it)", default: "1000000")
    static let memoryMixCheckouts = CommandOption(
        "memory-mix-checkouts", "N",
        help: "checkouts of flood's realistic mix for the second memory run, after a warm-up of as many (0 skips it)",
        default: "200000")
    static let daemonArgs = CommandOption(
        "daemon-args", "\"ARGS\"",
        help: "extra checkoutbusd flags for the throughput and latency runs, space-separated (e.g. \"--fsync-ms 10 "
            + "--journal-cache-bytes kernel\")")
    static let producerQueue = CommandOption(
        "producer-queue", "N",
        help: "messages the load driver's producer may queue ahead of either target (its subscriber's queue stays "
            + "1000000, so nothing is dropped). A much larger queue slows the raw rounds more than the daemon's and "
            + "flatters the ratio", default: "10000")
    static let abuseRate = CommandOption("abuse-rate", "R", help: "live events per second (0 skips the round)", default: "5000")
    static let abuseEvents = CommandOption("abuse-events", "N", help: "live events per measurement", default: "15000")
    static let abuseRounds = CommandOption("abuse-rounds", "N", help: "twin/bus alternations", default: "2")
    static let abusePrefill = CommandOption(
        "abuse-prefill", "N", help: "records written before the round, for the storm to replay", default: "50000")
    static let file = CommandOption("file", "PATH", help: "parse: the raw event to parse", default: "bench/snapshot-1k.json")
    static let iterations = CommandOption("iterations", "N", help: "parse: repetitions per stage", default: "1000000")
    static let onlyFullProcess = CommandOption(
        "only-full-process", help: "parse: run only the full-processing stage (for profiling it alone)")

    package static let spec = CommandSpec(
        "checkoutbus bench", summary: "measure CheckoutBus on this machine, beside a baseline in the same run.",
        operands: "[abuse | parse | journal]",
        operandHelp: [
            .init("(none)", "starts checkoutbusd and a raw ZeroMQ PULL→PUB forwarder (zmq_proxy) on ephemeral ports; "
                  + "drives both with the same producer and subscriber and distinct ~1 KB snapshots in alternating "
                  + "rounds; prints each round with the CPU time per message of the target and of the load driver, the "
                  + "medians and the bus/raw ratio; then p50/p90/p99/p99.9 latency of both at a fixed rate; then the "
                  + "daemon's RSS growth per tracked checkout, on distinct starts and on flood's realistic mix (with the "
                  + "state table's own bytes per checkout); then the abuse round"),
            .init("abuse", "(also the last part of the default run) live latency at a fixed rate with no storm, with "
                  + "four clients replaying the journal's first 10,000 records in a loop, a /metrics scraper, a "
                  + "subscriber churning 20,000 subscriptions/s, 20 subscribers that never read, ten multipart control "
                  + "requests/s of 100 x 64 KiB frames and 100 stalled HTTP heads aimed at a twin daemon on a copy of "
                  + "the journal (the host's CPU contention alone), and with the same storm aimed at the measured "
                  + "daemon, alternating"),
            .init("parse", "hot-path stages on one snapshot: tape scan, scan + canonical hash, full processing "
                  + "(decode, rules, summary, redaction, envelope)"),
            .init("journal", "writes N ~1 KB envelopes into a fresh journal, then reads them back: Journal.read "
                  + "(checksums verified) beside a plain read(2) of the same files, and paged replay over a spawned "
                  + "daemon's control socket"),
        ],
        groups: [
            .init(nil, [rounds, warmup, events, latencyRate, latencyEvents, memoryCheckouts, memoryMixCheckouts, daemonArgs, producerQueue]),
            .init("The abuse round:", [abuseRate, abuseEvents, abuseRounds, abusePrefill]),
            .init("bench parse:", [file, iterations, onlyFullProcess]),
        ],
        notes: "bench/compare-parsers runs simdjson on the same file beside `bench parse`.")
    package static var help: String { spec.help }

    package enum Mode {
        case parse(file: String, iterations: Int, onlyFullProcess: Bool)
        case throughput(ThroughputBenchmark)
        case journal(JournalBenchmark)
        case abuse(AbuseBenchmark)
    }

    package let mode: Mode

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        if args.positionals.first == "parse" {
            mode = .parse(file: args.string(Self.file),
                          iterations: try args.int(Self.iterations, in: 1...1_000_000_000),
                          onlyFullProcess: args.has(Self.onlyFullProcess))
            return
        }
        let events = try args.optionalInt(Self.events, in: 1000...100_000_000)
        if args.positionals.first == "journal" {
            var j = JournalBenchmark()
            j.events = events ?? Self.journalEvents
            mode = .journal(j)
            return
        }
        let daemonArguments = (args.value(Self.daemonArgs) ?? "").split(separator: " ").map(String.init)
        let producerQueue = Int32(try args.int(Self.producerQueue, in: 1...10_000_000))
        var abuse = AbuseBenchmark()
        abuse.rate = Double(try args.int(Self.abuseRate, in: 0...1_000_000))
        abuse.events = try args.int(Self.abuseEvents, in: 100...100_000_000)
        abuse.rounds = try args.int(Self.abuseRounds, in: 1...100)
        abuse.prefill = try args.int(Self.abusePrefill, in: 1000...100_000_000)
        abuse.daemonArguments = daemonArguments
        abuse.producerQueue = producerQueue
        if args.positionals.first == "abuse" {
            mode = .abuse(abuse)
            return
        }
        guard args.positionals.isEmpty else { throw .init("unknown benchmark \(args.positionals[0])") }
        var b = ThroughputBenchmark()
        b.rounds = try args.int(Self.rounds, in: 1...1000)
        b.warmupRounds = try args.int(Self.warmup, in: 0...1000)
        b.daemonArguments = daemonArguments
        b.events = events ?? Self.roundEvents
        b.latencyRate = Double(try args.int(Self.latencyRate, in: 1...1_000_000))
        b.latencyEvents = try args.int(Self.latencyEvents, in: 100...100_000_000)
        b.memoryCheckouts = try args.int(Self.memoryCheckouts, in: 0...100_000_000)
        b.memoryMixCheckouts = try args.int(Self.memoryMixCheckouts, in: 0...10_000_000)
        b.producerQueue = producerQueue
        b.abuse = abuse
        mode = .throughput(b)
    }

    package func run() -> Int32 {
        switch mode {
        case .parse(let file, let iterations, let only):
            ParseBenchmark(file: file, iterations: iterations, onlyFullProcess: only).run()
        case .throughput(let b): b.run()
        case .journal(let j): j.run()
        case .abuse(let a): a.runAlone()
        }
    }
}
