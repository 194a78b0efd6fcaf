/// Why a send on an ``AcknowledgedProducer`` did not get every answer. `Sendable`.
///
/// A struct that can grow: compare ``code`` with the `static let`s of ``Code``. Replies come in
/// the order events were sent, so the events answered before the failure are a prefix of the
/// ones given: ``acknowledged`` holds their answers, and the events after them may or may not be
/// in the journal — send them again (with their `event_id`s the daemon answers a retry of one it
/// has as a duplicate with the first `seq`; docs/durability.md, "Retries").
public struct AcknowledgedProducerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for code to act on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// No reply came within the producer's timeout: the daemon is down or unreachable, slower
        /// than the timeout, or (with CURVE) refused the key.
        public static let timedOut = Code("timed_out")
        /// The connection to the daemon dropped with events unanswered (the daemon stopped or
        /// was killed); libzmq reconnects by itself, and later sends go to the daemon once it is back.
        public static let disconnected = Code("disconnected")
        /// A reply that does not answer the event it came for: not a reply at all, or one naming
        /// another `event_id`. The producer starts a fresh connection.
        public static let unexpectedReply = Code("unexpected_reply")
        /// The task waiting for the answers was cancelled.
        public static let cancelled = Code("cancelled")
        /// The producer was closed (or its socket could not be made).
        public static let closed = Code("closed")
    }

    public let code: Code
    /// The answers to the events before the first one left unanswered, in send order.
    public let acknowledged: [Acknowledgement]
    public let description: String

    public init(_ code: Code, _ description: String, acknowledged: [Acknowledgement] = []) {
        self.code = code
        self.description = description
        self.acknowledged = acknowledged
    }
}
