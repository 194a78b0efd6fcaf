import CheckoutBusJSON
import CheckoutBusProtocol

/// The daemon's answer to one event sent on its acknowledged ingest socket (docs/durability.md,
/// "Acknowledged ingest"). `Sendable`; a value.
///
/// An accepted event has a `seq` (nil when the daemon suppressed it as an unchanged snapshot, or
/// when it is a duplicate of such an event); a rejected one was dead-lettered under ``reason``.
/// Either may be a ``isDuplicate`` retry of an `event_id` the daemon already had: then ``seq`` is
/// the first attempt's.
public struct Acknowledgement: Sendable, Equatable, CustomStringConvertible {
    /// The event is in the journal (published), was suppressed, or is a retry of one that was.
    public let isAccepted: Bool
    /// The journal `seq` of the event (or of its dead letter); nil for a suppressed update.
    public let seq: Int64?
    /// The machine-readable dead-letter reason (`invalid_json`, `unknown_event`, …) of a rejected
    /// event; nil when accepted.
    public let reason: String?
    /// A retry of an `event_id` the daemon had already answered: nothing was published again.
    public let isDuplicate: Bool
    /// An identical update the daemon did not publish (no `seq`).
    public let isSuppressed: Bool
    /// The event's id as the daemon read it; nil when it had none (or was not JSON).
    public let eventID: String?

    public init(isAccepted: Bool, seq: Int64?, reason: String?, isDuplicate: Bool, isSuppressed: Bool, eventID: String?) {
        self.isAccepted = isAccepted
        self.seq = seq
        self.reason = reason
        self.isDuplicate = isDuplicate
        self.isSuppressed = isSuppressed
        self.eventID = eventID
    }

    /// Reads one reply frame: `{"ok":true,"seq":N,…}` or `{"ok":false,"seq":N,"reason":…,…}`
    /// (``AckReplyWire/read(_:)``).
    /// - Returns: nil when the frame is not such a reply.
    package init?(reply bytes: UnsafeRawBufferPointer, document: JSONDocument) {
        guard (try? document.parse(bytes)) != nil, let fields = AckReplyWire.read(document) else { return nil }
        self.init(isAccepted: fields.ok, seq: fields.seq, reason: fields.reason, isDuplicate: fields.duplicate,
                  isSuppressed: fields.suppressed, eventID: fields.eventID)
    }

    public var description: String {
        let at = seq.map { "seq \($0)" } ?? "no seq"
        let id = eventID.map { ", event_id \($0)" } ?? ""
        let duplicate = isDuplicate ? ", duplicate" : ""
        if isAccepted { return "accepted (\(isSuppressed ? "suppressed" : at)\(duplicate)\(id))" }
        return "rejected: \(reason ?? "?") (\(at)\(duplicate)\(id))"
    }
}
