/// The fields of a published envelope (docs/envelope.md), for ``ReceivedEnvelope/decode()``.
///
/// Every field the daemon may omit or null is optional, so one type reads lifecycle envelopes and
/// dead letters alike; `checkout` and `payment` (redacted snapshots of any shape) stay in
/// ``ReceivedEnvelope/bytes``. `Sendable` (a value).
public struct Envelope: Decodable, Sendable, Equatable {
    /// Where the event came from.
    public struct Source: Decodable, Sendable, Equatable {
        public var sdk: String?
        public var platform: String?
        public var format: String?
    }

    /// What analytics needs from any SDK's snapshot.
    public struct Summary: Decodable, Sendable, Equatable {
        public var status: String?
        public var currency: String?
        /// Minor units.
        public var total: Int64?
        public var subtotal: Int64?
        public var lineCount: Int?
        public var itemQuantity: Int64?
        public var orderID: String?

        enum CodingKeys: String, CodingKey {
            case status, currency, total, subtotal
            case lineCount = "line_count"
            case itemQuantity = "item_quantity"
            case orderID = "order_id"
        }
    }

    /// A failure's error (on `fail`).
    public struct Failure: Decodable, Sendable, Equatable {
        /// The stable code (docs/error-codes.md).
        public var code: String
        public var rawCode: String?
        public var message: String?
        public var httpStatus: Int?
        public var terminal: Bool?
        public var continueURL: String?

        enum CodingKeys: String, CodingKey {
            case code, message, terminal
            case rawCode = "raw_code"
            case httpStatus = "http_status"
            case continueURL = "continue_url"
        }
    }

    public var v: Int
    public var seq: Int64
    public var kindSeq: Int64
    /// 0 on an unsharded bus (and in envelopes written before shards existed).
    public var shard: Int?
    /// `start`, `update`, `complete`, `fail`, `dismiss` or `deadletter`.
    public var kind: String
    public var checkoutID: String?
    public var eventID: String?
    public var idempotencyKey: String?
    public var source: Source?
    /// RFC 3339 UTC with milliseconds.
    public var receivedAt: String?
    /// On `complete`: this checkout completed before.
    public var isRepeat: Bool?
    /// On `fail`: the checkout completed before this failure.
    public var afterComplete: Bool?
    public var summary: Summary?
    public var error: Failure?

    enum CodingKeys: String, CodingKey {
        case v, seq, shard, kind, source, summary, error
        case kindSeq = "kind_seq"
        case checkoutID = "checkout_id"
        case eventID = "event_id"
        case idempotencyKey = "idempotency_key"
        case receivedAt = "received_at"
        case isRepeat = "repeat"
        case afterComplete = "after_complete"
    }
}
