import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("Dead letters (DESIGN §5: nothing is lost silently)")
struct DeadLetterTests {
    static func expectDeadLetter(_ out: Output, _ reason: DeadLetterReason, size: Int,
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(out.outcome == .deadLettered(reason), sourceLocation: sourceLocation)
        #expect(out.topic == "bus.deadletter", sourceLocation: sourceLocation)
        #expect(out["v"] == 1, sourceLocation: sourceLocation)
        #expect(out["kind"] == "deadletter", sourceLocation: sourceLocation)
        #expect(out["reason"] == .string(reason.code), sourceLocation: sourceLocation)
        #expect(out["size"] == .int(Int64(size)), sourceLocation: sourceLocation)
        #expect(out["received_at"] == "2025-12-02T11:39:01.123Z", sourceLocation: sourceLocation)
        #expect(out["detail"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
    }

    @Test("dead-lettered inputs keep their reason and their raw text", arguments: [
        ("{\"event\":\"start\",", DeadLetterReason.invalidJSON),
        ("", .invalidJSON),
        ("{\"a\":1} trailing", .invalidJSON),
        ("é", .invalidJSON),  // UTF-8, but not JSON
        ("{\"event\":\"start\"\n\"x\":1}", .invalidJSON),
        ("[1,2,3]", .unknownShape),
        ("\"just a string\"", .unknownShape),
        ("42", .unknownShape),
        ("{\"checkout_id\":\"ck-1\",\"hello\":\"world\"}", .unknownShape),
        ("{\"event\":42,\"checkout_id\":\"ck-1\"}", .unknownShape),
        ("{\"event\":\"checkoutDidExplode\",\"checkout_id\":\"ck-1\"}", .unknownEvent),
        ("{\"event\":\"dismiss\"}", .missingCheckoutID),
        ("{\"event\":\"onCheckoutFailed\",\"error\":{\"code\":\"network_error\"}}", .missingCheckoutID),
        ("{\"jsonrpc\":\"2.0\",\"method\":\"ec.start\",\"params\":{\"checkout\":{\"status\":\"incomplete\"}}}", .missingCheckoutID),
        (String(repeating: "[", count: 70) + String(repeating: "]", count: 70), .tooDeep),
    ])
    func reasons(text: String, reason: DeadLetterReason) {
        let p = EventProcessor()
        let out = p.feed(text)
        Self.expectDeadLetter(out, reason, size: text.utf8.count)
        #expect(out["raw"] == .string(text))
        #expect(out["raw_truncated"] == false)
        #expect(p.counters.deadLettered[reason.code] == 1)
        #expect(p.counters.deadLetteredTotal == 1)
        #expect(p.state.count == 0)
    }

    @Test("invalid UTF-8 is dead-lettered with every bad byte escaped as \\u00XX and good text kept", arguments: [
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D] as [UInt8], #""{\"a\":\"\u00ff\"}""#),
        ([0x22, 0xC0, 0xAF, 0x22], #""\"\u00c0\u00af\"""#),  // overlong "/"
        ([0x22, 0xED, 0xA0, 0x80, 0x22], #""\"\u00ed\u00a0\u0080\"""#),  // UTF-8-encoded surrogate
        ([0x22, 0xC3, 0xA9, 0xFE, 0x22], "\"\\\"é\\u00fe\\\"\""),  // valid é kept as is, then a bad byte
        ([0xFF, 0xFE] as [UInt8], #""\u00ff\u00fe""#),  // outside any string (was invalid_json)
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x80, 0x7D] as [UInt8], #""{\"a\":\u0080}""#),  // where a value starts
    ])
    func invalidUTF8(bytes: [UInt8], rawLiteral: String) {
        let p = EventProcessor()
        let out = p.feed(bytes: bytes)
        Self.expectDeadLetter(out, .invalidUTF8, size: bytes.count)
        #expect(out.text.contains(",\"raw\":" + rawLiteral + "}"), "envelope: \(out.text)")
    }

    @Test("control bytes and quotes in raw input are escaped, not passed through")
    func controlBytes() {
        let p = EventProcessor()
        let bytes: [UInt8] = [0x00, 0x01, 0x09, 0x0A, 0x0D, 0x22, 0x5C, 0x7F, 0x41]
        let out = p.feed(bytes: bytes)
        #expect(out.outcome == .deadLettered(.invalidJSON))
        #expect(out.text.contains(#""raw":"\u0000\u0001\t\n\r\"\\\u007fA""#), "envelope: \(out.text)")
        #expect(out["raw"] == .string("\u{0}\u{1}\t\n\r\"\\\u{7F}A"))
    }

    @Test("a message over maxMessageBytes is oversized; one at the limit is processed")
    func oversized() {
        var options = EventProcessor.Options()
        options.maxMessageBytes = 40
        let p = EventProcessor(options: options)
        let fits = #"{"event":"dismiss","checkout_id":"ck-1"}"#  // 40 bytes
        #expect(fits.utf8.count == 40)
        #expect(p.feed(fits).outcome == .published(.dismiss))
        let big = #"{"event":"dismiss","checkout_id":"ck-12"}"#  // 41 bytes
        let out = p.feed(big)
        Self.expectDeadLetter(out, .oversized, size: 41)
        #expect(out["raw"] == .string(big))
        #expect(out["detail"]?.stringValue?.contains("41") == true)
    }

    @Test("with buyer data redacted, a dead letter that parsed carries its raw redacted; one that did not, as received")
    func rawRedacted() {
        let text = #"{"event":"checkoutDidExplode","checkout_id":"ck-1","checkout":{"buyer":{"email":"a@example.com"},"id":"ck-1"}}"#
        let p = EventProcessor()
        let out = p.feed(text)
        Self.expectDeadLetter(out, .unknownEvent, size: text.utf8.count)
        #expect(out["raw_redacted"] == true)
        #expect(!out.text.contains("a@example.com"))
        #expect(out["raw"]?.stringValue?.contains(#""buyer":"[redacted]""#) == true)
        #expect(out["raw"]?.stringValue?.contains(#""event":"checkoutDidExplode""#) == true)

        var full = EventProcessor.Options()
        full.keepBuyerData = true
        let kept = EventProcessor(options: full).feed(text)
        #expect(kept["raw_redacted"] == false)
        #expect(kept["raw"] == .string(text))

        let broken = #"{"email":"a@example.com","#
        let unparsed = p.feed(broken)
        #expect(unparsed.outcome == .deadLettered(.invalidJSON))
        #expect(unparsed["raw_redacted"] == false)
        #expect(unparsed["raw"] == .string(broken))
    }

    @Test("raw is cut at deadLetterRawLimit and flagged raw_truncated")
    func rawLimit() {
        var options = EventProcessor.Options()
        options.deadLetterRawLimit = 8
        let p = EventProcessor(options: options)
        let text = "{\"this is\": not json at all}"
        let out = p.feed(text)
        Self.expectDeadLetter(out, .invalidJSON, size: text.utf8.count)
        #expect(out["raw"] == "{\"this i")
        #expect(out["raw_truncated"] == true)
    }

    @Test("a multipart message is dead-lettered through reject(_:_:_:receivedAt:)")
    func multipart() {
        let p = EventProcessor()
        let frame = #"{"event":"dismiss","checkout_id":"ck-1"}"#
        let result = Array(frame.utf8).withUnsafeBytes {
            p.reject(.multipart, "2 frames", $0, receivedAt: Timestamp(milliseconds: fixedReceivedAt))
        }
        let out = readOutput(result)
        Self.expectDeadLetter(out, .multipart, size: frame.utf8.count)
        #expect(out["detail"] == "2 frames")
        #expect(out["raw"] == .string(frame))
        #expect(p.counters.received == 1)
        #expect(p.counters.deadLettered["multipart"] == 1)
        #expect(p.state.count == 0)  // the event inside was not applied
    }

    @Test("dead letters take a seq and their own kind_seq")
    func deadLetterSequences() {
        let p = EventProcessor()
        let a = p.feed("nope")
        let b = p.feed(#"{"event":"dismiss","checkout_id":"ck-1"}"#)
        let c = p.feed("[]")
        #expect(a["seq"] == 1)
        #expect(a["kind_seq"] == 1)
        #expect(b["seq"] == 2)
        #expect(c["seq"] == 3)
        #expect(c["kind_seq"] == 2)
        #expect(p.counters.deadLettered == ["invalid_json": 1, "unknown_shape": 1])
        #expect(p.counters.deadLetteredTotal == 2)
    }

    @Test("the reason set is complete and stable")
    func reasonSet() {
        #expect(DeadLetterReason.all.map(\.code) == [
            "invalid_json", "invalid_utf8", "too_deep", "oversized", "unknown_shape", "unknown_event",
            "not_lifecycle", "missing_checkout_id", "invalid_embedded_json", "wrong_type", "wrong_shard", "multipart",
            "batch", "id_too_long",
        ])
    }

    /// `JSONDocument.parseOwned` skips allocating when `source.count == 0` and the document has
    /// never owned storage, then force-unwraps the missing buffer. A fresh processor's payload and
    /// body documents have never owned storage, so an empty embedded string traps the process.
    /// Exit tests keep the trap out of this test process.
    @Test("an empty embedded JSON string is dead-lettered, never a crash (wrapper payload)")
    func emptyPayloadString() async {
        await #expect(processExitsWith: .success) {
            let p = EventProcessor()
            let outcome = Array(#"{"checkout_id":"ck-1","payload":""}"#.utf8).withUnsafeBytes {
                p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 0).outcome
            }
            precondition(outcome == .deadLettered(.invalidEmbeddedJSON), "got \(outcome)")
        }
    }

    @Test("an empty embedded JSON string is dead-lettered, never a crash (bridge body)")
    func emptyBridgeBody() async {
        await #expect(processExitsWith: .success) {
            let p = EventProcessor()
            let outcome = Array(#"{"checkout_id":"ck-1","payload":{"name":"completed","body":""}}"#.utf8).withUnsafeBytes {
                p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 0).outcome
            }
            precondition(outcome == .deadLettered(.invalidEmbeddedJSON), "got \(outcome)")
        }
    }

    @Test("JSONDocument.parseOwned of no bytes reports `empty` instead of trapping")
    func parseOwnedEmpty() async {
        await #expect(processExitsWith: .success) {
            let doc = JSONDocument()
            do throws(JSONParseError) {
                try doc.parseOwned([])
                preconditionFailure("parsed an empty document")
            } catch {
                precondition(error.reason == .empty, "got \(error.reason.name)")
            }
        }
    }

    @Test("an empty bridge body on a dismiss is not JSON to parse and is published")
    func emptyBodyDismiss() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"name":"close","body":""}"#))
        #expect(out.outcome == .published(.dismiss))
    }
}

/// Ids past ``DeadLetterReason/maxIDBytes``: each is kept or repeated (the state table, every
/// envelope, the acknowledgement), so one as long as the producer likes would be held that long.
@Suite("Dead letters: ids over 1 KiB")
struct LongIDTests {
    static func complete(order: String, event: String = "e-1", checkout: String = "ck-long") -> String {
        #"{"checkout_id":"\#(checkout)","event_id":"\#(event)","payload":{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":{"id":"\#(checkout)","status":"completed","order":{"id":"\#(order)"}}}}}"#
    }

    @Test("an order, event or checkout id of 1,024 bytes is taken; of 1,025, dead-lettered id_too_long, named")
    func limit() {
        let p = EventProcessor()
        let fits = String(repeating: "o", count: DeadLetterReason.maxIDBytes)
        let taken = p.feed(Self.complete(order: fits))
        #expect(taken.outcome == .published(.complete) && taken["idempotency_key"] == .string(fits))
        for (line, which) in [(Self.complete(order: fits + "o", event: "e-2", checkout: "ck-2"), "an order id of 1025"),
                              (Self.complete(order: "o-3", event: fits + "e", checkout: "ck-3"), "an event id of 1025"),
                              (Self.complete(order: "o-4", event: "e-4", checkout: fits + "c"), "a checkout id of 1025")] {
            let out = p.feed(line)
            DeadLetterTests.expectDeadLetter(out, .idTooLong, size: line.utf8.count)
            #expect(out["detail"]?.stringValue?.hasPrefix(which) == true, "\(out.text)")
        }
        // An order id at the limit names a checkout of its own when nothing else does (`order:` + id).
        let byOrder = p.feed(#"{"event":"checkoutDidComplete","orderId":"\#(fits)"}"#)
        #expect(byOrder.outcome == .published(.complete) && byOrder["checkout_id"] == .string("order:" + fits))
        #expect(p.state.count == 2)
        #expect(p.counters.deadLettered["id_too_long"] == 3)
    }

    @Test("a dead letter names no event or checkout id over the limit (it would be as long), whatever its reason")
    func notEchoed() {
        let p = EventProcessor()
        let long = String(repeating: "x", count: 300_000)
        let tooLong = p.feed(Self.complete(order: "o-5", event: long))
        #expect(tooLong.outcome == .deadLettered(.idTooLong))
        #expect(tooLong["event_id"] == .null && tooLong["checkout_id"] == "ck-long", "\(tooLong.text.prefix(300))")
        let unknown = p.feed(#"{"checkout_id":"\#(long)","event_id":"\#(long)","payload":{"event":"checkoutDidExplode"}}"#)
        #expect(unknown.outcome == .deadLettered(.unknownEvent))
        #expect(unknown["event_id"] == .null && unknown["checkout_id"] == .null)
    }
}
