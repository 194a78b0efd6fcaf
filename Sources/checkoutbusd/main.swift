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
if let i = arguments.firstIndex(where: { $0 == "--check-config" || $0.hasPrefix("--check-config=") }) {
    let inline = arguments[i].hasPrefix("--check-config=") ? String(arguments[i].dropFirst("--check-config=".count)) : nil
    guard inline != nil || i + 1 < arguments.count else {
        FileHandleWriter.standardError("checkoutbusd: --check-config needs a FILE (checkoutbusd --help lists the flags)\n")
        exit(2)
    }
    let file = inline ?? arguments[i + 1]
    let flags = Array(arguments[..<i] + arguments[(inline == nil ? i + 2 : i + 1)...])
    if flags.contains(where: { $0 == "--config" || $0.hasPrefix("--config=") }) {
        FileHandleWriter.standardError("checkoutbusd: --check-config FILE is the configuration to check: no --config beside it (checkoutbusd --help lists the flags)\n")
        exit(2)
    }
    do {
        let summary = try DaemonConfiguration.check(configFile: file, flags: flags)
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
// instead of killing the daemon. A peer that has gone is an error on the write that meets it,
// never a signal that kills the daemon.
TerminationSignals.ignore(SIGXFSZ, SIGPIPE)
// A start that fails before the daemon is ready (a port in use, a bad key) leaves no data
// directory behind that it made itself: nothing was taken into it. Only a directory this start's
// mkdir made counts, and only while no other daemon holds its journal's lock.
let madeDataDirectory = DataDirectory.make(configuration.dataDirectory)
var ready = false
@MainActor
func failStart(_ error: any Error) -> Never {
    logger.error("fatal", ["error": "\(error)"])
    if !ready && madeDataDirectory {
        switch DataDirectory.removeIfUnused(configuration.dataDirectory) {
        case .removed: break
        case .inUse:
            logger.info("the data directory this start made is in use by another daemon: left", ["path": configuration.dataDirectory])
        case .failed(let why):
            logger.warning("could not remove the data directory this start made", ["path": configuration.dataDirectory, "error": why])
        }
    }
    exit(1)
}
// Before the journal is opened (and recovered, which may take a while): SIGTERM then stops the
// daemon as soon as it runs, and a SIGHUP (a reload) waits for the reload handler instead of
// killing the process.
stop.trapTerminationSignals()
TerminationSignals.ignore(SIGHUP)
let daemon: BusDaemon
do {
    daemon = try BusDaemon(configuration: configuration, logger: logger)
} catch {
    failStart(error)
}
daemon.allocator = Jemalloc.allocator() ?? .system
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
