import Testing

import CheckoutBusJSON

@Suite("JSONDocument: tape parser")
struct JSONDocumentTests {
    // MARK: Valid documents

    @Test("every kind of value parses as the root", arguments: [
        ("{}", JSONDocument.Kind.object),
        ("[]", .array),
        ("\"text\"", .string),
        ("0", .number),
        ("-12.5e+3", .number),
        ("true", .true),
        ("false", .false),
        ("null", .null),
        (" \t\r\n{ \"a\" : [ 1 , { } ] } \n", .object),
    ])
    func rootKinds(text: String, kind: JSONDocument.Kind) throws {
        let doc = try #require(document(text))
        #expect(doc.kind(doc.root) == kind)
    }

    @Test("a nested document is read back through the accessors")
    func nestedDocument() throws {
        let text = #"""
            {"s":"hé","n":-42,"f":2.5,"e":1e3,"t":true,"f2":false,"z":null,
             "a":[1,"two",[3],{"four":4}],"o":{"p":{"q":"deep"}},"empty":{},"none":[]}
            """#
        let doc = try #require(document(text))
        let root = doc.root
        #expect(doc.count(root) == 11)
        #expect(doc.member(root, "s").flatMap(doc.string) == "hé")
        #expect(doc.member(root, "n").flatMap(doc.int64) == -42)
        #expect(doc.member(root, "f").flatMap(doc.double) == 2.5)
        #expect(doc.member(root, "e").flatMap(doc.double) == 1000)
        #expect(doc.member(root, "e").flatMap(doc.int64) == 1000)
        #expect(doc.member(root, "t").flatMap(doc.bool) == true)
        #expect(doc.member(root, "f2").flatMap(doc.bool) == false)
        #expect(doc.member(root, "z").map(doc.kind) == .null)
        #expect(doc.member(root, "missing") == nil)

        let a = try #require(doc.member(root, "a"))
        #expect(doc.kind(a) == .array)
        #expect(doc.count(a) == 4)
        var kinds: [JSONDocument.Kind] = []
        doc.forEachElement(a) { kinds.append(doc.kind($0)) }
        #expect(kinds == [.number, .string, .array, .object])
        let first = try #require(doc.firstElement(a))
        #expect(doc.int64(first) == 1)

        #expect(doc.path(root, "o", "p", "q").flatMap(doc.string) == "deep")
        #expect(doc.path(root, "o", "x", "q") == nil)
        #expect(doc.object(root, "o") != nil)
        #expect(doc.object(root, "a") == nil)  // an array, not an object
        #expect(doc.count(try #require(doc.member(root, "empty"))) == 0)
        #expect(doc.firstElement(try #require(doc.member(root, "none"))) == nil)

        var keys: [String] = []
        doc.forEachMember(root) { k, _ in keys.append(doc.string(k) ?? "?") }
        #expect(keys == ["s", "n", "f", "e", "t", "f2", "z", "a", "o", "empty", "none"])

        let raw = try #require(doc.member(root, "a"))
        #expect(String(decoding: doc.raw(raw), as: UTF8.self) == #"[1,"two",[3],{"four":4}]"#)
    }

    @Test("valid multi-byte UTF-8 at the edges of the ranges is accepted", arguments: [
        [0xC2, 0x80],  // U+0080
        [0xDF, 0xBF],  // U+07FF
        [0xE0, 0xA0, 0x80],  // U+0800
        [0xED, 0x9F, 0xBF],  // U+D7FF, just below the surrogates
        [0xEE, 0x80, 0x80],  // U+E000, just above them
        [0xEF, 0xBF, 0xBF],  // U+FFFF
        [0xF0, 0x90, 0x80, 0x80],  // U+10000
        [0xF4, 0x8F, 0xBF, 0xBF],  // U+10FFFF
    ] as [[UInt8]])
    func validUTF8(sequence: [UInt8]) throws {
        let bytes: [UInt8] = [UInt8(ascii: "\"")] + sequence + [UInt8(ascii: "\"")]
        #expect(parseError(bytes) == nil)
        let doc = JSONDocument()
        try doc.parseOwned(bytes)
        #expect(doc.unescapedBytes(doc.root) == sequence)
    }

    @Test("nesting up to maxDepth parses; one level deeper is too_deep")
    func depthLimit() {
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(parseError(Array(ok.utf8)) == nil)

        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(parseError(Array(deep.utf8)) == JSONParseError(.tooDeep, at: 64))

        let objects = String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65)
        #expect(parseError(Array(objects.utf8))?.reason == .tooDeep)

        #expect(parseError(Array("[[[]]]".utf8), maxDepth: 2)?.reason == .tooDeep)
        #expect(parseError(Array("[[]]".utf8), maxDepth: 2) == nil)
    }

    @Test("a document is reusable: a failed parse does not poison the next one")
    func reuse() throws {
        let doc = JSONDocument()
        #expect(throws: JSONParseError.self) { try doc.parseOwned(Array("{\"a\":".utf8)) }
        try doc.parseOwned(Array("{\"b\":[1,2]}".utf8))
        #expect(doc.path(doc.root, "b").map(doc.count) == 2)
        #expect(doc.member(doc.root, "a") == nil)
    }

    @Test("documents larger than the initial tape grow it, also when the parse then fails")
    func tapeGrowth() throws {
        let big = "[" + (0..<5_000).map { "{\"i\":\($0)}" }.joined(separator: ",") + "]"
        let doc = JSONDocument()
        try doc.parseOwned(Array(big.utf8))
        #expect(doc.count(doc.root) == 5_000)
        var sum: Int64 = 0
        doc.forEachElement(doc.root) { e in sum += doc.member(e, "i").flatMap(doc.int64) ?? 0 }
        #expect(sum == 4_999 * 5_000 / 2)

        // Grow the tape inside a parse that then fails; the document must stay usable.
        let other = JSONDocument()
        let broken = "[" + (0..<3_000).map(String.init).joined(separator: ",") + ",]"
        #expect(parseError(Array(broken.utf8))?.reason == .unexpectedCharacter)
        #expect(throws: JSONParseError.self) { try other.parseOwned(Array(broken.utf8)) }
        try other.parseOwned(Array(big.utf8))
        #expect(other.count(other.root) == 5_000)
        try other.parseOwned(Array("{\"k\":[true]}".utf8))
        #expect(other.path(other.root, "k").flatMap(other.firstElement).flatMap(other.bool) == true)
    }

    // MARK: Every parse error

    struct ErrorCase: Sendable, CustomTestStringConvertible {
        var bytes: [UInt8]
        var reason: JSONParseError.Reason
        var offset: Int?
        var label: String
        init(_ text: String, _ reason: JSONParseError.Reason, at offset: Int? = nil) {
            bytes = Array(text.utf8)
            self.reason = reason
            self.offset = offset
            label = text
        }
        init(bytes: [UInt8], _ reason: JSONParseError.Reason, at offset: Int? = nil, _ label: String) {
            self.bytes = bytes
            self.reason = reason
            self.offset = offset
            self.label = label
        }
        var testDescription: String { "\(label) → \(reason.name)" }
    }

    static let errorCases: [ErrorCase] = [
        // empty
        ErrorCase("", .empty, at: 0),
        ErrorCase(" \n\t ", .empty, at: 4),
        // truncated
        ErrorCase("{\"a\":1", .truncated, at: 6),
        ErrorCase("{\"a\"", .truncated),
        ErrorCase("{\"a\":", .truncated),
        ErrorCase("[1,2", .truncated, at: 4),
        ErrorCase("\"abc", .truncated, at: 4),
        ErrorCase("tru", .truncated, at: 0),
        ErrorCase("-", .truncated, at: 1),
        ErrorCase("\"\\", .truncated),
        ErrorCase("\"\\u00", .truncated),
        // trailing data
        ErrorCase("{} x", .trailingData, at: 3),
        ErrorCase("1 2", .trailingData, at: 2),
        ErrorCase("{}}", .trailingData, at: 2),
        ErrorCase("01", .trailingData, at: 1),
        ErrorCase("nullnull", .trailingData, at: 4),
        // bad numbers
        ErrorCase("1.", .badNumber, at: 2),
        ErrorCase("[1.]", .badNumber, at: 3),
        ErrorCase("1.e5", .badNumber, at: 2),
        ErrorCase("1e", .badNumber, at: 2),
        ErrorCase("1e+", .badNumber, at: 3),
        ErrorCase("[1E-]", .badNumber, at: 4),
        ErrorCase("-x", .badNumber, at: 1),
        ErrorCase("[-]", .badNumber, at: 2),
        // bad escapes
        ErrorCase(#""\x""#, .badEscape, at: 1),
        ErrorCase(#""\a""#, .badEscape, at: 1),
        ErrorCase(#""\u12G4""#, .badEscape, at: 5),
        ErrorCase(#"["\u00e"]"#, .badEscape, at: 7),
        ErrorCase(#""\U0041""#, .badEscape, at: 1),
        // control characters in strings
        ErrorCase("\"a\nb\"", .controlCharacter, at: 2),
        ErrorCase("\"a\tb\"", .controlCharacter, at: 2),
        ErrorCase(bytes: [0x22, 0x00, 0x22], .controlCharacter, at: 1, "NUL in a string"),
        ErrorCase(bytes: [0x7B, 0x22, 0x1F, 0x22, 0x3A, 0x31, 0x7D], .controlCharacter, at: 2, "U+001F in a key"),
        // invalid UTF-8
        ErrorCase(bytes: [0x22, 0xFF, 0x22], .invalidUTF8, at: 1, "0xFF"),
        ErrorCase(bytes: [0x22, 0x80, 0x22], .invalidUTF8, at: 1, "lone continuation byte"),
        ErrorCase(bytes: [0x22, 0xC0, 0xAF, 0x22], .invalidUTF8, at: 1, "overlong 2-byte C0 AF"),
        ErrorCase(bytes: [0x22, 0xC1, 0xBF, 0x22], .invalidUTF8, at: 1, "overlong 2-byte C1 BF"),
        ErrorCase(bytes: [0x22, 0xE0, 0x80, 0xAF, 0x22], .invalidUTF8, at: 2, "overlong 3-byte E0 80 AF"),
        ErrorCase(bytes: [0x22, 0xF0, 0x80, 0x80, 0xAF, 0x22], .invalidUTF8, at: 2, "overlong 4-byte F0 80 80 AF"),
        ErrorCase(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], .invalidUTF8, at: 2, "surrogate U+D800 ED A0 80"),
        ErrorCase(bytes: [0x22, 0xED, 0xBF, 0xBF, 0x22], .invalidUTF8, at: 2, "surrogate U+DFFF ED BF BF"),
        ErrorCase(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], .invalidUTF8, at: 2, "above U+10FFFF"),
        ErrorCase(bytes: [0x22, 0xF5, 0x80, 0x80, 0x80, 0x22], .invalidUTF8, at: 1, "F5 lead byte"),
        ErrorCase(bytes: [0x22, 0xC3, 0x22], .invalidUTF8, at: 2, "sequence cut by the closing quote"),
        ErrorCase(bytes: [0x22, 0xE2, 0x82, 0x22, 0x22], .invalidUTF8, at: 3, "3-byte sequence missing its last byte"),
        ErrorCase(bytes: [0x7B, 0x22, 0xFE, 0x22, 0x3A, 0x31, 0x7D], .invalidUTF8, at: 2, "invalid byte in a key"),
        // structure
        ErrorCase(".5", .unexpectedCharacter, at: 0),
        ErrorCase("+1", .unexpectedCharacter, at: 0),
        ErrorCase("nulx", .unexpectedCharacter, at: 3),
        ErrorCase("[1,]", .unexpectedCharacter, at: 3),
        ErrorCase("'a'", .unexpectedCharacter, at: 0),
        ErrorCase("{,}", .expectedKey, at: 1),
        ErrorCase("{\"a\":1,}", .expectedKey, at: 7),
        ErrorCase("{a:1}", .expectedKey, at: 1),
        ErrorCase("{\"a\" 1}", .expectedColon, at: 5),
        ErrorCase("{\"a\":1 \"b\":2}", .expectedCommaOrEnd, at: 7),
        ErrorCase("[1 2]", .expectedCommaOrEnd, at: 3),
        // too deep
        ErrorCase(String(repeating: "[", count: 100), .tooDeep, at: 64),
    ]

    @Test("every malformed input fails with its reason and offset", arguments: errorCases)
    func errors(_ c: ErrorCase) {
        let error = parseError(c.bytes)
        #expect(error?.reason == c.reason)
        if let offset = c.offset {
            #expect(error?.offset == offset)
        }
    }

    // MARK: Strings

    @Test("string(_:) decodes every escape", arguments: [
        (#""plain""#, "plain"),
        (#""""#, ""),
        (#""\"\\\/\b\f\n\r\t""#, "\"\\/\u{08}\u{0C}\n\r\t"),
        (#""\u0041""#, "A"),
        (#""\u00e9t\u00E9""#, "été"),
        (#""\u20AC 5""#, "€ 5"),
        (#""\u0000""#, "\u{0}"),
        (#""\ud83d\ude00""#, "😀"),
        (#""\uD83D\uDE00!""#, "😀!"),
        (#""a\ud83c\udff3\ufe0f\u200d\ud83c\udf08b""#, "a\u{1F3F3}\u{FE0F}\u{200D}\u{1F308}b"),
        (#""x\ud83dy""#, "x\u{FFFD}y"),  // lone high surrogate
        (#""\ude00""#, "\u{FFFD}"),  // lone low surrogate
        (#""\ud83d\u0041""#, "\u{FFFD}A"),  // high surrogate followed by a non-surrogate escape
        ("\"hé 😀\"", "hé 😀"),  // raw UTF-8 needs no escape
    ])
    func stringEscapes(json: String, expected: String) throws {
        let doc = try #require(document(json))
        #expect(doc.string(doc.root) == expected)
        #expect(doc.unescapedBytes(doc.root) == Array(expected.utf8))
    }

    @Test("escaped strings decode to their text: runs between escapes, escapes at both ends, 5,000 random strings")
    func unescapedRandom() throws {
        // Each piece: its JSON spelling and the bytes it stands for.
        let pieces: [(String, [UInt8])] = [
            (#"\n"#, [0x0A]), (#"\""#, [0x22]), (#"\\"#, [0x5C]), (#"\/"#, [0x2F]), (#"\t"#, [0x09]),
            (#"\u00e9"#, Array("é".utf8)), (#"\ud83d\ude00"#, Array("😀".utf8)), ("é", Array("é".utf8)),
            ("a", [0x61]), ("xyz", Array("xyz".utf8)),
            (String(repeating: "r", count: 40), Array(repeating: 0x72, count: 40)),
        ]
        var rng = SplitMix64(seed: 0x0E5C)
        for _ in 0..<5_000 {
            var json = "\""
            var expected: [UInt8] = []
            // At least one escape, so the token is escaped and takes the decoding path.
            let first = pieces[Int(rng.next() % 7)]
            var parts = [first]
            for _ in 0..<Int(rng.next() % 8) { parts.append(pieces[Int(rng.next() % UInt64(pieces.count))]) }
            if rng.next() % 2 == 0 { parts.reverse() }
            for (text, bytes) in parts {
                json += text
                expected += bytes
            }
            json += "\""
            let doc = try #require(document(json), "\(json)")
            #expect(doc.unescapedBytes(doc.root) == expected, "\(json)")
            // Appended after what is there already.
            var out: [UInt8] = [1, 2, 3]
            doc.appendUnescaped(doc.root, to: &out)
            #expect(out == [1, 2, 3] + expected, "\(json)")
        }
    }

    @Test("member lookup and stringEquals decode escaped keys and values")
    func escapedKeys() throws {
        let doc = try #require(document(#"{"\u0065vent":"\u0063omplete","na\/me":"x"}"#))
        let v = try #require(doc.member(doc.root, "event"))
        #expect(doc.stringEquals(v, "complete"))
        #expect(!doc.stringEquals(v, "completed"))
        #expect(doc.member(doc.root, "na/me").flatMap(doc.string) == "x")
        Array("complete".utf8).withUnsafeBytes { buf in
            #expect(doc.stringEquals(v, bytes: buf))
        }
    }

    @Test("the first of repeated members wins; anyOf tries spellings in order")
    func memberLookup() throws {
        let doc = try #require(document(#"{"a":1,"a":2,"checkoutId":"x","checkout_id":"y"}"#))
        #expect(doc.member(doc.root, "a").flatMap(doc.int64) == 1)
        #expect(doc.member(doc.root, anyOf: "checkout_id", "checkoutId").flatMap(doc.string) == "y")
        #expect(doc.member(doc.root, anyOf: "id", "checkoutId").flatMap(doc.string) == "x")
        #expect(doc.member(doc.root, anyOf: "id", "uuid") == nil)
    }

    // MARK: Scalars

    @Test("identifier(_:) reads strings and numbers; empty strings are no identifier")
    func identifiers() throws {
        let doc = try #require(document(#"{"s":"ck-1","n":123,"e":"","b":true,"x":"a\"b"}"#))
        #expect(doc.member(doc.root, "s").flatMap(doc.identifier) == "ck-1")
        #expect(doc.member(doc.root, "n").flatMap(doc.identifier) == "123")
        #expect(doc.member(doc.root, "e").flatMap(doc.identifier) == nil)
        #expect(doc.member(doc.root, "b").flatMap(doc.identifier) == nil)
        #expect(doc.member(doc.root, "x").flatMap(doc.identifier) == "a\"b")
    }

    @Test("int64(_:) reads integral numbers and integer strings, refuses the rest", arguments: [
        ("42", Int64?.some(42)),
        ("-7", -7),
        ("0", 0),
        ("4.0", 4),
        ("1e2", 100),
        ("\"410\"", 410),
        ("\"-3\"", -3),
        ("4.5", nil),
        ("\"4.5\"", nil),
        ("\"abc\"", nil),
        ("\"\"", nil),
        ("true", nil),
        ("null", nil),
        ("9223372036854775807", Int64.max),
    ])
    func int64Values(json: String, expected: Int64?) throws {
        let doc = try #require(document(json))
        #expect(doc.int64(doc.root) == expected)
    }

    /// 9223372036854775808 is Int64.max + 1: 19 digits, so it passes the length check and the digit
    /// loop wraps around (`&*`, `&+`) to Int64.min instead of refusing the value.
    @Test("int64(_:) refuses integers that do not fit in Int64 instead of wrapping around", arguments: [
        "9223372036854775808", "9999999999999999999", "\"9999999999999999999\"",
    ])
    func int64Overflow(json: String) throws {
        let doc = try #require(document(json))
        #expect(doc.int64(doc.root) == nil)
    }

    @Test("double(_:) reads numbers and numeric strings")
    func doubles() throws {
        let doc = try #require(document(#"[12.34,"12.34",-1e-2,"x",null,7]"#))
        var values: [Double?] = []
        doc.forEachElement(doc.root) { values.append(doc.double($0)) }
        #expect(values == [12.34, 12.34, -0.01, nil, nil, 7])
    }

    /// The string scanner reads eight bytes at a time and jumps to the first byte that needs a
    /// look; every offset of that byte inside a word must land exactly.
    @Test("a quote, escape, control or non-ASCII byte is found at every offset of a word")
    func stringScanOffsets() throws {
        for prefix in 0..<20 {
            let filler = String(repeating: "a", count: prefix)
            let plain = try #require(document("[\"\(filler)\",1]"))
            #expect(plain.string(try #require(plain.firstElement(plain.root))) == filler)
            let escaped = try #require(document("[\"\(filler)\\n\(filler)\"]"))
            #expect(escaped.string(try #require(escaped.firstElement(escaped.root))) == filler + "\n" + filler)
            let accented = try #require(document("[\"\(filler)é\(filler)\"]"))
            #expect(accented.string(try #require(accented.firstElement(accented.root))) == filler + "é" + filler)
            for bad in [Array("[\"\(filler)\u{01}\"]".utf8), Array("[\"\(filler)".utf8) + [0xFF, 0x22, 0x5D]] {
                let doc = JSONDocument()
                #expect(throws: JSONParseError.self) { try doc.parseOwned(bad) }
            }
            let truncated = JSONDocument()
            #expect(throws: JSONParseError.self) { try truncated.parseOwned(Array("\"\(filler)".utf8)) }
            // Object keys and string values take the scanner's short-string path first.
            let text = "{\"\(filler)\":\"\(filler)\",\"k\\t\(filler)\":\"é\(filler)\",\"z\":1}"
            let object = try #require(document(text))
            #expect(object.member(object.root, "z").flatMap(object.int64) == 1)
            var members: [String] = []
            object.forEachMember(object.root) { k, v in members += [object.string(k) ?? "?", object.string(v) ?? "?"] }
            #expect(members == [filler, filler, "k\t" + filler, "é" + filler, "z", "?"])
            let badKey = JSONDocument()
            #expect(throws: JSONParseError.self) { try badKey.parseOwned(Array("{\"\(filler)\u{01}\":1}".utf8)) }
        }
    }

    @Test("anyOf finds the last of two to six spellings, and prefers the earliest spelling present")
    func anyOfEveryArity() throws {
        let doc = try #require(document(#"{"f":6,"e":5,"d":4,"c":3,"b":2}"#))
        let r = doc.root
        #expect(doc.member(r, anyOf: "x", "b").flatMap(doc.int64) == 2)
        #expect(doc.member(r, anyOf: "x", "y", "c").flatMap(doc.int64) == 3)
        #expect(doc.member(r, anyOf: "x", "y", "z", "d").flatMap(doc.int64) == 4)
        #expect(doc.member(r, anyOf: "x", "y", "z", "w", "e").flatMap(doc.int64) == 5)
        #expect(doc.member(r, anyOf: "x", "y", "z", "w", "v", "f").flatMap(doc.int64) == 6)
        #expect(doc.member(r, anyOf: "b", "x", "f").flatMap(doc.int64) == 2)
        #expect(doc.member(r, anyOf: "x", "y", "z", "w", "v") == nil)
    }
}
