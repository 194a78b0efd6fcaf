import CheckoutBusJSON
import Foundation
import Testing

/// The production scanner against ``ReferenceScanner`` (the straightforward one): for every input,
/// the same tape token for token (kind, flag, start, end, next), or the same error reason and offset.
@Suite("scanner differential")
struct ScannerDifferentialTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func lines(_ path: String) -> [[UInt8]] {
        let text = (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map { Array($0.utf8) }
    }

    /// Every sample and corpus line, and the bench snapshot whole.
    static let seeds: [[UInt8]] = {
        var all = lines("samples/tour.jsonl") + lines("samples/bridges.jsonl") + lines("Tests/Corpus/sdk-payloads.jsonl")
        if let snapshot = try? Data(contentsOf: root.appendingPathComponent("bench/snapshot-1k.json")) {
            all.append(Array(snapshot))
        }
        return all
    }()

    /// Bytes that start, end or break tokens, or stress the string and number paths.
    static let interesting: [UInt8] = Array("\"\\{}[],: \t\n\r0123456789-+.eEtfnu/xA".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC2, 0xC3, 0xE0, 0xED, 0xF0, 0xF4, 0xFF]

    /// Compares the two scanners on `bytes`, also when the bytes are followed in memory by more
    /// (structural) bytes the scanners must not read. Returns a mismatch description, or nil.
    static func mismatch(_ bytes: [UInt8], maxDepth: Int = 64) -> String? {
        let (expected, expectedCompact) = ReferenceScanner.scan(bytes, maxDepth: maxDepth)
        let doc = JSONDocument()
        doc.maxDepth = maxDepth
        for padding in [[], Array("\"}]0,\":1e5 \\".utf8) + [UInt8](repeating: 0x22, count: 24)] as [[UInt8]] {
            let buffer = bytes + padding
            let got: Result<[TapeEntry], JSONParseError> = buffer.withUnsafeBytes { raw in
                do throws(JSONParseError) {
                    try doc.parse(UnsafeRawBufferPointer(rebasing: raw[0..<bytes.count]))
                    return .success((0..<doc.tokenCount).map { k in
                        let t = doc.tokens[k]
                        return TapeEntry(kind: t.kind, flag: t.flag, start: t.start, end: t.end, next: t.next)
                    })
                } catch {
                    return .failure(error)
                }
            }
            // The tape is reserved up front from this bound, and appends do not check it.
            if doc.tokenCount > JSONDocument.tapeBound(length: bytes.count, maxDepth: maxDepth) {
                return "\(doc.tokenCount) tokens exceed the tape bound"
            }
            switch (expected, got) {
            case let (.success(a), .success(b)):
                if a != b {
                    let k = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
                    return "tapes differ at token \(k) (\(a.count) vs \(b.count) tokens): "
                        + "\(k < a.count ? a[k].description : "-") vs \(k < b.count ? b[k].description : "-")"
                }
                if doc.isCompact != expectedCompact {
                    return "isCompact \(doc.isCompact), expected \(expectedCompact)"
                }
            case let (.failure(a), .failure(b)):
                if a != b { return "errors differ: \(a.reason.name)@\(a.offset) vs \(b.reason.name)@\(b.offset)" }
            case let (.success(a), .failure(b)):
                return "reference parses (\(a.count) tokens); scanner fails \(b.reason.name)@\(b.offset)"
            case let (.failure(a), .success(b)):
                return "reference fails \(a.reason.name)@\(a.offset); scanner parses (\(b.count) tokens)"
            }
        }
        return nil
    }

    static func check(_ bytes: [UInt8], maxDepth: Int = 64, _ what: @autoclosure () -> String,
                      sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        guard let problem = mismatch(bytes, maxDepth: maxDepth) else { return true }
        Issue.record("\(what()): \(problem): \(String(decoding: bytes.prefix(300), as: UTF8.self))",
                     sourceLocation: sourceLocation)
        return false
    }

    /// Inserts whitespace after every structural byte outside strings (a pretty-printed text).
    static func spaced(_ bytes: [UInt8], _ space: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var inString = false
        var k = 0
        out.append(contentsOf: space)
        while k < bytes.count {
            let c = bytes[k]
            out.append(c)
            if inString {
                if c == 0x5C, k + 1 < bytes.count {
                    k += 1
                    out.append(bytes[k])
                } else if c == 0x22 {
                    inString = false
                    out.append(contentsOf: space)
                }
            } else if c == 0x22 {
                inString = true
            } else {
                out.append(contentsOf: space)
            }
            k += 1
        }
        return out
    }

    @Test("every sample line, corpus line and the bench snapshot: same tape, also pretty-printed")
    func seedsMatch() {
        #expect(Self.seeds.count > 190)
        for (n, line) in Self.seeds.enumerated() {
            guard Self.check(line, "seed \(n)") else { continue }
            _ = Self.check(Self.spaced(line, [0x20]), "seed \(n) spaced")
            _ = Self.check(Self.spaced(line, Array("\r\n\t ".utf8)), "seed \(n) pretty")
            _ = Self.check(line, maxDepth: 2, "seed \(n) at depth 2")
        }
    }

    @Test("every truncation of every seed fails the same way")
    func truncations() {
        var failures = 0
        for (n, line) in Self.seeds.enumerated() where failures < 10 {
            for end in 0..<line.count where !Self.check(Array(line[0..<end]), "seed \(n) cut at \(end)") {
                failures += 1
                break
            }
        }
    }

    @Test("seeds with one byte replaced, inserted or deleted at random offsets")
    func mutations() {
        var rng = SplitMix64(seed: 0x5CA7)
        var failures = 0
        for (n, line) in Self.seeds.enumerated() where failures < 10 && !line.isEmpty {
            for _ in 0..<150 {
                var m = line
                let at = Int(rng.next() % UInt64(m.count))
                let byte = rng.next() % 4 == 0 ? UInt8(truncatingIfNeeded: rng.next())
                    : Self.interesting[Int(rng.next() % UInt64(Self.interesting.count))]
                switch rng.next() % 4 {
                case 0: m.insert(byte, at: at)
                case 1: m.remove(at: at)
                case 2: m.insert(contentsOf: [UInt8](repeating: 0x20, count: Int(rng.next() % 3) + 1), at: at)
                default: m[at] = byte
                }
                if !Self.check(m, "seed \(n) mutated at \(at)") {
                    failures += 1
                    break
                }
            }
        }
    }

    @Test("thousands of generated documents, valid and mutated, at several depth limits")
    func generated() {
        var rng = SplitMix64(seed: 0xD1FF)
        var failures = 0
        for n in 0..<6000 where failures < 10 {
            var text: [UInt8] = []
            Self.value(&text, &rng, depth: 0, pretty: n % 5 == 0)
            var ok = Self.check(text, "generated \(n)")
            if ok, n % 7 == 0 { ok = Self.check(text, maxDepth: Int(rng.next() % 6) + 1, "generated \(n), shallow limit") }
            if ok, !text.isEmpty {
                var m = text
                let at = Int(rng.next() % UInt64(m.count))
                m[at] = Self.interesting[Int(rng.next() % UInt64(Self.interesting.count))]
                ok = Self.check(m, "generated \(n), byte \(at) replaced")
                if ok { ok = Self.check(Array(text[0..<at]), "generated \(n), cut at \(at)") }
            }
            if !ok { failures += 1 }
        }
    }

    @Test("nesting around the depth limit, empty containers, one-byte values, a lone value at the end")
    func edges() {
        var cases: [String] = ["", " ", "0", "-", "-0", "1", "[]", "{}", "[[]]", "[{}]", "[0]", "[0,1]", "[1,2,3]",
                               "{\"\":0}", "{\"a\":[]}", "\"\"", "\"a", "[\"\"]", "true", "tru", "nul", "falsey",
                               "[0,]", "{,}", "[,]", "{\"a\"}", "{\"a\":}", "{\"a\" :1 }", " [ 1 , 2 ] ",
                               "01", "-01", "1.", "1.e5", "1e", "1e+", "1E-7", "0.5e308", "1e309", "-1e309",
                               "\"\\u00e9\"", "\"\\u00g9\"", "\"\\x\"", "\"\\", "\"\\u12", "[1e5,2.5,-0.0]",
                               "{ }", "[ ]", "[\n]", "{\t}", "{ ,}", "[ ,]", "{\"a\":1,}", "{\"a\":1, }", "[1,]", "[1, ]",
                               "{}}", "[]]", "[[],[]]", "{\"a\":{},\"b\":[]}", "[{ }]", "{\"a\":[ ],\"b\":{ }}", "{]", "[}",
                               "{\"a\": 1}", "{\"a\":\t\"x\"}", "{\"a\": {}}", "{\"a\":\n[]}", "{\"a\": -1}", "{\"a\": tru}",
                               "[ 1]", "[ \"x\"]", "[ {}]", "[ []]", "[1, 2]", "[1,\n-2]", "[ -1 ]", "{\"a\": }", "[ x]", "[ ,1]"]
        for d in [62, 63, 64, 65] {
            cases.append(String(repeating: "[", count: d) + String(repeating: "]", count: d))
            cases.append(String(repeating: "{\"k\":", count: d) + "1" + String(repeating: "}", count: d))
            cases.append(String(repeating: "[", count: d))
        }
        for len in 0..<40 {
            let s = String(repeating: "a", count: len)
            cases += ["\"\(s)\"", "{\"\(s)\":\"\(s)\"}", "[\"\(s)\",\(String(repeating: "9", count: len + 1))]",
                      "{\"\(s)é\":\"\(s)\\n\"}", "[\(String(repeating: "7", count: len + 1)).\(String(repeating: "5", count: len + 1))]"]
        }
        for text in cases {
            let bytes = Array(text.utf8)
            _ = Self.check(bytes, "\(text)")
            for end in 0..<bytes.count { _ = Self.check(Array(bytes[0..<end]), "\(text) cut at \(end)") }
        }
    }

    @Test("members with keys of 0…18 bytes (plain, escaped, non-ASCII, a control, spaced) before every kind of value, every truncation")
    func compactMembers() {
        var failures = 0
        let values = ["1", "-2", "\"v\"", "{}", "[]", "true", "null", " 1", "\t\"x\"", "\"\"", "{\"a\":0}", "0.5"]
        for length in 0...18 where failures < 10 {
            let plain = String((0..<length).map { Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8($0 % 26))) })
            var keys = [plain]
            if length > 0 {
                keys += [String(plain.dropLast()) + "\\n", String(plain.dropLast()) + "é", String(plain.dropLast()) + "\u{01}",
                         String(plain.dropLast()) + "\""]
            }
            for key in keys {
                for value in values {
                    for member in ["\"\(key)\":\(value)", "\"\(key)\" :\(value)", "\"\(key)\": \(value)"] {
                        for text in ["{\(member)}", "{\"0\":0,\(member)}", "[{\(member),\(member)}]"] {
                            let bytes = Array(text.utf8)
                            for end in 0...bytes.count where !Self.check(Array(bytes[0..<end]), "\(text) cut at \(end)") {
                                failures += 1
                                break
                            }
                        }
                    }
                }
            }
        }
    }

    @Test("the tape bound holds where tokens are densest: one-byte scalars, empty and unclosed containers")
    func tapeBound() {
        // A lone one-byte scalar at depth limit 0 fills the bound exactly (one token, bound one).
        var texts: [String] = ["0", "7", "[", "{"]
        for n in 1..<40 {
            texts.append("[" + Array(repeating: "0", count: n).joined(separator: ",") + "]")
            texts.append("{" + Array(repeating: "\"\":0", count: n).joined(separator: ",") + "}")
            texts.append(String(repeating: "[", count: n) + String(repeating: "]", count: n))
            texts.append("[" + Array(repeating: "[]", count: n).joined(separator: ",") + "]")
            texts.append(String(repeating: "[0,", count: n))
            texts.append(String(repeating: "{\"\":[", count: n))
        }
        for text in texts {
            let bytes = Array(text.utf8)
            for depth in [0, 1, 3, 64, 1000] {
                for end in 0...bytes.count { _ = Self.check(Array(bytes[0..<end]), maxDepth: depth, "\(text) cut at \(end), depth \(depth)") }
            }
        }
        #expect(JSONDocument.tapeBound(length: 0, maxDepth: 64) == 1)
        #expect(JSONDocument.tapeBound(length: 10, maxDepth: .max) == 11)
        #expect(JSONDocument.tapeBound(length: 1000, maxDepth: -1) == 501)
    }

    @Test("every byte value at every position of multi-byte sequences, in short and long strings")
    func utf8Bytes() {
        var failures = 0
        for ch in ["é", "\u{7FF}", "€", "\u{D7FF}", "\u{E000}", "\u{FFFF}", "😀", "\u{10000}", "\u{10FFFF}"] {
            for prefix in ["", "abcdefghijklmnopqrstu"] {
                let text = Array("[\"\(prefix)\(ch)x\"]".utf8)
                let lead = 2 + prefix.utf8.count
                for at in lead..<(lead + ch.utf8.count + 1) where failures < 10 {
                    for b in 0...255 {
                        var m = text
                        m[at] = UInt8(b)
                        if !Self.check(m, "\(ch) byte \(at) = \(b)") { failures += 1 }
                    }
                }
            }
        }
    }

    @Test("every byte value after a backslash and inside a \\u escape")
    func escapeBytes() {
        for text in ["[\"\\u00e9\"]", "{\"\\u00e9abcdefghijklmnopq\":0}"] {
            let bytes = Array(text.utf8)
            for at in 2..<8 {
                for b in 0...255 {
                    var m = bytes
                    m[at] = UInt8(b)
                    _ = Self.check(m, "\(text) byte \(at) = \(b)")
                }
            }
        }
    }

    // MARK: Generation

    static func value(_ out: inout [UInt8], _ rng: inout SplitMix64, depth: Int, pretty: Bool) {
        let space: [UInt8] = pretty ? [[0x20], [0x0A, 0x20, 0x20], [], [0x09]][Int(rng.next() % 4)] : []
        let pick = depth > 5 ? rng.next() % 5 + 2 : rng.next() % 7
        switch pick {
        case 0, 1:
            let open: UInt8 = pick == 0 ? 0x7B : 0x5B
            out.append(open)
            let n = Int(rng.next() % 6)
            for k in 0..<n {
                out += space
                if k > 0 { out.append(0x2C); out += space }
                if pick == 0 {
                    string(&out, &rng)
                    out += space
                    out.append(0x3A)
                    out += space
                }
                value(&out, &rng, depth: depth + 1, pretty: pretty)
            }
            out += space
            out.append(pick == 0 ? 0x7D : 0x5D)
        case 2, 3: string(&out, &rng)
        case 4, 5: number(&out, &rng)
        default: out += Array(["true", "false", "null"][Int(rng.next() % 3)].utf8)
        }
    }

    static func string(_ out: inout [UInt8], _ rng: inout SplitMix64) {
        out.append(0x22)
        let n = Int(rng.next() % (rng.next() % 4 == 0 ? 60 : 18))
        let pieces: [[UInt8]] = [Array("a".utf8), Array("Z".utf8), Array("_".utf8), Array(" ".utf8), Array("é".utf8),
                                 Array("€".utf8), Array("😀".utf8), Array("\\n".utf8), Array("\\\"".utf8), Array("\\\\".utf8),
                                 Array("\\u00e9".utf8), Array("\\/".utf8), Array("~".utf8), Array("9".utf8)]
        let plain = rng.next() % 2 == 0
        for _ in 0..<n { out += plain ? pieces[Int(rng.next() % 4)] : pieces[Int(rng.next() % UInt64(pieces.count))] }
        out.append(0x22)
    }

    static func number(_ out: inout [UInt8], _ rng: inout SplitMix64) {
        if rng.next() % 4 == 0 { out.append(0x2D) }
        let digits = Int(rng.next() % (rng.next() % 4 == 0 ? 40 : 12)) + 1
        if rng.next() % 5 == 0 {
            out.append(0x30)
        } else {
            out.append(UInt8(0x31 + rng.next() % 9))
            for _ in 1..<digits { out.append(UInt8(0x30 + rng.next() % 10)) }
        }
        if rng.next() % 3 == 0 {
            out.append(0x2E)
            for _ in 0..<(Int(rng.next() % 12) + 1) { out.append(UInt8(0x30 + rng.next() % 10)) }
        }
        if rng.next() % 4 == 0 {
            out.append(rng.next() % 2 == 0 ? 0x65 : 0x45)
            switch rng.next() % 3 {
            case 0: out.append(0x2B)
            case 1: out.append(0x2D)
            default: break
            }
            for _ in 0..<(Int(rng.next() % 3) + 1) { out.append(UInt8(0x30 + rng.next() % 10)) }
        }
    }
}
