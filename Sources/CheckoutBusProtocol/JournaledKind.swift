import CheckoutBusJSON

/// The kinds of envelope that take a `seq` and are journaled: five lifecycle kinds and dead letters.
///
/// The one definition of the kinds' names and topics: ``LifecycleKind`` takes its own from here,
/// and the journal's kind count is ``allCases``'s. Their order is the journal's kind byte
/// (docs/durability.md). `Sendable`.
public enum JournaledKind: Int, Sendable, CaseIterable {
    case start, update, complete, fail, dismiss, deadletter

    /// The name in envelopes (`"kind"`), in a heartbeat's `kind_seqs` and in stats.
    @inlinable
    public var staticName: StaticString {
        switch self {
        case .start: "start"
        case .update: "update"
        case .complete: "complete"
        case .fail: "fail"
        case .dismiss: "dismiss"
        case .deadletter: "deadletter"
        }
    }

    /// The topic an envelope of this kind is published on; a failure's appends `.<code>`.
    @inlinable
    public var topic: StaticString {
        switch self {
        case .start: "checkout.start"
        case .update: "checkout.update"
        case .complete: "checkout.complete"
        case .fail: "checkout.fail"
        case .dismiss: "checkout.dismiss"
        case .deadletter: "bus.deadletter"
        }
    }

    /// ``staticName`` as a `String`.
    public var name: String { JournaledKind.string(staticName) }

    /// Every topic of this kind starts with this; for every kind but `fail` it is the whole topic.
    package var topicRoot: String { topicIsExact ? JournaledKind.string(topic) : JournaledKind.string(topic) + "." }

    /// Whether the topic's whole family is this kind's root (`false` only for `fail`'s per-code topics).
    package var topicIsExact: Bool { self != .fail }

    /// The journaled kind of a lifecycle event.
    @inlinable
    public init(_ kind: LifecycleKind) {
        switch kind {
        case .start: self = .start
        case .update: self = .update
        case .complete: self = .complete
        case .fail: self = .fail
        case .dismiss: self = .dismiss
        }
    }

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

    private static func string(_ text: StaticString) -> String {
        String(decoding: UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount), as: UTF8.self)
    }
}
