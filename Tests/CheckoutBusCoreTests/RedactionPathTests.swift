import Foundation
import Testing

@testable import CheckoutBusCore
@testable import CheckoutBusJSON
import CheckoutBusProtocol

/// The redactor's two writers must agree: the span copier (compact input, the hot path) and the
/// token-by-token writer (input with whitespace, and the reference).
@Suite("Redaction: span copier against the token writer")
struct RedactionPathTests {
    /// Every value of every tour sample line, plus hand-written cases with escapes and nesting.
    static let inputs: [String] = {
        repositoryLines("samples/tour.jsonl") + [
            #"{"buyer":{"email":"a@b.c"},"cart":{"token":"t-1","id":"c"},"paymentMethods":[{"details":{"x":1}}]}"#,
            #"{"em\u0061il":"escaped-key@example.com","n":[1,2,{"phone":"+1"}],"deliveries":[{"details":"d"}]}"#,
            #"[{"address1":"a","ok":"keep \"quoted\" \\ text"},{"zip":"12345"},[],{}]"#,
            #"{"a":{"b":{"c":{"first_name":"Ada","last_name":"L","list":[{"card":{"n":"4242"}}]}}}}"#,
            #"{"email":null,"phone":[],"buyer":{},"card":0,"token":"not under cart"}"#,
            #"{"Email":"a","_card_":{"n":1},"customer_email":"b","aVeryLongPrefixThatGoesOnAndOnCustomerEmail":"c"}"#,
            #"{"__typename":"X","PaymentMethods":[{"Details":{"x":1}}],"Cart":{"Token":"t"},"e-mail":"d","ip":"e"}"#,
        ]
    }()

    /// Rewrites `text` compactly (the token writer drops whitespace) so the span path applies.
    static func compact(_ text: String) -> [UInt8]? {
        let doc = JSONDocument()
        let bytes = Array(text.utf8)
        // The document owns its copy: it is read after `bytes`' last use.
        guard (try? doc.parseOwned(bytes)) != nil else { return nil }
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
        try doc.parseOwned(compact)  // a copy the document owns, read after `compact`'s last use
        #expect(doc.isCompact)
        var spans = JSONWriter(capacity: 256)
        var tokens = JSONWriter(capacity: 256)
        BuyerDataRedactor.writeSpans(doc, doc.root, to: &spans)
        BuyerDataRedactor.writeTokens(doc, doc.root, to: &tokens)
        #expect(String(decoding: spans.bytes, as: UTF8.self) == String(decoding: tokens.bytes, as: UTF8.self))
    }

    @Test("one walk for the hash and the redactions gives the hash and the bytes of the two separate walks",
          arguments: inputs.indices)
    func fusedWalk(index: Int) throws {
        let compact = try #require(Self.compact(Self.inputs[index]))
        let doc = JSONDocument()
        try doc.parseOwned(compact)  // a copy the document owns, read after `compact`'s last use
        // The whole line, and every container in it (the pipeline hands over a snapshot inside).
        for t in 0..<doc.tokenCount where doc.kind(t) == .object || doc.kind(t) == .array {
            var fused = JSONWriter(capacity: 64)
            var spans = JSONWriter(capacity: 64)
            var redactions = [1, 2, 3]  // left over from an earlier event: replaced, not added to
            let hash = CanonicalHash.hashNotingRedactions(doc, t, into: &redactions)
            BuyerDataRedactor.write(doc, t, redactions: redactions, to: &fused)
            BuyerDataRedactor.writeSpans(doc, t, to: &spans)
            #expect(hash == CanonicalHash.hash(doc, t))
            #expect(String(decoding: fused.bytes, as: UTF8.self) == String(decoding: spans.bytes, as: UTF8.self))
        }
    }

    @Test("input with whitespace is written compact, on one line")
    func whitespaceInput() throws {
        let doc = JSONDocument()
        let text = Array("{ \"email\" : \"a@b.c\",\n  \"items\": [ 1, 2 ] }".utf8)
        try doc.parseOwned(text)
        #expect(!doc.isCompact)
        var w = JSONWriter(capacity: 64)
        BuyerDataRedactor.write(doc, doc.root, to: &w)
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"email":"[redacted]","items":[1,2]}"#)
    }

    /// Folds `key` as the redactor does, with `String`: ASCII letters lower-cased, `_` and `-` dropped.
    static func fold(_ key: [UInt8]) -> [UInt8] {
        key.compactMap { b in
            b == UInt8(ascii: "_") || b == UInt8(ascii: "-") ? nil : (b >= 0x41 && b <= 0x5A ? b | 0x20 : b)
        }
    }

    /// The rule written plainly: the folded name is listed, or ends in a listed ending.
    static func reference(_ key: [UInt8]) -> Bool {
        let folded = fold(key)
        return BuyerDataRedactor.listedNames.contains { Array($0.utf8) == folded }
            || BuyerDataRedactor.listedEndings.contains { ending in
                folded.count >= ending.utf8.count && folded.suffix(ending.utf8.count).elementsEqual(ending.utf8)
            }
    }

    static func isRedacted(_ key: [UInt8], parent: String? = nil) -> Bool {
        key.withUnsafeBytes { k in
            guard let parent else { return BuyerDataRedactor.isRedacted(k, parent: nil) }
            return Array(parent.utf8).withUnsafeBytes { BuyerDataRedactor.isRedacted(k, parent: $0) }
        }
    }

    static func mayBeRedacted(_ key: [UInt8]) -> Bool { key.withUnsafeBytes { BuyerDataRedactor.mayBeRedacted($0) } }

    /// Spellings of folded `name` that fold back to it: upper case, capitalised, camel-ish, and
    /// with separators before, between and after its letters.
    static func spellings(_ name: String) -> [[UInt8]] {
        let n = Array(name.utf8)
        func upper(_ b: UInt8) -> UInt8 { b >= 0x61 && b <= 0x7A ? b & ~0x20 : b }
        var out: [[UInt8]] = [n, n.map(upper), [upper(n[0])] + n.dropFirst(), n.dropLast() + [upper(n[n.count - 1])]]
        for i in 1..<n.count {
            out.append(Array(n[..<i]) + [UInt8(ascii: "_")] + n[i...])
            out.append(Array(n[..<i]) + [UInt8(ascii: "-")] + [upper(n[i])] + n[(i + 1)...])
            out.append(Array(n[..<i]) + [upper(n[i])] + n[(i + 1)...])
        }
        out.append([UInt8(ascii: "_")] + n)
        out.append(n + [UInt8(ascii: "_")])
        out.append(Array("__".utf8) + n.map(upper) + Array("--".utf8))
        return out
    }

    @Test("folding agrees with the plain rule for every byte value, at every place in a word, short or long")
    func foldEveryByte() {
        for length in [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 40] {
            for b in 0...255 {
                for at in Set([0, length / 2, length - 1]) {
                    var key = (0..<length).map { UInt8(ascii: "a") &+ UInt8($0 % 26) }
                    key[at] = UInt8(b)
                    let expected = Self.fold(key)
                    var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
                    let (folded, count) = key.withUnsafeBytes { k in
                        withUnsafeMutableBytes(of: &buffer) { out in
                            let (end, count) = BuyerDataRedactor.fold(k, into: out)
                            let kept = min(count, 32)
                            return (Array(UnsafeRawBufferPointer(start: end - kept, count: kept)), count)
                        }
                    }
                    #expect(count == expected.count, "length \(length), byte \(b) at \(at)")
                    #expect(folded == Array(expected.suffix(32)), "length \(length), byte \(b) at \(at)")
                }
            }
        }
    }

    @Test("the prefilter passes exactly the first, second-to-last and last bytes a redactable name can fold from")
    func prefilterMatchesList() {
        // The reference: a separator is folded away, so in its place any byte may be the folded
        // name's (a separator last: its last two); otherwise a byte folds to itself, lower-cased.
        func sep(_ b: Int) -> Bool { b == 0x5F || b == 0x2D }
        func low(_ b: Int) -> UInt8 { UInt8(b >= 0x41 && b <= 0x5A ? b | 0x20 : b) }
        let names = (BuyerDataRedactor.listedNames + BuyerDataRedactor.contextualNames).map { Array($0.utf8) }
        let endings = BuyerDataRedactor.listedEndings.map { Array($0.utf8) }
        let screen = BuyerDataRedactor.screen
        var wrong = 0
        var passed = 0
        for p in 0...255 {
            for l in 0...255 {
                func pair(_ n: [UInt8]) -> Bool { (sep(p) || low(p) == n[n.count - 2]) && low(l) == n[n.count - 1] }
                let anyFirst = sep(l) || endings.contains(where: pair)
                let matching = names.filter(pair)
                var first = [Bool](repeating: false, count: 256)
                for n in matching { first[Int(n[0])] = true }
                for f in 0...255 {
                    let expected = anyFirst || (!matching.isEmpty && sep(f)) || first[Int(low(f))]
                    let screened = BuyerDataRedactor.mayBeRedacted(
                        first: UInt8(f), penultimate: UInt8(p), last: UInt8(l), screen: screen)
                    if screened != expected { wrong += 1 }
                    if screened { passed += 1 }
                }
            }
        }
        #expect(wrong == 0)
        // Separators pass much around them; otherwise a pass is rare.
        #expect(passed < 256 * 256 * 256 / 50)
    }

    @Test("the lists are folded, and no listed name is also matched by an ending")
    func listsAreFolded() {
        let all = BuyerDataRedactor.listedNames + BuyerDataRedactor.listedEndings + BuyerDataRedactor.contextualNames
        for name in all {
            #expect(Self.fold(Array(name.utf8)) == Array(name.utf8), "\(name)")
            #expect(name.utf8.count >= 2 && name.utf8.count <= 32, "\(name)")
        }
        #expect(Set(all).count == all.count)
        for name in BuyerDataRedactor.listedNames {
            #expect(!BuyerDataRedactor.listedEndings.contains { name.hasSuffix($0) }, "\(name) is already an ending")
        }
    }

    @Test("every spelling of a listed name or ending is redacted and passes the prefilter",
          arguments: BuyerDataRedactor.listedNames + BuyerDataRedactor.listedEndings)
    func listedSpellings(name: String) {
        for spelling in Self.spellings(name) {
            let text = String(decoding: spelling, as: UTF8.self)
            #expect(Self.isRedacted(spelling), "\(text)")
            #expect(Self.mayBeRedacted(spelling), "\(text)")
        }
    }

    @Test("a name ending in a listed ending is redacted, however long", arguments: BuyerDataRedactor.listedEndings)
    func endings(ending: String) {
        let prefixes = ["customer", "billing_", "Contact", "x", "primary-", "buyer", String(repeating: "a", count: 40)]
        for prefix in prefixes {
            for spelling in Self.spellings(ending) {
                let key = Array(prefix.utf8) + spelling
                let text = String(decoding: key, as: UTF8.self)
                #expect(Self.isRedacted(key), "\(text)")
                #expect(Self.mayBeRedacted(key), "\(text)")
                // Something after the ending makes it another word.
                let longer = key + Array("Verified".utf8)
                #expect(Self.isRedacted(longer) == Self.reference(longer), "\(text)Verified")
            }
        }
    }

    @Test("the unrolled checks agree with the plain rule on every one-byte change of a listed name")
    func unrolledCheckMatchesRule() {
        var checked = 0
        var redacted = 0
        let names = BuyerDataRedactor.listedNames + BuyerDataRedactor.listedEndings + BuyerDataRedactor.contextualNames
        for name in names {
            let n = Array(name.utf8)
            for i in n.indices {
                for replacement in [UInt8(ascii: "_"), UInt8(ascii: "x"), UInt8(ascii: "1"), n[i] ^ 0x20, n[i] &+ 1]
                where replacement != n[i] {
                    var other = n
                    other[i] = replacement
                    let expected = Self.reference(other)
                    #expect(Self.isRedacted(other) == expected, "\(String(decoding: other, as: UTF8.self))")
                    if expected {
                        #expect(Self.mayBeRedacted(other), "\(String(decoding: other, as: UTF8.self))")
                        redacted += 1
                    }
                    checked += 1
                }
            }
        }
        #expect(checked > 2000)
        #expect(redacted > 300)
    }

    @Test("kept: names about contact data rather than the data, and ordinary keys",
          arguments: ["id", "title", "status", "name", "emailVerified", "email_verified", "emailMarketingConsent",
                      "email_marketing_consent", "phoneVerified", "acceptsMarketing", "customer", "customerId",
                      "customer_id", "shipping", "cart", "tokenType", "tokens", "details", "ipCountry", "addressType",
                      "emailAddressVerified", "cardBrand", "last_digits", "Zone", "currency", "e", "", "__", "_-_"])
    func kept(key: String) {
        #expect(!Self.isRedacted(Array(key.utf8)))
        #expect(!Self.reference(Array(key.utf8)))
    }

    @Test("a flag whose name ends in a listed ending loses its value too (the lesser harm)")
    func endingFlags() {
        #expect(Self.isRedacted(Array("isEmail".utf8)))
        #expect(Self.isRedacted(Array("requires_phone".utf8)))
    }

    @Test("a snapshot's common keys are cleared by the prefilter without folding",
          arguments: ["id", "quantity", "title", "price", "amount", "currency", "line_items", "type", "totals", "item",
                      "image_url", "status", "messages", "code", "content", "severity", "links", "url", "fulfillment",
                      "methods", "method", "selected_option_id", "jsonrpc", "params", "checkout", "Id", "Quantity",
                      "LineItems", "subtotal", "total", "lineItems", "currencyCode", "paymentId", "orderId"])
    func commonKeysAreCheap(key: String) {
        #expect(!Self.mayBeRedacted(Array(key.utf8)))
    }

    @Test("details are redacted only under their parents, folded too; every token under any parent or none")
    func contextual() {
        for parent in ["paymentMethods", "payment_methods", "PaymentMethods", "deliveries", "Deliveries"] {
            #expect(Self.isRedacted(Array("details".utf8), parent: parent), "\(parent)")
            #expect(Self.isRedacted(Array("Details".utf8), parent: parent), "\(parent)")
        }
        for parent in ["lineItems", "links", "paymentMethod", "deliveriesX", "carts"] {
            #expect(!Self.isRedacted(Array("details".utf8), parent: parent), "\(parent)")
        }
        // Primer's drop-in `onTokenizeSuccess` body has its payment-method token at the top.
        for key in ["token", "Token", "cartToken", "cart_token", "resumeToken", "clientToken", "klarnaCustomerToken"] {
            #expect(Self.isRedacted(Array(key.utf8)), "\(key)")
            for parent in ["cart", "CART", "paymentMethodTokenData", "links", "payload"] {
                #expect(Self.isRedacted(Array(key.utf8), parent: parent), "\(key) under \(parent)")
            }
            #expect(Self.mayBeRedacted(Array(key.utf8)), "\(key)")
        }
        #expect(Self.mayBeRedacted(Array("details".utf8)))
    }

    @Test("a person's `name` is redacted under a destination, recipient or customer; a product's is kept")
    func personName() {
        for parent in ["destinations", "Destinations", "destination", "recipient", "recipients", "customer", "Customer",
                       "contact", "shopper", "delivery_address"] {
            #expect(Self.isRedacted(Array("name".utf8), parent: parent), "\(parent)")
            #expect(Self.isRedacted(Array("Name".utf8), parent: parent), "\(parent)")
        }
        for parent in ["lineItems", "line_items", "item", "methods", "options", "merchandise", "product", "shop"] {
            #expect(!Self.isRedacted(Array("name".utf8), parent: parent), "\(parent)")
        }
        #expect(!Self.isRedacted(Array("name".utf8)))
        #expect(!Self.isRedacted(Array("names".utf8), parent: "destinations"))
        #expect(Self.mayBeRedacted(Array("name".utf8)))
    }

    @Test("every name the list held before folding is still redacted",
          arguments: ["email", "emailAddress", "email_address", "phone", "phone_number", "phoneNumber", "first_name",
                      "last_name", "firstName", "lastName", "full_name", "fullName", "buyer", "billing_address",
                      "billingAddress", "shipping_address", "shippingAddress", "delivery_address", "deliveryAddress",
                      "address", "addresses", "address1", "address2", "instruments", "instrument", "credential",
                      "credentials", "card", "cardDetails", "card_details", "billing", "cart_token", "cartToken",
                      "paymentMethodData", "payment_method_data", "browser_ip", "ip_address", "customer_ip",
                      "street_address", "extended_address", "postal_code", "postalCode", "zip", "address_locality",
                      "address_region"])
    func formerList(key: String) {
        #expect(Self.isRedacted(Array(key.utf8)))
        #expect(Self.mayBeRedacted(Array(key.utf8)))
    }
}
