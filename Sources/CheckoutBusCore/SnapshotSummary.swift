/// What analytics needs from any SDK's snapshot, in one shape (`summary` in the envelope).
///
/// Amounts are integer minor units. Checkout Kit v4 snapshots already carry integers (minor units);
/// `MoneyV2`-style `{"amount":"12.34","currencyCode":"USD"}` values and decimal strings are major
/// units and are scaled by the currency's exponent (0 for JPY and the like, 3 for BHD and the
/// like, 2 otherwise). `Sendable`.
public struct SnapshotSummary: Sendable, Equatable {
    public var status: String?
    public var currency: String?
    public var total: Int64?
    public var subtotal: Int64?
    public var lineCount: Int?
    public var itemQuantity: Int64?
    public var orderID: String?

    public init() {}

    /// Reads a summary from a snapshot (v4 `Checkout`, older `orderDetails`) and/or a Primer payment.
    public static func read(kind: LifecycleKind, snapshot: JSONRef?, payment: JSONRef?, orderID: String?) -> SnapshotSummary {
        var s = SnapshotSummary()
        s.orderID = orderID
        if let snapshot { s.readSnapshot(snapshot.doc, snapshot.token) }
        if let payment { s.readPayment(payment.doc, payment.token) }
        if s.status == nil && kind == .complete { s.status = "completed" }
        return s
    }

    private mutating func readSnapshot(_ doc: JSONDocument, _ c: Int) {
        var f = Fields(doc, c)
        if let details = f.orderDetails {
            if let cart = doc.object(details, "cart") {
                readLines(doc, cart)
                if let price = doc.object(cart, "price") ?? doc.object(cart, "cost") {
                    readMoneyObject(doc, price)
                }
            }
            f = Fields(doc, details)
        }
        if let v = f.status { status = doc.string(v) }
        if let v = f.currency { currency = doc.string(v) ?? currency }
        if let lines = f.lines { readLineArray(doc, lines) }
        if let totals = f.totals {
            switch doc.kind(totals) {
            case .array:
                doc.forEachElement(totals) { e in
                    guard let type = doc.member(e, "type"), let amount = doc.member(e, "amount") else { return }
                    if doc.stringEquals(type, "total") {
                        total = minorUnits(doc, amount, integersAreMinor: true)
                    } else if doc.stringEquals(type, "subtotal") {
                        subtotal = minorUnits(doc, amount, integersAreMinor: true)
                    }
                    if currency == nil, let cur = doc.member(e, anyOf: "currency", "currencyCode") {
                        currency = doc.string(cur)
                    }
                }
            case .object: readMoneyObject(doc, totals)
            default: break
            }
        }
        if let cost = f.cost { readMoneyObject(doc, cost) }
    }

    /// The members of a snapshot (or of its `orderDetails`) a summary reads, found in one pass
    /// over its members (``JSONDocument/members(_:_:_:)``) rather than one pass per name. Where
    /// several spellings are accepted, the first in the list that is present wins.
    private struct Fields {
        /// `orderDetails`, else `order_details`, when it is an object.
        var orderDetails: Int?
        var status: Int?
        /// `currency`, `currencyCode` or `currency_code`.
        var currency: Int?
        /// `line_items`, `lineItems` or `lines`.
        var lines: Int?
        var totals: Int?
        /// `cost`, when it is an object.
        var cost: Int?

        init(_ doc: JSONDocument, _ o: Int) {
            var names: (StaticString, StaticString, StaticString, StaticString, StaticString, StaticString, StaticString,
                        StaticString, StaticString, StaticString, StaticString) =
                ("orderDetails", "order_details", "status", "currency", "currencyCode", "currency_code", "line_items",
                 "lineItems", "lines", "totals", "cost")
            var f = Fields()
            withUnsafeBytes(of: &names) { n in
                doc.members(o, names: n, 11) { m in
                    f.orderDetails = m.object(0) ?? m.object(1)
                    f.status = m.at(2)
                    f.currency = m.at(3) ?? m.at(4) ?? m.at(5)
                    f.lines = m.at(6) ?? m.at(7) ?? m.at(8)
                    f.totals = m.at(9)
                    f.cost = m.object(10)
                }
            }
            self = f
        }

        private init() {}
    }

    /// Object of named amounts: `{"total":…,"subtotal":…}` or `totalAmount`/`subtotalAmount`.
    private mutating func readMoneyObject(_ doc: JSONDocument, _ o: Int) {
        if let v = doc.member(o, anyOf: "total", "totalAmount", "total_amount", "totalPrice") {
            total = minorUnits(doc, v, integersAreMinor: doc.kind(v) == .number) ?? total
        }
        if let v = doc.member(o, anyOf: "subtotal", "subtotalAmount", "subtotal_amount", "subtotalPrice") {
            subtotal = minorUnits(doc, v, integersAreMinor: doc.kind(v) == .number) ?? subtotal
        }
    }

    private mutating func readLines(_ doc: JSONDocument, _ o: Int) {
        if let lines = doc.member(o, anyOf: "line_items", "lineItems", "lines") { readLineArray(doc, lines) }
    }

    /// Line count and item quantity from `lines`, when it is an array.
    private mutating func readLineArray(_ doc: JSONDocument, _ lines: Int) {
        guard doc.kind(lines) == .array else { return }
        var n = 0
        var q: Int64 = 0
        doc.forEachElement(lines) { e in
            n += 1
            if let v = doc.member(e, "quantity"), let qty = doc.int64(v) { q &+= qty }
        }
        lineCount = n
        itemQuantity = q
    }

    private mutating func readPayment(_ doc: JSONDocument, _ p: Int) {
        if let v = doc.member(p, "status"), status == nil { status = doc.string(v) }
        if let v = doc.member(p, anyOf: "currencyCode", "currency_code", "currency") {
            currency = doc.string(v) ?? currency
        }
        if let v = doc.member(p, "amount"), total == nil {
            total = minorUnits(doc, v, integersAreMinor: true)
        }
    }

    /// An amount in minor units: an integer as is (when `integersAreMinor`), a decimal string or
    /// fractional number scaled by the currency's exponent, or a `MoneyV2` object.
    private mutating func minorUnits(_ doc: JSONDocument, _ v: Int, integersAreMinor: Bool) -> Int64? {
        switch doc.kind(v) {
        case .object:
            if currency == nil, let cur = doc.member(v, anyOf: "currencyCode", "currency_code", "currency") {
                currency = doc.string(cur)
            }
            guard let a = doc.member(v, "amount") else { return nil }
            if doc.kind(a) == .number && !doc.tokens[a].flag && integersAreMinor && doc.member(v, "currencyCode") == nil {
                return doc.int64(a)
            }
            return SnapshotSummary.scaleDecimal(doc.raw(a), exponent: SnapshotSummary.exponent(currency))
        case .number:
            if integersAreMinor && !doc.tokens[v].flag { return doc.int64(v) }
            return SnapshotSummary.scaleDecimal(doc.raw(v), exponent: SnapshotSummary.exponent(currency))
        case .string:
            return SnapshotSummary.scaleDecimal(doc.raw(v), exponent: SnapshotSummary.exponent(currency))
        default:
            return nil
        }
    }

    /// Digits after the decimal point for an ISO 4217 currency.
    public static func exponent(_ currency: String?) -> Int {
        switch currency?.uppercased() {
        case "JPY", "KRW", "VND", "CLP", "ISK", "UGX", "XAF", "XOF", "XPF", "PYG", "RWF", "KMF", "GNF", "DJF",
            "BIF", "VUV":
            return 0
        case "BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD": return 3
        default: return 2
        }
    }

    /// Exact decimal → minor units ("12.345" with exponent 2 rounds half up to 1235); quotes skipped.
    static func scaleDecimal(_ r: UnsafeRawBufferPointer, exponent: Int) -> Int64? {
        var i = 0
        var end = r.count
        if end >= 2 && r[0] == UInt8(ascii: "\"") {
            i = 1
            end -= 1
        }
        var negative = false
        if i < end && r[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        var whole: Int64 = 0
        var digits = 0
        while i < end, r[i] &- UInt8(ascii: "0") < 10 {
            guard digits < 15 else { return nil }
            whole = whole * 10 + Int64(r[i] - UInt8(ascii: "0"))
            digits += 1
            i += 1
        }
        var frac: Int64 = 0
        var fracDigits = 0
        var roundUp = false
        if i < end && r[i] == UInt8(ascii: ".") {
            i += 1
            while i < end, r[i] &- UInt8(ascii: "0") < 10 {
                if fracDigits < exponent {
                    frac = frac * 10 + Int64(r[i] - UInt8(ascii: "0"))
                    fracDigits += 1
                } else if fracDigits == exponent {
                    roundUp = r[i] >= UInt8(ascii: "5")
                    fracDigits += 1
                }
                i += 1
            }
        }
        guard i == end, digits > 0 || fracDigits > 0 else { return nil }
        var scale: Int64 = 1
        for _ in 0..<exponent { scale *= 10 }
        var used = min(fracDigits, exponent)
        while used < exponent {
            frac *= 10
            used += 1
        }
        var value = whole * scale + frac + (roundUp ? 1 : 0)
        if negative { value = -value }
        return value
    }
}
