import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON
import CheckoutBusProtocol

/// The checkout id read in place (its bytes in the message, no `String`) against
/// `JSONDocument.identifier(_:)`: the same id, the same state-table key, the same envelope text.
@Suite("ids read in place")
struct InPlaceIDTests {
    /// Checks `identifierText` on every token of `doc` against `identifier`.
    static func check(_ doc: JSONDocument, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for t in 0..<doc.tokenCount {
            let expected = doc.identifier(t)
            let read = RawEventDecoder.identifierText(doc, t)
            let (text, string) = (read.bytes, read.string)
            #expect(text == nil || string == nil, "\(context): token \(t)", sourceLocation: sourceLocation)
            let got = text.map { String(decoding: $0, as: UTF8.self) } ?? string
            #expect(got == expected, "\(context): token \(t)", sourceLocation: sourceLocation)
            if let text, let expected {
                #expect(Array(text) == Array(expected.utf8), "\(context): token \(t)", sourceLocation: sourceLocation)
                let a = CheckoutStateTable.key(utf8: text)
                let b = CheckoutStateTable.key(expected)
                #expect(a.lo == b.lo && a.hi == b.hi, "\(context): token \(t)", sourceLocation: sourceLocation)
                // The envelope's text: the bytes written as `appendString` writes the `String`.
                var w1 = JSONWriter(capacity: 16)
                var w2 = JSONWriter(capacity: 16)
                var event = DecodedEvent(kind: .update, format: .ecp, sdk: "shopify")
                event.checkoutIdentifier = IdentifierText(bytes: text)
                event.writeCheckoutID(to: &w1)
                w2.appendString(expected)
                #expect(w1.bytes == w2.bytes, "\(context): token \(t)", sourceLocation: sourceLocation)
                #expect(event.checkoutID == expected && event.hasCheckoutID)
                let k = event.checkoutKey()
                #expect(k?.lo == b.lo && k?.hi == b.hi)
                // The event id's window key, and its envelope text, likewise.
                event.eventIdentifier = IdentifierText(bytes: text)
                #expect(event.eventID == expected && event.hasEventID)
                #expect(event.eventIDKey(checkout: b).map { [$0.0, $0.1] } == [EventIDWindow.key(expected, checkout: b).0,
                                                                               EventIDWindow.key(expected, checkout: b).1])
                var w3 = JSONWriter(capacity: 16)
                event.writeEventID(to: &w3)
                #expect(w3.bytes == w2.bytes, "\(context): token \(t)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("an IdentifierText holds one of absent, bytes or a String, and reads and writes as its value")
    func identifierTextCases() {
        let absent = IdentifierText()
        #expect(!absent.isPresent && absent.bytes == nil && absent.string == nil && absent.value == nil)
        var w = JSONWriter(capacity: 16)
        let wroteAbsent = absent.write(to: &w)
        #expect(!wroteAbsent && w.bytes.isEmpty)
        for text in ["", "r:5:0000000000000000000", "caf\u{E9} \"q\"\\", "caf\u{E9} 日本", "1234567", "12345678", "123456789",
                     String(repeating: "x", count: 300)] {
            var copy = Array(text.utf8)
            copy.withUnsafeMutableBytes { raw in
                let bytes = UnsafeRawBufferPointer(raw)
                var expected = JSONWriter(capacity: 16)
                expected.appendString(text)
                // In place only what needs no escape, as the decoder reads it (see IdentifierText).
                let plain = JSONWriter.needsNoEscape(bytes)
                let cases = plain
                    ? [(IdentifierText(bytes: bytes), true), (IdentifierText(string: text), false),
                       (IdentifierText(bytes: bytes, string: "other"), true)]
                    : [(IdentifierText(string: text), false)]
                for (id, inPlace) in cases {
                    #expect(id.isPresent)
                    #expect(id.value == text)
                    #expect((id.bytes != nil) == inPlace && (id.string != nil) == !inPlace)
                    var got = JSONWriter(capacity: 16)
                    let wrote = id.write(to: &got)
                    #expect(wrote)
                    #expect(got.bytes == expected.bytes)
                }
            }
        }
    }

    @Test("identifierText is identifier(_:) in place: edge cases")
    func edgeCases() throws {
        let texts = [
            #"["r-5","r:5:0000000000000000000",123,-4.5e2,"","  ",null,"undefined"," NULL ","nil","[object Object]"]"#,
            #"["caf\u00e9","café","日本","\"q\"","a\\b","id\n",true,false,{"id":1},[1],"0",0,"(null)x"]"#,
            #"{"checkout_id":"gid://shopify/Checkout/abc?key=1","event_id":"e-1"}"#,
        ]
        for text in texts {
            let doc = JSONDocument()
            try doc.parseOwned(Array(text.utf8))
            Self.check(doc, text)
        }
    }

    @Test("identifierText is identifier(_:) in place: every token of the samples and corpus")
    func samplesAndCorpus() {
        let lines = sampleAndCorpusLines
        #expect(lines.count > 150)
        for line in lines {
            let doc = JSONDocument()
            guard (try? doc.parseOwned(Array(line.utf8))) != nil else { continue }
            Self.check(doc, String(line.prefix(80)))
        }
    }

    @Test("an order id read in place, escaped, numeric or a placeholder: the summary, the idempotency key and a repeat's key")
    func orderIDs() {
        func complete(_ order: String, checkout: String) -> String {
            #"{"method":"ec.complete","jsonrpc":"2.0","params":{"checkout":{"id":"\#(checkout)","status":"completed","#
                + #""order":{"id":\#(order)}}}}"#
        }
        let p = EventProcessor()
        for (order, expected, checkout) in [(#""O-1""#, "O-1", "ck-1"), (#""O\u002d2""#, "O-2", "ck-2"), ("1234", "1234", "ck-3"),
                                            (#""caf\u00e9 \"q\"""#, "caf\u{E9} \"q\"", "ck-4")] {
            let out = p.feed(complete(order, checkout: checkout))
            #expect(out.outcome == .published(.complete), "\(order)")
            #expect(out["summary.order_id"] == .string(expected), "\(order)")
            #expect(out["idempotency_key"] == .string(expected), "\(order)")
            // A repeat is published under the key the first complete kept, whatever it says now.
            let again = p.feed(complete(#""other""#, checkout: checkout))
            #expect(again["repeat"] == true && again["idempotency_key"] == .string(expected), "\(order)")
        }
        // A placeholder is no order id: the key is the checkout id.
        let none = p.feed(complete(#""undefined""#, checkout: "ck-5"))
        #expect(none["summary.order_id"] == .null)
        #expect(none["idempotency_key"] == "ck-5")
        // An order id in JSON nested in a string (its own document), and a Primer payment's.
        let nested = p.feed(#"{"checkout_id":"ck-6","payload":{"name":"completed","body":"{\"orderDetails\":{\"id\":\"O-6\"}}"}}"#)
        #expect(nested.outcome == .published(.complete))
        #expect(nested["summary.order_id"] == "O-6" && nested["idempotency_key"] == "O-6")
        let primer = p.feed(#"{"checkout_id":"ck-7","sdk":"primer","payload":{"event":"primerDidCompleteCheckoutWithData","#
            + #""paymentResult":{"paymentId":"pay-7","status":"SUCCESS","orderId":"ord-7"}}}"#)
        #expect(primer.outcome == .published(.complete))
        #expect(primer["summary.order_id"] == "ord-7" && primer["idempotency_key"] == "ord-7")
    }

    @Test("a result's event id read in place outlives its message; a retry is a duplicate whether its id is escaped or not")
    func resultEventIDAndDuplicates() {
        var options = EventProcessor.Options()
        options.dedupeWindow = 16
        let p = EventProcessor(options: options)
        func run(_ text: String) -> ProcessingResult {
            // A fresh array per call, overwritten once processed: the result must not read it.
            var bytes = Array(text.utf8)
            let result = bytes.withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: 0), now: 1_000) }
            for i in bytes.indices { bytes[i] = 0x20 }
            return result
        }
        func start(_ id: String) -> String {
            #"{"checkout_id":"ck-1","event_id":"# + id + #","payload":{"jsonrpc":"2.0","method":"ec.start","params":{}}}"#
        }
        let first = run(start(#""r:5:0000000000000000000""#))
        #expect(first.outcome == .published(.start))
        #expect(first.eventID == "r:5:0000000000000000000")
        let retry = run(start(#""r:5:0000000000000000000""#))
        #expect(retry.outcome == .duplicate(first.seq))
        #expect(retry.eventID == "r:5:0000000000000000000")
        let escapedFirst = run(start(#""e-2""#))
        #expect(escapedFirst.outcome == .published(.start))
        #expect(escapedFirst.eventID == "e-2")
        let plainRetry = run(start(#""e-2""#))
        #expect(plainRetry.outcome == .duplicate(escapedFirst.seq))
        #expect(plainRetry.eventID == "e-2")
        let number = run(start("12345678901234567890"))
        #expect(number.eventID == "12345678901234567890")
        #expect(run(start(#""12345678901234567890""#)).outcome == .duplicate(number.seq))
        // A long id (past the processor's first buffer) and a short one after it.
        let long = String(repeating: "x", count: 300)
        #expect(run(start("\"" + long + "\"")).eventID == long)
        #expect(run(start(#""s""#)).eventID == "s")
    }

    @Test("a wrapper's checkout id in place reaches the event, the state key and the envelope as its String would")
    func wrapperCheckoutID() throws {
        for (id, written) in [(#""r-5""#, "r-5"), ("42", "42"), (#""caf\u00e9-1""#, "café-1"), (#""c\"q""#, "c\"q")] {
            let text = #"{"checkout_id":"# + id + #","event_id":"e1","payload":{"jsonrpc":"2.0","method":"ec.start","params":{}}}"#
            let doc = JSONDocument()
            try doc.parseOwned(Array(text.utf8))
            let event = try RawEventDecoder().decode(doc)
            #expect(event.checkoutID == written, "\(text)")
            let k = event.checkoutKey()
            let expected = CheckoutStateTable.key(written)
            #expect(k?.lo == expected.lo && k?.hi == expected.hi, "\(text)")
        }
    }
}
