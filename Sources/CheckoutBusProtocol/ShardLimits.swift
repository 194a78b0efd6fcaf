/// How many shards a bus may have: one definition for the daemon (`--shard I/N`), the router, the
/// bridge and every client that lists shards (docs/sharding.md).
package enum ShardLimits {
    /// The most shards a bus may have.
    package static let maxShards = 1024
}
