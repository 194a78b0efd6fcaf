#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusJSON
import CheckoutBusProtocol

/// SDK callback events by name, in every platform's spelling (`onComplete`, `checkoutDidComplete`, …).
extension RawEventDecoder {
    /// - Parameters:
    ///   - holderToken: where a bridge put the event's fields (``holder(_:_:_:)``).
    ///   - platform: what the name's spelling says (``platform(forCallback:)``).
    func decodeCallback(_ doc: JSONDocument, _ r: Int, holder holderToken: Int?, kind: LifecycleKind,
                        platform: String?) throws(DecodeRejection) -> DecodedEvent {
        var event = DecodedEvent(kind: kind, format: .callback, sdk: "shopify")
        event.platform = platform
        let h = holder(doc, r, holderToken)
        let hd = h.doc
        let atTop = hd === doc && h.token == r
        var snapshot = try checkedObject(hd, hd.member(h.token, "checkout"), "checkout")
        if snapshot == nil && !atTop { snapshot = try checkedObject(doc, doc.member(r, "checkout"), "checkout") }
        if let c = snapshot {
            // Read before `c` moves into the event: its document without a retain of its own.
            readSnapshotIDs(c.doc, c.token, into: &event)
            event.snapshot = c
        } else if kind == .complete || kind == .start || kind == .update,
            hd.object(h.token, "orderDetails") != nil || hd.object(h.token, "order_details") != nil
                // Checkout Sheet Kit 4's bodies under a callback's name (React Native's
                // `sendEventWithStringData("complete", …)`), the web component's `checkout:complete`:
                // `{orderConfirmation, cart}`, `{cart, locale}`, nothing else beside them but a name.
                || (kind != .update
                    && (hd.object(h.token, "orderConfirmation") != nil || hd.object(h.token, "cart") != nil)
                    && RawEventDecoder.membersAreAmong(hd, h.token, ["orderConfirmation", "cart", "locale", "method",
                                                                     "type", "event", "name"]))
        {
            event.snapshot = h
            readSnapshotIDs(hd, h.token, into: &event)
        }
        if kind == .fail {
            if let e = hd.object(h.token, "error") {
                event.error = failureError(hd, object: e, fields: h.token, terminal: true)
            } else if hd === doc {
                event.error = failureError(doc, object: doc.object(r, "error"), fields: h.token, orStringIn: r, terminal: true)
            } else if hasErrorFields(hd, h.token) || doc.member(r, "error") == nil {
                event.error = failureError(hd, object: nil, fields: h.token, terminal: true)
            } else {
                // The holder was JSON in a string without the error: the event's own `error`.
                event.error = failureError(doc, object: doc.object(r, "error"), fields: r, orStringIn: r, terminal: true)
            }
        }
        // Checkout Sheet Kit Android's completed event printed by Kotlin (its data class's
        // `toString()`, as the kit's sample app logs the event): the order's id in `OrderDetails(…)`.
        if kind == .complete, !event.hasOrderID, snapshot == nil, let v = doc.member(r, anyOf: "data", "event", "body"),
            let text = doc.string(v), let id = RawEventDecoder.printedKotlinOrderID(text)
        {
            event.orderIdentifier = IdentifierText(string: id)
        }
        readEventIDs(doc, r, into: &event)
        if !atTop { readEventIDs(hd, h.token, into: &event) }
        return event
    }

    /// The order's id in Checkout Sheet Kit Android's completed event printed whole by Kotlin
    /// (`CheckoutCompletedEvent(orderDetails=OrderDetails(billingAddress=…, cart=CartInfo(…), …,
    /// id=gid://shopify/OrderIdentity/8, …))`, the data class's `toString()`, `CompletedEvent.kt` in
    /// Shopify/checkout-sheet-kit-android). Kotlin quotes no string, so a buyer's address or a
    /// product's title could print `…), id=…` of its own: only an id of the kit's shape
    /// (`gid://shopify/OrderIdentity/` and digits) that the text names once, as a member of
    /// `OrderDetails` itself, is taken. Nil for anything else, and for a text over 64 KiB.
    package static func printedKotlinOrderID(_ text: String) -> String? {
        let opening = "CheckoutCompletedEvent(orderDetails=OrderDetails(".utf8
        let marker = Array("id=gid://shopify/OrderIdentity/".utf8)
        guard text.utf8.count <= 65_536, text.utf8.starts(with: opening) else { return nil }
        var text = text
        return text.withUTF8 { u -> String? in
            func hasMarker(at i: Int) -> Bool {
                i + marker.count <= u.count && memcmp(u.baseAddress! + i, marker, marker.count) == 0
            }
            var found: Int?
            var depth = 0
            var i = opening.count
            while i < u.count {
                if hasMarker(at: i) {
                    // Named twice (a buyer's text among them): neither is taken.
                    guard found == nil else { return nil }
                    let memberStart = u[i - 1] == UInt8(ascii: "(") || (u[i - 1] == UInt8(ascii: " ")
                                                                        && u[i - 2] == UInt8(ascii: ","))
                    guard depth == 0, memberStart else { return nil }
                    found = i
                    i += marker.count
                    continue
                }
                switch u[i] {
                case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
                case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
                default: break
                }
                i += 1
            }
            guard let at = found else { return nil }
            var end = at + marker.count
            while end < u.count, u[end] &- UInt8(ascii: "0") < 10 { end += 1 }
            guard end > at + marker.count, end - at <= 64, end < u.count,
                u[end] == UInt8(ascii: ",") || u[end] == UInt8(ascii: ")")
            else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: u[(at + 3)..<end]), as: UTF8.self)
        }
    }
}
