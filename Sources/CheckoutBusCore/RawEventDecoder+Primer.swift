import CheckoutBusJSON
import CheckoutBusProtocol

/// Primer Checkout states and callbacks: payment results, checkout data, Primer errors.
extension RawEventDecoder {
    /// - Parameter platform: what the name's spelling says (``platform(forPrimer:)``).
    func decodePrimer(_ outer: JSONDocument, _ r: Int, holder holderToken: Int?, kind: LifecycleKind,
                      platform: String?) -> DecodedEvent {
        var event = DecodedEvent(kind: kind, format: .primer, sdk: "primer")
        event.platform = platform
        // Primer's own fields on the event itself win over a bridge's holder.
        let own = outer.member(r, anyOf: "paymentResult", "payment_result", "checkoutData", "checkout_data", "result",
                               "payment", "error", "primerError") != nil
        let h = own ? JSONRef(outer, r) : holder(outer, r, holderToken)
        let doc = h.doc
        let holder = h.token
        // The payment, and the order it names: on the event, else (iOS's
        // `primerDidFailWithError(_:data:)` relayed as `{"error":…,"data":{"payment":…}}`) in the
        // holder beside its own fields.
        readPrimerPayment(doc, holder, into: &event)
        if own, event.payment == nil, let other = objectValue(outer, holderToken) {
            readPrimerPayment(other.doc, other.token, into: &event)
        }
        // A success whose payment did not go through: iOS calls its success delegate when the
        // server says the checkout completed, whatever the payment's status, and Primer's React
        // Native v3 reads that status to tell success from failure. Published as what it is — a
        // fulfilment worker must not take a declined payment for an order.
        if kind == .complete, let p = event.payment, let v = p.doc.member(p.token, "status"), let status = p.doc.string(v) {
            let folded = ErrorCodeNormalizer.fold(status)
            if folded == "failed" || folded == "declined" || folded == "cancelled" || folded == "canceled" {
                event.kind = .fail
                event.error = DecodedError(
                    code: folded.hasPrefix("cancel") ? .paymentCancelled : .paymentFailed, rawCode: status,
                    message: "payment \(status) in the checkout's success data", httpStatus: nil, terminal: false)
            }
        }
        if kind == .fail {
            // iOS's `PrimerError.paymentFailed(paymentMethodType:paymentId:orderId:status:…)` encoded by
            // `Codable`: `{"error":{"paymentFailed":{"paymentId","orderId",…}}}` names its order.
            if !event.hasOrderID, let e = doc.object(holder, "error"),
                let (_, values) = RawEventDecoder.codableEnumCase(doc, e),
                let v = doc.member(values, anyOf: "orderId", "order_id")
            {
                event.setOrderID(doc, v)
            }
            var terminal = false
            if let p = doc.member(holder, "phase"), doc.stringEquals(p, "initializing") { terminal = true }
            if let t = doc.member(holder, "terminal"), doc.bool(t) == true { terminal = true }
            event.error = failureError(doc, object: doc.object(holder, "error") ?? doc.object(holder, "primerError"),
                                       fields: holder, terminal: terminal)
        }
        readEventIDs(outer, r, into: &event)
        if doc !== outer || holder != r { readEventIDs(doc, holder, into: &event) }
        return event
    }

    /// A Primer event's payment (`paymentResult`, `result`, `checkoutData.payment` or `payment`)
    /// and order id, from the object at `holder`.
    private func readPrimerPayment(_ doc: JSONDocument, _ holder: Int, into event: inout DecodedEvent) {
        let checkoutData = doc.object(holder, "checkoutData") ?? doc.object(holder, "checkout_data")
        let payment = doc.object(holder, "paymentResult") ?? doc.object(holder, "payment_result")
            ?? doc.object(holder, "result") ?? checkoutData.flatMap { doc.object($0, "payment") }
            ?? doc.object(holder, "payment")
        if let payment {
            event.payment = JSONRef(doc, payment)
            if let v = doc.member(payment, anyOf: "orderId", "order_id") { event.setOrderID(doc, v) }
        }
        // A PaymentResult names no order; the checkout data's payment beside it may.
        if !event.hasOrderID, let p = checkoutData.flatMap({ doc.object($0, "payment") }),
            let v = doc.member(p, anyOf: "orderId", "order_id")
        {
            event.setOrderID(doc, v)
        }
    }
}
