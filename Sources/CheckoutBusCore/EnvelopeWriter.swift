import CheckoutBusJSON
import CheckoutBusProtocol

/// Writes the envelopes of `docs/envelope.md` and their topics — lifecycle events, dead letters and
/// heartbeats — into buffers it owns and reuses message after message.
///
/// An event's and a dead letter's frames share one pair of buffers, a heartbeat's have a pair of
/// their own: the frames a write returns stay valid until the next write of the same family.
/// Not `Sendable` (and `~Copyable`: it owns its buffers): one per ``EventProcessor``, on its
/// pipeline thread.
package struct EnvelopeWriter: ~Copyable {
    /// A topic frame and an envelope frame, in the writer's buffers.
    package typealias Frames = (topic: UnsafeRawBufferPointer, envelope: UnsafeRawBufferPointer)

    private var topic = JSONWriter(capacity: 64)
    private var envelope = JSONWriter(capacity: 8192)
    private var heartbeatTopic = JSONWriter(capacity: 32)
    private var heartbeatEnvelope = JSONWriter(capacity: 512)
    /// Writes `received_at`, remembering the text of its last minute.
    private var receivedAtFormatter = TimestampFormatter()
    /// The shard index every envelope carries.
    private let shard: ShardMap
    /// Whether buyer and payment details are written as received (`--buyer-data full`) or redacted.
    private let keepBuyerData: Bool

    package init(shard: ShardMap, keepBuyerData: Bool) {
        self.shard = shard
        self.keepBuyerData = keepBuyerData
    }

    /// Writes a lifecycle event's topic (`checkout.<kind>`, a failure's with `.<code>`) and envelope.
    /// - Parameters:
    ///   - idempotencyKey: the envelope's key; nil: the event's order id, else its checkout id
    ///     (written from the message).
    ///   - redactions: where the event's snapshot is redacted (offset pairs), when `useRedactions`:
    ///     noted while it was hashed, so publishing it takes a few copies and no second walk.
    package mutating func writeEvent(
        _ e: borrowing DecodedEvent, seq: UInt64, kindSeq: UInt64, idempotencyKey: String?, isRepeat: Bool,
        afterComplete: Bool, receivedAt: Timestamp, redactions: [Int], useRedactions: Bool
    ) -> Frames {
        topic.reset()
        topic.append(e.kind.topic)
        if let err = e.error {
            topic.append(byte: UInt8(ascii: "."))
            topic.appendRaw(err.code.rawValue)
        }
        envelope.reset()
        let (shard, keepBuyerData) = (shard, keepBuyerData)
        EnvelopeWriter.writing(&envelope, &receivedAtFormatter) { w, receivedAtFormatter in
            EnvelopeHead.write(seq: seq, kindSeq: kindSeq, shard: shard.index, to: &w)
            w.append(",\"kind\":\"")
            w.append(e.kind.name)
            w.append(EnvelopeHead.afterKindName)
            e.writeCheckoutID(to: &w)
            w.append(",\"event_id\":")
            e.writeEventID(to: &w)
            w.append(",\"idempotency_key\":")
            if let idempotencyKey {
                w.appendString(idempotencyKey)
            } else if !e.orderIdentifier.write(to: &w) {  // the order id, else the checkout id
                e.writeCheckoutID(to: &w)
            }
            w.append(",\"source\":{\"sdk\":")
            w.appendString(e.sdk)
            w.append(",\"platform\":")
            if let p = e.platform { w.appendString(p) } else { w.append("null") }
            w.append(",\"format\":\"")
            w.append(e.format.name)
            w.append("\"},\"received_at\":")
            receivedAtFormatter.write(receivedAt, to: &w)
            w.append(",\"occurred_at\":")
            if let at = e.occurredAt { w.appendRaw(at.doc.raw(at.token)) } else { w.append("null") }
            w.append(",\"repeat\":")
            w.append(bool: isRepeat)
            w.append(",\"after_complete\":")
            w.append(bool: afterComplete)
            w.append(",\"summary\":")
            // The order id is written from the event itself: not copied into the summary and released.
            let summary = SnapshotSummary.read(kind: e.kind, snapshot: e.snapshot, payment: e.payment, orderID: nil)
            EnvelopeWriter.writeSummary(summary, orderID: e.orderIdentifier, to: &w)
            if let err = e.error {
                w.append(",\"error\":{\"code\":\"")
                w.appendRaw(err.code.rawValue)
                w.append("\",\"raw_code\":")
                if let raw = err.rawCode { w.appendString(raw) } else { w.append("null") }
                w.append(",\"message\":")
                if let m = err.message { w.appendString(m) } else { w.append("null") }
                w.append(",\"http_status\":")
                if let s = err.httpStatus { w.append(int: s) } else { w.append("null") }
                w.append(",\"terminal\":")
                w.append(bool: err.terminal)
                w.append(",\"continue_url\":")
                if let u = err.continueURL { w.appendString(u) } else { w.append("null") }
                w.append("}")
            } else {
                w.append(",\"error\":null")
            }
            w.append(",\"payment\":")
            EnvelopeWriter.writeValue(e.payment, keepBuyerData: keepBuyerData, to: &w)
            w.append(",\"checkout\":")
            if useRedactions, let snapshot = e.snapshot {
                // Used without a retain and release: the event does not own its document (JSONRef.doc is
                // unowned); the decode context or the decoder's embedded documents keep it for this call.
                let token = snapshot.token
                Unmanaged.passUnretained(snapshot.doc)._withUnsafeGuaranteedRef {
                    BuyerDataRedactor.write($0, token, redactions: redactions, to: &w)
                }
            } else {
                EnvelopeWriter.writeValue(e.snapshot, keepBuyerData: keepBuyerData, to: &w)
            }
            w.append("}")
        }
        return (topic.unsafeBytes, envelope.unsafeBytes)
    }

    /// Writes a dead letter's topic (`bus.deadletter`) and envelope.
    /// - Parameters:
    ///   - size: the input's size in bytes.
    ///   - raw: the input as kept: as received, or as the redactor rewrote it (`redacted`); at most
    ///     `rawLimit` bytes of it are written.
    package mutating func writeDeadLetter(
        seq: UInt64, kindSeq: UInt64, reason: DeadLetterReason, detail: String, eventID: String?, checkoutID: String?,
        receivedAt: Timestamp, size: Int, raw: UnsafeRawBufferPointer, rawLimit: Int, redacted: Bool
    ) -> Frames {
        topic.reset()
        topic.append("bus.deadletter")
        envelope.reset()
        let shard = shard
        EnvelopeWriter.writing(&envelope, &receivedAtFormatter) { w, receivedAtFormatter in
            EnvelopeHead.write(seq: seq, kindSeq: kindSeq, shard: shard.index, to: &w)
            w.append(",\"kind\":\"deadletter\",\"reason\":")
            w.appendString(reason.code)
            w.append(",\"detail\":")
            w.appendString(detail)
            w.append(",\"event_id\":")
            if let id = eventID { w.appendString(id) } else { w.append("null") }
            w.append(",\"checkout_id\":")
            if let checkoutID { w.appendString(checkoutID) } else { w.append("null") }
            w.append(",\"received_at\":")
            receivedAtFormatter.write(receivedAt, to: &w)
            w.append(",\"size\":")
            w.append(int: size)
            let kept = min(raw.count, rawLimit)
            w.append(",\"raw_truncated\":")
            w.append(bool: kept < raw.count)
            w.append(",\"raw_redacted\":")
            w.append(bool: redacted)
            w.append(",\"raw\":")
            w.appendBytesEscaped(UnsafeRawBufferPointer(rebasing: raw[0..<kept]))
            w.append("}")
        }
        return (topic.unsafeBytes, envelope.unsafeBytes)
    }

    /// Writes a `bus.heartbeat`: the last `seq` and per-kind `kind_seq`, so an idle subscriber can
    /// tell it is behind, and the pipeline's counts. Its frames are apart from an event's.
    /// - Parameters:
    ///   - kindSeqs: each kind's last `kind_seq`, dead letters last.
    package mutating func writeHeartbeat(
        at time: Timestamp, seq: UInt64, kindSeqs: [UInt64], trackedCheckouts: Int, counters: EventProcessor.Counters,
        evictedCheckouts: UInt64, expiredCheckouts: UInt64, startedAt: Timestamp? = nil, journal: String? = nil
    ) -> Frames {
        heartbeatTopic.reset()
        heartbeatTopic.append("bus.heartbeat")
        heartbeatEnvelope.reset()
        var contents = HeartbeatWire.Contents(
            seq: seq, shard: shard.index, shards: shard.count, kindSeqs: kindSeqs, sentAt: time, startedAt: startedAt,
            trackedCheckouts: trackedCheckouts, received: counters.received, suppressed: counters.suppressed,
            deadLettered: counters.deadLettered, evictedCheckouts: evictedCheckouts, expiredCheckouts: expiredCheckouts)
        contents.journal = journal
        HeartbeatWire.write(contents, to: &heartbeatEnvelope)
        return (heartbeatTopic.unsafeBytes, heartbeatEnvelope.unsafeBytes)
    }

    /// Runs `body` on `w` and a `received_at` formatter: one exclusive access to each for the
    /// whole envelope rather than one per append.
    @inline(__always)
    private static func writing(
        _ w: inout JSONWriter, _ formatter: inout TimestampFormatter, _ body: (inout JSONWriter, inout TimestampFormatter) -> Void
    ) {
        body(&w, &formatter)
    }

    private static func writeValue(_ ref: JSONRef?, keepBuyerData: Bool, to w: inout JSONWriter) {
        guard let ref else {
            w.append("null")
            return
        }
        if keepBuyerData {
            w.appendRaw(ref.doc.raw(ref.token))
        } else {
            BuyerDataRedactor.write(ref.doc, ref.token, to: &w)
        }
    }

    /// Writes `s` with `orderID` as its `order_id` (`s.orderID` is not read).
    private static func writeSummary(_ s: borrowing SnapshotSummary, orderID: borrowing IdentifierText,
                                     to w: inout JSONWriter) {
        w.append("{\"status\":")
        if let v = s.status { w.appendString(v) } else { w.append("null") }
        w.append(",\"currency\":")
        if let v = s.currency { w.appendString(v) } else { w.append("null") }
        w.append(",\"total\":")
        if let v = s.total { w.append(int: v) } else { w.append("null") }
        w.append(",\"subtotal\":")
        if let v = s.subtotal { w.append(int: v) } else { w.append("null") }
        w.append(",\"line_count\":")
        if let v = s.lineCount { w.append(int: v) } else { w.append("null") }
        w.append(",\"item_quantity\":")
        if let v = s.itemQuantity { w.append(int: v) } else { w.append("null") }
        w.append(",\"order_id\":")
        if !orderID.write(to: &w) { w.append("null") }
        w.append("}")
    }
}
