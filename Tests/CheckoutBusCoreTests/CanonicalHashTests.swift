import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("CanonicalHash: JSON equality")
struct CanonicalHashTests {
    static func hash(_ text: String) -> UInt64? {
        guard let doc = document(text) else { return nil }
        return CanonicalHash.hash(doc, doc.root)
    }

    @Test("JSON-equal documents hash alike", arguments: [
        // key order and whitespace
        (#"{"a":1,"b":2}"#, #"{"b":2,"a":1}"#),
        (#"{"a":1,"b":[1,2],"c":{"d":null,"e":true}}"#,
         " { \"c\" : { \"e\" : true , \"d\" : null } ,\n\t\"b\" : [ 1 , 2 ] , \"a\" : 1 } "),
        (#"[{"x":1,"y":"z"},{"p":[{"q":1,"r":2}]}]"#, #"[{"y":"z","x":1},{"p":[{"r":2,"q":1}]}]"#),
        (Fixture.snapshot(), #"""
            {"messages":[],"totals":[{"type":"subtotal","amount":5400},{"amount":100,"type":"tax"},
             {"amount":5500,"type":"total"}],"line_items":[{"quantity":2,"item":{"price":2500,
             "title":"Canvas Tote","id":"gid://shopify/ProductVariant/1"},"id":"li_1"},{"item":{"title":"Enamel Pin",
             "price":400,"id":"gid://shopify/ProductVariant/2"},"quantity":1,"id":"li_2"}],"currency":"USD",
             "status":"incomplete","id":"ck-1"}
            """#),
        // numbers by value
        ("1", "1.0"),
        ("1", "1e0"),
        ("1", "1E0"),
        ("1", "10e-1"),
        ("1", "0.1e1"),
        ("0", "-0"),
        ("0", "0.0"),
        ("0", "-0.0"),
        ("2500", "2.5e3"),
        ("1.5", "1.50"),
        ("-3", "-3.0"),
        (#"{"amount":5400}"#, #"{"amount":5.4e3}"#),
        // escapes decoded
        (#""\u0041""#, #""A""#),
        (#""\u00e9""#, "\"é\""),
        (#""a\/b""#, #""a/b""#),
        (#""\ud83d\ude00""#, "\"😀\""),
        (#"{"\u0061":1}"#, #"{"a":1}"#),
        (#"["\u0074ab\u006C\u0065"]"#, #"["table"]"#),
        // literals and empties
        ("true", " true "),
        ("null", "null"),
        ("[]", "[ ]"),
        ("{}", "{ }"),
    ])
    func equal(a: String, b: String) throws {
        let ha = try #require(Self.hash(a))
        let hb = try #require(Self.hash(b))
        #expect(ha == hb)
    }

    @Test("different values hash differently", arguments: [
        ("[1,2]", "[2,1]"),
        (#"{"a":[1,2]}"#, #"{"a":[2,1]}"#),
        ("1", "2"),
        ("1", "\"1\""),
        ("1.5", "1.25"),
        ("0.1", "0.2"),
        ("-1", "1"),
        ("true", "false"),
        ("null", "false"),
        ("null", "\"\""),
        ("0", "false"),
        ("[]", "{}"),
        ("[]", "[null]"),
        ("{}", #"{"a":null}"#),
        (#"{"a":1}"#, #"{"a":1,"b":1}"#),
        (#"{"a":1,"b":2}"#, #"{"a":2,"b":1}"#),
        (#"{"a":"b"}"#, #"{"b":"a"}"#),
        (#"{"ab":"c"}"#, #"{"a":"bc"}"#),
        (#"{"a":{"b":1}}"#, #"{"a":{"c":1}}"#),
        (#"{"a":{"b":1}}"#, #"{"a":[{"b":1}]}"#),
        ("[[1],[2]]", "[[1,2]]"),
        ("[[1,2]]", "[1,2]"),
        (#""ab""#, #""ba""#),
        (#""A""#, #""a""#),
        (#""A""#, #""\u0042""#),
        (#""abcdefghi""#, #""abcdefghj""#),
        (Fixture.snapshot(quantity: 2), Fixture.snapshot(quantity: 3)),
        (Fixture.snapshot(id: "ck-1"), Fixture.snapshot(id: "ck-2")),
        (Fixture.snapshot(status: "incomplete"), Fixture.snapshot(status: "ready_for_complete")),
    ])
    func different(a: String, b: String) throws {
        let ha = try #require(Self.hash(a))
        let hb = try #require(Self.hash(b))
        #expect(ha != hb)
    }

    @Test("a subtree hashes like the same value parsed on its own")
    func subtree() throws {
        let outer = try #require(document(#"{"params":{"checkout":{"b":[1,2],"a":"x"}}}"#))
        let inner = try #require(outer.path(outer.root, "params", "checkout"))
        let alone = try #require(Self.hash(#"{"a":"x","b":[1,2]}"#))
        #expect(CanonicalHash.hash(outer, inner) == alone)
        #expect(CanonicalHash.hash(outer, outer.root) != alone)
    }

    @Test("hashing is deterministic across documents and reuse")
    func deterministic() throws {
        let doc = JSONDocument()
        try doc.parseOwned(Array(Fixture.snapshot().utf8))
        let first = CanonicalHash.hash(doc, doc.root)
        try doc.parseOwned(Array("[1,2,3]".utf8))
        try doc.parseOwned(Array(Fixture.snapshot().utf8))
        #expect(CanonicalHash.hash(doc, doc.root) == first)
    }

    /// `hashNumber` hashes an integer of up to 18 characters through the integer path, but a
    /// fraction/exponent spelling of the same value through `Double`, and maps the double back to
    /// the integer path only below 9e15. From 9e15 up the two spellings of one value hash apart.
    @Test("numbers compare by value above 9e15 too (integer vs exponent spelling)", arguments: [
        ("100000000000000000", "1e17"),
        ("9000000000000001", "9000000000000001.0"),
        ("12000000000000000", "1.2e16"),
    ])
    func largeIntegralNumbers(a: String, b: String) throws {
        let ha = try #require(Self.hash(a))
        let hb = try #require(Self.hash(b))
        #expect(ha == hb)
    }

    /// Short strings are hashed from two words read straight from the text; the same string,
    /// escaped (decoded first) or at the very end of a document, must hash alike at every length.
    @Test("a string hashes alike wherever it sits and however it is escaped, at every length")
    func stringLengths() throws {
        for n in 0...40 {
            let text = String((0..<n).map { Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8($0 % 26))) })
            let escaped = text.isEmpty ? "" : "\\u00" + String(text.utf8.first!, radix: 16) + text.dropFirst()
            let alone = try #require(Self.hash("\"\(text)\""))
            #expect(try #require(Self.hash("\"\(escaped)\"")) == alone)
            let inArray = try #require(document("[\"\(text)\",\"\(escaped)\",\"\(text)x\"]"))
            var hashes: [UInt64] = []
            inArray.forEachElement(inArray.root) { hashes.append(CanonicalHash.hash(inArray, $0)) }
            #expect(hashes[0] == alone && hashes[1] == alone && hashes[2] != alone)
        }
    }

    /// Integers of up to 8 digits are read in one word ending at the last digit; longer ones, and
    /// ones within the first bytes of the text, are parsed another way. Every digit count, sign and
    /// position must give the value's hash, and the same as its fraction/exponent spelling.
    @Test("an integer hashes by value at every digit count, sign and position")
    func integerLengths() throws {
        for digits in 1...15 {  // beyond 2⁵³ a fraction spelling may round to another double
            for negative in [false, true] {
                let text = (negative ? "-" : "") + String("918273645091827364".prefix(digits))
                let alone = try #require(Self.hash(text))
                #expect(try #require(Self.hash(text + ".0")) == alone, "\(text)")
                #expect(try #require(Self.hash(text + "e0")) == alone, "\(text)")
                let inArray = try #require(document("[\"padding\",\(text),\(text)0,\(text).0]"))
                var hashes: [UInt64] = []
                inArray.forEachElement(inArray.root) { hashes.append(CanonicalHash.hash(inArray, $0)) }
                #expect(hashes[1] == alone && hashes[3] == alone && hashes[2] != alone, "\(text)")
                let inObject = try #require(Self.hash("{\"k\":\(text),\"padding\":1}"))
                #expect(try #require(Self.hash("{\"padding\":1,\"k\":\(text).0}")) == inObject, "\(text)")
            }
        }
        #expect(Self.hash("[12345678]") != Self.hash("[12345679]"))
        #expect(Self.hash("[\"x\",7]") != Self.hash("[\"x\",2]"))
    }

    /// Keys of up to 8 bytes go into their member's multiply as their bytes and length; longer
    /// keys as their string hash. Escaped or unescaped, first or later in the text, a key must
    /// count the same at every length, and keys differing only in length must not.
    @Test("an object key counts alike wherever it sits and however it is escaped, at every length")
    func keyLengths() throws {
        for n in 0...40 {
            let key = String((0..<n).map { Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8($0 % 26))) })
            let escaped = key.isEmpty ? "" : "\\u00" + String(key.utf8.first!, radix: 16) + key.dropFirst()
            let plain = try #require(Self.hash("{\"\(key)\":1,\"zz\":\"v\"}"))
            #expect(try #require(Self.hash("{\"zz\":\"v\",\"\(key)\":1}")) == plain, "\(key)")
            #expect(try #require(Self.hash("{\"\(escaped)\":1,\"zz\":\"v\"}")) == plain, "\(key)")
            #expect(try #require(Self.hash("{\"zz\":\"v\",\"\(escaped)\":1}")) == plain, "\(key)")
            #expect(try #require(Self.hash("{\"\(key)\\u0000\":1,\"zz\":\"v\"}")) != plain, "\(key)")
            #expect(try #require(Self.hash("{\"\(key)\":\"1\",\"zz\":\"v\"}")) != plain, "\(key)")
        }
    }

    @Test("strings differing only in trailing NULs or length hash differently", arguments: [
        (#""""#, #""\u0000""#),
        (#""a""#, #""a\u0000""#),
        (#""abcdefgh""#, #""abcdefgh\u0000""#),
        (#""abcdefg""#, #""abcdefg\u0000""#),
        (#""abcdefghijklmnop""#, #""abcdefghijklmnop\u0000""#),
        (#"["abcdefghijklmnopq"]"#, #"["abcdefghijklmnop"]"#),
        (#"[{"a":[]},{}]"#, #"[{"a":{}},{}]"#),
        (#"[[],[[]]]"#, #"[[[]],[]]"#),
    ])
    func lengthsMatter(a: String, b: String) throws {
        #expect(try #require(Self.hash(a)) != #require(Self.hash(b)))
    }

    @Test("hashBytes over 16 bytes reads only its own bytes and every byte counts")
    func longByteHashes() {
        for n in 17...64 {
            let text = (0..<n).map { UInt8(ascii: "a") &+ UInt8($0 % 26) }
            // The same bytes with other bytes around them hash the same.
            let padded = [UInt8](repeating: 0xFF, count: 9) + text + [UInt8](repeating: 0xEE, count: 9)
            let alone = text.withUnsafeBytes { CanonicalHash.hashBytes($0.baseAddress!, n, seed: 7) }
            let inside = padded.withUnsafeBytes { CanonicalHash.hashBytes($0.baseAddress! + 9, n, seed: 7) }
            #expect(alone == inside, "length \(n)")
            // Changing any one byte changes the hash.
            var seen: Set<UInt64> = [alone]
            for i in 0..<n {
                var changed = text
                changed[i] ^= 0x01
                seen.insert(changed.withUnsafeBytes { CanonicalHash.hashBytes($0.baseAddress!, n, seed: 7) })
            }
            #expect(seen.count == n + 1, "length \(n)")
        }
    }
}
