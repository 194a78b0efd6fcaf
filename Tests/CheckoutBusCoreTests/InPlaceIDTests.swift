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
            let (text, string) = RawEventDecoder.identifierText(doc, t)
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
                event.checkoutIDText = text
                event.writeCheckoutID(to: &w1)
                w2.appendString(expected)
                #expect(w1.bytes == w2.bytes, "\(context): token \(t)", sourceLocation: sourceLocation)
                #expect(event.checkoutID == expected && event.hasCheckoutID)
                let k = event.checkoutKey()
                #expect(k?.lo == b.lo && k?.hi == b.hi)
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
        var lines: [String] = []
        for file in ["samples/bridges.jsonl", "samples/tour.jsonl", "Tests/Corpus/sdk-payloads.jsonl"] {
            lines += repositoryLines(file)
        }
        #expect(lines.count > 150)
        for line in lines {
            let doc = JSONDocument()
            guard (try? doc.parseOwned(Array(line.utf8))) != nil else { continue }
            Self.check(doc, String(line.prefix(80)))
        }
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
