#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusJetStream
import CheckoutBusClient
import CheckoutBusRuntime

// checkoutbus-jetstream: parse flags, bridge the bus into JetStream until SIGTERM/SIGINT.
// `verify` and `dump` read a stream back.
var arguments = Array(CommandLine.arguments.dropFirst())
if let command = arguments.first, command == "verify" || command == "dump" {
    arguments.removeFirst()
    if arguments.contains("--help") || arguments.contains("-h") {
        print(StreamInspection.help)
        exit(0)
    }
    do {
        let inspection = try StreamInspection(arguments: arguments)
        exit(try command == "verify" ? inspection.verify() : inspection.dump())
    } catch {
        FileHandleWriter.standardError("checkoutbus-jetstream \(command): \(error)\n")
        exit(error is CommandLineArguments.UsageError ? 2 : 1)
    }
}
if arguments.contains("--help") || arguments.contains("-h") {
    print(BridgeOptions.help)
    exit(0)
}
let options: BridgeOptions
do {
    options = try BridgeOptions.parse(arguments)
} catch {
    FileHandleWriter.standardError("checkoutbus-jetstream: \(error) (checkoutbus-jetstream --help lists the flags)\n")
    exit(2)
}
// SIGTERM/SIGINT caught from here on, unblocked in the main thread (no `await` has run yet).
TerminationSignals.install()
// A log reader gone (SIGPIPE: the next line would end the worker, its last words lost) and the
// signals a daemon's operator sends to reload or poke (SIGHUP, SIGUSR1, SIGUSR2: each ended it
// without a word) do not stop it; SIGTERM and SIGINT do, cleanly.
TerminationSignals.ignore(SIGPIPE, SIGHUP, SIGUSR1, SIGUSR2)
let logger = BusLogger(label: "checkoutbus-jetstream", level: options.logLevel)
do {
    // SIGTERM/SIGINT cancel the bridge's task: it flushes, commits what was acknowledged, and returns.
    try await TerminationSignals.run {
        try await JetStreamBridge(options: options, logger: logger).run { fields in
            let body = fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\"\($0.value)\"" }.joined(separator: ",")
            FileHandleWriter.standardOutput("{\"ready\":true,\(body),\"pid\":\(getpid())}\n")
        }
    }
} catch {
    logger.error("fatal", ["error": "\(error)"])
    exit(1)
}
exit(0)
