import CheckoutBusJSON

/// One thread's working state for ``EventProcessor/prepare(_:options:eventIDWindow:in:prefetch:)``:
/// the parsed document, the decoder, the redaction notes, and what the prepare found, which waits
/// here for ``EventProcessor/commit(_:_:_:receivedAt:now:)``.
///
/// `@unchecked Sendable`: a context is used by one thread at a time and handed between the
/// pipeline thread and a prepare thread with a happens-before edge (the daemon's
/// ``PrepareWorkers`` hand batches over under a lock); its buffers are reused message after message.
public final class EventDecodeContext: @unchecked Sendable {
    /// What a prepare found.
    public enum Outcome {
        case none
        case oversized
        case parseFailed(JSONParseError)
        case decodeFailed(DecodeRejection)
        /// Decoded, for a checkout this shard does not own (the owner's index).
        case wrongShard(Int)
        case decoded
    }

    let document = JSONDocument()
    let decoder = RawEventDecoder()
    /// Where the event's snapshot is redacted (offset pairs), noted while it was hashed; valid
    /// while ``redactionsToken`` is the snapshot's token.
    var redactions: [Int] = []
    var redactionsToken: Int?

    public internal(set) var outcome = Outcome.none
    /// The decoded event, kept here by whoever prepares in parallel until the commit.
    public var event: DecodedEvent?
    var hash: UInt64 = 0
    var checkoutKey = CheckoutStateTable.key("")
    var idKey: (UInt64, UInt64)?
    /// A message that did not decode: the event and checkout it names, if any.
    var failedEventID: String?
    var failedCheckoutID: String?

    /// Set before the prepare to time this message's stages (``EventProcessor/lastStageTimes``).
    public var timing = false
    var startedAt: UInt64 = 0
    var decodedAt: UInt64 = 0
    var hashedAt: UInt64 = 0

    public init() {}

    @inline(__always)
    func reset() {
        outcome = .none
        idKey = nil
        // Set only after a message that did not decode: cleared only then (assigning nil releases
        // the old value, a runtime call, even when it is nil).
        if failedEventID != nil { failedEventID = nil }
        if failedCheckoutID != nil { failedCheckoutID = nil }
        redactionsToken = nil
        decodedAt = 0
        hashedAt = 0
    }
}
