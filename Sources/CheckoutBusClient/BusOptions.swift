import CheckoutBusProtocol
import Foundation
import CheckoutBusRuntime

/// The flags of a daemon's client, declared once for every command, worker and bridge that takes
/// them (``CommandOption``); a command that says more about one takes it with
/// ``CommandOption/described(_:)``.
public enum BusOptions {
    /// `--control ENDPOINT`, one daemon's.
    public static let control = CommandOption(
        "control", "ENDPOINT", help: "the daemon's --control endpoint", default: DefaultEndpoints.control)
    /// `--control ENDPOINT[,…]`: every shard's, in shard order.
    public static let controlShards = control.described(
        "the daemon's --control endpoint; for several shards, every shard's, comma-separated, in shard order")
    /// `--from ENDPOINT[,…]`: the daemon's publish endpoint, or every shard's.
    public static let from = CommandOption(
        "from", "ENDPOINT",
        help: "the daemon's --publish endpoint; for several shards, every shard's, comma-separated, in shard order",
        default: DefaultEndpoints.publish)
    /// `--to ENDPOINT`: the daemon's fire-and-forget ingest.
    public static let to = CommandOption(
        "to", "ENDPOINT", help: "the daemon's --ingest endpoint", default: DefaultEndpoints.ingest)

    /// `--timeout SECONDS` with a command's own default.
    public static func timeout(_ seconds: Int, _ help: String = "give up when the daemon does not answer") -> CommandOption {
        CommandOption("timeout", "SECONDS", help: help, default: String(seconds))
    }

    /// `--format pretty|json`: a command describes what each prints.
    public static func format(_ help: String) -> CommandOption {
        CommandOption("format", "pretty|json", help: help, default: "pretty")
    }

    /// A comma-separated list of endpoints (every shard's; `ordered`: in shard order): none empty,
    /// at most ``ShardLimits/maxShards``; spaces around each are dropped. Every flag that lists shards' endpoints reads
    /// them with this.
    public static func endpoints(_ value: String, flag: String, ordered: Bool = true)
        throws(CommandLineArguments.UsageError) -> [String]
    {
        let list = value.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        guard list.count <= ShardLimits.maxShards, !list.contains(where: \.isEmpty) else {
            throw .init(.invalidValue, "--\(flag) takes 1 to \(ShardLimits.maxShards) comma-separated endpoints"
                        + (ordered ? ", in shard order (shard 0 first)" : "") + ", none empty; got \(value)")
        }
        return list
    }

    /// The endpoints `option` gives (or its default).
    public static func endpoints(_ args: CommandLineArguments, _ option: CommandOption) throws(CommandLineArguments.UsageError) -> [String] {
        try endpoints(args.string(option), flag: option.name)
    }
}
