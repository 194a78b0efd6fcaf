#if canImport(Glibc)
import Glibc
import CheckoutBusProtocol
import CheckoutBusJSON
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a JSON value with buyer and payment details replaced by `"[redacted]"`.
///
/// Redacted by default (`--buyer-data redacted`): any member named for buyer identity or contact
/// (email, phone, names, `buyer`, IP addresses), addresses and their parts, payment instrument
/// details (`instruments`, `credential`, `card`, `cardholderName`, `paymentMethodData`, …), every
/// token (`token`, `cartToken`, `resumeToken`, `clientToken`: bearer credentials), and in the
/// older `orderDetails`, `details` under `paymentMethods`/`deliveries`. The key stays so consumers
/// see the field existed; its value, whatever its
/// type, becomes the string `"[redacted]"`.
///
/// Names are compared *folded*: ASCII letters lower-cased, `_` and `-` removed, so `email`,
/// `Email` and `EMAIL` all fold to `email`, and `email_address`, `emailAddress` and
/// `Email-Address` to `emailaddress`. A member is redacted when its folded name is one of ``listedNames``,
/// or is or ends in one of ``listedEndings`` (`customer_email`, `billingPhone`, `ipAddress`). The
/// list is in `docs/envelope.md`. `Sendable`; pure.
package enum BuyerDataRedactor {
    /// Folded names redacted wherever they appear: the reference list. The hot path checks names
    /// with ``isListed(_:_:)`` behind the prefilter; tests check both against this list.
    static let listedNames: [String] = [
        // Buyer identity and contact (names and numbers that end in a listed ending are below).
        "buyer", "emails", "phones", "phonenumbers", "mobile", "givenname", "middlename", "familyname", "surname",
        "dateofbirth", "birthdate", "nationaldocumentid",
        // The buyer's network address (`ipAddress` and the like end in `address`).
        "ip", "browserip", "clientip", "customerip", "remoteip", "shopperip", "userip", "buyerip", "deviceip",
        // Addresses and their parts (`billing_address`, `street_address`, … end in `address`).
        "addresses", "address1", "address2", "addressline1", "addressline2", "addresslocality",
        "addressregion", "street", "street1", "street2",
        "postalcode", "postcode", "zip", "zipcode", "billing",
        // Payment instruments.
        "instrument", "instruments", "credential", "credentials", "card", "carddetails", "paymentmethoddata",
        "cardholder", "cardholdername", "nameoncard", "cardnumber", "cvc", "cvv", "securitycode", "iban",
        // Primer's tokenized instrument (`PrimerPaymentMethodTokenData.paymentInstrumentData`: network,
        // cardholder, digits, a Klarna customer token).
        "paymentinstrumentdata",
        // UCP's `signals` (source/schemas/common/types/signals.json): what the platform observed of
        // the buyer for abuse checks, under reverse-domain keys (`dev.ucp.buyer_ip`,
        // `dev.ucp.user_agent`, `com.example.device_id`) that no name above matches.
        "signals",
        // AP2's mandates (UCP source/schemas/shopping/ap2_mandate.json): the buyer's signed
        // authorisations, bearer SD-JWTs that may disclose their email. A payment's own `mandate`
        // (a SEPA or card mandate's reference) is kept.
        "checkoutmandate", "cartmandate", "intentmandate", "paymentmandate",
    ]

    /// Folded endings: a name that is, or ends in, one of these is redacted (`customerEmail`,
    /// `billing_phone`, `shippingAddress`, `telephoneNumber`, `cardholderFirstName`). Only words
    /// that name contact data and little else; `emailVerified` or `email_marketing_consent` do not
    /// end in one and are kept, while a flag that does (`isEmail`) loses its value too.
    ///
    /// `token`: every token the SDKs hand over is a bearer credential for something — the cart's,
    /// Primer's tokenized payment method (`onTokenizeSuccess`'s body, its `token` at the top in the
    /// drop-in SDKs), its `resumeToken`, the `clientToken` of a session, a Klarna customer token.
    static let listedEndings: [String] = [
        "email", "address", "phone", "phonenumber", "mobilenumber", "firstname", "lastname", "fullname", "token",
    ]

    /// Folded names redacted only under a given parent (the older kit's `orderDetails`; a person's
    /// `name` in a fulfilment destination or a recipient).
    static let contextualNames: [String] = ["details", "name"]

    /// Folded parents under which `name` is a person's (a shipping destination's addressee, a
    /// gift's recipient, the customer): a product's or a shipping method's `name` is kept.
    static let personParents: [StaticString] = [
        "destinations", "destination", "recipient", "recipients", "customer", "contact", "contacts", "shopper",
        "person", "addressee", "deliveryaddress",
    ]

    /// Whether `b` is dropped by folding (`_` or `-`).
    @inline(__always)
    static func isSeparator(_ b: UInt8) -> Bool { b == UInt8(ascii: "_") || b == UInt8(ascii: "-") }

    /// `b` folded: an ASCII capital lower-cased, any other byte as it is.
    @inline(__always)
    static func folded(_ b: UInt8) -> UInt8 { b &- UInt8(ascii: "A") < 26 ? b | 0x20 : b }

    /// Eight bytes with their ASCII capitals lower-cased, all at once (bytes of 0x80 and above are
    /// left alone: adding to their low seven bits never carries into the next byte).
    @inline(__always)
    static func lowerCased(_ w: UInt64) -> UInt64 {
        let low = w & 0x7F7F_7F7F_7F7F_7F7F
        let atLeastA = low &+ 0x3F3F_3F3F_3F3F_3F3F  // bit 7 set where the byte is 0x41 ("A") or more
        let pastZ = low &+ 0x2525_2525_2525_2525  // bit 7 set where it is 0x5B (past "Z") or more
        let capitals = atLeastA & ~pastZ & ~w & 0x8080_8080_8080_8080
        return w | (capitals >> 2)
    }

    /// Bit 7 set in each byte of `w` that is zero, and nowhere else.
    @inline(__always)
    static func zeroBytes(_ w: UInt64) -> UInt64 {
        ~(((w & 0x7F7F_7F7F_7F7F_7F7F) &+ 0x7F7F_7F7F_7F7F_7F7F) | w | 0x7F7F_7F7F_7F7F_7F7F)
    }

    /// The `n` bytes (at most 8) at `p` as a word, the first in its lowest byte and the rest zero:
    /// two loads that may overlap (the overlapping bytes are the same, so or-ing them is harmless),
    /// instead of a call to copy them.
    @inline(__always)
    static func loadWord(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        if n >= 8 { return UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)) }
        if n >= 4 {
            let low = UInt64(UInt32(littleEndian: p.loadUnaligned(as: UInt32.self)))
            let high = UInt64(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)))
            return low | high << UInt64((n &- 4) &* 8)
        }
        if n >= 2 {
            let low = UInt64(UInt16(littleEndian: p.loadUnaligned(as: UInt16.self)))
            let high = UInt64(UInt16(littleEndian: p.loadUnaligned(fromByteOffset: n &- 2, as: UInt16.self)))
            return low | high << UInt64((n &- 2) &* 8)
        }
        return n == 1 ? UInt64(p.load(as: UInt8.self)) : 0
    }

    /// Folds `key` into `buffer`: 32 zero-filled bytes bound to `UInt64` (four words).
    ///
    /// A key of up to 32 bytes is read and lower-cased eight bytes at a time, and closed up over
    /// its separators only if it has any (from the first one on), so a `camelCase` name costs a
    /// few word operations. A longer key is folded from its end, byte by byte, so the buffer holds
    /// the last 32 folded bytes (enough to check the endings).
    ///
    /// - Returns: where the folded bytes end in `buffer`, and the folded length, which may exceed
    ///   the 32 bytes held.
    static func fold(
        _ key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer
    ) -> (end: UnsafeRawPointer, count: Int) {
        let base = buffer.baseAddress!
        let n = key.count
        guard n <= buffer.count else {
            let count = foldTail(key, into: buffer)
            return (UnsafeRawPointer(base + buffer.count), count)
        }
        guard n > 0 else { return (UnsafeRawPointer(base), 0) }
        let source = key.baseAddress!
        let words = base.assumingMemoryBound(to: UInt64.self)
        var firstSeparator = n
        var i = 0
        while i < n {
            let w = loadWord(source + i, min(8, n &- i))
            // The zero bytes past the key are neither separators nor capitals.
            let separators = zeroBytes(w ^ 0x5F5F_5F5F_5F5F_5F5F) | zeroBytes(w ^ 0x2D2D_2D2D_2D2D_2D2D)
            if separators != 0 && firstSeparator == n { firstSeparator = i &+ separators.trailingZeroBitCount >> 3 }
            words[i >> 3] = lowerCased(w).littleEndian
            i &+= 8
        }
        var j = firstSeparator
        for i in firstSeparator..<n {
            let b = base.load(fromByteOffset: i, as: UInt8.self)
            base.storeBytes(of: b, toByteOffset: j, as: UInt8.self)
            j &+= isSeparator(b) ? 0 : 1
        }
        return (UnsafeRawPointer(base + j), j)
    }

    /// Folds `key` from its end into `buffer`, so the last folded byte lands at the buffer's end.
    ///
    /// - Returns: the folded length; when it exceeds `buffer.count` only the last `buffer.count`
    ///   folded bytes are written.
    static func foldTail(_ key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var i = key.count
        var j = buffer.count
        var n = 0
        while i > 0 {
            i &-= 1
            let b = key[i]
            if isSeparator(b) { continue }
            n &+= 1
            if j > 0 {
                j &-= 1
                buffer[j] = folded(b)
            }
        }
        return n
    }

    /// Whether `key`, folded, is exactly `name` (folded already).
    static func foldedEquals(_ key: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        let count = name.utf8CodeUnitCount
        var j = 0
        for b in key where !isSeparator(b) {
            guard j < count && folded(b) == name.utf8Start[j] else { return false }
            j &+= 1
        }
        return j == count
    }

    /// Whether the folded name at `name` (`n` bytes) is one of ``listedNames``: the list
    /// unrolled into a switch on the length and byte compares, so a check touches no array (no
    /// retain, no release). A test checks it against the list.
    static func isListed(_ name: UnsafeRawPointer, _ n: Int) -> Bool {
        @inline(__always) func eq(_ listed: StaticString) -> Bool { memcmp(name, listed.utf8Start, n) == 0 }
        switch n {
        case 2: return eq("ip")
        case 3: return eq("zip") || eq("cvc") || eq("cvv")
        case 4: return eq("card") || eq("iban")
        case 5: return eq("buyer")
        case 6: return eq("emails") || eq("phones") || eq("mobile") || eq("userip") || eq("street")
        case 7:
            return eq("surname") || eq("zipcode") || eq("billing") || eq("buyerip") || eq("street1") || eq("street2")
                || eq("signals")
        case 8:
            return eq("clientip") || eq("remoteip") || eq("address1") || eq("address2") || eq("postcode")
                || eq("deviceip")
        case 9:
            return eq("givenname") || eq("birthdate") || eq("browserip") || eq("shopperip") || eq("addresses")
        case 10:
            return eq("middlename") || eq("familyname") || eq("customerip") || eq("postalcode") || eq("instrument")
                || eq("credential") || eq("cardholder") || eq("nameoncard") || eq("cardnumber")
        case 11:
            return eq("dateofbirth") || eq("instruments") || eq("credentials") || eq("carddetails") || eq("cartmandate")
        case 12:
            return eq("phonenumbers") || eq("addressline1") || eq("addressline2") || eq("securitycode")
        case 13: return eq("addressregion") || eq("intentmandate")
        case 14: return eq("cardholdername") || eq("paymentmandate")
        case 15: return eq("addresslocality") || eq("checkoutmandate")
        case 17: return eq("paymentmethoddata")
        case 21: return eq("paymentinstrumentdata")
        case 18: return eq("nationaldocumentid")
        default: return false
        }
    }

    /// Whether the folded bytes ending at `end` (`n` of them, at least 1) end in one of
    /// ``listedEndings``. A test checks it against the list.
    static func hasListedEnding(_ end: UnsafeRawPointer, _ n: Int) -> Bool {
        @inline(__always) func ends(_ ending: StaticString) -> Bool {
            let count = ending.utf8CodeUnitCount
            return n >= count && memcmp(end - count, ending.utf8Start, count) == 0
        }
        switch end.load(fromByteOffset: -1, as: UInt8.self) {
        case UInt8(ascii: "l"): return ends("email")
        case UInt8(ascii: "s"): return ends("address")
        case UInt8(ascii: "e"): return ends("phone") || ends("firstname") || ends("lastname") || ends("fullname")
        case UInt8(ascii: "r"): return ends("phonenumber") || ends("mobilenumber")
        case UInt8(ascii: "n"): return ends("token")
        default: return false
        }
    }

    /// The prefilter's tables: three of 256 words, indexed by a key's first, second-to-last and
    /// last byte (``mayBeRedacted(first:penultimate:last:screen:)``), built once from the lists.
    ///
    /// Each bit stands for one folded (second-to-last, last) pair that a name of
    /// ``listedNames`` or ``contextualNames`` ends in, or one of ``listedEndings`` does. A pair's
    /// bit is set under both its bytes, lower and upper case, in the second and third tables,
    /// and in the first table under the first byte of each listed or contextual name with that
    /// pair, or under every byte for an ending's pair (an ending's name may start with anything).
    /// So the three words AND to non-zero for every spelling of a redacted name without a
    /// separator in those three places.
    ///
    /// A separator (`_`, `-`) is folded away, so in its place any byte may be the folded name's:
    /// first or second-to-last, its word is all ones; last, its word is all ones and also sets bit
    /// ``anyBeforeSeparator``, which every word of the first and second tables has (the folded name's
    /// last two bytes are then both somewhere earlier).
    ///
    /// Immutable after it is built; never freed.
    nonisolated(unsafe) static let screen: UnsafePointer<UInt64> = makeScreen()

    /// The bit of ``screen`` that a last byte that is a separator sets alone.
    static let anyBeforeSeparator: UInt64 = 1 << 63

    static func makeScreen() -> UnsafePointer<UInt64> {
        let table = UnsafeMutablePointer<UInt64>.allocate(capacity: 768)
        table.initialize(repeating: 0, count: 768)
        var bits: [[UInt8]: UInt64] = [:]
        func bit(_ name: String) -> UInt64 {
            let n = Array(name.utf8)
            let pair = [n[n.count - 2], n[n.count - 1]]
            if let b = bits[pair] { return b }
            let b: UInt64 = 1 << UInt64(bits.count)
            bits[pair] = b
            return b
        }
        func set(_ offset: Int, _ byte: UInt8, _ b: UInt64) {
            table[offset + Int(byte)] |= b
            // The upper-case spelling of a lower-case letter folds to it.
            if byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") { table[offset + Int(byte - 0x20)] |= b }
        }
        for name in listedNames + contextualNames + listedEndings {
            let n = Array(name.utf8)
            let b = bit(name)
            set(256, n[n.count - 2], b)
            set(512, n[n.count - 1], b)
            if listedEndings.contains(name) {
                for first in 0..<256 { table[first] |= b }
            } else {
                set(0, n[0], b)
            }
        }
        precondition(bits.count < 63, "one bit per pair, and anyBeforeSeparator")
        for i in 0..<256 {
            table[i] |= anyBeforeSeparator
            table[256 + i] |= anyBeforeSeparator
        }
        for separator in [UInt8(ascii: "_"), UInt8(ascii: "-")] {
            table[Int(separator)] = ~0
            table[256 + Int(separator)] = ~0
            table[512 + Int(separator)] = ~0
        }
        return UnsafePointer(table)
    }

    /// A cheap, inlined pre-check for ``isRedacted(_:parent:)``: false for most keys, so the full
    /// check (which folds the key) is called only for the few that remain. Never false for a key
    /// that ``isRedacted(_:parent:)`` redacts under any parent.
    @inline(__always)
    static func mayBeRedacted(_ key: UnsafeRawBufferPointer) -> Bool {
        let n = key.count
        guard n >= 2 else { return false }
        let p = key.baseAddress!.assumingMemoryBound(to: UInt8.self)
        return mayBeRedacted(first: p[0], penultimate: p[n &- 2], last: p[n &- 1], screen: screen)
    }

    /// ``mayBeRedacted(_:)`` on a key of at least two bytes, given its first, second-to-last and
    /// last bytes and ``screen`` (which the hash walk loads once): three loads and two ANDs.
    ///
    /// A one-byte key may pass its opening quote as `penultimate`: the quote's word in the second
    /// table is ``anyBeforeSeparator`` alone, which only a separator's word in the third shares.
    @inline(__always)
    static func mayBeRedacted(first: UInt8, penultimate: UInt8, last: UInt8, screen: UnsafePointer<UInt64>) -> Bool {
        screen[Int(first)] & screen[256 &+ Int(penultimate)] & screen[512 &+ Int(last)] != 0
    }

    /// Whether member `key` (raw, unquoted bytes) under `parent` (the enclosing member's name) is
    /// redacted: its folded name is listed or ends in a listed ending, or it is `details` under
    /// `paymentMethods`/`deliveries` or a person's `name` (each folded too).
    static func isRedacted(_ key: UnsafeRawBufferPointer, parent: UnsafeRawBufferPointer?) -> Bool {
        // Most listed names arrive spelled as listed (`buyer`, `instruments`, `billing_address`):
        // as written, such a name already is, or ends in, its folded form.
        if let start = key.baseAddress, key.count > 0,
            isListed(start, key.count) || hasListedEnding(start + key.count, key.count)
        {
            return true
        }
        // A 32-byte stack buffer for the folded name (its last 32 bytes, if longer).
        var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        return withUnsafeMutableBytes(of: &buffer) { b in
            let (end, n) = fold(key, into: b)
            guard n > 0 else { return false }
            let kept = min(n, b.count)
            if n == kept && isListed(end - n, n) { return true }
            if hasListedEnding(end, kept) { return true }
            guard let parent else { return false }
            if n == 7 && memcmp(end - 7, ("details" as StaticString).utf8Start, 7) == 0 {
                return foldedEquals(parent, "paymentmethods") || foldedEquals(parent, "deliveries")
            }
            if n == 4 && memcmp(end - 4, ("name" as StaticString).utf8Start, 4) == 0 {
                return personParents.contains { foldedEquals(parent, $0) }
            }
            return false
        }
    }

    /// Appends value `t` of `doc` to `out`, redacting as described above.
    ///
    /// Compact input (the usual case) is copied in spans: the bytes between two redacted values go
    /// out in one copy, so a snapshot with nothing to redact costs one walk of its keys and one
    /// copy. Input with whitespace between tokens is rewritten token by token, compact, so an
    /// envelope always stays on one line.
    package static func write(_ doc: JSONDocument, _ t: Int, to out: inout JSONWriter) {
        if doc.isCompact {
            writeSpans(doc, t, to: &out)
        } else {
            var changed = false
            write(doc, t, parent: nil, changed: &changed, to: &out)
        }
    }

    /// Appends compact value `t` of `doc` to `out` with the values at `redactions` (offset pairs
    /// from ``CanonicalHash/hashNotingRedactions(_:_:into:)`` on the same value) replaced by
    /// `"[redacted]"`: the bytes ``write(_:_:to:)`` appends, in a few copies and no walk.
    package static func write(_ doc: JSONDocument, _ t: Int, redactions: [Int], to out: inout JSONWriter) {
        let base = doc.base
        var from = Int(doc.tokens[t].start)
        var i = 0
        while i &+ 1 < redactions.count {
            out.appendRaw(UnsafeRawBufferPointer(start: base + from, count: redactions[i] &- from))
            out.append("\"[redacted]\"")
            from = redactions[i &+ 1]
            i &+= 2
        }
        out.appendRaw(UnsafeRawBufferPointer(start: base + from, count: Int(doc.tokens[t].end) &- from))
    }

    /// The token-by-token writer, for any input (also used by tests as the reference).
    static func writeTokens(_ doc: JSONDocument, _ t: Int, to out: inout JSONWriter) {
        var changed = false
        write(doc, t, parent: nil, changed: &changed, to: &out)
    }

    /// A dead letter's raw input, redacted: as ``write(_:_:to:)``, and a string that holds a JSON
    /// object or array (a bridge's `body`, which Checkout Sheet Kit always sends as a string) is
    /// parsed and written redacted too, still a string, down to ``maxEmbeddedDepth`` such strings
    /// within each other; one that is not JSON is kept as it is.
    package static func writeDescendingIntoStrings(_ doc: JSONDocument, _ t: Int, to out: inout JSONWriter) {
        var changed = false
        write(doc, t, parent: nil, embedded: maxEmbeddedDepth, changed: &changed, to: &out)
    }

    /// Strings holding JSON within strings holding JSON that a dead letter's rewrite descends into.
    static let maxEmbeddedDepth = 3

    /// Appends string `t` of `doc` redacted when it holds a JSON object or array in which anything
    /// is redacted (``writeDescendingIntoStrings(_:_:to:)``), and sets `changed`; false when it
    /// holds none, or nothing in it is redacted, and nothing was appended (the string is kept as sent).
    private static func writeEmbedded(_ doc: JSONDocument, _ t: Int, parent: UnsafeRawBufferPointer?, embedded: Int,
                                      changed: inout Bool, to out: inout JSONWriter) -> Bool {
        guard embedded > 0, doc.kind(t) == .string else { return false }
        let text = doc.unescapedBytes(t)
        guard let first = text.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) else {
            return false
        }
        // A value printed by Kotlin or Swift (`CheckoutCompletedEvent(orderDetails=OrderDetails(
        // billingAddress=Address(…), email=…))`, a Kotlin list or map, a Swift dictionary: which
        // bridges forward as text), when it is not JSON.
        func printed() -> Bool {
            guard let redacted = redactPrinted(text, parent: parent) else { return false }
            redacted.withUnsafeBytes { out.appendString(utf8: $0) }
            changed = true
            return true
        }
        guard first == UInt8(ascii: "{") || first == UInt8(ascii: "[") else { return printed() }
        let nested = JSONDocument()
        do throws(JSONParseError) {
            try nested.parseOwned(text)
        } catch {
            return printed()
        }
        var inner = JSONWriter(capacity: text.count + 16)
        var innerChanged = false
        write(nested, nested.root, parent: parent, embedded: embedded - 1, changed: &innerChanged, to: &inner)
        // Nothing in it redacted: the string as it came, spacing and escapes kept.
        guard innerChanged else { return false }
        inner.withUnsafeBytes { out.appendString(utf8: $0) }
        changed = true
        return true
    }

    /// `text`, a value as Kotlin's data classes (`Address(address1=1 Main St, city=Ottawa)`, lists,
    /// maps `{email=…}`) or Swift (`Address(address1: Optional("1 Main St"))`, dictionaries
    /// `["email": "…"]`) print it, with the value of every labelled field redacted by name (as a
    /// member is: `email=…`, `billingAddress=Address(…)` whole, `details` under `paymentMethods`)
    /// replaced by `[redacted]`; nil when nothing is. A value runs to the next `,` or closing
    /// bracket outside brackets (and, in Swift's form, double-quoted strings): Kotlin quotes no
    /// string, so the rest of an address line after a comma in it stays. The form is the first
    /// label's: `key=` is Kotlin's, where a `"` is only a character.
    static func redactPrinted(_ text: [UInt8], parent: UnsafeRawBufferPointer?) -> [UInt8]? {
        guard text.count <= maxPrintedBytes, text.contains(UInt8(ascii: "=")) || text.contains(UInt8(ascii: ":"))
        else { return nil }
        func isWord(_ b: UInt8) -> Bool {
            (b | 0x20) &- UInt8(ascii: "a") < 26 || b &- UInt8(ascii: "0") < 10 || b == UInt8(ascii: "_")
        }
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        var changed = false
        // The parent of each open bracket's fields: the field whose value it opened, else its own parent.
        var parents: [Range<Int>?] = []
        var lastKey: Range<Int>?
        var kotlin: Bool?
        var i = 0
        var atArgument = true
        while i < text.count {
            let b = text[i]
            if atArgument, let (key, valueStart, isKotlin) = printedLabel(text, at: i, kotlin: kotlin) {
                if kotlin == nil { kotlin = isKotlin }
                out.append(contentsOf: text[i..<valueStart])
                let redacted = text.withUnsafeBytes { raw -> Bool in
                    let k = UnsafeRawBufferPointer(rebasing: raw[key])
                    guard let p = parents.last ?? nil else { return isRedacted(k, parent: parent) }
                    return isRedacted(k, parent: UnsafeRawBufferPointer(rebasing: raw[p]))
                }
                atArgument = false
                if redacted {
                    out.append(contentsOf: Array("[redacted]".utf8))
                    changed = true
                    i = PrintedSwift.valueEnd(text, from: valueStart, quotes: kotlin != true)
                    continue
                }
                lastKey = key
                i = valueStart
                continue
            }
            out.append(b)
            switch b {
            case UInt8(ascii: "\"") where kotlin != true:
                // A Swift string: copied to its closing quote.
                var j = i + 1
                while j < text.count, text[j] != UInt8(ascii: "\"") {
                    if text[j] == UInt8(ascii: "\\") { j += 1 }
                    j += 1
                }
                let end = min(j + 1, text.count)
                out.append(contentsOf: text[(i + 1)..<end])
                i = end
                atArgument = false
                continue
            case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"):
                parents.append(lastKey ?? (parents.last ?? nil))
                lastKey = nil
                atArgument = true
            case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                _ = parents.popLast()
                lastKey = nil
                atArgument = false
            case UInt8(ascii: ","):
                lastKey = nil
                atArgument = true
            case 0x20:
                break
            default:
                // A type's name before its `(` keeps the field it is the value of as the parent.
                if !isWord(b) && b != UInt8(ascii: ".") { lastKey = nil }
                atArgument = false
            }
            i += 1
        }
        return changed ? out : nil
    }

    /// The label of a printed field at `i`: `key=` (Kotlin's form), `key: ` (Swift's), a Swift
    /// dictionary's `"key": ` or `AnyHashable("key"): `; its key's range, where its value starts,
    /// and whether it is Kotlin's form. Nil for anything else, or a form other than `kotlin` (the
    /// text's, once known).
    private static func printedLabel(_ text: [UInt8], at i: Int, kotlin: Bool?) -> (Range<Int>, Int, Bool)? {
        func isWord(_ b: UInt8) -> Bool {
            (b | 0x20) &- UInt8(ascii: "a") < 26 || b &- UInt8(ascii: "0") < 10 || b == UInt8(ascii: "_")
        }
        func swiftSeparator(_ j: Int) -> Bool {
            kotlin != true && j + 1 < text.count && text[j] == UInt8(ascii: ":") && text[j + 1] == 0x20
        }
        let b = text[i]
        if kotlin != true {
            // `"key": ` and `AnyHashable("key"): `: a quoted key, then `": ` or `"): `.
            let wrapped = text[i...].starts(with: "AnyHashable(\"".utf8)
            if b == UInt8(ascii: "\"") || wrapped {
                let keyStart = i + (wrapped ? 13 : 1)
                guard let close = text[keyStart...].firstIndex(of: UInt8(ascii: "\"")), close > keyStart else { return nil }
                var j = close + 1
                if wrapped {
                    guard j < text.count, text[j] == UInt8(ascii: ")") else { return nil }
                    j += 1
                }
                return swiftSeparator(j) ? (keyStart..<close, j + 2, false) : nil
            }
        }
        guard (b | 0x20) &- UInt8(ascii: "a") < 26 || b == UInt8(ascii: "_") else { return nil }
        var j = i
        while j < text.count, isWord(text[j]) { j += 1 }
        if kotlin != false, j < text.count, text[j] == UInt8(ascii: "="),
            !(j + 1 < text.count && text[j + 1] == UInt8(ascii: "="))
        {
            return (i..<j, j + 1, true)
        }
        return swiftSeparator(j) ? (i..<j, j + 2, false) : nil
    }

    /// Printed text longer than this is kept as sent (a message is at most `--max-message-bytes`,
    /// 1 MiB by default: every such string is read).
    static let maxPrintedBytes = 16 << 20

    /// The span writer; `doc` must be compact.
    static func writeSpans(_ doc: JSONDocument, _ t: Int, to out: inout JSONWriter) {
        var copier = SpanCopier(doc: doc, from: Int(doc.tokens[t].start))
        copier.walk(t, parent: nil, to: &out)
        copier.copy(upTo: Int(doc.tokens[t].end), to: &out)
    }

    /// Walks the tape and copies the text between redacted values verbatim.
    struct SpanCopier {
        let doc: JSONDocument
        let tokens: UnsafeMutablePointer<JSONDocument.Token>
        let base: UnsafePointer<UInt8>
        /// Offset of the first byte not yet written.
        var from: Int

        init(doc: JSONDocument, from: Int) {
            self.doc = doc
            tokens = doc.tokens
            base = doc.base
            self.from = from
        }

        @inline(__always)
        mutating func copy(upTo end: Int, to out: inout JSONWriter) {
            if end > from { out.appendRaw(UnsafeRawBufferPointer(start: base + from, count: end - from)) }
            from = end
        }

        mutating func walk(_ t: Int, parent: UnsafeRawBufferPointer?, to out: inout JSONWriter) {
            let tok = tokens[t]
            switch tok.kind {
            case .object:
                let end = Int(tok.next)
                var k = t + 1
                while k < end {
                    let v = k + 1
                    let key = tokens[k]
                    if key.flag {
                        // An escaped key: compare its decoded form (rare).
                        let decoded = doc.unescapedBytes(k)
                        decoded.withUnsafeBytes { member(v, key: $0, parent: parent, to: &out) }
                    } else {
                        let raw = UnsafeRawBufferPointer(start: base + Int(key.start) + 1, count: Int(key.end - key.start) - 2)
                        member(v, key: raw, parent: parent, to: &out)
                    }
                    k = Int(tokens[v].next)
                }
            case .array:
                let end = Int(tok.next)
                var e = t + 1
                while e < end {
                    let kind = tokens[e].kind
                    if kind == .object || kind == .array { walk(e, parent: parent, to: &out) }
                    e = Int(tokens[e].next)
                }
            default:
                break
            }
        }

        @inline(__always)
        mutating func member(_ v: Int, key: UnsafeRawBufferPointer, parent: UnsafeRawBufferPointer?,
                             to out: inout JSONWriter) {
            if BuyerDataRedactor.mayBeRedacted(key) && BuyerDataRedactor.isRedacted(key, parent: parent) {
                copy(upTo: Int(tokens[v].start), to: &out)
                out.append("\"[redacted]\"")
                from = Int(tokens[v].end)
            } else {
                let kind = tokens[v].kind
                if kind == .object || kind == .array { walk(v, parent: key, to: &out) }
            }
        }
    }

    private static func keyBytes(_ doc: JSONDocument, _ k: Int, scratch: inout [UInt8]) -> UnsafeRawBufferPointer? {
        let r = doc.raw(k)
        if !doc.tokens[k].flag { return UnsafeRawBufferPointer(rebasing: r[1..<(r.count - 1)]) }
        scratch = doc.unescapedBytes(k)
        return nil
    }

    /// - Parameters:
    ///   - embedded: how many strings holding JSON within each other to descend into (0: none).
    ///   - changed: set when anything is redacted.
    private static func write(_ doc: JSONDocument, _ t: Int, parent: UnsafeRawBufferPointer?, embedded: Int = 0,
                              changed: inout Bool, to out: inout JSONWriter) {
        switch doc.kind(t) {
        case .object:
            out.append(byte: UInt8(ascii: "{"))
            var first = true
            doc.forEachMember(t) { k, v in
                if !first { out.append(byte: UInt8(ascii: ",")) }
                first = false
                out.appendRaw(doc.raw(k))
                out.append(byte: UInt8(ascii: ":"))
                var scratch: [UInt8] = []
                if let key = keyBytes(doc, k, scratch: &scratch) {
                    writeMember(doc, v, key: key, parent: parent, embedded: embedded, changed: &changed, to: &out)
                } else {
                    scratch.withUnsafeBytes {
                        writeMember(doc, v, key: $0, parent: parent, embedded: embedded, changed: &changed, to: &out)
                    }
                }
            }
            out.append(byte: UInt8(ascii: "}"))
        case .array:
            out.append(byte: UInt8(ascii: "["))
            var first = true
            doc.forEachElement(t) { e in
                if !first { out.append(byte: UInt8(ascii: ",")) }
                first = false
                write(doc, e, parent: parent, embedded: embedded, changed: &changed, to: &out)
            }
            out.append(byte: UInt8(ascii: "]"))
        default:
            if !writeEmbedded(doc, t, parent: parent, embedded: embedded, changed: &changed, to: &out) {
                out.appendRaw(doc.raw(t))
            }
        }
    }

    private static func writeMember(
        _ doc: JSONDocument, _ v: Int, key: UnsafeRawBufferPointer, parent: UnsafeRawBufferPointer?, embedded: Int,
        changed: inout Bool, to out: inout JSONWriter
    ) {
        if isRedacted(key, parent: parent) {
            out.append("\"[redacted]\"")
            changed = true
        } else {
            switch doc.kind(v) {
            case .object, .array: write(doc, v, parent: key, embedded: embedded, changed: &changed, to: &out)
            default:
                if !writeEmbedded(doc, v, parent: key, embedded: embedded, changed: &changed, to: &out) {
                    out.appendRaw(doc.raw(v))
                }
            }
        }
    }
}
