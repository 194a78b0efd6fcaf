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
        readEventIDs(doc, r, into: &event)
        if !atTop { readEventIDs(hd, h.token, into: &event) }
        return event
    }
}
