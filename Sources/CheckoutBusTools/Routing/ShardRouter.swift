import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Picks the shard an event goes to, exactly as the shards decide ownership: the event is decoded
/// by the daemon's own code path (``JSONDocument`` and ``RawEventDecoder``, as in
/// ``EventProcessor/process(_:receivedAt:now:timed:)``) and its `checkout_id` is mapped by
/// ``ShardMap/owner(of:count:)``.
///
/// Input that cannot be decoded (invalid JSON, no checkout id, an unknown event, a message larger
/// than ``maxMessageBytes``) has no owner. It still goes to one shard, chosen deterministically
/// from the raw bytes (jump hash of their FNV-1a), so that shard dead-letters it with the real
/// reason: nothing is dropped, and the same bad input always lands on the same shard.
///
/// Not `Sendable`: it reuses one parse buffer; one router per thread.
package final class ShardRouter {
    /// Where one event goes.
    package struct Route: Equatable, Sendable {
        /// The shard, `0..<count`.
        package var shard: Int
        /// Whether the event decoded and `shard` is its checkout's owner; false for input the
        /// owning shard cannot be known for (routed by its raw bytes).
        package var owned: Bool
    }

    /// How many shards there are (1...``ShardMap/maxCount``).
    package let count: Int
    /// Messages larger than this are not parsed: the daemon dead-letters them as `oversized`
    /// before decoding, so they are routed by their raw bytes (the daemon's `--max-message-bytes`
    /// default).
    package var maxMessageBytes = 1 << 20
    /// Decode even with one shard, so ``lastEventID`` is known (the acknowledged relay checks
    /// replies against it).
    package var keepsEventIDs = false

    /// The ingest wrapper's `event_id` of the last event routed, when it decoded and had one.
    package private(set) var lastEventID: String?

    private let document = JSONDocument()
    private let decoder = RawEventDecoder()

    /// - Parameter count: the number of shards.
    package init(count: Int) {
        precondition((1...ShardMap.maxCount).contains(count), "shard count out of range")
        self.count = count
    }

    /// The shard for one single-frame event.
    package func route(_ bytes: UnsafeRawBufferPointer) -> Route {
        lastEventID = nil
        if count == 1 && !keepsEventIDs { return Route(shard: 0, owned: true) }
        // A UTF-8 byte order mark is skipped, as the daemon skips it: the shard is the checkout's.
        let json = EventProcessor.withoutByteOrderMark(bytes)
        if bytes.count <= maxMessageBytes, (try? document.parse(json)) != nil,
            let event = try? decoder.decode(document), let id = event.checkoutID
        {
            lastEventID = event.eventID
            return Route(shard: ShardMap.owner(of: id, count: count), owned: true)
        }
        return Route(shard: ShardRouter.fallbackShard(bytes, count: count), owned: false)
    }

    /// The shard for one event held in an array.
    package func route(_ bytes: [UInt8]) -> Route { bytes.withUnsafeBytes { route($0) } }

    /// The deterministic shard for input without an owner: jump hash of the bytes' FNV-1a.
    package static func fallbackShard(_ bytes: UnsafeRawBufferPointer, count: Int) -> Int {
        ShardMap.jump(ShardMap.fnv1a64(bytes), buckets: count)
    }
}
