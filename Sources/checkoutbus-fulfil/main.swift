#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusWorkers
import CheckoutBusClient
import CheckoutBusRuntime

// checkoutbus-fulfil: parse flags, open the order store, record orders until SIGTERM/SIGINT.
let arguments = Array(CommandLine.arguments.dropFirst())
// SIGTERM/SIGINT caught from here on, unblocked in the main thread before any other starts.
TerminationSignals.install()
// A log reader gone (SIGPIPE: the next line would end the worker, its last words lost) and the
// signals a daemon's operator sends to reload or poke (SIGHUP, SIGUSR1, SIGUSR2: each ended it
// without a word) do not stop it; SIGTERM and SIGINT do, cleanly.
TerminationSignals.ignore(SIGPIPE, SIGHUP, SIGUSR1, SIGUSR2)
if arguments.contains("--help") || arguments.contains("-h") {
    print(FulfilmentWorker.help)
    exit(0)
}
let options: FulfilmentWorker.Options
do {
    options = try FulfilmentWorker.parse(arguments)
} catch {
    FileHandleWriter.standardError("checkoutbus-fulfil: \(error) (checkoutbus-fulfil --help lists the flags)\n")
    exit(2)
}
let logger = BusLogger(label: "checkoutbus-fulfil", level: options.worker.logLevel)
do {
    // SIGTERM/SIGINT cancel the worker's task: it records what was handed over, logs, and returns.
    try await TerminationSignals.run {
        let worker = try FulfilmentWorker(options: options, logger: logger)
        try await worker.run { FileHandleWriter.standardError("fulfil: subscribed\n") }
    }
} catch {
    logger.error("fatal", ["error": "\(error)"])
    exit(1)
}
exit(0)
