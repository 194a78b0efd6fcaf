import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import SQLite


/// The flags every worker shares: where the bus is, who the worker is, and its subscriber's queue.
/// `Sendable`.
package struct WorkerOptions: Sendable {
    /// Every shard's `--publish` endpoint, in shard order (`--from A,B,C`; one for a single daemon).
    package var publishEndpoints = [DefaultEndpoints.publish]
    /// Every shard's `--control` endpoint, in the order of ``publishEndpoints`` (`--control X,Y,Z`).
    package var controlEndpoints = [DefaultEndpoints.control]
    /// The (first) daemon's `--publish` endpoint; setting it makes the list that one endpoint.
    package var publish: String {
        get { publishEndpoints[0] }
        set { publishEndpoints = [newValue] }
    }
    /// The (first) daemon's `--control` endpoint; setting it makes the list that one endpoint.
    package var control: String {
        get { controlEndpoints[0] }
        set { controlEndpoints = [newValue] }
    }
    /// How many shards the worker follows.
    package var shardCount: Int { publishEndpoints.count }
    /// The name the worker reports its drops under in the daemon's `stats` (`--name`).
    package var name: String
    /// The subscriber's receive high-water mark (`--receive-hwm`).
    package var receiveHighWaterMark: Int32 = 100_000
    package var logLevel = BusLogger.Level.info
    /// CURVE client keys (`--curve-key`, `--curve-server`), when the daemon requires them.
    package var curve: CurveClientKeys?

    static let from = BusOptions.from
    static let control = BusOptions.controlShards.described(
        "the daemon's --control endpoint; for several shards, every shard's, in the same order as --from. Each "
            + "shard's heartbeat is checked against its position: a wrong or incomplete list is refused")
    /// `--name`, with the worker's own default.
    static func name(default note: String) -> CommandOption {
        CommandOption("name", "NAME", help: "the name this worker reports its drops under in the daemon's stats",
                      defaultNote: note)
    }
    static let receiveHWM = CommandOption(
        "receive-hwm", "N",
        help: "envelopes queued for this worker before ZeroMQ drops; drops are fetched again from the journal either way",
        default: String(WorkerOptions(name: "").receiveHighWaterMark))

    /// The flags ``parse(_:into:)`` reads, under their heading in a worker's `--help`; `name` is
    /// the worker's default name as `--help` says it.
    package static func options(name: String) -> [CommandSpec.Group] {
        [.init("The bus (every worker):", [from, control, Self.name(default: name), receiveHWM, BusLogger.Level.option]),
         .init(nil, CurveClientKeys.options)]
    }

    package init(name: String) { self.name = name }

    /// Reads the shared flags from parsed arguments.
    package static func parse(_ args: CommandLineArguments, into o: inout WorkerOptions) throws(CommandLineArguments.UsageError) {
        o.publishEndpoints = try BusOptions.endpoints(args, from)
        o.controlEndpoints = try BusOptions.endpoints(args, control)
        guard o.publishEndpoints.count == o.controlEndpoints.count else {
            throw .init("--from lists \(o.publishEndpoints.count) endpoints and --control \(o.controlEndpoints.count): "
                        + "give every shard's publish and control endpoints, in the same shard order")
        }
        if let v = args.value("name") {
            guard !v.isEmpty, v.utf8.count <= 200 else { throw .init("--name must be 1 to 200 bytes") }
            o.name = v
        }
        o.receiveHighWaterMark = Int32(try args.int(receiveHWM, in: 1...10_000_000))
        o.curve = try CurveClientKeys.parse(args)
        o.logLevel = try BusLogger.Level.parse(args)
    }

    /// The subscriber options for these flags and `prefixes` (the first shard's endpoints).
    package func subscriberOptions(prefixes: [String]) -> BusSubscriber.Options {
        shardSubscriberOptions(prefixes: prefixes)[0]
    }

    /// One subscriber's options per shard, in shard order, for a ``ShardedSubscriber``.
    package func shardSubscriberOptions(prefixes: [String]) -> [BusSubscriber.Options] {
        zip(publishEndpoints, controlEndpoints).map { publish, control in
            var s = BusSubscriber.Options(publish: publish, control: control)
            s.prefixes = prefixes
            s.name = name
            s.receiveHighWaterMark = receiveHighWaterMark
            s.curve = curve
            return s
        }
    }

}
