#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes a JSON value with buyer and payment details replaced by `"[redacted]"`.
///
/// Redacted by default (`--buyer-data redacted`): any member named for buyer identity or contact
/// (email, phone, names, `buyer`), addresses (billing, shipping, delivery), payment instrument
/// details (`instruments`, `credential`, `card`, `paymentMethodData`), the cart token, and in the
/// older `orderDetails`, `details` under `paymentMethods`/`deliveries` and `token` under `cart`.
/// The key stays so consumers see the field existed; its value, whatever its type, becomes the
/// string `"[redacted]"`. The list is in `docs/envelope.md`. `Sendable`; pure.
public enum BuyerDataRedactor {
    /// Member names redacted wherever they appear, bucketed by byte length: the reference list.
    /// The hot path checks names with ``isListed(_:_:)`` behind the prefilter; tests check both
    /// against this list.
    static let always: [[[UInt8]]] = bucket([
        "email", "emailAddress", "email_address", "phone", "phone_number", "phoneNumber", "first_name",
        "last_name", "firstName", "lastName", "full_name", "fullName", "buyer", "billing_address",
        "billingAddress", "shipping_address", "shippingAddress", "delivery_address", "deliveryAddress",
        "address", "addresses", "address1", "address2", "instruments", "instrument", "credential",
        "credentials", "card", "cardDetails", "card_details", "billing", "cart_token", "cartToken",
        "paymentMethodData", "payment_method_data", "browser_ip", "ip_address", "customer_ip",
        "street_address", "extended_address", "postal_code", "postalCode", "zip", "address_locality",
        "address_region",
    ])

    static func bucket(_ names: [String]) -> [[[UInt8]]] {
        var b = [[[UInt8]]](repeating: [], count: 33)
        for n in names { b[n.utf8.count].append(Array(n.utf8)) }
        return b
    }

    /// Whether `key` is one of ``always`` (`n` = its length, 3…32): the list unrolled into a
    /// switch on the length and byte compares, so a check touches no array (no retain, no release).
    /// A test checks it against the list.
    static func isListed(_ key: UnsafeRawPointer, _ n: Int) -> Bool {
        @inline(__always) func eq(_ name: StaticString) -> Bool { memcmp(key, name.utf8Start, n) == 0 }
        switch n {
        case 3: return eq("zip")
        case 4: return eq("card")
        case 5: return eq("email") || eq("phone") || eq("buyer")
        case 7: return eq("address") || eq("billing")
        case 8: return eq("lastName") || eq("fullName") || eq("address1") || eq("address2")
        case 9: return eq("last_name") || eq("firstName") || eq("full_name") || eq("addresses") || eq("cartToken")
        case 10:
            return eq("first_name") || eq("instrument") || eq("credential") || eq("cart_token") || eq("browser_ip")
                || eq("ip_address") || eq("postalCode")
        case 11:
            return eq("phoneNumber") || eq("instruments") || eq("credentials") || eq("cardDetails")
                || eq("customer_ip") || eq("postal_code")
        case 12: return eq("emailAddress") || eq("phone_number") || eq("card_details")
        case 13: return eq("email_address")
        case 14: return eq("billingAddress") || eq("street_address") || eq("address_region")
        case 15: return eq("billing_address") || eq("shippingAddress") || eq("deliveryAddress")
        case 16:
            return eq("shipping_address") || eq("delivery_address") || eq("extended_address")
                || eq("address_locality")
        case 17: return eq("paymentMethodData")
        case 19: return eq("payment_method_data")
        default: return false
        }
    }

    /// The prefilter's bit for a name of at least 3 bytes: length and three of its bytes mixed.
    @inline(__always)
    static func filterBit(_ key: UnsafeRawBufferPointer) -> Int {
        let n = key.count
        let p = key.baseAddress!.assumingMemoryBound(to: UInt8.self)
        return (n &* 37 &+ Int(p[0]) &* 7 &+ Int(p[n &- 1]) &* 3 &+ Int(p[1])) & 255
    }

    /// Whether `key` is exactly `name`.
    @inline(__always)
    static func equals(_ key: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
        key.count == name.utf8CodeUnitCount && memcmp(key.baseAddress!, name.utf8Start, key.count) == 0
    }

    /// A 256-bit prefilter over ``always``: the bit of every listed name is set, so most keys of a
    /// snapshot (`id`, `quantity`, `amount`, …) are cleared without comparing bytes. A test checks
    /// that these words match the list.
    @inline(__always)
    static func filterWord(_ i: Int) -> UInt64 {
        switch i {
        case 0: return 0x2044_2801_0c82_0240
        case 1: return 0x4040_04a1_0808_8020
        case 2: return 0x0802_b020_0840_0400
        default: return 0x0100_0014_2056_0640
        }
    }

    /// A cheap, inlined pre-check for ``isRedacted(_:parent:)``: false for most keys (the
    /// prefilter's bit is clear and the key cannot be `details` or `token`), so the full check is
    /// called only for the few that remain.
    @inline(__always)
    static func mayBeRedacted(_ key: UnsafeRawBufferPointer, hasParent: Bool) -> Bool {
        let n = key.count
        guard n >= 3 && n <= 32 else { return false }
        let first = key.baseAddress!.load(as: UInt8.self)
        if hasParent && ((n == 7 && first == UInt8(ascii: "d")) || (n == 5 && first == UInt8(ascii: "t"))) {
            return true
        }
        let bit = filterBit(key)
        return filterWord(bit >> 6) & (1 << UInt64(bit & 63)) != 0
    }

    /// Whether member `key` (raw, unquoted bytes) under `parent` (the enclosing member's name) is redacted.
    static func isRedacted(_ key: UnsafeRawBufferPointer, parent: UnsafeRawBufferPointer?) -> Bool {
        let n = key.count
        if n >= 3 && n <= 32 {
            let bit = filterBit(key)
            if filterWord(bit >> 6) & (1 << UInt64(bit & 63)) != 0 && isListed(key.baseAddress!, n) { return true }
        }
        guard let parent else { return false }
        if n == 7 && equals(key, "details") {
            return equals(parent, "paymentMethods") || equals(parent, "payment_methods") || equals(parent, "deliveries")
        }
        if n == 5 && equals(key, "token") { return equals(parent, "cart") }
        return false
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
            if BuyerDataRedactor.mayBeRedacted(key, hasParent: parent != nil)
                && BuyerDataRedactor.isRedacted(key, parent: parent)
            {
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
