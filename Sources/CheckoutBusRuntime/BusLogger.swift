#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A small structured logger: one `key=value` line per record on stderr, filtered by level.
///
/// `Sendable`; writes are single `write(2)` calls, so lines from several threads never interleave.
/// Copies of a logger share one ``SharedLogLevel``: changing ``level`` on one changes it for all
/// (the daemon's SIGHUP reload relies on it).
public struct BusLogger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        public var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }
        public init?(name: String) {
            guard let l = Level.allCases.first(where: { $0.name == name }) else { return nil }
            self = l
        }
    }

    public var label: String
    public let sharedLevel: SharedLogLevel
    public var level: Level {
        get { sharedLevel.level }
        nonmutating set { sharedLevel.level = newValue }
    }

    public init(label: String, level: Level = .info) {
        self.label = label
        self.sharedLevel = SharedLogLevel(level)
    }

    /// Writes `msg` with `fields` if `level` is enabled. Values with spaces or quotes are quoted.
    public func log(_ level: Level, _ msg: String, _ fields: KeyValuePairs<String, String> = [:]) {
        guard level >= self.level else { return }
        var line = "level=\(level.name) component=\(label) msg=\(BusLogger.quote(msg))"
        for (k, v) in fields { line += " \(k)=\(BusLogger.quote(v))" }
        line += "\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }

    public func debug(_ msg: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, msg, fields) }
    public func info(_ msg: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, msg, fields) }
    public func warning(_ msg: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warning, msg, fields) }
    public func error(_ msg: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, msg, fields) }

    package static func quote(_ v: String) -> String {
        if !v.isEmpty && !v.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\n" }) { return v }
        var out = "\""
        for c in v {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out + "\""
    }
}

extension BusLogger.Level {
    /// `--log-level LEVEL`, declared once for the daemon, the workers, the bridge and `route`.
    public static let option = CommandOption(
        "log-level", "LEVEL", help: "debug, info, warning or error; logs are key=value lines on stderr", default: "info")

    /// The level `option` (or a command's copy of it) gives.
    public static func parse(_ args: CommandLineArguments, _ option: CommandOption = option)
        throws(CommandLineArguments.UsageError) -> BusLogger.Level
    {
        let raw = args.string(option)
        guard let level = BusLogger.Level(name: raw) else {
            throw .init(.invalidValue, "--\(option.name) must be debug, info, warning or error, got \(raw)")
        }
        return level
    }
}
