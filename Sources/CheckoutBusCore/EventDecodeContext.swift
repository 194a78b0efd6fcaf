import CheckoutBusJSON

/// One thread's reusable buffers for ``EventProcessor/prepare(_:options:eventIDWindow:in:timed:into:prefetch:)``:
/// the parsed document, the decoder and the redaction notes. What a prepare found is not left
/// here: it returns a ``PreparedEvent``, which ``EventProcessor/commit(_:_:_:_:receivedAt:now:)`` consumes.
/// The buffers stay valid for that commit (the event and the notes point into them).
///
/// Not `Sendable`: a context belongs to one thread at a time; its buffers are reused message after
/// message. The daemon's contexts live in its `PreparedSlots`, which hands them between the
/// pipeline thread and the prepare threads (under `PrepareWorkers`' lock).
package final class EventDecodeContext {
    let document = JSONDocument()
    let decoder = RawEventDecoder()
    /// Where the event's snapshot is redacted (offset pairs), noted while it was hashed; valid
    /// for the snapshot whose token is the prepared event's ``PreparedEvent/Keys/redactionsToken``.
    var redactions: [Int] = []

    package init() {}
}

/// What ``EventProcessor/prepare(_:options:eventIDWindow:in:timed:into:prefetch:)`` found in one
/// message, for ``EventProcessor/commit(_:_:_:_:receivedAt:now:)``: why it cannot be used, or the
/// decoded event's keys and its snapshot's hash; for a timed message, when each stage ended.
/// The decoded event itself travels beside it, where the caller keeps it (it is not copyable,
/// and moving it inside this value would copy all of it twice per message).
package struct PreparedEvent: Sendable {
    /// What the prepare found. Its payloads are plain values, so a prepared event goes away without
    /// a call (why a message is dead-lettered, with its strings, is in ``rejection``).
    package enum Outcome: Sendable {
        /// Decoded, for this shard.
        case decoded(Keys)
        /// Decoded, for a checkout this shard does not own (the owner's index).
        case wrongShard(owner: Int)
        /// Not decoded: ``rejection`` says why.
        case rejected
    }

    /// Why a message was not decoded.
    package final class Rejection: Sendable {
        enum Reason {
            case oversized
            case parseFailed(JSONParseError)
            /// With the event and checkout the message names, if any (a dead letter shows them).
            case decodeFailed(DecodeRejection, eventID: String?, checkoutID: String?)
        }

        let reason: Reason

        init(_ reason: Reason) { self.reason = reason }
    }

    /// What the lifecycle rules need of a decoded event, computed while it was prepared.
    package struct Keys: Sendable {
        /// The checkout's state-table key.
        var checkoutKey: CheckoutStateTable.Key
        /// The event id's window key, when the processor keeps event ids and the event has one.
        var idKey: (UInt64, UInt64)?
        /// The snapshot's canonical hash (0 without one).
        var hash: UInt64
        /// The snapshot whose redactions the context noted, if any (``EventDecodeContext/redactions``).
        var redactionsToken: Int?
    }

    /// When a timed message's stages ended (monotonic ns, ``StageTimes/now()``).
    package struct Marks: Sendable {
        var started: UInt64
        var decoded: UInt64
        var hashed: UInt64
    }

    package let outcome: Outcome
    /// Set when the message was timed and decoded for this shard.
    let marks: Marks?
    /// Set when ``outcome`` is `rejected`.
    let rejection: Rejection?

    init(_ outcome: Outcome, marks: Marks? = nil) {
        self.outcome = outcome
        self.marks = marks
        rejection = nil
    }

    init(rejected reason: Rejection.Reason) {
        outcome = .rejected
        marks = nil
        rejection = Rejection(reason)
    }
}
