#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// SIGHUP: re-read `--config` and apply what can change live (the log level), and re-read the
/// CURVE allowlist directories.
///
/// Runs on a global dispatch queue; the level is shared atomically with every copy of the
/// daemon's logger, so the pipeline sees the change at its next log line. Without `--config`,
/// SIGHUP is logged and ignored (it no longer terminates the daemon). `Sendable` by use.
package enum ReloadSignal {
    /// Installs the handler; keep the returned sources alive.
    package static func trap(configuration: DaemonConfiguration, logger: BusLogger, allowlists: CurveAllowlists? = nil)
        -> [any DispatchSourceSignal]
    {
        TerminationSignals.ignore(SIGHUP)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        let path = configuration.configPath
        let errorMapPath = configuration.errorMapPath
        source.setEventHandler {
            if let errorMapPath {
                // A bad file never replaces a good map: the error names its line, the old map stays.
                do {
                    let map = try DaemonConfiguration.loadErrorMap(errorMapPath)
                    ErrorMap.install(map)
                    logger.log(.warning, "error map reloaded", ["path": errorMapPath, "entries": String(map.count)])
                } catch {
                    logger.error("error map reload failed; the map stays as it was", ["error": "\(error)"])
                }
            }
            if let allowlists {
                do {
                    let n = try allowlists.reload()
                    logger.log(.warning, "curve allowlists reloaded", [
                        "producers": String(n.producers), "subscribers": String(n.subscribers),
                    ])
                } catch {
                    logger.error("curve allowlist reload failed; the lists stay as they were", ["error": "\(error)"])
                }
            }
            guard let path else {
                if allowlists == nil && errorMapPath == nil { logger.warning("SIGHUP ignored: no --config file to reload") }
                return
            }
            do {
                let before = logger.level
                if let level = try DaemonConfiguration.reloadableLogLevel(path: path) { logger.level = level }
                logger.log(.warning, "configuration reloaded", [
                    "path": path, "log_level": "\(before.name)→\(logger.level.name)",
                ])
            } catch {
                logger.error("configuration reload failed; settings unchanged", ["path": path, "error": "\(error)"])
            }
        }
        source.resume()
        return [source]
    }
}
