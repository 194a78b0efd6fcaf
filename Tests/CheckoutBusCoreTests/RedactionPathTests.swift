import Foundation
import Testing

@testable import CheckoutBusCore

/// The redactor's two writers must agree: the span copier (compact input, the hot path) and the
/// token-by-token writer (input with whitespace, and the reference).
@Suite("Redaction: span copier against the token writer")
struct RedactionPathTests {
    /// Every value of every tour sample line, plus hand-written cases with escapes and nesting.
    static let inputs: [String] = {
        let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("samples/tour.jsonl")
        let lines = ((try? String(contentsOf: sample, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        return lines + [
            #"{"buyer":{"email":"a@b.c"},"cart":{"token":"t-1","id":"c"},"paymentMethods":[{"details":{"x":1}}]}"#,
            #"{"em\u0061il":"escaped-key@example.com","n":[1,2,{"phone":"+1"}],"deliveries":[{"details":"d"}]}"#,
            #"[{"address1":"a","ok":"keep \"quoted\" \\ text"},{"zip":"12345"},[],{}]"#,
            #"{"a":{"b":{"c":{"first_name":"Ada","last_name":"L","list":[{"card":{"n":"4242"}}]}}}}"#,
            #"{"email":null,"phone":[],"buyer":{},"card":0,"token":"not under cart"}"#,
        ]
    }()

    /// Rewrites `text` compactly (the token writer drops whitespace) so the span path applies.
    static func compact(_ text: String) -> [UInt8]? {
        let doc = JSONDocument()
        let bytes = Array(text.utf8)
        guard (try? bytes.withUnsafeBytes({ try doc.parse($0) })) != nil else { return nil }
        var w = JSONWriter(capacity: 256)
        writeCompact(doc, doc.root, to: &w)
        return w.bytes
    }

    static func writeCompact(_ doc: JSONDocument, _ t: Int, to w: inout JSONWriter) {
        switch doc.kind(t) {
        case .object:
            w.append("{")
            var first = true
            doc.forEachMember(t) { k, v in
                if !first { w.append(",") }
                first = false
                w.appendRaw(doc.raw(k))
                w.append(":")
                writeCompact(doc, v, to: &w)
            }
            w.append("}")
        case .array:
            w.append("[")
            var first = true
            doc.forEachElement(t) { e in
                if !first { w.append(",") }
                first = false
                writeCompact(doc, e, to: &w)
            }
            w.append("]")
        default:
            w.appendRaw(doc.raw(t))
        }
    }

    @Test("both writers give the same bytes on compact input", arguments: inputs.indices)
    func samePaths(index: Int) throws {
        let compact = try #require(Self.compact(Self.inputs[index]))
        let doc = JSONDocument()
        try compact.withUnsafeBytes { try doc.parse($0) }
        #expect(doc.isCompact)
        var spans = JSONWriter(capacity: 256)
        var tokens = JSONWriter(capacity: 256)
        BuyerDataRedactor.writeSpans(doc, doc.root, to: &spans)
        BuyerDataRedactor.writeTokens(doc, doc.root, to: &tokens)
        #expect(String(decoding: spans.bytes, as: UTF8.self) == String(decoding: tokens.bytes, as: UTF8.self))
    }

    @Test("input with whitespace is written compact, on one line")
    func whitespaceInput() throws {
        let doc = JSONDocument()
        let text = Array("{ \"email\" : \"a@b.c\",\n  \"items\": [ 1, 2 ] }".utf8)
        try text.withUnsafeBytes { try doc.parse($0) }
        #expect(!doc.isCompact)
        var w = JSONWriter(capacity: 64)
        BuyerDataRedactor.write(doc, doc.root, to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"email":"[redacted]","items":[1,2]}"#)
    }

    @Test("the prefilter's constant words have the bit of every listed name set")
    func prefilterMatchesList() {
        var words = [UInt64](repeating: 0, count: 4)
        var names = 0
        for bucket in BuyerDataRedactor.always {
            for name in bucket {
                names += 1
                let bit = name.withUnsafeBytes { BuyerDataRedactor.filterBit($0) }
                words[bit >> 6] |= 1 << UInt64(bit & 63)
            }
        }
        #expect(names > 40)
        #expect(words == (0..<4).map { BuyerDataRedactor.filterWord($0) })
    }

    @Test("the unrolled name check accepts exactly the listed names")
    func unrolledCheckMatchesList() {
        let listed = Set(BuyerDataRedactor.always.joined())
        var checked = 0
        for name in listed {
            #expect(name.withUnsafeBytes { BuyerDataRedactor.isListed($0.baseAddress!, $0.count) })
            // Every one-byte change of a listed name is rejected unless that name is listed too.
            for i in name.indices {
                for replacement in [UInt8(ascii: "_"), UInt8(ascii: "x"), name[i] ^ 0x20] where replacement != name[i] {
                    var other = name
                    other[i] = replacement
                    let isListed = other.withUnsafeBytes { BuyerDataRedactor.isListed($0.baseAddress!, $0.count) }
                    #expect(isListed == listed.contains(other))
                    checked += 1
                }
            }
        }
        #expect(checked > 1000)
    }
}
