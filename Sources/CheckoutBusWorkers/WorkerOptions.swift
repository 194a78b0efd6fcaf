import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import SQLite


/// The flags every worker shares: where the bus is, who the worker is, and its subscriber's queue.
/// `Sendable`.
public struct WorkerOptions: Sendable {
    /// Every shard's `--publish` endpoint, in shard order (`--from A,B,C`; one for a single daemon).
    public var publishEndpoints = ["tcp://127.0.0.1:7702"]
    /// Every shard's `--control` endpoint, in the order of ``publishEndpoints`` (`--control X,Y,Z`).
    public var controlEndpoints = ["tcp://127.0.0.1:7703"]
    /// The (first) daemon's `--publish` endpoint; setting it makes the list that one endpoint.
    public var publish: String {
        get { publishEndpoints[0] }
        set { publishEndpoints = [newValue] }
    }
    /// The (first) daemon's `--control` endpoint; setting it makes the list that one endpoint.
    public var control: String {
        get { controlEndpoints[0] }
        set { controlEndpoints = [newValue] }
    }
    /// How many shards the worker follows.
    public var shardCount: Int { publishEndpoints.count }
    /// The name the worker reports its drops under in the daemon's `stats` (`--name`).
    public var name: String
    /// The subscriber's receive high-water mark (`--receive-hwm`).
    public var receiveHighWaterMark: Int32 = 100_000
    public var logLevel = BusLogger.Level.info
    /// CURVE client keys (`--curve-key`, `--curve-server`), when the daemon requires them.
    public var curve: CurveClientKeys?

    /// Flags with a value that ``parse(_:into:)`` reads; a worker adds its own.
    public static let valued: Set<String> = Set(["from", "control", "name", "receive-hwm", "log-level"])
        .union(CurveClientKeys.flags)

    public init(name: String) { self.name = name }

    /// Reads the shared flags from parsed arguments.
    public static func parse(_ args: CommandLineArguments, into o: inout WorkerOptions) throws(CommandLineArguments.UsageError) {
        if let v = args.value("from") { o.publishEndpoints = try BusOptions.endpoints(v, flag: "from") }
        if let v = args.value("control") { o.controlEndpoints = try BusOptions.endpoints(v, flag: "control") }
        guard o.publishEndpoints.count == o.controlEndpoints.count else {
            throw .init("--from lists \(o.publishEndpoints.count) endpoints and --control \(o.controlEndpoints.count): "
                        + "give every shard's publish and control endpoints, in the same shard order")
        }
        if let v = args.value("name") {
            guard !v.isEmpty, v.utf8.count <= 200 else { throw .init("--name must be 1 to 200 bytes") }
            o.name = v
        }
        o.receiveHighWaterMark = Int32(try args.int("receive-hwm", default: 100_000, in: 1...10_000_000))
        o.curve = try CurveClientKeys.parse(args)
        if let v = args.value("log-level") {
            guard let l = BusLogger.Level(name: v) else { throw .init("--log-level must be debug, info, warning or error") }
            o.logLevel = l
        }
    }

    /// The subscriber options for these flags and `prefixes` (the first shard's endpoints).
    public func subscriberOptions(prefixes: [String]) -> BusSubscriber.Options {
        shardSubscriberOptions(prefixes: prefixes)[0]
    }

    /// One subscriber's options per shard, in shard order, for a ``ShardedSubscriber``.
    public func shardSubscriberOptions(prefixes: [String]) -> [BusSubscriber.Options] {
        zip(publishEndpoints, controlEndpoints).map { publish, control in
            var s = BusSubscriber.Options(publish: publish, control: control)
            s.prefixes = prefixes
            s.name = name
            s.receiveHighWaterMark = receiveHighWaterMark
            s.curve = curve
            return s
        }
    }

    /// Help text for the shared flags.
    public static let help = """
          --from ENDPOINT      the daemon's --publish endpoint (default tcp://127.0.0.1:7702); for several
                               shards, every shard's, comma-separated, in shard order (0 first)
          --control ENDPOINT   the daemon's --control endpoint (default tcp://127.0.0.1:7703); for several
                               shards, every shard's, in the same order. Each shard's heartbeat is
                               checked against its position: a wrong or incomplete list is refused
          --name NAME          the name this worker reports its drops under in the daemon's stats
          --receive-hwm N      envelopes queued for this worker before ZeroMQ drops (default 100000);
                               drops are fetched again from the journal either way
          --log-level LEVEL    debug, info (default), warning, error
        \(CurveClientKeys.help)
        """
}
