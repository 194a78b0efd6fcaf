import CheckoutBusJSON

/// The acknowledged ingest socket's answer to one event, declared once: the daemon writes it
/// (``write(_:eventID:)``), the Swift client's `Acknowledgement` reads it (``read(_:)``), and the
/// Python client's `Acknowledgement` reads the same bytes — both checked against
/// `Tests/Golden/ack-replies.tsv` (docs/durability.md, "Acknowledged ingest").
///
/// Every reply has `ok`, `seq` (a number or null) and `event_id` (a string or null), in that
/// order around the outcome's own members: `suppressed`, `reason`, `duplicate`.
package enum AckReplyWire {
    /// What became of the event, as the reply says it.
    package enum Outcome: Equatable, Sendable {
        /// Journaled and published under `seq`.
        case published(seq: UInt64)
        /// An update identical to the checkout's last snapshot: not published, no seq.
        case suppressed
        /// A retry of an `event_id` already accepted under `seq`; 0 when that one was suppressed.
        case duplicate(seq: UInt64)
        /// A retry of an `event_id` already dead-lettered under `seq` for `reason`.
        case duplicateDeadLetter(seq: UInt64, reason: String)
        /// Dead-lettered under `seq` for `reason` (a stable dead-letter code).
        case deadLettered(seq: UInt64, reason: String)
    }

    /// The reply's bytes; `eventID` is the event's id as the daemon read it (nil: none).
    package static func write(_ outcome: Outcome, eventID: String?) -> [UInt8] {
        var w = JSONWriter(capacity: 128)
        switch outcome {
        case .published(let seq):
            w.append("{\"ok\":true,\"seq\":")
            w.append(int: Int64(seq))
        case .suppressed:
            w.append("{\"ok\":true,\"seq\":null,\"suppressed\":true")
        case .duplicate(let seq):
            w.append("{\"ok\":true,\"seq\":")
            if seq > 0 { w.append(int: Int64(seq)) } else { w.append("null") }
            w.append(",\"duplicate\":true")
        case .deadLettered(let seq, let reason), .duplicateDeadLetter(let seq, let reason):
            w.append("{\"ok\":false,\"seq\":")
            w.append(int: Int64(seq))
            w.append(",\"reason\":")
            w.appendString(reason)
            if case .duplicateDeadLetter = outcome { w.append(",\"duplicate\":true") }
        }
        w.append(",\"event_id\":")
        if let eventID { w.appendString(eventID) } else { w.append("null") }
        w.append("}")
        return w.bytes
    }

    /// A reply as a reader sees it. Members it does not know are ignored, so a daemon may add some.
    package struct Fields: Equatable, Sendable {
        package var ok: Bool
        package var seq: Int64?
        package var reason: String?
        package var duplicate = false
        package var suppressed = false
        package var eventID: String?

        package init(ok: Bool, seq: Int64?, reason: String? = nil, duplicate: Bool = false, suppressed: Bool = false,
                     eventID: String?) {
            self.ok = ok
            self.seq = seq
            self.reason = reason
            self.duplicate = duplicate
            self.suppressed = suppressed
            self.eventID = eventID
        }
    }

    /// Reads a parsed reply: an object with an `ok` (accepted when it is `true`, refused whatever
    /// else it holds) and, when refused, a string `reason`.
    /// - Returns: nil when `document` is no such reply.
    package static func read(_ document: JSONDocument) -> Fields? {
        let root = document.root
        guard document.kind(root) == .object, let ok = document.member(root, "ok") else { return nil }
        func flag(_ key: StaticString) -> Bool { document.member(root, key).map { document.kind($0) == .true } ?? false }
        let fields = Fields(
            ok: document.kind(ok) == .true,
            seq: document.member(root, "seq").flatMap { document.int64($0) },
            reason: document.member(root, "reason").flatMap { document.string($0) },
            duplicate: flag("duplicate"), suppressed: flag("suppressed"),
            eventID: document.member(root, "event_id").flatMap { document.string($0) })
        if !fields.ok && fields.reason == nil { return nil }
        return fields
    }
}
