import CheckoutBusProtocol
import CheckoutBusJSON

/// What analytics needs from any SDK's snapshot, in one shape (`summary` in the envelope).
///
/// Amounts are integer minor units. Which unit an amount was *sent* in is decided by the schema it
/// belongs to, never by its JSON type (a producer's `2500.0` or `"2500"` means what `2500` means):
///
/// - Minor units: Checkout Kit v4 / Embedded Checkout Protocol `totals` (`[{"type","amount"}]`, or
///   the same names in an object) and a Primer payment's `amount`.
/// - Major units, scaled by the currency's exponent (0 for JPY and the like, 3 for KWD and the
///   like, 2 otherwise): a Storefront `MoneyV2` object (`amount` beside `currencyCode`) wherever it
///   appears, and every amount in the older kit's `orderDetails.cart.price`/`cost`, Checkout
///   Sheet Kit 4's `cart.cost` and a Storefront-style `cost` object.
///
/// Either unit is read exactly from the number's text, as a JSON number (`2500`, `2500.0`,
/// `2.5e3`) or a string holding one (`"2500"`); digits below the minor unit round half away from
/// zero. A value that is not a number (`"abc"`, `true`, an escaped string) leaves the field null.
/// `Sendable`.
package struct SnapshotSummary: Sendable, Equatable {
    package var status: String?
    package var currency: String?
    package var total: Int64?
    package var subtotal: Int64?
    package var lineCount: Int?
    package var itemQuantity: Int64?
    package var orderID: String?

    package init() {}

    /// The unit a schema writes its amounts in (see the type's discussion).
    enum AmountUnit {
        /// Integer minor units already (v4 `totals`, Primer `amount`).
        case minor
        /// Major units to be scaled by the currency's exponent (`MoneyV2`, the older `orderDetails`).
        case major
    }

    /// Reads a summary from a snapshot (v4 `Checkout`, older `orderDetails`) and/or a Primer payment.
    package static func read(kind: LifecycleKind, snapshot: JSONRef?, payment: JSONRef?, orderID: String?) -> SnapshotSummary {
        var s = SnapshotSummary()
        s.read(kind: kind, snapshot: snapshot, payment: payment, orderID: orderID)
        return s
    }

    /// ``read(kind:snapshot:payment:orderID:)`` into a summary, out of line, so that the one above
    /// returns its value moved, not copied and then destroyed (three optional strings retained and
    /// released).
    @inline(never)
    private mutating func read(kind: LifecycleKind, snapshot: JSONRef?, payment: JSONRef?, orderID: String?) {
        self.orderID = orderID
        if let snapshot { readSnapshot(snapshot.doc, snapshot.token) }
        if let payment { readPayment(payment.doc, payment.token) }
        if status == nil && kind == .complete { status = "completed" }
    }

    private mutating func readSnapshot(_ doc: JSONDocument, _ c: Int) {
        var f = Fields(doc, c)
        // Checkout Sheet Kit 4's `{cart, orderConfirmation}`: its cart, as the older kit's.
        var cart = f.cart
        if let details = f.orderDetails {
            cart = doc.object(details, "cart")
            f = Fields(doc, details)
        }
        // The currency first: a major-unit amount is scaled by it.
        if let v = f.status { status = SnapshotSummary.usualStatus(doc, v) ?? doc.string(v) }
        if let v = f.currency { currency = SnapshotSummary.currencyCode(doc, v) ?? currency }
        if let cart {
            readLines(doc, cart)
            if let price = doc.object(cart, "price") ?? doc.object(cart, "cost") {
                readMoneyObject(doc, price, .major)
            }
        }
        if let lines = f.lines { readLineArray(doc, lines) }
        if let totals = f.totals {
            switch doc.kind(totals) {
            case .array:
                doc.forEachElement(totals) { e in
                    guard let (type, amount) = SnapshotSummary.typeAndAmount(doc, e) else { return }
                    if currency == nil, let cur = doc.member(e, anyOf: "currency", "currencyCode") {
                        currency = SnapshotSummary.currencyCode(doc, cur)
                    }
                    // A v4 entry's amount is minor units even beside a `currencyCode`: the entry is
                    // not a MoneyV2 object (its `amount` may be one, and is then read as such).
                    if doc.stringEquals(type, "total") {
                        total = minorUnits(doc, amount, .minor)
                    } else if doc.stringEquals(type, "subtotal") {
                        subtotal = minorUnits(doc, amount, .minor)
                    } else if doc.stringEqualsIgnoringCase(type, "total") {
                        // Android's enum names (`TOTAL`) and other casings: checked after the usual spelling.
                        total = minorUnits(doc, amount, .minor)
                    } else if doc.stringEqualsIgnoringCase(type, "subtotal") {
                        subtotal = minorUnits(doc, amount, .minor)
                    }
                }
            case .object: readMoneyObject(doc, totals, .minor)
            default: break
            }
        }
        if let cost = f.cost { readMoneyObject(doc, cost, .major) }
    }

    /// A Checkout Kit v4 status (the usual case), as a literal: no string is built from the input.
    @inline(__always)
    static func usualStatus(_ doc: JSONDocument, _ v: Int) -> String? {
        if doc.stringEquals(v, "incomplete") { return "incomplete" }
        if doc.stringEquals(v, "ready_for_complete") { return "ready_for_complete" }
        if doc.stringEquals(v, "requires_escalation") { return "requires_escalation" }
        if doc.stringEquals(v, "complete_in_progress") { return "complete_in_progress" }
        if doc.stringEquals(v, "completed") { return "completed" }
        if doc.stringEquals(v, "canceled") { return "canceled" }
        return nil
    }

    /// The `type` and `amount` members of a v4 totals entry (the first of each), found in one pass
    /// over its members; nil unless it is an object with both.
    @inline(__always)
    static func typeAndAmount(_ doc: JSONDocument, _ e: Int) -> (Int, Int)? {
        var type = -1
        var amount = -1
        doc.forEachMember(e) { k, v in
            let tok = doc.tokens[k]
            if type < 0 && doc.keyEquals(k, tok, SnapshotSummary.typeKey.utf8Start, 4) {
                type = v
            } else if amount < 0 && doc.keyEquals(k, tok, SnapshotSummary.amountKey.utf8Start, 6) {
                amount = v
            }
        }
        return type >= 0 && amount >= 0 ? (type, amount) : nil
    }

    private static let typeKey: StaticString = "type"
    private static let amountKey: StaticString = "amount"

    /// A currency code from string `v`: one of the usual codes as a literal, else its text, in upper
    /// case when it has an ASCII lower-case letter (ISO 4217 codes are upper case; a bridge's `eur`
    /// is EUR; the exponent lookup folds too). Nil when `v` is not a string.
    static func currencyCode(_ doc: JSONDocument, _ v: Int) -> String? {
        if let usual = usualCurrency(doc, v) { return usual }
        guard let c = doc.string(v) else { return nil }
        return c.utf8.contains(where: { $0 >= 0x61 && $0 <= 0x7A }) ? c.uppercased() : c
    }

    /// One of the most used currency codes, upper case already (the usual case), as a literal.
    @inline(__always)
    static func usualCurrency(_ doc: JSONDocument, _ v: Int) -> String? {
        if doc.stringEquals(v, "USD") { return "USD" }
        if doc.stringEquals(v, "EUR") { return "EUR" }
        if doc.stringEquals(v, "GBP") { return "GBP" }
        if doc.stringEquals(v, "CAD") { return "CAD" }
        if doc.stringEquals(v, "AUD") { return "AUD" }
        if doc.stringEquals(v, "JPY") { return "JPY" }
        return nil
    }

    /// The members of a snapshot (or of its `orderDetails`) a summary reads, found in one pass
    /// over its members (``JSONDocument/members(_:_:)``) rather than one pass per name. Where
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
        /// `cart`, when it is an object (Checkout Sheet Kit 4's events).
        var cart: Int?

        /// The names, indexed once.
        static let fieldNames = MemberNames(
            "orderDetails", "order_details", "status", "currency", "currencyCode", "currency_code", "line_items",
            "lineItems", "lines", "totals", "cost", "cart")

        init(_ doc: JSONDocument, _ o: Int) {
            let m = doc.members(o, SnapshotSummary.Fields.fieldNames)
            orderDetails = m.object(0) ?? m.object(1)
            status = m.at(2)
            currency = m.at(3) ?? m.at(4) ?? m.at(5)
            lines = m.at(6) ?? m.at(7) ?? m.at(8)
            totals = m.at(9)
            cost = m.object(10)
            cart = m.object(11)
        }
    }

    /// Object of named amounts: `{"total":…,"subtotal":…}` or `totalAmount`/`subtotalAmount`, whose
    /// bare values are in `unit` (a `MoneyV2` value is major units whatever `unit` says).
    private mutating func readMoneyObject(_ doc: JSONDocument, _ o: Int, _ unit: AmountUnit) {
        if let v = doc.member(o, anyOf: "total", "totalAmount", "total_amount", "totalPrice") {
            total = minorUnits(doc, v, unit) ?? total
        }
        if let v = doc.member(o, anyOf: "subtotal", "subtotalAmount", "subtotal_amount", "subtotalPrice") {
            subtotal = minorUnits(doc, v, unit) ?? subtotal
        }
    }

    private mutating func readLines(_ doc: JSONDocument, _ o: Int) {
        if let lines = doc.member(o, anyOf: "line_items", "lineItems", "lines") { readLineArray(doc, lines) }
    }

    /// Line count and item quantity from `lines`, when it is an array. A quantity is read like a
    /// minor-unit amount (``integer(_:_:)``): `2`, `2.0`, `"2"` are 2; one that is not a number adds nothing.
    private mutating func readLineArray(_ doc: JSONDocument, _ lines: Int) {
        guard doc.kind(lines) == .array else { return }
        var n = 0
        var q: Int64? = 0
        doc.forEachElement(lines) { e in
            n += 1
            if let v = doc.member(e, "quantity"), let qty = SnapshotSummary.integer(doc, v), let sum = q {
                // A sum past 64 bits is no quantity: null rather than a wrapped negative.
                let (r, overflow) = sum.addingReportingOverflow(qty)
                q = overflow ? nil : r
            }
        }
        lineCount = n
        itemQuantity = q
    }

    private mutating func readPayment(_ doc: JSONDocument, _ p: Int) {
        if let v = doc.member(p, "status"), status == nil { status = doc.string(v) }
        if let v = doc.member(p, anyOf: "currencyCode", "currency_code", "currency") {
            currency = SnapshotSummary.currencyCode(doc, v) ?? currency
        }
        if let v = doc.member(p, "amount"), total == nil {
            total = minorUnits(doc, v, .minor)
        }
    }

    /// An amount in minor units, from a value sent in `unit`: a number or numeric string, or a money
    /// object `{"amount":…}`. A `MoneyV2` object (one with `currencyCode`) is major units whatever
    /// `unit` says and is scaled by its own currency; another money object (`{"amount","currency"}`)
    /// is in `unit`. A money object's currency becomes the summary's when it has none yet.
    private mutating func minorUnits(_ doc: JSONDocument, _ v: Int, _ unit: AmountUnit) -> Int64? {
        // The usual value, a bare number or string: no money object, no currency of its own.
        guard doc.kind(v) == .object else {
            switch unit {
            case .minor: return SnapshotSummary.integer(doc, v)
            case .major: return SnapshotSummary.decimal(doc, v, exponent: SnapshotSummary.exponent(currency))
            }
        }
        return moneyObjectMinorUnits(doc, v, unit)
    }

    /// ``minorUnits(_:_:_:)`` of a money object `v`.
    private mutating func moneyObjectMinorUnits(_ doc: JSONDocument, _ v: Int, _ unit: AmountUnit) -> Int64? {
        var unit = unit
        var ownCurrency: String?
        guard let value = doc.member(v, "amount") else { return nil }
        let code = doc.member(v, "currencyCode")
        if code != nil { unit = .major }
        if let cur = code ?? doc.member(v, anyOf: "currency_code", "currency") {
            ownCurrency = SnapshotSummary.currencyCode(doc, cur)
            if currency == nil { currency = ownCurrency }
        }
        switch unit {
        case .minor:
            return SnapshotSummary.integer(doc, value)
        case .major:
            return SnapshotSummary.decimal(doc, value, exponent: SnapshotSummary.exponent(ownCurrency ?? currency))
        }
    }

    /// An integer (minor units, a quantity) from a number or a string holding one, read exactly
    /// from its text: `2500`, `2500.0`, `2.5e3` and `"2500"` are all 2500; a fraction rounds half
    /// away from zero (`2500.5` is 2501). Nil for anything else.
    @inline(__always)
    static func integer(_ doc: JSONDocument, _ v: Int) -> Int64? {
        // The usual case, a plain JSON integer: read in place, no call. One of 1…8 digits ending
        // 8 or more bytes into the text is read as one word (``CanonicalHash/digitsValue(endingAt:_:)``,
        // as the hash reads it), a longer one by `parseInt`.
        let tok = doc.tokens[v]
        if tok.kind == .number && !tok.flag {
            let start = Int(tok.start)
            let end = Int(tok.end)
            let negative = doc.base[start] == UInt8(ascii: "-")
            let digits = end &- start &- (negative ? 1 : 0)
            if UInt(bitPattern: digits &- 1) < 8 && end >= 8 {
                let value = Int64(bitPattern: CanonicalHash.digitsValue(endingAt: doc.base + end, digits))
                return negative ? 0 &- value : value
            }
            return JSONDocument.parseInt(doc.raw(v))
        }
        return decimal(doc, v, exponent: 0)
    }

    /// A number or a string holding one, scaled by 10^`exponent` (``scaleDecimal(_:exponent:)``).
    static func decimal(_ doc: JSONDocument, _ v: Int, exponent: Int) -> Int64? {
        switch doc.kind(v) {
        case .number, .string: return scaleDecimal(doc.raw(v), exponent: exponent)
        default: return nil
        }
    }

    /// Digits after the decimal point for an ISO 4217 currency.
    package static func exponent(_ currency: String?) -> Int {
        switch currency?.uppercased() {
        case "JPY", "KRW", "VND", "CLP", "ISK", "UGX", "XAF", "XOF", "XPF", "PYG", "RWF", "KMF", "GNF", "DJF",
            "BIF", "VUV":
            return 0
        case "BHD", "KWD", "OMR", "JOD", "TND", "IQD", "LYD": return 3
        default: return 2
        }
    }

    /// Exact decimal text → integer scaled by 10^`exponent` ("12.345" with exponent 2 rounds half
    /// up to 1235, away from zero when negative). JSON number syntax, leniently: a leading `-`,
    /// digits with an optional `.` fraction (`5.` and `.5` pass), an optional `e`/`E` exponent
    /// (`2.5e3`); surrounding quotes are skipped. Nil for other text, and for a value with more than
    /// 15 digits before the point once the `e` exponent is applied (before `exponent`).
    static func scaleDecimal(_ r: UnsafeRawBufferPointer, exponent: Int) -> Int64? {
        var i = 0
        var end = r.count
        if end >= 2 && r[0] == UInt8(ascii: "\"") && r[end - 1] == UInt8(ascii: "\"") {
            i = 1
            end -= 1
        }
        var negative = false
        if i < end && r[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        // First the shape: whole digits, fraction digits, exponent.
        let wholeStart = i
        while i < end, r[i] &- UInt8(ascii: "0") < 10 { i += 1 }
        let wholeEnd = i
        var fracStart = i
        if i < end && r[i] == UInt8(ascii: ".") {
            i += 1
            fracStart = i
            while i < end, r[i] &- UInt8(ascii: "0") < 10 { i += 1 }
        }
        let fracEnd = i
        guard wholeEnd > wholeStart || fracEnd > fracStart else { return nil }
        var shift = 0
        if i < end && (r[i] | 0x20) == UInt8(ascii: "e") {
            i += 1
            var shiftNegative = false
            if i < end && (r[i] == UInt8(ascii: "+") || r[i] == UInt8(ascii: "-")) {
                shiftNegative = r[i] == UInt8(ascii: "-")
                i += 1
            }
            let digits = i
            while i < end, r[i] &- UInt8(ascii: "0") < 10 {
                shift = min(shift * 10 + Int(r[i] &- UInt8(ascii: "0")), 100_000)
                i += 1
            }
            guard i > digits else { return nil }
            if shiftNegative { shift = -shift }
        }
        guard i == end else { return nil }

        // Then the value: the significant digits D (whole digits without leading zeros, then the
        // fraction's), of which the first `keep` make the integer result; the next one rounds.
        var first = wholeStart
        while first < wholeEnd && r[first] == UInt8(ascii: "0") { first += 1 }
        let wholeCount = wholeEnd - first
        let count = wholeCount + (fracEnd - fracStart)
        @inline(__always) func digit(_ k: Int) -> Int64 {
            Int64(r[k < wholeCount ? first + k : fracStart + (k - wholeCount)] &- UInt8(ascii: "0"))
        }
        var limit: Int64 = 1
        for _ in 0..<(15 + max(exponent, 0)) {
            let (next, overflow) = limit.multipliedReportingOverflow(by: 10)
            limit = overflow ? Int64.max : next
        }
        let keep = wholeCount + shift + exponent
        var value: Int64 = 0
        @inline(__always) func append(_ d: Int64) -> Bool {
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(d)
            guard !o1 && !o2 && sum < limit else { return false }
            value = sum
            return true
        }
        if keep > 0 {
            let taken = min(keep, count)
            for k in 0..<taken {
                guard append(digit(k)) else { return nil }
            }
            // Zeros past the last digit (a whole number, or `e` moving the point right).
            if value != 0 {
                for _ in taken..<keep {
                    guard append(0) else { return nil }
                }
            }
        }
        if keep >= 0 && keep < count && digit(keep) >= 5 { value += 1 }
        return negative ? -value : value
    }
}
