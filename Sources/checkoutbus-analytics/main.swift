#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusWorkers
import CheckoutBusClient
import CheckoutBusRuntime

// checkoutbus-analytics: parse flags, build the worker, run it until SIGTERM/SIGINT, exit.
let arguments = Array(CommandLine.arguments.dropFirst())
// SIGTERM/SIGINT caught from here on, unblocked in the main thread before any other starts.
TerminationSignals.install()
// A log reader gone (SIGPIPE: the next line would end the worker, its last words lost) and the
// signals a daemon's operator sends to reload or poke (SIGHUP, SIGUSR1, SIGUSR2: each ended it
// without a word) do not stop it; SIGTERM and SIGINT do, cleanly.
TerminationSignals.ignore(SIGPIPE, SIGHUP, SIGUSR1, SIGUSR2)
if arguments.contains("--help") || arguments.contains("-h") {
    print(AnalyticsOptions.help)
    exit(0)
}
let options: AnalyticsOptions
do {
    options = try AnalyticsOptions.parse(arguments)
} catch {
    FileHandleWriter.standardError("checkoutbus-analytics: \(error) (checkoutbus-analytics --help lists the flags)\n")
    exit(2)
}
let logger = BusLogger(label: "checkoutbus-analytics", level: options.worker.logLevel)
do {
    // SIGTERM/SIGINT cancel the worker's task: it checkpoints, reports, prints its summary and returns.
    try await TerminationSignals.run {
        try await AnalyticsWorker(options: options, logger: logger).run()
    }
} catch {
    logger.error("fatal", ["error": "\(error)"])
    exit(1)
}
exit(0)
