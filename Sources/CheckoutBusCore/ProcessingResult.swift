import CheckoutBusProtocol

/// What one input to ``EventProcessor`` produced, returned as a value: the outcome, the seq it was
/// published under and, when a message is to be journaled and sent, its numbering and frames.
///
/// Not `Sendable`: ``Publication/topic``, ``Publication/envelope`` and the ids' bytes
/// (``eventIdentifier``, ``suppressedCheckout``) point into buffers the processor owns, valid until
/// its next ``EventProcessor/process(_:receivedAt:now:timed:)``,
/// ``EventProcessor/commit(_:_:_:_:receivedAt:now:)`` or ``EventProcessor/reject(_:_:_:receivedAt:)``
/// call (a heartbeat writes buffers of its own and leaves them alone). Lives on the pipeline thread
/// that called the processor.
package struct ProcessingResult {
    /// A message that takes a `seq`: a lifecycle event or a dead letter. Not `Sendable` (see above).
    package struct Publication {
        /// The message's `seq`.
        package let seq: UInt64
        /// Its kind (the journal's kind byte is the raw value).
        package let kind: JournaledKind
        /// Its `kind_seq`.
        package let kindSeq: UInt64
        /// The topic frame, in the processor's buffer.
        package let topic: UnsafeRawBufferPointer
        /// The envelope frame, in the processor's buffer.
        package let envelope: UnsafeRawBufferPointer
    }

    /// What happened to the input.
    package let outcome: EventProcessor.Outcome
    /// The `seq` the input was published under; for an input that published nothing, the last
    /// `seq` assigned before it (what an acknowledgement of it waits to be durable).
    package let seq: UInt64
    /// The input's `event_id` (its ingest wrapper's, when it had one), also for a dead letter that names one.
    /// Built when read, from ``eventIdentifier``'s bytes when the id was read in place.
    package var eventID: String? { eventIdentifier.value }
    /// The event id: its bytes copied from the message into a buffer the processor owns (as the
    /// publication's frames, valid until its next ``EventProcessor/process(_:receivedAt:now:timed:)``,
    /// ``EventProcessor/commit(_:_:_:_:receivedAt:now:)`` or ``EventProcessor/reject(_:_:_:receivedAt:)``
    /// call), or its `String`.
    let eventIdentifier: IdentifierText
    /// For a suppressed update with an `event_id`: its checkout (the daemon keeps such ids beside
    /// the journal, which holds only what was published). Built when read, as ``eventID``.
    package var suppressedCheckoutID: String? { suppressedCheckout.value }
    /// The checkout id of a suppressed update with an `event_id`, as ``eventIdentifier`` holds its id.
    let suppressedCheckout: IdentifierText
    /// The message to journal and send: `nil` when the input was suppressed or a duplicate.
    package let publication: Publication?
    /// A timed input's stages (``EventProcessor/process(_:receivedAt:now:timed:)``); nil when it
    /// was not timed or did not decode into a lifecycle event (a dead letter is not sampled).
    package internal(set) var stages: EventStages?

    init(outcome: EventProcessor.Outcome, seq: UInt64, eventID: IdentifierText,
         suppressedCheckout: IdentifierText, publication: Publication?) {
        self.outcome = outcome
        self.seq = seq
        self.eventIdentifier = eventID
        self.suppressedCheckout = suppressedCheckout
        self.publication = publication
    }

    /// For a suppressed update with an `event_id`: calls `body` with its checkout id's and event
    /// id's UTF-8, without building either `String`; nothing otherwise.
    package func withSuppressedIDs(
        _ body: (_ checkoutID: UnsafeRawBufferPointer, _ eventID: UnsafeRawBufferPointer) -> Void
    ) {
        guard suppressedCheckout.isPresent && eventIdentifier.isPresent else { return }
        suppressedCheckout.withUTF8 { checkout in eventIdentifier.withUTF8 { body(checkout, $0) } }
    }
}
