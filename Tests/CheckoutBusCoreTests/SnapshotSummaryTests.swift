import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("SnapshotSummary: amounts in minor units")
struct SnapshotSummaryTests {
    static func scale(_ text: String, _ exponent: Int) -> Int64? {
        Array(text.utf8).withUnsafeBytes { SnapshotSummary.scaleDecimal($0, exponent: exponent) }
    }

    @Test("scaleDecimal turns decimal text into exact minor units", arguments: [
        ("12.34", 2, Int64?.some(1234)),
        ("\"12.34\"", 2, 1234),  // quotes are skipped
        ("12", 2, 1200),
        ("12.3", 2, 1230),
        ("0.01", 2, 1),
        ("0", 2, 0),
        ("-1.50", 2, -150),
        ("12.344", 2, 1234),
        ("12.345", 2, 1235),  // half up
        ("12.3449", 2, 1234),
        ("0.995", 2, 100),
        ("-0.005", 2, -1),  // half away from zero
        ("1500", 0, 1500),  // JPY
        ("1500.4", 0, 1500),
        ("1500.5", 0, 1501),
        ("1.234", 3, 1234),  // KWD
        ("1.2", 3, 1200),
        ("0.0005", 3, 1),
        ("999999999999999", 2, 99_999_999_999_999_900),
        ("", 2, nil),
        ("\"\"", 2, nil),
        (".", 2, nil),
        ("-", 2, nil),
        ("abc", 2, nil),
        ("12.3x", 2, nil),
        ("1e3", 2, 100_000),  // JSON exponent syntax moves the point
        ("1.25E1", 2, 1250),
        ("125e-2", 2, 125),
        ("5e-3", 2, 1),  // 0.005 half up
        ("4.9e-3", 2, 0),
        ("1e-99999", 2, 0),
        ("0e99", 2, 0),
        ("2.5e3", 0, 2500),  // minor units (exponent 0)
        ("2.5E+3", 0, 2500),
        ("\"2500\"", 0, 2500),
        ("2500.0", 0, 2500),
        ("2500.5", 0, 2501),
        ("-2500.5", 0, -2501),
        ("2500.49", 0, 2500),
        ("1e15", 0, nil),  // 16 digits before the point
        ("1e14", 0, 100_000_000_000_000),
        ("1e", 2, nil),
        ("1e+", 2, nil),
        ("1e99999", 2, nil),
        ("1.5.0", 2, nil),
        (" 12", 2, nil),
        ("+12", 2, nil),
        ("0x1A", 2, nil),
        ("NaN", 2, nil),
        ("Infinity", 2, nil),
        ("\"12", 2, nil),  // an opening quote without its closing one
        ("1,000.00", 2, nil),
        ("1234567890123456", 2, nil),  // more than 15 integer digits
    ])
    func scaleDecimal(text: String, exponent: Int, expected: Int64?) {
        #expect(Self.scale(text, exponent) == expected)
    }

    @Test("currency exponents follow ISO 4217", arguments: [
        ("USD", 2), ("EUR", 2), ("CAD", 2), ("GBP", 2),
        ("JPY", 0), ("jpy", 0), ("KRW", 0), ("CLP", 0), ("ISK", 0), ("VND", 0),
        ("KWD", 3), ("BHD", 3), ("OMR", 3), ("JOD", 3), ("TND", 3),
    ])
    func exponents(currency: String, exponent: Int) {
        #expect(SnapshotSummary.exponent(currency) == exponent)
    }

    @Test("an unknown or missing currency has exponent 2")
    func defaultExponent() {
        #expect(SnapshotSummary.exponent(nil) == 2)
        #expect(SnapshotSummary.exponent("XYZ") == 2)
    }

    static func summary(_ text: String, kind: LifecycleKind = .update, orderID: String? = nil) -> SnapshotSummary? {
        guard let doc = document(text) else { return nil }
        // A JSONRef does not keep its document alive.
        return withExtendedLifetime(doc) {
            SnapshotSummary.read(kind: kind, snapshot: JSONRef(doc, doc.root), payment: nil, orderID: orderID)
        }
    }

    @Test("v4 snapshot: integer totals are already minor units")
    func v4Snapshot() throws {
        let s = try #require(Self.summary(Fixture.snapshot(quantity: 3), orderID: "O-1"))
        #expect(s.status == "incomplete")
        #expect(s.currency == "USD")
        #expect(s.subtotal == 7900)
        #expect(s.total == 8000)
        #expect(s.lineCount == 2)
        #expect(s.itemQuantity == 4)
        #expect(s.orderID == "O-1")
    }

    @Test("v4 snapshot in JPY and KWD: integer minor units are not rescaled")
    func v4OtherCurrencies() throws {
        let jpy = try #require(Self.summary(#"{"currency":"JPY","totals":[{"type":"total","amount":1500}]}"#))
        #expect(jpy.total == 1500)
        let kwd = try #require(Self.summary(#"{"currency":"KWD","totals":[{"type":"total","amount":12345}]}"#))
        #expect(kwd.total == 12345)
    }

    @Test("older orderDetails MoneyV2 amounts are major units, scaled by the currency", arguments: [
        ("USD", "\"12.34\"", "\"10.00\"", Int64(1234), Int64(1000)),
        ("JPY", "\"1500\"", "\"1400\"", 1500, 1400),
        ("JPY", "1500.0", "1400", 1500, 1400),
        ("KWD", "\"12.345\"", "\"10.5\"", 12345, 10500),
        ("USD", "12.34", "10", 1234, 1000),
    ])
    func moneyV2(currency: String, total: String, subtotal: String, expectedTotal: Int64, expectedSubtotal: Int64) throws {
        let text = #"{"orderDetails":{"id":"o-1","cart":{"lines":[{"title":"A","quantity":2},{"title":"B","quantity":5}],"price":{"total":{"amount":"# + total + #","currencyCode":""# + currency + #""},"subtotal":{"amount":"# + subtotal + #","currencyCode":""# + currency + #""}}}}}"#
        let s = try #require(Self.summary(text, kind: .complete))
        #expect(s.currency == currency)
        #expect(s.total == expectedTotal)
        #expect(s.subtotal == expectedSubtotal)
        #expect(s.lineCount == 2)
        #expect(s.itemQuantity == 7)
        #expect(s.status == "completed")  // a complete with no status of its own
    }

    @Test("Storefront-style cost objects with totalAmount/subtotalAmount are read")
    func costObject() throws {
        let s = try #require(Self.summary(#"{"lines":[{"quantity":1}],"cost":{"totalAmount":{"amount":"99.99","currencyCode":"EUR"},"subtotalAmount":{"amount":"89.99","currencyCode":"EUR"}}}"#))
        #expect(s.currency == "EUR")
        #expect(s.total == 9999)
        #expect(s.subtotal == 8999)
        #expect(s.lineCount == 1)
    }

    @Test("a Primer payment supplies status, currency and an integer minor-unit amount")
    func primerPayment() throws {
        let doc = try #require(document(#"{"paymentId":"p","status":"SUCCESS","amount":1999,"currencyCode":"JPY"}"#))
        let s = withExtendedLifetime(doc) {
            SnapshotSummary.read(kind: .complete, snapshot: nil, payment: JSONRef(doc, doc.root), orderID: nil)
        }
        #expect(s.status == "SUCCESS")
        #expect(s.currency == "JPY")
        #expect(s.total == 1999)
        #expect(s.subtotal == nil)
        #expect(s.lineCount == nil)
    }

    static func payment(_ text: String) -> SnapshotSummary? {
        guard let doc = document(text) else { return nil }
        return withExtendedLifetime(doc) {
            SnapshotSummary.read(kind: .complete, snapshot: nil, payment: JSONRef(doc, doc.root), orderID: nil)
        }
    }

    // Units are decided by the schema an amount belongs to, never by its JSON type: each case
    // below was read 100x too large when the type alone decided.

    @Test("v4 totals are minor units whatever the JSON type of the amount", arguments: [
        ("2500", "USD", Int64?.some(2500)),
        ("2500.0", "USD", 2500),
        ("2.5e3", "USD", 2500),
        ("2.5E+3", "USD", 2500),
        ("25e2", "USD", 2500),
        ("\"2500\"", "USD", 2500),
        ("\"2500.0\"", "USD", 2500),
        ("\"2.5e3\"", "USD", 2500),
        ("2500.0", "JPY", 2500),
        ("\"2500\"", "KWD", 2500),
        ("-2500.0", "USD", -2500),
        // A real fraction of a minor unit rounds half away from zero.
        ("2500.5", "USD", 2501),
        ("2500.4", "USD", 2500),
        ("\"2500.5\"", "USD", 2501),
        ("-2500.5", "USD", -2501),
        // Not a number: null, never a guess.
        ("\"abc\"", "USD", nil),
        ("\"\"", "USD", nil),
        ("\"25 00\"", "USD", nil),
        ("\"\\u0032500\"", "USD", nil),  // escaped: not read
        ("true", "USD", nil),
        ("null", "USD", nil),
        ("[2500]", "USD", nil),
    ])
    func v4AmountTypes(amount: String, currency: String, expected: Int64?) throws {
        let text = #"{"currency":""# + currency + #"","totals":[{"type":"subtotal","amount":"# + amount
            + #"},{"type":"total","amount":"# + amount + "}]}"
        let s = try #require(Self.summary(text))
        #expect(s.total == expected)
        #expect(s.subtotal == expected)
        #expect(s.currency == currency)
    }

    @Test("a v4 totals entry naming a currencyCode is still minor units (the entry is not a MoneyV2)")
    func v4EntryWithCurrencyCode() throws {
        let s = try #require(Self.summary(#"{"totals":[{"type":"total","amount":2500.0,"currencyCode":"USD"}]}"#))
        #expect(s.total == 2500)
        #expect(s.currency == "USD")
    }

    @Test("a MoneyV2 value inside v4 totals is major units, scaled by its own currency")
    func moneyV2InsideTotals() throws {
        let s = try #require(Self.summary(
            #"{"currency":"USD","totals":[{"type":"total","amount":{"amount":"1500","currencyCode":"JPY"}},{"type":"subtotal","amount":{"amount":"12.50","currencyCode":"USD"}}]}"#))
        #expect(s.total == 1500)
        #expect(s.subtotal == 1250)
        #expect(s.currency == "USD")
    }

    @Test("a totals object's bare values are minor units too; a MoneyV2 value in it is major")
    func totalsObject() throws {
        let s = try #require(Self.summary(
            #"{"currency":"USD","totals":{"total":2500.0,"subtotal":{"amount":"24.00","currencyCode":"USD"}}}"#))
        #expect(s.total == 2500)
        #expect(s.subtotal == 2400)
        let t = try #require(Self.summary(
            #"{"currency":"USD","totals":{"total_amount":{"amount":"2500","currency":"USD"}}}"#))
        #expect(t.total == 2500)  // {"amount","currency"} is not a MoneyV2: the schema's unit
    }

    @Test("ec.start with amount 2500.0 publishes total 2500; the equal integer snapshot after it is suppressed")
    func ecpStartWithIntegralFloat() {
        let p = EventProcessor()
        let float = #"{"id":"ck-f","currency":"USD","totals":[{"type":"subtotal","amount":2500.0},{"type":"total","amount":2500.0}]}"#
        let integer = #"{"id":"ck-f","currency":"USD","totals":[{"type":"subtotal","amount":2500},{"type":"total","amount":2500}]}"#
        let start = p.feed(Fixture.ecp("ec.start", checkout: float))
        #expect(start.outcome == .published(.start))
        #expect(start["summary.total"] == 2500)
        #expect(start["summary.subtotal"] == 2500)
        #expect(p.feed(Fixture.ecp("ec.totals.change", checkout: integer)).outcome == .suppressed)
    }

    @Test("v4 totals sent as strings through the daemon's pipeline are minor units")
    func ecpStringAmount() {
        let p = EventProcessor()
        let out = p.feed(Fixture.ecp("ec.totals.change", checkout:
            #"{"id":"ck-s","currency":"USD","totals":[{"type":"total","amount":"2500"}]}"#))
        #expect(out["summary.total"] == 2500)
    }

    @Test("a Primer amount is minor units whatever its JSON type", arguments: [
        ("1999", "EUR", Int64?.some(1999)),
        ("\"1999\"", "EUR", 1999),
        ("1999.0", "EUR", 1999),
        ("1.999e3", "EUR", 1999),
        ("\"1999\"", "JPY", 1999),
        ("\"1999\"", "KWD", 1999),
        ("1999.5", "EUR", 2000),
        ("\"19.99 EUR\"", "EUR", nil),
    ])
    func primerAmountTypes(amount: String, currency: String, expected: Int64?) throws {
        let s = try #require(Self.payment(
            #"{"paymentId":"p","status":"SUCCESS","amount":"# + amount + #","currencyCode":""# + currency + #""}"#))
        #expect(s.total == expected)
        #expect(s.currency == currency)
    }

    @Test("a Primer success with a string amount publishes minor units through the pipeline")
    func primerStringAmountThroughPipeline() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"state":"success","paymentResult":{"paymentId":"pay_1","status":"SUCCESS","amount":"1999","currencyCode":"EUR"}}"#,
                              sdk: "primer"))
        #expect(out.outcome == .published(.complete))
        #expect(out["summary.total"] == 1999)
        #expect(out["summary.currency"] == "EUR")
    }

    @Test("MoneyV2 amounts are major units whatever their JSON type, scaled by the currency", arguments: [
        ("\"12.50\"", "USD", Int64?.some(1250)),
        ("12.5", "USD", 1250),
        ("12.50", "USD", 1250),
        ("1.25e1", "USD", 1250),
        ("12", "USD", 1200),
        ("\"12.345\"", "USD", 1235),  // half up
        ("\"1500\"", "JPY", 1500),
        ("1500", "JPY", 1500),
        ("\"1500.5\"", "JPY", 1501),
        ("\"12.345\"", "KWD", 12345),
        ("\"12.5\"", "KWD", 12500),
        ("\"12.3456\"", "KWD", 12346),
        ("\"twelve\"", "USD", nil),
    ])
    func moneyV2Types(amount: String, currency: String, expected: Int64?) throws {
        let s = try #require(Self.summary(
            #"{"cost":{"totalAmount":{"amount":"# + amount + #","currencyCode":""# + currency + #""}}}"#))
        #expect(s.total == expected)
        #expect(s.currency == currency)
    }

    @Test("the older kit's orderDetails amounts are major units even as bare values")
    func orderDetailsBareValues() throws {
        let usd = try #require(Self.summary(
            #"{"orderDetails":{"id":"o","currencyCode":"USD","cart":{"price":{"total":"12.50","subtotal":10}}}}"#,
            kind: .complete))
        #expect(usd.total == 1250)
        #expect(usd.subtotal == 1000)
        let jpy = try #require(Self.summary(
            #"{"orderDetails":{"id":"o","currencyCode":"JPY","cart":{"price":{"total":"1500"}}}}"#, kind: .complete))
        #expect(jpy.total == 1500)
        let kwd = try #require(Self.summary(
            #"{"orderDetails":{"id":"o","currency":"KWD","cart":{"price":{"total":1.5}}}}"#, kind: .complete))
        #expect(kwd.total == 1500)
    }

    @Test("a Checkout Sheet Kit completed event with MoneyV2 prices publishes scaled minor units")
    func sheetBridgeThroughPipeline() {
        let p = EventProcessor()
        let body = #"{"orderDetails":{"id":"o-9","cart":{"lines":[{"title":"Mug","quantity":"3"}],"price":{"total":{"amount":"41.25","currencyCode":"CAD"},"subtotal":{"amount":37.5,"currencyCode":"CAD"}}}}}"#
        let out = p.feed(wrap(#"{"name":"completed","body":"# + jsonStringLiteral(body) + "}", checkoutID: "sk-1"))
        #expect(out.outcome == .published(.complete))
        #expect(out["summary.total"] == 4125)
        #expect(out["summary.subtotal"] == 3750)
        #expect(out["summary.currency"] == "CAD")
        #expect(out["summary.item_quantity"] == 3)
    }

    @Test("quantities are read like minor-unit amounts: number, integral float or numeric string", arguments: [
        ("2", Int64(2)), ("2.0", 2), ("2e0", 2), ("\"2\"", 2), ("\"2.0\"", 2), ("\"2e0\"", 2),
        ("2.5", 3),  // a fraction rounds half away from zero, as amounts do
        ("\"two\"", 0), ("null", 0), ("true", 0),  // not a number: adds nothing
    ])
    func quantityTypes(quantity: String, expected: Int64) throws {
        let s = try #require(Self.summary(
            #"{"line_items":[{"id":"a","quantity":"# + quantity + #"},{"id":"b","quantity":1}]}"#))
        #expect(s.lineCount == 2)
        #expect(s.itemQuantity == expected + 1)
    }

    @Test("no snapshot: only the order id and a complete's default status")
    func empty() {
        let s = SnapshotSummary.read(kind: .dismiss, snapshot: nil, payment: nil, orderID: nil)
        #expect(s == SnapshotSummary())
        let c = SnapshotSummary.read(kind: .complete, snapshot: nil, payment: nil, orderID: "O")
        #expect(c.status == "completed")
        #expect(c.orderID == "O")
    }
}

@Suite("Timestamp and JSONWriter")
struct TimestampWriterTests {
    @Test("timestamps are written as RFC 3339 UTC with milliseconds", arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (1_764_675_541_123, "2025-12-02T11:39:01.123Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        (1_798_847_941_005, "2027-01-01T23:59:01.005Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
    ])
    func rfc3339(ms: Int64, text: String) {
        var w = JSONWriter()
        Timestamp(milliseconds: ms).write(to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == "\"\(text)\"")
    }

    @Test("timestamps order by milliseconds")
    func ordering() {
        #expect(Timestamp(milliseconds: 1) < Timestamp(milliseconds: 2))
        #expect(Timestamp(milliseconds: 5) == Timestamp(milliseconds: 5))
    }

    @Test("integers are written exactly", arguments: [Int64(0), 7, -7, 1_234_567_890, Int64.max, Int64.min])
    func integers(value: Int64) {
        var w = JSONWriter()
        w.append(int: value)
        #expect(String(decoding: w.bytes, as: UTF8.self) == String(value))
    }

    @Test("strings are escaped so the output is valid JSON that reads back the same", arguments: [
        "plain", "quote \" backslash \\", "line\nfeed\ttab\rreturn", "\u{0}\u{1}\u{1F}", "héllo €😀", "",
        // Escapes found by the eight-byte scan, in the first word, a later one and the tail.
        "12345678", "1234567\"", "12345678\\", "0123456789abcdef\u{1F}", "0123456789abcdefgh\"x",
        "ñandú-ñandú-ñandú", "\u{7F}\u{80}\u{FF}~~~~~~~~",
    ])
    func strings(text: String) throws {
        var w = JSONWriter()
        w.appendString(text)
        let doc = JSONDocument()
        try doc.parseOwned(w.bytes)
        #expect(doc.string(doc.root) == text)
        #expect(J.parse(w.bytes) == .string(text))
    }

    @Test("a writer grows past its initial capacity and keeps every byte, and reset reuses it")
    func growth() {
        var w = JSONWriter(capacity: 1)
        var expected = "["
        w.append("[")
        for i in 0..<500 {
            if i > 0 {
                w.append(byte: UInt8(ascii: ","))
                expected += ","
            }
            let text = "item \(i) \"quoted\" " + String(repeating: "x", count: i % 40)
            w.appendString(text)
            w.append(byte: UInt8(ascii: ","))
            w.append(int: Int64(-i * 1_000_003))
            expected += "\"item \(i) \\\"quoted\\\" " + String(repeating: "x", count: i % 40) + "\",\(-i * 1_000_003)"
        }
        w.append("]")
        expected += "]"
        #expect(w.count == expected.utf8.count)
        #expect(String(decoding: w.bytes, as: UTF8.self) == expected)
        #expect(w.withUnsafeBytes { Array($0) } == Array(expected.utf8))
        w.reset()
        w.append(bool: true)
        #expect(String(decoding: w.bytes, as: UTF8.self) == "true")
    }
}
