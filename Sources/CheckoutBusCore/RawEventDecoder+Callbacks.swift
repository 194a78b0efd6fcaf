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

    /// The `id` of the `OrderDetails(…)` in a Kotlin data class printed whole
    /// (`CheckoutCompletedEvent(orderDetails=OrderDetails(billingAddress=null, cart=CartInfo(…), …,
    /// id=gid://shopify/OrderIdentity/8, …))`, `CompletedEvent.kt` in Shopify/checkout-sheet-kit-android):
    /// only a member of `OrderDetails` itself, not of a value nested in it. Nil for anything else.
    package static func printedKotlinOrderID(_ text: String) -> String? {
        let u = Array(text.utf8.prefix(65_536))
        guard u.starts(with: "CheckoutCompletedEvent(".utf8) else { return nil }
        let opening = Array("OrderDetails(".utf8)
        guard var i = (0...(u.count - opening.count)).first(where: { u[$0..<($0 + opening.count)].elementsEqual(opening) })
        else { return nil }
        i += opening.count
        var depth = 0
        var memberStart = true
        while i < u.count {
            let b = u[i]
            if depth == 0 && memberStart && u[i...].starts(with: "id=".utf8) {
                let start = i + 3
                var end = start
                while end < u.count, u[end] != UInt8(ascii: ","), u[end] != UInt8(ascii: ")") { end += 1 }
                guard end > start, end - start <= 256, end < u.count else { return nil }
                let id = String(decoding: u[start..<end], as: UTF8.self)
                return id == "null" ? nil : id
            }
            memberStart = false
            switch b {
            case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                if depth == 0 { return nil }
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 0, i + 1 < u.count, u[i + 1] == UInt8(ascii: " ") {
                    i += 1
                    memberStart = true
                }
            default: break
            }
            i += 1
        }
        return nil
    }
}
