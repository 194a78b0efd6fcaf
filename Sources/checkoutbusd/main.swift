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
// --check-config FILE [flags]: what a start would read, checked; nothing bound, nothing written.
if let i = arguments.firstIndex(of: "--check-config") {
    guard i + 1 < arguments.count else {
        FileHandleWriter.standardError("checkoutbusd: --check-config needs a FILE (checkoutbusd --help lists the flags)\n")
        exit(2)
    }
    do {
        let summary = try DaemonConfiguration.check(configFile: arguments[i + 1], flags: Array(arguments[..<i] + arguments[(i + 2)...]))
        print(summary)
        exit(0)
    } catch {
        FileHandleWriter.standardError("checkoutbusd --check-config: \(error)\n")
        exit(1)
    }
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
// A start that fails before the daemon is ready (a port in use, a bad key) leaves no data
// directory behind that it made itself: nothing was taken into it.
var directoryInfo = stat()
let directoryWasThere = stat(configuration.dataDirectory, &directoryInfo) == 0 || errno != ENOENT
var ready = false
@MainActor
func failStart(_ error: any Error) -> Never {
    logger.error("fatal", ["error": "\(error)"])
    if !ready && !directoryWasThere {
        if let failure = DataDirectory.removeFresh(configuration.dataDirectory) {
            logger.warning("could not remove the data directory this start made", ["path": configuration.dataDirectory, "error": failure])
        }
    }
    exit(1)
}
let daemon: BusDaemon
do {
    daemon = try BusDaemon(configuration: configuration, logger: logger)
} catch {
    failStart(error)
}
daemon.allocator = Jemalloc.allocator() ?? .system
stop.trapTerminationSignals()
let reloadSources = ReloadSignal.trap(configuration: configuration, logger: logger, allowlists: daemon.allowlists)
do {
    try daemon.run(stop: stop) { bound in
        ready = true
        FileHandleWriter.standardOutput(bound.readyLine + "\n")
    }
} catch {
    failStart(error)
}
exit(0)
