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
/// details (`instruments`, `credential`, `card`, `cardholderName`, `paymentMethodData`, …), the
/// cart token, and in the older `orderDetails`, `details` under `paymentMethods`/`deliveries` and
/// `token` under `cart`. The key stays so consumers see the field existed; its value, whatever its
/// type, becomes the string `"[redacted]"`.
///
/// Names are compared *folded*: ASCII letters lower-cased, `_` and `-` removed, so `email`,
/// `Email` and `EMAIL` all fold to `email`, and `email_address`, `emailAddress` and
/// `Email-Address` to `emailaddress`. A member is redacted when its folded name is one of ``listedNames``,
/// or is or ends in one of ``listedEndings`` (`customer_email`, `billingPhone`, `ipAddress`). The
/// list is in `docs/envelope.md`. `Sendable`; pure.
public enum BuyerDataRedactor {
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
        // The cart token (a bearer credential for the cart).
        "carttoken",
    ]

    /// Folded endings: a name that is, or ends in, one of these is redacted (`customerEmail`,
    /// `billing_phone`, `shippingAddress`, `telephoneNumber`, `cardholderFirstName`). Only words
    /// that name contact data and little else; `emailVerified` or `email_marketing_consent` do not
    /// end in one and are kept, while a flag that does (`isEmail`) loses its value too.
    static let listedEndings: [String] = [
        "email", "address", "phone", "phonenumber", "mobilenumber", "firstname", "lastname", "fullname",
    ]

    /// Folded names redacted only under a given parent (the older kit's `orderDetails`; a person's
    /// `name` in a fulfilment destination or a recipient).
    static let contextualNames: [String] = ["details", "token", "name"]

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
        case 7: return eq("surname") || eq("zipcode") || eq("billing") || eq("buyerip") || eq("street1") || eq("street2")
        case 8:
            return eq("clientip") || eq("remoteip") || eq("address1") || eq("address2") || eq("postcode")
                || eq("deviceip")
        case 9:
            return eq("givenname") || eq("birthdate") || eq("browserip") || eq("shopperip") || eq("addresses")
                || eq("carttoken")
        case 10:
            return eq("middlename") || eq("familyname") || eq("customerip") || eq("postalcode") || eq("instrument")
                || eq("credential") || eq("cardholder") || eq("nameoncard") || eq("cardnumber")
        case 11: return eq("dateofbirth") || eq("instruments") || eq("credentials") || eq("carddetails")
        case 12:
            return eq("phonenumbers") || eq("addressline1") || eq("addressline2") || eq("securitycode")
        case 13: return eq("addressregion")
        case 14: return eq("cardholdername")
        case 15: return eq("addresslocality")
        case 17: return eq("paymentmethoddata")
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
        default: return false
        }
    }

    /// A name's first, second-to-last and last bytes in one word, for the prefilters.
    @inline(__always)
    static func packed(_ first: UInt8, _ penultimate: UInt8, _ last: UInt8) -> UInt64 {
        UInt64(penultimate) | UInt64(last) << 8 | UInt64(first) << 16
    }

    /// The name prefilter's bit (0…255): the top byte of a multiplicative hash of ``packed(_:_:_:)``.
    @inline(__always)
    static func nameBit(_ packed: UInt64) -> Int { Int(truncatingIfNeeded: (packed &* 0x78E4_B98D_4787_F93B) >> 56) }

    /// The ending prefilter's bit (0…63): the same kind of hash of the last two bytes alone.
    @inline(__always)
    static func endingBit(_ packed: UInt64) -> Int {
        Int(truncatingIfNeeded: ((packed & 0xFFFF) &* 0x5217_2DAB_7A58_50AF) >> 58)
    }

    /// A 256-bit prefilter over ``listedNames`` and ``contextualNames``: the ``nameBit(_:)`` of
    /// every one is set, so most keys of a snapshot (`id`, `quantity`, `amount`, …) are cleared
    /// without folding them. A test checks that these words match the lists, and that a
    /// snapshot's common keys miss them.
    @inline(__always)
    static func nameFilterWord(_ i: Int) -> UInt64 {
        switch i {
        case 0: return 0x4802_4004_0012_7002
        case 1: return 0x0112_0110_4000_4280
        case 2: return 0x0883_A212_8010_0002
        default: return 0x0010_C308_0002_410B
        }
    }

    /// A 64-bit prefilter over ``listedEndings``: the ``endingBit(_:)`` of every one is set.
    /// A test checks it against the list.
    @inline(__always)
    static var endingFilterWord: UInt64 { 0x0000_2000_1404_0040 }

    /// A cheap, inlined pre-check for ``isRedacted(_:parent:)``: false for most keys, so the full
    /// check (which folds the key) is called only for the few that remain.
    ///
    /// Unless a separator stands there, a key's first and last two bytes are its folded name's,
    /// up to case; `| 0x20` lower-cases them (and leaves the digits and lower-case letters the
    /// lists are made of alone), so both prefilters read the raw bytes and never clear a listed
    /// name, however long. A key with a separator in one of those places goes to the full check
    /// (rare).
    @inline(__always)
    static func mayBeRedacted(_ key: UnsafeRawBufferPointer) -> Bool {
        let n = key.count
        guard n >= 2 else { return false }
        let p = key.baseAddress!.assumingMemoryBound(to: UInt8.self)
        return mayBeRedacted(packed: packed(p[0], p[n &- 2], p[n &- 1]))
    }

    /// ``mayBeRedacted(_:)`` on a key of at least two bytes, given its first, second-to-last and
    /// last bytes as ``packed(_:_:_:)`` packs them (the hash walk takes them from the words it
    /// reads the key as). One branch: the separator test and both filters are combined first.
    @inline(__always)
    static func mayBeRedacted(packed: UInt64) -> Bool {
        let bytes = packed | 0x20_2020
        // A separator among the three bytes: `_` lower-cases to 0x7F, `-` stays 0x2D (so do DEL
        // and CR, which merely send such a key to the full check too). A zero byte of `x` shows
        // in `(x - 0x010101) & ~x & 0x808080`, and only one does.
        let underscores = bytes ^ 0x7F_7F7F
        let hyphens = bytes ^ 0x2D_2D2D
        let separators = ((underscores &- 0x01_0101) & ~underscores | (hyphens &- 0x01_0101) & ~hyphens) & 0x80_8080
        let ending = endingFilterWord &>> UInt64(endingBit(bytes))
        let bit = nameBit(bytes)
        let name = nameFilterWord(bit >> 6) &>> UInt64(bit & 63)
        return (separators | ((ending | name) & 1)) != 0
    }

    /// Whether member `key` (raw, unquoted bytes) under `parent` (the enclosing member's name) is
    /// redacted: its folded name is listed or ends in a listed ending, or it is `details` under
    /// `paymentMethods`/`deliveries` or `token` under `cart` (each folded too).
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
            if n == 5 && memcmp(end - 5, ("token" as StaticString).utf8Start, 5) == 0 {
                return foldedEquals(parent, "cart")
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
    public static func write(_ doc: JSONDocument, _ t: Int, to out: inout JSONWriter) {
        if doc.isCompact {
            writeSpans(doc, t, to: &out)
        } else {
            write(doc, t, parent: nil, to: &out)
        }
    }

    /// Appends compact value `t` of `doc` to `out` with the values at `redactions` (offset pairs
    /// from ``CanonicalHash/hashNotingRedactions(_:_:into:)`` on the same value) replaced by
    /// `"[redacted]"`: the bytes ``write(_:_:to:)`` appends, in a few copies and no walk.
    public static func write(_ doc: JSONDocument, _ t: Int, redactions: [Int], to out: inout JSONWriter) {
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
        write(doc, t, parent: nil, to: &out)
    }

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

    private static func write(_ doc: JSONDocument, _ t: Int, parent: UnsafeRawBufferPointer?, to out: inout JSONWriter) {
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
                    writeMember(doc, v, key: key, parent: parent, to: &out)
                } else {
                    scratch.withUnsafeBytes { writeMember(doc, v, key: $0, parent: parent, to: &out) }
                }
            }
            out.append(byte: UInt8(ascii: "}"))
        case .array:
            out.append(byte: UInt8(ascii: "["))
            var first = true
            doc.forEachElement(t) { e in
                if !first { out.append(byte: UInt8(ascii: ",")) }
                first = false
                write(doc, e, parent: parent, to: &out)
            }
            out.append(byte: UInt8(ascii: "]"))
        default:
            out.appendRaw(doc.raw(t))
        }
    }

    private static func writeMember(
        _ doc: JSONDocument, _ v: Int, key: UnsafeRawBufferPointer, parent: UnsafeRawBufferPointer?,
        to out: inout JSONWriter
    ) {
        if isRedacted(key, parent: parent) {
            out.append("\"[redacted]\"")
        } else {
            switch doc.kind(v) {
            case .object, .array: write(doc, v, parent: key, to: &out)
            default: out.appendRaw(doc.raw(v))
            }
        }
    }
}
