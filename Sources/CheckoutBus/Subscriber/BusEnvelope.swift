/// The kinds of envelope that take a `seq` and are journaled: five lifecycle kinds and dead letters.
///
/// Their order is the journal's kind byte (docs/durability.md). `Sendable`.
public enum JournaledKind: Int, Sendable, CaseIterable {
    case start, update, complete, fail, dismiss, deadletter

    /// The name in envelopes (`"kind"`) and in a heartbeat's `kind_seqs`.
    public var name: String {
        switch self {
        case .start: "start"
        case .update: "update"
        case .complete: "complete"
        case .fail: "fail"
        case .dismiss: "dismiss"
        case .deadletter: "deadletter"
        }
    }

    /// Every topic of this kind starts with this; for every kind but `fail` it is the whole topic.
    var topicRoot: String {
        switch self {
        case .start: "checkout.start"
        case .update: "checkout.update"
        case .complete: "checkout.complete"
        case .fail: "checkout.fail."
        case .dismiss: "checkout.dismiss"
        case .deadletter: "bus.deadletter"
        }
    }

    /// Whether the topic's whole family is this kind's root (`false` only for `fail`'s per-code topics).
    var topicIsExact: Bool { self != .fail }

    /// The kind a published topic belongs to, or `nil` for a topic that takes no `seq`.
    public init?(topic: [UInt8]) {
        for kind in JournaledKind.allCases {
            let root = kind.topicRoot.utf8
            if kind.topicIsExact ? topic.elementsEqual(root) : (topic.starts(with: root) || topic.elementsEqual(root.dropLast())) {
                self = kind
                return
            }
        }
        return nil
    }
}

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
    var positionOnly = false

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
struct TopicCoverage: Sendable {
    enum Level: Sendable { case none, partial, full }

    let levels: [Level]

    init(prefixes: [String]) {
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

    func level(_ kind: JournaledKind) -> Level { levels[kind.rawValue] }

    /// Every journaled topic matches: `seq` itself is contiguous, and any jump in it is a gap.
    var coversEverything: Bool { levels.allSatisfy { $0 == .full } }

    /// The kinds with any coverage.
    var subscribedKinds: [JournaledKind] { JournaledKind.allCases.filter { level($0) != .none } }

    /// The one kind subscribed, when exactly one is and it is fully covered: its `kind_seq` is then
    /// contiguous, and any jump in it is a gap.
    var singleFullKind: JournaledKind? {
        let kinds = subscribedKinds
        guard kinds.count == 1, level(kinds[0]) == .full else { return nil }
        return kinds[0]
    }
}
