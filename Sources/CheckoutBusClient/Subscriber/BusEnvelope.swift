import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// One envelope handed to a ``BusSubscriber``'s handler, with the fields the subscriber read from it.
///
/// `Sendable` (a value).
public struct BusEnvelope: Sendable {
    /// Where the subscriber got the envelope.
    public enum Origin: Sendable, Equatable {
        /// From the publish socket, as it happened.
        case live
        /// From the daemon's journal over the control socket: catching up, or filling a gap.
        case journal
    }

    /// The position in the publishing shard's journal (the whole bus's with one shard).
    public let seq: Int64
    /// The position within ``kind``.
    public let kindSeq: Int64
    public let kind: JournaledKind
    /// The topic frame, as published.
    public let topic: [UInt8]
    /// The envelope JSON, byte for byte as published (live and replayed envelopes are identical).
    public let bytes: [UInt8]
    public let origin: Origin
    /// The shard that published it (the envelope's `"shard"`; 0 for an envelope without one, written
    /// before shards existed). `seq` and `kind_seq` count within this shard (docs/sharding.md).
    /// A ``ShardedSubscriber`` has checked it against the endpoint's position in its list.
    public let shard: Int
    /// A live envelope outside the subscriber's prefixes, received only to keep `seq` contiguous.
    package var positionOnly = false

    public init(seq: Int64, kindSeq: Int64, kind: JournaledKind, topic: [UInt8], bytes: [UInt8], origin: Origin,
                shard: Int = 0) {
        self.seq = seq
        self.kindSeq = kindSeq
        self.kind = kind
        self.topic = topic
        self.bytes = bytes
        self.origin = origin
        self.shard = shard
    }

    public var topicString: String { String(decoding: topic, as: UTF8.self) }
}

/// How a set of subscription prefixes covers each journaled kind's topics.
///
/// A kind is covered `full`y when every topic of it matches a prefix (`checkout.` covers every
/// lifecycle kind, `checkout.fail` every failure), `partial`ly when only some do
/// (`checkout.fail.network_error`), else not at all. Under full coverage each `kind_seq` jump is a
/// real gap; under partial coverage a jump may be a failure of another code, so only the journal
/// can tell. `Sendable`.
package struct TopicCoverage: Sendable {
    package enum Level: Sendable { case none, partial, full }

    package let levels: [Level]

    package init(prefixes: [String]) {
        levels = JournaledKind.allCases.map { kind in
            let root = kind.topicRoot
            if prefixes.contains(where: { root.hasPrefix($0) || (!kind.topicIsExact && $0 == String(root.dropLast())) }) {
                return .full
            }
            if !kind.topicIsExact && prefixes.contains(where: { $0.hasPrefix(root) && $0.count > root.count }) {
                return .partial
            }
            return .none
        }
    }

    package func level(_ kind: JournaledKind) -> Level { levels[kind.rawValue] }

    /// Every journaled topic matches: `seq` itself is contiguous, and any jump in it is a gap.
    package var coversEverything: Bool { levels.allSatisfy { $0 == .full } }

    /// The kinds with any coverage.
    package var subscribedKinds: [JournaledKind] { JournaledKind.allCases.filter { level($0) != .none } }

    /// The one kind subscribed, when exactly one is and it is fully covered: its `kind_seq` is then
    /// contiguous, and any jump in it is a gap.
    package var singleFullKind: JournaledKind? {
        let kinds = subscribedKinds
        guard kinds.count == 1, level(kinds[0]) == .full else { return nil }
        return kinds[0]
    }
}
