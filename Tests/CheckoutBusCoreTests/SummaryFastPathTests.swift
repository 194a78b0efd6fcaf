import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON

/// The summary's in-place integer read against `JSONDocument.int64(_:)` (what it replaces for a
/// plain JSON integer), and its totals-entry lookup against `member(_:_:)`.
@Suite("summary fast paths")
struct SummaryFastPathTests {
    @Test("integer(_:_:) reads plain integers as int64(_:) does: lengths 1 to 22, signs, zeros, limits, at every offset 1 to 14")
    func integerAgreesWithInt64() throws {
        var numbers = ["0", "-0", "7", "-7", "1005", "123456789012345678", "-12345678901234567",
                       "999999999999999999", "-999999999999999999", "9223372036854775807", "-9223372036854775808",
                       "9223372036854775808", "-9223372036854775809", "12345678901234567890", "1234567890123456789012"]
        var rng = SplitMix64(seed: 0x5EED_0003)
        for _ in 0..<5_000 {
            let n = 1 + Int(rng.next() % 21)
            var text = rng.next() % 4 == 0 ? "-" : ""
            // JSON integers: no leading zero.
            for i in 0..<n { text.append(Character(String(i == 0 && n > 1 ? 1 + rng.next() % 9 : rng.next() % 10))) }
            numbers.append(text)
        }
        // Padded so the number ends before, at and after offset 8: a number of up to 8 digits
        // ending 8 or more bytes into the text is read as one word, others by `parseInt`.
        let doc = JSONDocument()
        for (index, text) in numbers.enumerated() {
            for padding in index < 200 ? Array(0...13) : [index % 14] {
                try doc.parseOwned(Array(("[" + String(repeating: " ", count: padding) + text + "]").utf8))
                let v = doc.root + 1
                #expect(SnapshotSummary.integer(doc, v) == doc.int64(v), "\(text) after \(padding) spaces")
            }
        }
    }

    @Test("typeAndAmount finds what member(_:_:) finds: first of each, either order, missing ones")
    func typeAndAmountAgreesWithMember() throws {
        let entries = [#"{"type":"total","amount":1}"#, #"{"amount":1,"type":"total"}"#, #"{"type":"a","type":"b","amount":1,"amount":2}"#,
                       #"{"type":"total"}"#, #"{"amount":3}"#, #"{}"#, #"{"typ":"x","amounts":1,"type":"t","amount":2}"#,
                       #"{"ty\u0070e":"total","amount":5}"#, #"{"amount":{"amount":"1.00","currencyCode":"USD"},"type":"total"}"#, #"[1]"#, #""s""#]
        for text in entries {
            let doc = JSONDocument()
            try doc.parseOwned(Array(text.utf8))
            let expected = doc.member(doc.root, "type").flatMap { t in doc.member(doc.root, "amount").map { (t, $0) } }
            let got = SnapshotSummary.typeAndAmount(doc, doc.root)
            #expect(got?.0 == expected?.0 && got?.1 == expected?.1, "\(text)")
        }
    }

    @Test("isASCII agrees with a byte-by-byte check: every length to 24, a high byte at every position")
    func isASCIIAgrees() {
        for n in 0...24 {
            for high in -1..<n {
                var bytes = (0..<n).map { UInt8(0x20 + $0 % 90) }
                if high >= 0 { bytes[high] = 0xC3 }
                let got = bytes.withUnsafeBytes { RawEventDecoder.isASCII($0) }
                #expect(got == bytes.allSatisfy { $0 < 0x80 }, "n \(n) high \(high)")
            }
        }
    }
}
