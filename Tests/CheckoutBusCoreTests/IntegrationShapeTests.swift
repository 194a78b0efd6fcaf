import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

/// Shapes real SDK integrations produce around the documented events: React Native and Flutter
/// emitters, Kotlin serializers, iOS's Primer delegate relayed whole, Android's enum spellings.
/// Each was once dead-lettered or decoded short of what the SDK documents promise.
@Suite("Shapes SDK integrations send")
struct IntegrationShapeTests {
    @Test("a `{name, body}` emitter with a callback's name decodes as that callback")
    func nameBodyEmitter() {
        let p = EventProcessor()
        let complete = p.feed(#"""
            {"name":"checkoutDidComplete","body":{"checkout":{"id":"ck-rn","status":"completed","order":{"id":"O-rn"}}}}
            """#)
        #expect(complete.outcome == .published(.complete), "\(complete.text)")
        #expect(complete["checkout_id"] == "ck-rn")
        #expect(complete["idempotency_key"] == "O-rn")
        let fail = p.feed(#"""
            {"name":"onCheckoutFailed","body":{"checkoutId":"ck-rn2","error":{"code":"CART_EXPIRED","message":"expired"}}}
            """#)
        #expect(fail.outcome == .published(.fail), "\(fail.text)")
        #expect(fail.topic == "checkout.fail.cart_expired")
        #expect(fail["checkout_id"] == "ck-rn2")
        let dismiss = p.feed(#"{"checkout_id":"ck-rn","platform":"react_native","payload":{"name":"onDismiss","body":null}}"#)
        #expect(dismiss.outcome == .published(.dismiss), "\(dismiss.text)")
        // The older bridge's own names still decode as the bridge; an unknown name is still a dead letter.
        #expect(p.feed(#"{"name":"completed","body":{"id":"ck-sheet","order":{"id":"O-s"}}}"#).outcome
            == .published(.complete))
        #expect(p.feed(#"{"name":"somethingElse","body":{"id":"ck-sheet"}}"#).outcome == .deadLettered(.unknownEvent))
        #expect(p.feed(#"{"name":"webPixels","body":{"id":"ck-sheet"}}"#).outcome == .deadLettered(.notLifecycle))
    }

    @Test("`\"payload\": null` is no payload: a dismiss needs none")
    func nullPayload() {
        let p = EventProcessor()
        let shopify = p.feed(#"{"checkout_id":"ck-n","platform":"ios","event":"checkoutDidDismiss","payload":null}"#)
        #expect(shopify.outcome == .published(.dismiss), "\(shopify.text)")
        #expect(shopify["checkout_id"] == "ck-n")
        #expect(shopify["source.platform"] == "ios")
        let primer = p.feed(#"{"checkout_id":"primer-n","sdk":"primer","state":"dismissed","payload":null}"#)
        #expect(primer.outcome == .published(.dismiss), "\(primer.text)")
        #expect(primer["source.sdk"] == "primer")
        // A payload of another wrong type is still a dead letter.
        #expect(p.feed(#"{"checkout_id":"ck-n","event":"checkoutDidDismiss","payload":42}"#).outcome
            == .deadLettered(.wrongType))
    }

    @Test("totals typed in any case (`TOTAL`, `Total`) fill the summary")
    func upperCaseTotals() {
        let p = EventProcessor()
        let out = p.feed(#"""
            {"event":"onCheckoutStarted","checkout":{"id":"ck-a","currency":"EUR",
             "totals":[{"type":"SUBTOTAL","amount":1999},{"type":"SHIPPING","amount":199},{"type":"TOTAL","amount":2198}]}}
            """#)
        #expect(out.outcome == .published(.start), "\(out.text)")
        #expect(out["summary.total"] == 2198)
        #expect(out["summary.subtotal"] == 1999)
        let mixed = p.feed(#"{"event":"onCheckoutStarted","checkout":{"id":"ck-b","totals":[{"type":"Total","amount":500}]}}"#)
        #expect(mixed["summary.total"] == 500)
        // Other types are not taken for a total.
        let other = p.feed(#"{"event":"onCheckoutStarted","checkout":{"id":"ck-c","totals":[{"type":"TOTALS","amount":7}]}}"#)
        #expect(other["summary.total"] == .null)
    }

    @Test("a React Native `nativeEvent` holds the event's fields")
    func nativeEvent() {
        let p = EventProcessor()
        let start = p.feed(#"""
            {"type":"onStart","nativeEvent":{"checkout":{"id":"ck-ne","currency":"CAD","totals":[{"type":"total","amount":4550}]}},"timeStamp":1764669600000}
            """#)
        #expect(start.outcome == .published(.start), "\(start.text)")
        #expect(start["checkout_id"] == "ck-ne")
        #expect(start["summary.total"] == 4550)
        let complete = p.feed(#"""
            {"checkout_id":"ck-ne","payload":{"type":"completed","nativeEvent":{"orderDetails":{"id":"O-ne","cart":{"lines":[{"title":"Syrup","quantity":1}]}}}}}
            """#)
        #expect(complete.outcome == .published(.complete), "\(complete.text)")
        #expect(complete["idempotency_key"] == "O-ne")
        #expect(complete["summary.order_id"] == "O-ne")
    }

    @Test("a Primer failure relayed with its `data` beside the error keeps the payment and order id")
    func primerFailureData() {
        let p = EventProcessor()
        let out = p.feed(#"""
            {"checkout_id":"primer-g","sdk":"primer","platform":"ios","payload":{"callback":"primerDidFailWithError",
             "error":{"errorId":"payment-failed","description":"The payment failed","diagnosticsId":"d-1"},
             "data":{"payment":{"id":"pay_g","orderId":"ord-g","paymentFailureReason":"PAYMENT_FAILED"}}}}
            """#)
        #expect(out.outcome == .published(.fail), "\(out.text)")
        #expect(out.topic == "checkout.fail.payment_failed")
        #expect(out["payment.id"] == "pay_g")
        #expect(out["summary.order_id"] == "ord-g")
        #expect(out["idempotency_key"] == "ord-g")
        // The payment on the event itself still wins over the holder's.
        let own = p.feed(#"""
            {"checkout_id":"primer-h","sdk":"primer","payload":{"event":"onError","error":{"errorId":"payment-failed"},
             "checkoutData":{"payment":{"id":"pay_own","orderId":"ord-own"}},"data":{"payment":{"id":"pay_other","orderId":"ord-other"}}}}
            """#)
        #expect(own["payment.id"] == "pay_own")
        #expect(own["summary.order_id"] == "ord-own")
    }

    @Test("a null `code` does not hide the `errorId` beside it")
    func nullCode() {
        let p = EventProcessor()
        let out = p.feed(#"""
            {"checkout_id":"primer-c","sdk":"primer","payload":{"event":"onFailed","error":{"code":null,"errorId":"payment-failed","description":"declined"}}}
            """#)
        #expect(out.topic == "checkout.fail.payment_failed", "\(out.text)")
        #expect(out["error.raw_code"] == "payment-failed")
        // All null: no raw code, as before.
        let none = p.feed(#"{"checkout_id":"primer-d","sdk":"primer","payload":{"event":"onFailed","error":{"code":null,"errorId":null}}}"#)
        #expect(none.topic == "checkout.fail.unknown")
        #expect(none["error.raw_code"] == .null)
    }

    @Test("a qualified event name (kotlinx class name, nested class, web event) decodes by its last part")
    func qualifiedNames() {
        let p = EventProcessor()
        let kotlin = p.feed(#"{"type":"com.shopify.checkoutkit.lifecycle.CheckoutStartEvent","checkout":{"id":"ck-k"}}"#)
        #expect(kotlin.outcome == .published(.start), "\(kotlin.text)")
        #expect(kotlin["checkout_id"] == "ck-k")
        #expect(p.feed(#"{"type":"CheckoutEvent$Completed","checkout":{"id":"ck-k","order":{"id":"O-k"}}}"#).outcome
            == .published(.complete))
        let web = p.feed(#"{"type":"shopify:checkout:dismiss","detail":{"checkoutId":"ck-w"}}"#)
        #expect(web.outcome == .published(.dismiss), "\(web.text)")
        #expect(web["checkout_id"] == "ck-w")
        // A qualifier around an unknown name is still unknown.
        #expect(p.feed(#"{"type":"com.example.SomethingElse","checkout":{"id":"ck-k"}}"#).outcome
            == .deadLettered(.unknownEvent))
    }
}

@Suite("Errors as platforms encode them")
struct PlatformErrorShapeTests {
    @Test("an error enum encoded by Swift's Codable names its code by its case")
    func codableEnumErrors() {
        let p = EventProcessor()
        let cased = p.feed(#"""
            {"event":"checkoutDidFail","checkoutId":"ck-e1","error":{"checkoutExpired":{"message":"Cart expired","code":"cart_expired","recoverable":false}}}
            """#)
        #expect(cased.topic == "checkout.fail.cart_expired", "\(cased.text)")
        #expect(cased["error.message"] == "Cart expired")
        #expect(cased["error.raw_code"] == "cart_expired")
        let bare = p.feed(#"{"event":"checkoutDidFail","checkoutId":"ck-e2","error":{"checkoutExpired":{"_0":"expired"}}}"#)
        #expect(bare.topic == "checkout.fail.cart_expired", "\(bare.text)")
        #expect(bare["error.raw_code"] == "checkoutExpired")
        let codeCase = p.feed(#"{"event":"checkoutDidFail","checkoutId":"ck-e3","error":{"code":{"cartExpired":{}},"message":"expired"}}"#)
        #expect(codeCase.topic == "checkout.fail.cart_expired", "\(codeCase.text)")
        #expect(codeCase["error.raw_code"] == "cartExpired")
        // An error's own nested fields are not taken for a case.
        let nested = p.feed(#"{"event":"checkoutDidFail","checkoutId":"ck-e4","error":{"details":{"reason":"x"}}}"#)
        #expect(nested.topic == "checkout.fail.unknown", "\(nested.text)")
        #expect(nested["error.raw_code"] == .null)
    }

    @Test("an NSError of NSURLErrorDomain is a network error")
    func urlErrorDomain() {
        let p = EventProcessor()
        let out = p.feed(#"""
            {"event":"checkoutDidFail","checkoutId":"ck-u","error":{"domain":"NSURLErrorDomain","code":-1009,"localizedDescription":"The Internet connection appears to be offline."}}
            """#)
        #expect(out.topic == "checkout.fail.network_error", "\(out.text)")
        #expect(out["error.raw_code"] == "-1009")
        // Another domain's unknown code stays unknown.
        let other = p.feed(#"{"event":"checkoutDidFail","checkoutId":"ck-v","error":{"domain":"WKErrorDomain","code":-7}}"#)
        #expect(other.topic == "checkout.fail.unknown")
    }

    @Test("Embedded Checkout Protocol messages typed in upper case are read")
    func upperCaseECPMessages() {
        let p = EventProcessor()
        let out = p.feed(#"""
            {"jsonrpc":"2.0","method":"ec.error","params":{"checkout":{"id":"ck-x","messages":[
             {"type":"WARNING","code":"low_stock","content":"2 left"},
             {"type":"ERROR","code":"CART_EXPIRED","severity":"UNRECOVERABLE","content":"expired"}]}}}
            """#)
        #expect(out.outcome == .published(.fail), "\(out.text)")
        #expect(out.topic == "checkout.fail.cart_expired")
        #expect(out["error.raw_code"] == "CART_EXPIRED")
    }
}

@Suite("A person's name in a snapshot")
struct PersonNameRedactionTests {
    @Test("an Embedded Checkout Protocol destination's addressee is redacted; the method's and items' names are kept")
    func destinationName() {
        let p = EventProcessor()
        let out = p.feed(#"""
            {"jsonrpc":"2.0","method":"ec.fulfillment.change","params":{"checkout":{"id":"ck-d","currency":"USD",
             "line_items":[{"id":"li_1","item":{"id":"v1","name":"Socks","title":"Socks"},"quantity":2}],
             "fulfillment":{"methods":[{"id":"m1","type":"shipping","name":"Standard",
               "destinations":[{"id":"d1","name":"Cy Lopez","street_address":"1 Main St","address_country":"US"}],
               "selected_destination_id":"d1"}]}}}}
            """#)
        #expect(out.outcome == .published(.update), "\(out.text)")
        #expect(!out.text.contains("Cy Lopez"))
        #expect(out["checkout.fulfillment.methods.0.destinations.0.name"] == "[redacted]")
        #expect(out["checkout.fulfillment.methods.0.destinations.0.id"] == "d1")
        #expect(out["checkout.fulfillment.methods.0.name"] == "Standard")
        #expect(out["checkout.line_items.0.item.name"] == "Socks")
    }
}
