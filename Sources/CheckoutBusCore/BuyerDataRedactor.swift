/// Writes a JSON value with buyer and payment details replaced by `"[redacted]"`.
///
/// Redacted by default (`--buyer-data redacted`): any member named for buyer identity or contact
/// (email, phone, names, `buyer`), addresses (billing, shipping, delivery), payment instrument
/// details (`instruments`, `credential`, `card`, `paymentMethodData`), the cart token, and in the
/// older `orderDetails`, `details` under `paymentMethods`/`deliveries` and `token` under `cart`.
/// The key stays so consumers see the field existed; its value, whatever its type, becomes the
/// string `"[redacted]"`. The list is in `docs/envelope.md`. `Sendable`; pure.
public enum BuyerDataRedactor {
    /// Member names redacted wherever they appear, bucketed by byte length for a cheap check.
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

    @inline(__always)
    static func matches(_ key: UnsafeRawBufferPointer, _ list: [[UInt8]]) -> Bool {
        for candidate in list where candidate.withUnsafeBytes({ $0.elementsEqual(key) }) { return true }
        return false
    }

    /// Whether member `key` (raw, unquoted bytes) under `parent` (the enclosing member's name) is redacted.
    static func isRedacted(_ key: UnsafeRawBufferPointer, parent: UnsafeRawBufferPointer?) -> Bool {
        let n = key.count
        if n < always.count && !always[n].isEmpty && matches(key, always[n]) { return true }
        guard let parent else { return false }
        if n == 7 && key.elementsEqual("details".utf8) {
            return parent.elementsEqual("paymentMethods".utf8) || parent.elementsEqual("payment_methods".utf8)
                || parent.elementsEqual("deliveries".utf8)
        }
        if n == 5 && key.elementsEqual("token".utf8) { return parent.elementsEqual("cart".utf8) }
        return false
    }

    /// Appends value `t` of `doc` to `out`, redacting as described above.
    public static func write(_ doc: JSONDocument, _ t: Int, to out: inout JSONWriter) {
        write(doc, t, parent: nil, to: &out)
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
