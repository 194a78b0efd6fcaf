/// `checkoutbus bench`: benchmarks that print ratios and rates, never pass/fail thresholds.
public struct BenchCommand {
    public static let help = """
        checkoutbus bench — measure CheckoutBus on this machine.

        USAGE: checkoutbus bench parse [--file PATH] [--iterations N]

          parse              hot-path stages on one snapshot: tape scan, scan + canonical hash,
                             full processing (decode, rules, summary, redaction, envelope)
          --file PATH        the raw event to parse (default bench/snapshot-1k.json)
          --iterations N     repetitions per stage (default 1000000)

        bench/compare-parsers runs simdjson on the same file beside it.
        """

    enum Mode { case parse }
    let mode: Mode
    let file: String
    let iterations: Int

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(arguments, valued: ["file", "iterations"], switches: [])
        guard args.positionals.first == "parse" else { throw .init("which benchmark? try `checkoutbus bench parse`") }
        mode = .parse
        file = args.value("file") ?? "bench/snapshot-1k.json"
        iterations = try args.int("iterations", default: 1_000_000, in: 1...1_000_000_000)
    }

    public func run() -> Int32 {
        switch mode {
        case .parse: ParseBenchmark(file: file, iterations: iterations).run()
        }
    }
}
