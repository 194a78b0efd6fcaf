#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusRuntime

// checkoutbus: one tool for people. Parse the subcommand, run it, exit with its status.
let usage = """
    checkoutbus — the CheckoutBus command-line tool.

    USAGE: checkoutbus <command> [flags]

    COMMANDS:
      send    send raw events (JSON Lines) to a daemon's ingest socket, or to shards (--shards)
      route   a front for producers that cannot shard: each event goes to the shard owning its checkout
      tail    print envelopes published by a daemon, live
      trace   everything the journal holds about one checkout, in order, and a verdict
      replay  replay a recorded JSONL (raw capture or `tail --format json`) at its pacing, ×N, or flat out
      flood   drive a daemon (or shards) with synthetic lifecycles and check what it publishes
      stats   what a running daemon has done: counters, journal, subscribers' drops
      top     a live view of running daemons: rates, failures, dead letters, subscribers' lag
      subscribers  who follows the bus: live and gone subscribers, their lag; `forget NAME`
      ping    is every endpoint of a daemon (or of each shard) answering, and how fast
      cursor  show a subscriber's position (cursor file, fulfilment store, analytics checkpoint), or set it
      decode  what raw events would become (topic, code, summary, redaction), offline
      keygen  write a CURVE key pair (NAME.key, NAME.pub)
      bench   measure the daemon against a raw ZeroMQ forwarder; `bench parse`, `bench journal`
      forwarder  the raw PULL→PUB baseline the benchmark runs

    Run `checkoutbus <command> --help` for a command's flags.
    """

let allArguments = Array(CommandLine.arguments.dropFirst())
guard let command = allArguments.first else {
    print(usage)
    exit(2)
}
let arguments = Array(allArguments.dropFirst())
let stop = StopSignal()
// Only `tail`, `route` and `top` run until told to stop; every other command keeps the default signal behaviour.
if command == "tail" || command == "route" || command == "top" { stop.trapTerminationSignals() }

@MainActor
func runCommand(_ help: String, _ body: () throws -> Int32) -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") {
        print(help)
        return 0
    }
    do {
        return try body()
    } catch {
        // One line: what is wrong, and where the flags are (the help itself would scroll it away).
        FileHandleWriter.standardError("checkoutbus \(command): \(error) (checkoutbus \(command) --help lists the flags)\n")
        return 2
    }
}

/// Every command, its help and how it runs: the dispatch and the "did you mean" read one list.
let commands: [(name: String, help: String, run: @MainActor () throws -> Int32)] = [
    ("send", SendCommand.help, { try SendCommand(arguments: arguments).run() }),
    ("tail", TailCommand.help, { try TailCommand(arguments: arguments).run(stop: stop) }),
    ("route", RouteCommand.help, { try RouteCommand(arguments: arguments).run(stop: stop) }),
    ("replay", ReplayCommand.help, { try ReplayCommand(arguments: arguments).run() }),
    ("flood", FloodCommand.help, { try FloodCommand(arguments: arguments).run() }),
    ("forwarder", ForwarderCommand.help, { try ForwarderCommand(arguments: arguments).run() }),
    ("keygen", KeygenCommand.help, { try KeygenCommand(arguments: arguments).run() }),
    ("trace", TraceCommand.help, { try TraceCommand(arguments: arguments).run() }),
    ("stats", StatsCommand.help, { try StatsCommand(arguments: arguments).run() }),
    ("ping", PingCommand.help, { try PingCommand(arguments: arguments).run() }),
    ("cursor", CursorCommand.help, { try CursorCommand(arguments: arguments).run() }),
    ("subscribers", SubscribersCommand.help, { try SubscribersCommand(arguments: arguments).run() }),
    ("top", TopCommand.help, { try TopCommand(arguments: arguments).run(stop: stop) }),
    ("decode", DecodeCommand.help, { try DecodeCommand(arguments: arguments).run() }),
    ("bench", BenchCommand.help, { try BenchCommand(arguments: arguments).run() }),
]

// Output that cannot be written is an error, not a success with the output lost.
FileHandleWriter.exitOnStandardOutputFailure()

let status: Int32
if let entry = commands.first(where: { $0.name == command }) {
    status = runCommand(entry.help, entry.run)
} else {
    switch command {
    case "--help", "-h", "help":
        print(usage)
        status = 0
    case "--version":
        print("checkoutbus \(CheckoutBusVersion.current) (\(CheckoutBusVersion.revision))")
        status = 0
    default:
        let hint = CommandLineArguments.closest(command, among: commands.map(\.name)).map { "; did you mean `checkoutbus \($0)`?" } ?? ""
        FileHandleWriter.standardError("checkoutbus: unknown command \(command)\(hint) (checkoutbus --help lists the commands)\n")
        status = 2
    }
}
exit(status)
