#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusDaemon
import CheckoutBusRuntime

// checkoutbusd: parse flags, build the daemon, run it until SIGTERM/SIGINT, exit.
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
    print(DaemonConfiguration.help)
    exit(0)
}
if arguments.contains("--version") {
    print("checkoutbusd \(CheckoutBusVersion.current) (\(CheckoutBusVersion.revision))")
    exit(0)
}
let configuration: DaemonConfiguration
do {
    configuration = try DaemonConfiguration.parse(arguments)
} catch {
    FileHandleWriter.standardError("checkoutbusd: \(error) (checkoutbusd --help lists the flags)\n")
    exit(2)
}
let logger = BusLogger(label: "checkoutbusd", level: configuration.logLevel)
let stop = StopSignal()
// A file size limit (ulimit -f) makes a journal write fail with EFBIG, handled like a full disk,
// instead of killing the daemon.
signal(SIGXFSZ, SIG_IGN)
// A peer that has gone is an error on the write that meets it, never a signal that kills the daemon.
signal(SIGPIPE, SIG_IGN)
let daemon: BusDaemon
do {
    daemon = try BusDaemon(configuration: configuration, logger: logger)
} catch {
    logger.error("fatal", ["error": "\(error)"])
    exit(1)
}
daemon.allocator = Jemalloc.allocator() ?? .system
stop.trapTerminationSignals()
let reloadSources = ReloadSignal.trap(configuration: configuration, logger: logger, allowlists: daemon.allowlists)
do {
    try daemon.run(stop: stop) { bound in
        FileHandleWriter.standardOutput(bound.readyLine + "\n")
    }
} catch {
    logger.error("fatal", ["error": "\(error)"])
    exit(1)
}
exit(0)
