import CheckoutBus

/// The flags every worker shares: where the bus is, who the worker is, and its subscriber's queue.
/// `Sendable`.
public struct WorkerOptions: Sendable {
    /// The daemon's `--publish` endpoint (`--from`).
    public var publish = "tcp://127.0.0.1:7702"
    /// The daemon's `--control` endpoint (`--control`).
    public var control = "tcp://127.0.0.1:7703"
    /// The name the worker reports its drops under in the daemon's `stats` (`--name`).
    public var name: String
    /// The subscriber's receive high-water mark (`--receive-hwm`).
    public var receiveHighWaterMark: Int32 = 100_000
    public var logLevel = Logger.Level.info
    /// CURVE client keys (`--curve-key`, `--curve-server`), when the daemon requires them.
    public var curve: CurveClientKeys?

    /// Flags with a value that ``parse(_:into:)`` reads; a worker adds its own.
    public static let valued: Set<String> = Set(["from", "control", "name", "receive-hwm", "log-level"])
        .union(CurveClientKeys.flags)

    public init(name: String) { self.name = name }

    /// Reads the shared flags from parsed arguments.
    public static func parse(_ args: CommandLineArguments, into o: inout WorkerOptions) throws(CommandLineArguments.UsageError) {
        if let v = args.value("from") { o.publish = v }
        if let v = args.value("control") { o.control = v }
        if let v = args.value("name") {
            guard !v.isEmpty, v.utf8.count <= 200 else { throw .init("--name must be 1 to 200 bytes") }
            o.name = v
        }
        o.receiveHighWaterMark = Int32(try args.int("receive-hwm", default: 100_000, in: 1...10_000_000))
        o.curve = try CurveClientKeys.parse(args)
        if let v = args.value("log-level") {
            guard let l = Logger.Level(name: v) else { throw .init("--log-level must be debug, info, warning or error") }
            o.logLevel = l
        }
    }

    /// The subscriber options for these flags and `prefixes`.
    public func subscriberOptions(prefixes: [String]) -> BusSubscriber.Options {
        var s = BusSubscriber.Options(publish: publish, control: control)
        s.prefixes = prefixes
        s.name = name
        s.receiveHighWaterMark = receiveHighWaterMark
        s.curve = curve
        return s
    }

    /// Help text for the shared flags.
    public static let help = """
          --from ENDPOINT      the daemon's --publish endpoint (default tcp://127.0.0.1:7702)
          --control ENDPOINT   the daemon's --control endpoint (default tcp://127.0.0.1:7703)
          --name NAME          the name this worker reports its drops under in the daemon's stats
          --receive-hwm N      envelopes queued for this worker before ZeroMQ drops (default 100000);
                               drops are fetched again from the journal either way
          --log-level LEVEL    debug, info (default), warning, error
        \(CurveClientKeys.help)
        """
}
