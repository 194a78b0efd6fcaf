import CheckoutBusProtocol
import CheckoutBusJSON

/// Why an input could not be used: the machine-readable `reason` of a `bus.deadletter` envelope and
/// of an acknowledged producer's rejection. A struct with static codes so the set can grow.
/// `Sendable`.
package struct DeadLetterReason: Sendable, Hashable, CustomStringConvertible {
    package let code: String
    package init(_ code: String) { self.code = code }
    package var description: String { code }

    /// Not JSON (syntax error, truncated, trailing data, control characters in strings).
    package static let invalidJSON = DeadLetterReason("invalid_json")
    /// Bytes that are not valid UTF-8.
    package static let invalidUTF8 = DeadLetterReason("invalid_utf8")
    /// Nested deeper than the parser accepts.
    package static let tooDeep = DeadLetterReason("too_deep")
    /// Larger than `--max-message-bytes`.
    package static let oversized = DeadLetterReason("oversized")
    /// JSON, but not any raw shape this daemon knows (not an object, no event name, …).
    package static let unknownShape = DeadLetterReason("unknown_shape")
    /// A known shape naming an event this daemon does not know.
    package static let unknownEvent = DeadLetterReason("unknown_event")
    /// A known message that is not a lifecycle event (web pixels, `ec.ready`, requests, link clicks).
    package static let notLifecycle = DeadLetterReason("not_lifecycle")
    /// No checkout id in the snapshot, the event or the ingest wrapper.
    package static let missingCheckoutID = DeadLetterReason("missing_checkout_id")
    /// A field holding JSON as a string (`body`, `payload`) that does not parse.
    package static let invalidEmbeddedJSON = DeadLetterReason("invalid_embedded_json")
    /// A field of the wrong type where the shape needs one (`params.checkout` not an object, …).
    package static let wrongType = DeadLetterReason("wrong_type")

    /// An event of a checkout another shard owns (`--shard I/N`; docs/sharding.md).
    package static let wrongShard = DeadLetterReason("wrong_shard")

    /// A multipart ZeroMQ message: one raw event is one single-frame message.
    package static let multipart = DeadLetterReason("multipart")

    /// Several events in one message: a JSON-RPC batch (an array of notifications), or a web
    /// component's event whose `detail` lists several entries. One message is one event: each is
    /// sent as a message of its own.
    package static let batch = DeadLetterReason("batch")

    /// A checkout, order or event id longer than ``maxIDBytes``: no SDK's id is, and each is kept or
    /// repeated (the state table keeps a completed checkout's order id, every envelope names its
    /// checkout and its idempotency key, the acknowledgement and the dead letter the event id), so
    /// one that long makes each of them as large as the producer pleases.
    package static let idTooLong = DeadLetterReason("id_too_long")

    /// The longest checkout, order or event id accepted, in UTF-8 bytes.
    package static let maxIDBytes = 1024

    /// Every reason, for metrics and documentation. New reasons go at the end: a dead letter's
    /// place in this list is its tag in the event-id window.
    package static let all: [DeadLetterReason] = [
        .invalidJSON, .invalidUTF8, .tooDeep, .oversized, .unknownShape, .unknownEvent, .notLifecycle,
        .missingCheckoutID, .invalidEmbeddedJSON, .wrongType, .wrongShard, .multipart, .batch, .idTooLong,
    ]

    /// The dead-letter reason for a parse failure.
    package init(parseError: JSONParseError) {
        switch parseError.reason {
        case .invalidUTF8: self = .invalidUTF8
        case .tooDeep: self = .tooDeep
        default: self = .invalidJSON
        }
    }
}

/// A rejected input: the reason plus a human-readable detail.
package struct DecodeRejection: Error {
    package var reason: DeadLetterReason
    package var detail: String

    package init(_ reason: DeadLetterReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}
