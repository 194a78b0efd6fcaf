import Testing

import CheckoutBusJSON

/// The writer's in-place string path and the placeholder-id check against plain reference versions,
/// over edge cases and seeded random inputs.
@Suite("writer and access fast paths")
struct WriterAndAccessFastPathTests {
    /// A JSON string literal for `bytes`, escaped byte by byte (what `appendString(utf8:)` writes).
    static func referenceLiteral(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x22]
        let hex = Array("0123456789abcdef".utf8)
        for c in bytes {
            switch c {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, UInt8(ascii: "n")]
            case 0x0D: out += [0x5C, UInt8(ascii: "r")]
            case 0x09: out += [0x5C, UInt8(ascii: "t")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(c >> 4)], hex[Int(c & 0xF)]]
            default: out.append(c)
            }
        }
        out.append(0x22)
        return out
    }

    /// The placeholder check as it was first written (trim, then compare with each word).
    static func referencePlaceholder(_ text: [UInt8]) -> Bool {
        func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
        var s = text[...]
        while let f = s.first, isSpace(f) { s = s.dropFirst() }
        while let l = s.last, isSpace(l) { s = s.dropLast() }
        if s.isEmpty { return true }
        let lower = s.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        return ["undefined", "null", "nan", "nil", "none", "(null)", "<null>", "[object object]"]
            .contains { Array($0.utf8) == lower }
    }

    static func written(_ bytes: [UInt8], capacity: Int, prefix: Int) -> [UInt8] {
        var w = JSONWriter(capacity: capacity)
        for _ in 0..<prefix { w.append(byte: UInt8(ascii: "x")) }
        bytes.withUnsafeBytes { w.appendString(utf8: $0) }
        w.append(byte: UInt8(ascii: "!"))
        return Array(w.bytes.dropFirst(prefix))
    }

    @Test("appendString(utf8:) writes what a byte-by-byte escaper writes: edge cases")
    func appendStringEdgeCases() {
        // Strings of 0…9 bytes (the one-word path below 8) with a byte to escape at each place,
        // and with bytes from 0x80 up (not escaped).
        var short: [[UInt8]] = []
        for n in 0...9 {
            short.append([UInt8](repeating: UInt8(ascii: "a"), count: n))
            short.append((0..<n).map { UInt8(0x7A + $0 * 0x0D) })
            for at in 0..<n {
                for bad: UInt8 in [0x22, 0x5C, 0x00, 0x1F, 0x0A, 0x21, 0x20, 0x23] {
                    var b = [UInt8](repeating: UInt8(ascii: "a"), count: n)
                    b[at] = bad
                    short.append(b)
                }
            }
        }
        let cases: [[UInt8]] = short + [
            [], Array("a".utf8), Array("1234567".utf8), Array("12345678".utf8), Array("123456789".utf8),
            Array("gid://shopify/Checkout/tour-1".utf8), Array("r:5:0000000000000000000".utf8),
            Array("caf\u{E9} \u{1F600} \u{65E5}\u{672C}".utf8), Array("quote\"here".utf8), Array("1234567\"".utf8),
            Array("\"1234567".utf8), Array("12345678\\".utf8), Array("line\nbreak\ttab\r".utf8), [0x00], [0x1F, 0x7F],
            Array("abcdefghijklmno\u{01}".utf8), Array("abcdefghijklmnop\"".utf8), Array(repeating: 0x22, count: 17),
        ]
        for c in cases {
            for capacity in [16, 17, 64] {
                for prefix in [0, 3, 15] {
                    #expect(Self.written(c, capacity: capacity, prefix: prefix) == Self.referenceLiteral(c) + [0x21],
                            "\(c) capacity \(capacity) prefix \(prefix)")
                }
            }
        }
    }

    @Test("appendString(utf8:) writes what a byte-by-byte escaper writes: 20,000 random strings")
    func appendStringRandom() {
        var rng = SplitMix64(seed: 0x5EED_0001)
        let alphabet: [UInt8] = Array("abcXYZ09 -_:/.".utf8) + [0x22, 0x5C, 0x0A, 0x09, 0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xE2, 0x82, 0xAC]
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 48)
            // Mostly clean strings (the fast path), some with one byte to escape anywhere.
            let clean = rng.next() % 3 != 0
            let bytes = (0..<n).map { _ -> UInt8 in
                let c = alphabet[Int(rng.next() % UInt64(clean ? 14 : alphabet.count))]
                return c
            }
            let capacity = 16 + Int(rng.next() % 64)
            let prefix = Int(rng.next() % 20)
            #expect(Self.written(bytes, capacity: capacity, prefix: prefix) == Self.referenceLiteral(bytes) + [0x21], "\(bytes)")
        }
    }

    @Test("appendQuotedVerbatim writes what appendString writes for text that needs no escape: every length to 70, after 0 to 15 bytes")
    func appendQuotedVerbatim() {
        var rng = SplitMix64(seed: 0x5EED_0002)
        let alphabet: [UInt8] = Array("abcXYZ09 -_:/.".utf8) + [0x7F, 0xC3, 0xA9]
        for n in 0...70 {
            for _ in 0..<4 {
                let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
                for capacity in [16, 17, 64] {
                    for prefix in [0, 1, 7, 15] {
                        var w = JSONWriter(capacity: capacity)
                        for _ in 0..<prefix { w.append(byte: UInt8(ascii: "x")) }
                        // Taken from inside a larger buffer, as the decoder's ids are: bytes on
                        // either side must not be copied.
                        let framed = [UInt8](repeating: 0x22, count: 9) + bytes + [UInt8](repeating: 0x5C, count: 9)
                        framed.withUnsafeBytes { w.appendQuotedVerbatim(UnsafeRawBufferPointer(rebasing: $0[9..<(9 + n)])) }
                        w.append(byte: UInt8(ascii: "!"))
                        #expect(w.count == prefix + n + 3)
                        #expect(Array(w.bytes.dropFirst(prefix)) == Self.referenceLiteral(bytes) + [0x21], "\(bytes)")
                    }
                }
            }
        }
        // No bytes at all (no address): `""`.
        var w = JSONWriter(capacity: 16)
        w.appendQuotedVerbatim(UnsafeRawBufferPointer(start: nil, count: 0))
        #expect(w.bytes == Array(#""""#.utf8))
    }

    @Test("isPlaceholderText agrees with the plain trim-and-compare: words, spacing, case, random text")
    func placeholderText() {
        let words = ["undefined", "null", "nan", "nil", "none", "(null)", "<null>", "[object object]"]
        var cases: [String] = ["", " ", "\t\n\r ", "r-5", "abc", "nul", "nulls", "0", "id-123", "gid://shopify/Checkout/1",
                               "  x  ", "[object Object] x", "undefined1", "NaN", "(NULL)", "<Null>", "[OBJECT OBJECT]",
                               "[object object]      ", "                x", "nan\u{0}", "caf\u{E9}"]
        for w in words {
            cases += [w, w.uppercased(), " " + w, w + "\t", "\n" + w.prefix(1).uppercased() + w.dropFirst() + " ", w + "x", "x" + w, String(w.dropLast())]
        }
        for c in cases {
            let bytes = Array(c.utf8)
            let fast = bytes.withUnsafeBytes { JSONDocument.isPlaceholderText($0) }
            #expect(fast == Self.referencePlaceholder(bytes), "\(c.debugDescription)")
        }
        var rng = SplitMix64(seed: 0x5EED_0002)
        let alphabet = Array("nulNULdefiaobjct ()<>[]\t\n\r-x".utf8)
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 20)
            let bytes = (0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            let fast = bytes.withUnsafeBytes { JSONDocument.isPlaceholderText($0) }
            #expect(fast == Self.referencePlaceholder(bytes), "\(bytes)")
        }
    }
}

extension WriterAndAccessFastPathTests {
    @Test("bytesEqual agrees with memcmp: every length to 40, a difference at every position")
    func bytesEqualAgreesWithMemcmp() {
        for n in 0...40 {
            let a = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            for flip in -1..<n {
                var b = a
                if flip >= 0 { b[flip] ^= 0x20 }
                // Exact-size heap copies: a read past either range would be caught by tools.
                let pa = UnsafeMutablePointer<UInt8>.allocate(capacity: max(n, 1))
                let pb = UnsafeMutablePointer<UInt8>.allocate(capacity: max(n, 1))
                defer { pa.deallocate(); pb.deallocate() }
                pa.initialize(from: a, count: n)
                pb.initialize(from: b, count: n)
                #expect(JSONDocument.bytesEqual(pa, pb, n) == (a == b), "n \(n) flip \(flip)")
            }
        }
    }

    @Test("member lookups by every key length find the right member (word compares)")
    func memberLookupsByLength() throws {
        let keys = ["a", "ab", "abc", "abcd", "abcde", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmnop",
                    "abcdefghijklmnopq", "abcdefghijklmnopqrstuvwxyz"]
        // Each key next to near misses (same length, one byte off at the start, middle or end).
        var members: [String] = []
        for (i, k) in keys.enumerated() {
            let bytes = Array(k.utf8)
            for pos in Set([0, bytes.count / 2, bytes.count - 1]) {
                var miss = bytes
                miss[pos] = UInt8(ascii: "Z")
                members.append("\"\(String(decoding: miss, as: UTF8.self))\":-1")
            }
            members.append("\"\(k)\":\(i)")
        }
        let doc = JSONDocument()
        try doc.parseOwned(Array("{\(members.joined(separator: ","))}".utf8))
        for (i, k) in keys.enumerated() {
            let v = try #require(lookUp(doc, k), "\(k)")
            #expect(doc.int64(v) == Int64(i), "\(k)")
        }
        // And through `member(_:_:)` and `members`, for keys the summary and decoder use.
        let doc2 = JSONDocument()
        try doc2.parseOwned(Array(#"{"typf":0,"amount":1,"type":2,"amounu":3,"quantity":4,"currency":5}"#.utf8))
        #expect(doc2.member(doc2.root, "type").flatMap { doc2.int64($0) } == 2)
        #expect(doc2.member(doc2.root, "amount").flatMap { doc2.int64($0) } == 1)
        #expect(doc2.member(doc2.root, "quantity").flatMap { doc2.int64($0) } == 4)
        #expect(doc2.member(doc2.root, "quantit") == nil)
        #expect(doc2.member(doc2.root, anyOf: "currencyCode", "currency").flatMap { doc2.int64($0) } == 5)
    }

    @Test("stringEquals: plain, escaped, empty, other lengths, non-strings")
    func stringEqualsCases() throws {
        let doc = JSONDocument()
        try doc.parseOwned(Array(#"["total","t\u006ftal","","subtotal","totals","tota",5,"TOTAL","caf\u00e9","café"]"#.utf8))
        let e = doc.root + 1
        #expect(doc.stringEquals(e, "total"))
        #expect(doc.stringEquals(e + 1, "total"))
        #expect(doc.stringEquals(e + 2, ""))
        #expect(!doc.stringEquals(e + 2, "total"))
        #expect(doc.stringEquals(e + 3, "subtotal"))
        #expect(!doc.stringEquals(e + 3, "total"))
        #expect(!doc.stringEquals(e + 4, "total"))
        #expect(!doc.stringEquals(e + 5, "total"))
        #expect(!doc.stringEquals(e + 6, "5"))
        #expect(!doc.stringEquals(e + 7, "total"))
        #expect(doc.stringEquals(e + 8, "café"))
        #expect(doc.stringEquals(e + 9, "café"))
        #expect(!doc.stringEquals(e + 9, "cafe"))
    }

    /// The member named `key` (a runtime string) through `keyEquals`, as `member(_:_:)` does.
    func lookUp(_ doc: JSONDocument, _ key: String) -> Int? {
        var found: Int?
        var key = key
        key.withUTF8 { u in
            doc.forEachMember(doc.root) { k, v in
                if found == nil && doc.keyEquals(k, doc.tokens[k], u.baseAddress!, u.count) { found = v }
            }
        }
        return found
    }

    @Test("booleans are written whole, at every offset and beside what follows, as the buffer grows")
    func booleans() {
        var writer = JSONWriter(capacity: 16)
        var expected: [UInt8] = []
        for k in 0..<200 {
            let value = k % 3 != 0
            writer.append(bool: value)
            expected += Array((value ? "true" : "false").utf8)
            if k % 7 == 0 {
                writer.append(byte: UInt8(ascii: ","))
                expected.append(UInt8(ascii: ","))
            }
            #expect(writer.count == expected.count)
        }
        #expect(writer.bytes == expected)
    }
}

