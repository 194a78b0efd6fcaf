import CheckoutBusProtocol
import CheckoutBusJSON

/// Which shard owns a checkout: jump consistent hashing (Lamping & Veach, 2014) of the 64-bit
/// FNV-1a hash of the checkout id's UTF-8 bytes. Every event of one checkout goes to one shard, so
/// that shard alone holds its suppression state and its order.
///
/// The function is part of the product's contract (docs/sharding.md gives it in full with test
/// vectors, so producers in any language can route): it never changes for a given shard count.
/// Going from N to N+1 shards moves only about 1/(N+1) of the checkouts. `Sendable`.
package struct ShardMap: Sendable, Equatable, CustomStringConvertible {
    /// This daemon's shard, `0..<count`.
    package let index: Int
    /// How many shards there are.
    package let count: Int

    /// The whole bus as one shard (`0/1`), the default.
    package static let single = ShardMap(uncheckedIndex: 0, count: 1)

    /// The most shards a bus may have (``ShardLimits/maxShards``).
    package static let maxCount = ShardLimits.maxShards

    private init(uncheckedIndex index: Int, count: Int) {
        self.index = index
        self.count = count
    }

    /// Parses `I/N` (`--shard 1/3`): shard I of N, 0-based.
    package init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let i = Int(parts[0]), let n = Int(parts[1]),
              (1...ShardMap.maxCount).contains(n), (0..<n).contains(i)
        else { return nil }
        self.init(uncheckedIndex: i, count: n)
    }

    /// `I/N`.
    package var description: String { "\(index)/\(count)" }

    /// The shard (`0..<count`) that owns the checkout.
    package static func owner(of checkoutID: String, count: Int) -> Int {
        var id = checkoutID
        return id.withUTF8 { owner(ofBytes: UnsafeRawBufferPointer($0), count: count) }
    }

    /// The shard (`0..<count`) that owns the checkout whose id has these UTF-8 bytes.
    package static func owner(ofBytes bytes: UnsafeRawBufferPointer, count: Int) -> Int {
        jump(fnv1a64(bytes), buckets: count)
    }

    /// 64-bit FNV-1a.
    package static func fnv1a64(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes {
            h ^= UInt64(b)
            h &*= 0x0000_0100_0000_01b3
        }
        return h
    }

    /// Jump consistent hash: a bucket in `0..<buckets` for `key`.
    package static func jump(_ key: UInt64, buckets: Int) -> Int {
        var key = key
        var b: Int64 = -1
        var j: Int64 = 0
        while j < Int64(buckets) {
            b = j
            key = key &* 2_862_933_555_777_941_757 &+ 1
            j = Int64(Double(b + 1) * (Double(UInt64(1) << 31) / Double((key >> 33) + 1)))
        }
        return Int(b)
    }
}
