import CheckoutBusJSON

/// One envelope of a checkout's trace: a lifecycle event or a dead letter that named it.
/// `Sendable` value.
package struct TraceEntry: Sendable, Equatable {
    package var seq: Int64
    package var kind: String
    package var receivedAt: String?
    package var eventID: String?
    package var status: String?
    package var total: Int64?
    package var currency: String?
    package var orderID: String?
    package var idempotencyKey: String?
    /// On `fail`: the stable code, the code as sent, and whether checkout ended with it.
    package var code: String?
    package var rawCode: String?
    package var terminal: Bool?
    package var isRepeat = false
    package var afterComplete = false
    /// On a dead letter: its reason and detail.
    package var reason: String?
    package var detail: String?

    package var isDeadLetter: Bool { kind == "deadletter" }

    /// Reads an envelope; nil when it is not JSON or names another checkout.
    package init?(envelope: [UInt8], checkoutID: String, doc: JSONDocument) {
        let parsed: TraceEntry? = envelope.withUnsafeBytes { buf -> TraceEntry? in
            do throws(JSONParseError) { try doc.parse(buf) } catch { return nil }
            let r = doc.root
            guard doc.kind(r) == .object, let c = doc.member(r, "checkout_id"), doc.string(c) == checkoutID,
                let seq = doc.member(r, "seq").flatMap({ doc.int64($0) }),
                let kind = doc.member(r, "kind").flatMap({ doc.string($0) })
            else { return nil }
            func text(_ object: Int, _ key: StaticString) -> String? {
                doc.member(object, key).flatMap { doc.string($0) }
            }
            var e = TraceEntry(seq: seq, kind: kind)
            e.receivedAt = text(r, "received_at")
            e.eventID = text(r, "event_id")
            e.idempotencyKey = text(r, "idempotency_key")
            e.reason = text(r, "reason")
            e.detail = text(r, "detail")
            e.isRepeat = doc.member(r, "repeat").flatMap { doc.bool($0) } ?? false
            e.afterComplete = doc.member(r, "after_complete").flatMap { doc.bool($0) } ?? false
            if let s = doc.object(r, "summary") {
                e.status = text(s, "status")
                e.total = doc.member(s, "total").flatMap { doc.int64($0) }
                e.currency = text(s, "currency")
                e.orderID = text(s, "order_id")
            }
            if let error = doc.object(r, "error") {
                e.code = text(error, "code")
                e.rawCode = text(error, "raw_code")
                e.terminal = doc.member(error, "terminal").flatMap { doc.bool($0) }
            }
            return e
        }
        guard let parsed else { return nil }
        self = parsed
    }

    package init(seq: Int64, kind: String) {
        self.seq = seq
        self.kind = kind
    }
}

/// What the journal holds about one checkout, and the verdict drawn from it. `Sendable` value.
package struct CheckoutStory: Sendable {
    package var checkoutID: String
    package var shard: Int
    package var shards: Int
    /// The journal's retained range when it was read.
    package var firstSeq: Int64?
    package var lastSeq: Int64 = 0
    package var entries: [TraceEntry] = []
    /// The journal seq each suppressed update followed (`--data-dir`); nil when not known.
    package var suppressedSeqs: [Int64]?

    package init(checkoutID: String, shard: Int, shards: Int) {
        self.checkoutID = checkoutID
        self.shard = shard
        self.shards = shards
    }

    /// How many suppressed updates came after the entry at `index` and before the next one.
    package func suppressed(after index: Int) -> Int? {
        guard let suppressedSeqs else { return nil }
        let low = entries[index].seq
        let high = index + 1 < entries.count ? entries[index + 1].seq : Int64.max
        return suppressedSeqs.count { $0 >= low && $0 < high }
    }

    /// Suppressed updates before the first entry.
    package var suppressedBefore: Int? {
        guard let suppressedSeqs else { return nil }
        let first = entries.first?.seq ?? Int64.max
        return suppressedSeqs.count { $0 < first }
    }

    /// One line: how the checkout ended, or where it stands.
    package var verdict: String {
        let events = entries.filter { !$0.isDeadLetter }
        let deadLetters = entries.count - events.count
        guard !entries.isEmpty else {
            return "unknown checkout: nothing in the journal of shard \(shard)/\(shards)"
                + (firstSeq.map { " (seqs \($0)–\(lastSeq))" } ?? "")
        }
        var parts: [String] = []
        let firstComplete = events.firstIndex { $0.kind == "complete" }
        if let firstComplete {
            let complete = events[firstComplete]
            let order = complete.orderID ?? events[firstComplete...].lazy.compactMap(\.orderID).first
            parts.append("completed, order " + (order ?? "unknown (idempotency_key \(complete.idempotencyKey ?? "?"))"))
            let before = events[..<firstComplete].count { $0.kind == "fail" }
            if before > 0 { parts.append(TraceEntry.plural(before, "failure") + " before") }
            let repeats = events.count { $0.kind == "complete" && $0.isRepeat }
            if repeats > 0 { parts.append(TraceEntry.plural(repeats, "repeat complete")) }
            let after = events.count { $0.kind == "fail" && $0.afterComplete }
            if after > 0 { parts.append(TraceEntry.plural(after, "failure") + " after complete (the order stands)") }
        } else if let last = events.last {
            let failures = events.count { $0.kind == "fail" }
            switch last.kind {
            case "fail":
                let ended = last.terminal == false ? "failed, checkout still open" : "failed"
                parts.append("\(ended): \(last.code ?? "?"), no order")
                if failures > 1 { parts.append(TraceEntry.plural(failures, "failure") + " in all") }
            case "dismiss":
                parts.append("dismissed, no order")
                if failures > 0 { parts.append(TraceEntry.plural(failures, "failure") + " before") }
            default:
                parts.append("no outcome yet: last \(last.kind) at \(last.receivedAt ?? "?"), no order")
                if failures > 0 { parts.append(TraceEntry.plural(failures, "failure")) }
            }
        } else {
            parts.append("no lifecycle event published")
        }
        if deadLetters > 0 { parts.append(TraceEntry.plural(deadLetters, "dead letter")) }
        return parts.joined(separator: ", ")
    }

    /// The trace for people: a header, one line per entry, suppressed counts, the verdict.
    package func pretty() -> String {
        var out = "checkout \(checkoutID) (shard \(shard)/\(shards), journal seqs \(firstSeq ?? 0)–\(lastSeq))\n"
        if let before = suppressedBefore, before > 0 {
            out += "       \(TraceEntry.plural(before, "identical update")) suppressed\n"
        }
        for (index, e) in entries.enumerated() {
            var parts = ["#\(e.seq)".padded(to: 7), (e.receivedAt ?? "-").padded(to: 25), e.kind.padded(to: 10)]
            if e.isDeadLetter {
                parts.append("reason=\(e.reason ?? "?")")
                if let d = e.detail { parts.append("detail=\"\(d)\"") }
            } else {
                if let code = e.code {
                    parts.append("code=\(code)" + (e.rawCode.map { " (\($0))" } ?? ""))
                    if let t = e.terminal { parts.append(t ? "terminal" : "not terminal") }
                }
                if let total = e.total { parts.append("total=\(total)" + (e.currency.map { " \($0)" } ?? "")) }
                if let s = e.status { parts.append("status=\(s)") }
                if let o = e.orderID { parts.append("order=\(o)") }
                if e.isRepeat { parts.append("[repeat]") }
                if e.afterComplete { parts.append("[after_complete]") }
            }
            if let id = e.eventID { parts.append("event_id=\(id)") }
            out += parts.joined(separator: " ") + "\n"
            if let n = suppressed(after: index), n > 0 {
                out += "       \(TraceEntry.plural(n, "identical update")) suppressed\n"
            }
        }
        if suppressedSeqs == nil && !entries.isEmpty {
            out += "(suppressed updates are not journaled: counts need --data-dir on the daemon's host)\n"
        }
        out += "verdict: \(verdict)\n"
        return out
    }

    /// The trace as one JSON object.
    package func json() -> String {
        var w = JSONWriter(capacity: 4096)
        func field(_ name: StaticString, _ value: String?) {
            w.append(",\"")
            w.append(name)
            w.append("\":")
            if let value { w.appendString(value) } else { w.append("null") }
        }
        func field(_ name: StaticString, _ value: Int64?) {
            w.append(",\"")
            w.append(name)
            w.append("\":")
            if let value { w.append(int: value) } else { w.append("null") }
        }
        func field(_ name: StaticString, _ value: Bool?) {
            w.append(",\"")
            w.append(name)
            w.append("\":")
            if let value { w.append(bool: value) } else { w.append("null") }
        }
        w.append("{\"checkout_id\":")
        w.appendString(checkoutID)
        field("shard", Int64(shard))
        field("shards", Int64(shards))
        field("first_seq", firstSeq)
        field("last_seq", lastSeq)
        field("suppressed_before", suppressedBefore.map(Int64.init))
        w.append(",\"events\":[")
        for (index, e) in entries.enumerated() {
            if index > 0 { w.append(",") }
            w.append("{\"seq\":")
            w.append(int: e.seq)
            field("kind", e.kind)
            field("received_at", e.receivedAt)
            field("event_id", e.eventID)
            if e.isDeadLetter {
                field("reason", e.reason)
                field("detail", e.detail)
            } else {
                field("status", e.status)
                field("total", e.total)
                field("currency", e.currency)
                field("order_id", e.orderID)
                field("idempotency_key", e.idempotencyKey)
                field("code", e.code)
                field("raw_code", e.rawCode)
                field("terminal", e.terminal)
                field("repeat", e.isRepeat)
                field("after_complete", e.afterComplete)
            }
            field("suppressed_after", suppressed(after: index).map(Int64.init))
            w.append("}")
        }
        w.append("]")
        field("verdict", verdict)
        w.append("}")
        return String(decoding: w.bytes, as: UTF8.self)
    }
}

extension TraceEntry {
    /// `1 failure`, `2 failures`.
    package static func plural(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
}

extension String {
    fileprivate func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
