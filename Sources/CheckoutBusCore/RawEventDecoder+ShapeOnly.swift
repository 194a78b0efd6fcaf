import CheckoutBusJSON
import CheckoutBusProtocol

/// Events known by their shape alone: no name, no method (Checkout Sheet Kit React Native 4 bodies,
/// an Embedded Checkout Protocol `ErrorResponse`, Primer's errors and checkout data).
extension RawEventDecoder {
    /// Objects that name no event but are one by their shape, as an app's bridge forwards what its
    /// SDK handed it: a React Native Checkout Sheet Kit error (`__typename` `CheckoutExpiredError`,
    /// …, with its `code`) is a fail; its `completed` event's data (`orderDetails` with its `id` or
    /// `cart`) a complete; an
    /// Embedded Checkout Protocol `ErrorResponse` (`ucp` and `messages`, what Checkout Kit's React
    /// Native relay hands JavaScript for `ec.error`) a fail. A JSON-RPC response (`result` or
    /// `error` beside `id`, no `method`) is no lifecycle event.
    /// - Returns: nil when the shape is none of these.
    ///
    /// Primer's, as its React Native provider hands them to JavaScript: a `PrimerError`
    /// (`errorId`), or `{"error":{"errorId",…},"checkoutData":…}`, is a failure; checkout data
    /// (`{"payment":{"id","orderId"?,"status"?}}`, `checkoutData`, `paymentResult`) a complete — the
    /// bare `payment` only under a wrapper that says `"sdk":"primer"`, since any JSON may hold a
    /// `payment`.
    func decodeUnnamed(_ doc: JSONDocument, _ r: Int, wrapper: Wrapper) throws(DecodeRejection) -> DecodedEvent? {
        let saysPrimer = wrapper.saysPrimer
        if doc.member(r, anyOf: "errorId", "error_id") != nil
            || doc.object(r, "error").flatMap({ doc.member($0, anyOf: "errorId", "diagnosticsId", "error_id") }) != nil
        {
            // Its checkout data beside it (React Native v3's `PaymentOutcome` error: `data`) names the order.
            return decodePrimer(doc, r, holder: doc.object(r, "data"), kind: .fail,
                                platform: RawEventDecoder.platform(forPrimer: "failure"))
        }
        // Primer React Native v3's `PaymentOutcome` success (`PrimerCheckoutProviderTypes.ts` in
        // primer-io/primer-sdk-react-native): `{"status":"success","data":{"payment":{"id","orderId"}}}`.
        if let s = doc.member(r, "status"), doc.stringEquals(s, "success"), let data = doc.object(r, "data"),
            doc.object(data, "payment") != nil, saysPrimer
        {
            return decodePrimer(doc, r, holder: data, kind: .complete,
                                platform: RawEventDecoder.platform(forPrimer: "success"))
        }
        if doc.object(r, "paymentResult") != nil || doc.object(r, "payment_result") != nil || doc.object(r, "checkoutData") != nil
            || (saysPrimer && doc.object(r, "payment") != nil)
        {
            return decodePrimer(doc, r, holder: nil, kind: .complete,
                                platform: RawEventDecoder.platform(forPrimer: "success"))
        }
        if doc.member(r, "jsonrpc") != nil, doc.member(r, "id") != nil,
            doc.member(r, "result") != nil || doc.member(r, "error") != nil
        {
            throw DecodeRejection(.notLifecycle, "a JSON-RPC response is not a lifecycle event")
        }
        if let t = doc.member(r, "__typename"), let typename = doc.string(t), typename.hasSuffix("Error"),
            doc.member(r, anyOf: "code", "message") != nil
        {
            return try decodeCallback(doc, r, holder: nil, kind: .fail,
                                      platform: RawEventDecoder.platform(forCallback: "error"))
        }
        // Checkout Sheet Kit React Native's `InternalError` instance, the one error class without a
        // `name` (`errors.d.ts`): `{"code","message","recoverable"}`, every kit error's three fields.
        if !saysPrimer, let c = doc.member(r, "code"), doc.kind(c) == .string, doc.member(r, "message") != nil,
            let v = doc.member(r, "recoverable"), doc.bool(v) != nil
        {
            return try decodeCallback(doc, r, holder: nil, kind: .fail,
                                      platform: RawEventDecoder.platform(forCallback: "error"))
        }
        // The kit's `OrderDetails` always has its `id` and its cart. Primer's client session
        // (`PrimerClientSession`, which its React Native bridge relays bare on an update) has an
        // `orderDetails` too — a `PrimerOrder`, `{countryCode, shipping}`, before any payment — and
        // is no completion.
        if let details = doc.object(r, "orderDetails") ?? doc.object(r, "order_details"),
            doc.member(details, anyOf: "id", "cart") != nil
        {
            return try decodeCallback(doc, r, holder: nil, kind: .complete,
                                      platform: RawEventDecoder.platform(forCallback: "completed"))
        }
        // Checkout Sheet Kit React Native 4's `complete` and `start` bodies: the event's name is
        // its channel, never in the body (`{orderConfirmation, cart}`, `{cart, locale?}`).
        if doc.member(r, "id") == nil, doc.object(r, "orderConfirmation") != nil || doc.object(r, "cart") != nil {
            var event = DecodedEvent(kind: doc.object(r, "orderConfirmation") != nil ? .complete : .start,
                                     format: .sheetBridge, sdk: "shopify")
            event.snapshot = JSONRef(doc, r)
            readSnapshotIDs(doc, r, into: &event)
            return event
        }
        if doc.object(r, "ucp") != nil, doc.member(r, "messages").map({ doc.kind($0) == .array }) == true {
            var event = DecodedEvent(kind: .fail, format: .ecp, sdk: "shopify")
            event.error = ecpError(doc, r, snapshot: nil)
            return event
        }
        return nil
    }

    /// What the name tables say of one folded event name.
}
