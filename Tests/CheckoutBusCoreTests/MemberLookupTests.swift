import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON

/// `JSONDocument.members(_:_:)` (one pass, names indexed by length, keys compared as two words)
/// and `member(_:_:)` (one pass per name, inlined) against a reference that compares each key's
/// decoded `String` with the name: for every name of a list, the first member of that name, or none — duplicate keys, missing keys, escaped keys, non-object values,
/// every key length class — over edge cases, every object of the samples and corpus, and
/// seeded random objects.
@Suite("member lookup")
struct MemberLookupTests {
    /// Name lists: the decoder's snapshot ids, a full 16 (every length class, names alike but for
    /// their first, middle or last byte, the empty name), and a totals entry's two.
    static let lists: [[StaticString]] = [
        ["id", "checkout_id", "checkoutId", "order", "orderDetails", "order_details", "order_id", "orderId", "cart",
         "orderConfirmation", "order_confirmation"],
        ["a", "b", "ab", "ba", "abc", "axc", "abcd", "abce", "abcdefg", "abcdefgh", "abcdefgi", "abcdefghijklmnop",
         "abcdefghijklmnoq", "abcdefghijklmnopq", "abcdefghijklmXopq", ""],
        ["type", "amount"],
        ["payload", "jsonrpc", "method", "name", "event", "state", "checkout_id", "checkoutId", "sdk", "platform",
         "event_id", "eventId", "occurred_at", "occurredAt", "type", "callback"],
        ["caf\u{E9}", "\u{65E5}\u{672C}", "x"],
    ]

    static let indexed = lists.map { MemberNames(list: $0) }

    /// Checks every list on every object (and some non-objects) of `doc`.
    static func check(_ doc: JSONDocument, _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for t in 0..<doc.tokenCount {
            for (l, names) in lists.enumerated() {
                let m = doc.members(t, indexed[l])
                for (i, name) in names.enumerated() {
                    var expected: Int?
                    if doc.kind(t) == .object {
                        let text = name.description
                        doc.forEachMember(t) { k, v in
                            if expected == nil && doc.string(k) == text { expected = v }
                        }
                    }
                    #expect(doc.member(t, name) == expected, "\(context): token \(t), name \(name)",
                            sourceLocation: sourceLocation)
                    #expect(m.at(i) == expected, "\(context): token \(t), name \(name)", sourceLocation: sourceLocation)
                    let object = expected.flatMap { doc.kind($0) == .object ? $0 : nil }
                    #expect(m.object(i) == object, "\(context): token \(t), name \(name)", sourceLocation: sourceLocation)
                }
            }
        }
    }

    static func parsed(_ text: String) throws -> JSONDocument {
        let doc = JSONDocument()
        try doc.parseOwned(Array(text.utf8))
        return doc
    }

    @Test("members(_:_:) finds what member(_:_:) finds: edge cases")
    func edgeCases() throws {
        let texts = [
            #"{}"#, #"[]"#, #""s""#, #"1"#, #"null"#, #"[{"id":1},{"type":2}]"#,
            #"{"id":1,"id":2}"#, #"{"type":"a","type":"b","amount":1,"amount":2}"#, #"{"amount":1,"type":"total"}"#,
            #"{"ty\u0070e":"total","amount":5}"#, #"{"\u0074ype":1,"type":2}"#, #"{"type":1,"\u0074ype":2}"#,
            #"{"i\u0064":{"id":3}}"#, #"{"":1,"":2}"#, #"{"\"":1}"#, #"{"a\\b":1}"#,
            #"{"typ":"x","amounts":1,"type":"t","amount":2}"#, #"{"order":{"id":"o1"},"cart":{"id":"c"},"order":[]}"#,
            #"{"abcdefghijklmnop":1,"abcdefghijklmnoq":2,"abcdefghijklmnopq":3,"abcdefghijklmXopq":4,"abcdefghijklmYopq":5}"#,
            #"{"abcdefghXjklmnopq":1,"abcdefghijklmnopq":2,"orderConfirmatiom":3,"order_confirmatioN":4,"order_confirmation":5}"#,
            #"{"abcdefgh":1,"abcdefgi":2,"abcdefgj":3,"bbcdefgh":4,"abcdefg":5,"abcdefG":6}"#,
            #"{"abc":1,"axc":2,"abd":3,"ab":4,"ba":5,"aa":6,"a":7,"b":8,"c":9}"#, #"{"abcd":1,"abce":2,"abcf":3,"bbcd":4}"#,
            #"{"orderConfirmation":{"order":{"id":9}},"order_confirmation":1,"orderConfirmatioN":2}"#,
            #"{"café":1,"日本":2,"caf\u00e9":3,"x":{"x":1}}"#, #"{"caf\u00e9":3,"café":1}"#,
            #"{ "id" : 1 , "checkout_id" : "c" , "cart" : { "id" : 2 } }"#,
            #"{"payload":{"payload":1},"jsonrpc":"2.0","method":"m","name":"n","event":"e","state":"s","checkout_id":"c","checkoutId":"d","sdk":"x","platform":"p","event_id":"e1","eventId":"e2","occurred_at":1,"occurredAt":2,"type":"t","callback":"cb","extra":0}"#,
            "{\"" + String(repeating: "k", count: 63) + "\":1,\"" + String(repeating: "k", count: 64) + "\":2,\"id\":3}",
        ]
        for text in texts { Self.check(try Self.parsed(text), text) }
    }

    @Test("members(_:_:) finds what member(_:_:) finds: every object of the samples and corpus")
    func samplesAndCorpus() throws {
        let lines = sampleAndCorpusLines
        #expect(lines.count > 150)
        for line in lines {
            let doc = JSONDocument()
            guard (try? doc.parseOwned(Array(line.utf8))) != nil else { continue }
            Self.check(doc, String(line.prefix(80)))
        }
    }

    @Test("members(_:_:) finds what member(_:_:) finds: 3,000 random objects")
    func randomObjects() throws {
        var rng = SplitMix64(seed: 0x5EED_00A1)
        // The names, and keys near them: a byte changed, one added or dropped, escaped.
        var keys: [String] = []
        for list in Self.lists {
            for name in list {
                let s = name.description
                keys.append(s)
                guard !s.isEmpty else { continue }
                var u = Array(s.utf8)
                u[u.count - 1] ^= 1
                keys.append(String(decoding: u, as: UTF8.self))
                u = Array(s.utf8)
                u[u.count / 2] ^= 0x20
                keys.append(String(decoding: u, as: UTF8.self))
                keys.append(s + "x")
                keys.append(String(s.dropLast()))
                if let f = s.unicodeScalars.first, f.isASCII {
                    let hex = String(f.value, radix: 16)
                    keys.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex + s.unicodeScalars.dropFirst().map(String.init).joined())
                }
            }
        }
        let values = ["1", "\"s\"", "null", "{}", "[]", "{\"id\":1,\"type\":2}", "[{\"a\":1}]", "-2.5e3", "true"]
        for round in 0..<3_000 {
            let n = Int(rng.next() % 12)
            var text = "{"
            for j in 0..<n {
                if j > 0 { text += "," }
                text += "\"" + keys[Int(rng.next() % UInt64(keys.count))] + "\":" + values[Int(rng.next() % UInt64(values.count))]
            }
            text += "}"
            let doc = JSONDocument()
            guard (try? doc.parseOwned(Array(text.utf8))) != nil else {
                Issue.record("round \(round): does not parse: \(text)")
                continue
            }
            Self.check(doc, text)
        }
    }

    @Test("MemberNames indexes every name: a bit per name, by length; words equal exactly when bytes are")
    func memberNamesIndex() {
        for (l, list) in Self.lists.enumerated() {
            let names = Self.indexed[l]
            #expect(names.count == list.count)
            #expect(Int(names.all) == (1 << list.count) - 1)
            for (i, name) in list.enumerated() {
                #expect(names.lengths[i] == name.utf8CodeUnitCount)
                #expect(names.byLength[name.utf8CodeUnitCount] & (1 << UInt16(i)) != 0)
            }
        }
        // Two byte strings of one length up to 16: equal words exactly when the bytes are equal.
        var rng = SplitMix64(seed: 0x5EED_00A2)
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 17)
            let a = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next() % 4) }
            var b = a
            if n > 0 && rng.next() % 2 == 0 { b[Int(rng.next() % UInt64(n))] ^= UInt8(1 + rng.next() % 3) }
            let wa = a.withUnsafeBufferPointer { MemberNames.words($0.baseAddress ?? UnsafePointer(bitPattern: 1)!, n) }
            let wb = b.withUnsafeBufferPointer { MemberNames.words($0.baseAddress ?? UnsafePointer(bitPattern: 1)!, n) }
            #expect((wa == wb) == (a == b), "\(a) \(b)")
        }
    }
}
