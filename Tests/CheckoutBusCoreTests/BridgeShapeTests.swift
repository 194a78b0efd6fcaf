import Foundation
import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

/// Shapes that real bridges and relays send around the documented families (docs/raw-shapes.md,
/// "Bridges and relays"): a complete among them must never be dead-lettered for its packaging.
@Suite("bridge and relay packaging")
struct BridgeShapeTests {
    static let snapshot = #"{"id":"ck-b","status":"completed","currency":"USD","totals":[{"type":"total","amount":2500}],"order":{"id":"O-b"}}"#

    /// `snapshot` as a JSON string literal (the way a bridge serialises it).
    static var snapshotString: String { jsonStringLiteral(snapshot) }

    struct Case: Sendable, CustomTestStringConvertible {
        let label: String
        let raw: String
        var kind: LifecycleKind = .complete
        var checkoutID = "ck-b"
        var eventID: String?
        var testDescription: String { label }
    }

    static let cases: [Case] = [
        Case(label: "name in `type`, snapshot under an `event` object",
             raw: #"{"type":"checkoutDidComplete","event":{"checkout":\#(snapshot)}}"#),
        Case(label: "event name beside wrapper fields; the payload names none",
             raw: #"{"event":"checkoutDidComplete","checkout_id":"ck-b","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "Redux-style action: `type` and `payload`",
             raw: #"{"type":"checkoutDidComplete","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "name in `callback`, snapshot in `payload`",
             raw: #"{"callback":"onComplete","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "snapshot under `payload` beside `event`",
             raw: #"{"event":"onComplete","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "snapshot under a `body` object",
             raw: #"{"event":"onCheckoutCompleted","body":{"checkout":\#(snapshot)}}"#),
        Case(label: "Flutter method channel: `method` and `arguments`",
             raw: #"{"method":"onCheckoutCompleted","arguments":{"checkout":\#(snapshot)}}"#),
        Case(label: "Flutter event channel: `data` as a JSON string",
             raw: #"{"event":"onComplete","data":\#(jsonStringLiteral(#"{"checkout":\#(snapshot)}"#))}"#),
        Case(label: "`checkout` as a JSON string",
             raw: #"{"event":"checkoutDidComplete","checkout":\#(snapshotString)}"#),
        Case(label: "ECP `params.checkout` as a JSON string",
             raw: #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":\#(snapshotString)}}"#),
        Case(label: "ECP `params` as a JSON string",
             raw: #"{"jsonrpc":"2.0","method":"ec.complete","params":\#(jsonStringLiteral(#"{"checkout":\#(snapshot)}"#))}"#),
        Case(label: "wrapper with `data` instead of `payload`",
             raw: #"{"checkout_id":"ck-b","event_id":"e-1","data":{"event":"onComplete","checkout":\#(snapshot)}}"#,
             eventID: "e-1"),
        Case(label: "wrapper with `body` instead of `payload`",
             raw: #"{"checkout_id":"ck-b","platform":"ios","body":{"event":"checkoutDidComplete","checkout":\#(snapshot)}}"#),
        Case(label: "a relay's wrapper around a wrapper: the outer event id wins, the inner checkout id fills in",
             raw: #"{"event_id":"relay-1","payload":{"checkout_id":"ck-b","event_id":"e-2","payload":{"event":"onComplete","checkout":\#(snapshot)}}}"#,
             eventID: "relay-1"),
        Case(label: "wrapper payload JSON-encoded twice",
             raw: #"{"checkout_id":"ck-b","event_id":"e-3","payload":\#(jsonStringLiteral(jsonStringLiteral(#"{"event":"onComplete","checkout":\#(snapshot)}"#)))}"#,
             eventID: "e-3"),
        Case(label: "bridge `body` JSON-encoded twice",
             raw: #"{"checkout_id":"ck-b","payload":{"name":"completed","body":\#(jsonStringLiteral(jsonStringLiteral(#"{"orderDetails":{"id":"O-b"}}"#)))}}"#),
        Case(label: "UTF-8 byte order mark before the JSON",
             raw: "\u{FEFF}" + #"{"event":"onComplete","checkout":\#(snapshot)}"#),
        Case(label: "dotted name like the bus's own topic",
             raw: #"{"event":"checkout.complete","checkout":\#(snapshot)}"#),
        Case(label: "ECP `ec.error` with `params` null and the id in the wrapper",
             raw: #"{"checkout_id":"ck-b","payload":{"jsonrpc":"2.0","method":"ec.error","params":null}}"#, kind: .fail),
    ]

    @Test("each packaging decodes to its event", arguments: cases)
    func decodes(_ c: Case) {
        let p = EventProcessor()
        let out = p.feed(c.raw)
        #expect(out.outcome == .published(c.kind), "\(out.text)")
        #expect(out["checkout_id"] == .string(c.checkoutID))
        if let id = c.eventID { #expect(out["event_id"] == .string(id)) }
        if c.kind == .complete && !c.raw.contains("orderDetails") {
            #expect(out["summary.total"] == 2500)
            #expect(out["idempotency_key"] == "O-b")
        }
    }

    @Test("a JSON string that is not JSON is left alone where it is optional, and still a dead letter as a payload")
    func notJSONInString() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onComplete","checkout_id":"ck-s","data":"{not json"}"#)
        #expect(out.outcome == .published(.complete))
        #expect(out["checkout"] == .null)
        #expect(p.feed(#"{"checkout_id":"ck-s","payload":"{not json"}"#).outcome == .deadLettered(.invalidEmbeddedJSON))
        // An event name that merely is a string is not taken for embedded JSON.
        #expect(p.feed(#"{"event":"onDismiss","checkout_id":"ck-s"}"#).outcome == .published(.dismiss))
    }

    @Test("blank and placeholder ids are no ids: they would merge every checkout that sent them")
    func placeholderIDs() {
        let p = EventProcessor()
        for id in ["", "   ", "undefined", "null", "NULL", "None", "nil", "NaN"] {
            let out = p.feed(#"{"event":"onDismiss","checkout_id":\#(jsonStringLiteral(id))}"#)
            #expect(out.outcome == .deadLettered(.missingCheckoutID), "\(id)")
        }
        // The snapshot's own id is used when the wrapper's is a placeholder.
        let out = p.feed(#"{"checkout_id":"undefined","event_id":"null","payload":{"event":"onComplete","checkout":\#(Self.snapshot)}}"#)
        #expect(out["checkout_id"] == "ck-b")
        #expect(out["event_id"] == .null)
        // Ids that only look alike are ids.
        for id in ["nullable", "none-1", "0", "undefined2"] {
            #expect(p.feed(#"{"event":"onDismiss","checkout_id":\#(jsonStringLiteral(id))}"#)["checkout_id"] == .string(id))
        }
    }

    @Test("the wrapper's platform is trimmed")
    func platformTrimmed() {
        let out = EventProcessor().feed(#"{"checkout_id":"ck-p","platform":" Android ","payload":{"event":"onDismiss"}}"#)
        #expect(out["source.platform"] == "android")
    }

    @Test("a relay's message tagged by `type` still wraps its payload")
    func relayTaggedByType() {
        let out = EventProcessor().feed(#"{"type":"checkout/message","payload":{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":\#(Self.snapshot)}}}"#)
        #expect(out.outcome == .published(.complete))
        #expect(out["idempotency_key"] == "O-b")
    }

    @Test("a payload's unknown `type` gives way to the wrapper's event name")
    func wrapperNameWins() {
        let out = EventProcessor().feed(#"{"event":"checkoutDidFail","checkout_id":"c","payload":{"type":"network","message":"timeout"}}"#)
        #expect(out.outcome == .published(.fail))
        #expect(out["error.message"] == "timeout")
    }

    @Test("an `event` holding JSON text is not taken for the name")
    func embeddedEventIsNotAName() {
        let out = EventProcessor().feed(#"{"type":"checkoutDidComplete","event":\#(jsonStringLiteral(#"{"checkout":\#(Self.snapshot)}"#))}"#)
        #expect(out.outcome == .published(.complete))
        #expect(out["checkout_id"] == "ck-b")
    }

    @Test("the event's own error is kept when its holder is JSON text without one")
    func topLevelErrorKept() {
        let out = EventProcessor().feed(#"{"event":"checkoutDidFail","checkout_id":"c","error":{"code":"cart_expired"},"data":"{\"reason\":\"x\"}"}"#)
        #expect(out["error.code"] == "cart_expired")
    }

    @Test("Primer events under a bridge's holder are Primer's; Primer's own fields beside a holder are kept")
    func primerInHolders() {
        let p = EventProcessor()
        let complete = p.feed(#"{"event":"onCheckoutCompleted","data":{"checkoutData":{"payment":{"id":"pay_f3","orderId":"ord-f3"}}}}"#)
        #expect(complete.outcome == .published(.complete))
        #expect(complete["checkout_id"] == "order:ord-f3")
        #expect(complete["source.sdk"] == "primer")
        let fail = p.feed(#"{"method":"onError","checkout_id":"c-p","arguments":{"error":{"errorId":"payment-failed","description":"Declined"}}}"#)
        #expect(fail["source.sdk"] == "primer")
        #expect(fail["error.terminal"] == false)
        let top = p.feed(#"{"state":"failure","checkout_id":"c-q","error":{"errorId":"payment-failed"},"params":{"x":1}}"#)
        #expect(top["error.raw_code"] == "payment-failed")
    }

    @Test("ec.error reads the messages of a checkout sent as JSON text")
    func ecpErrorFromEmbeddedCheckout() {
        let checkout = #"{"id":"ck-e","messages":[{"type":"error","code":"payment_declined","severity":"unrecoverable"}]}"#
        let out = EventProcessor().feed(#"{"jsonrpc":"2.0","method":"ec.error","params":{"checkout":\#(jsonStringLiteral(checkout))}}"#)
        #expect(out.outcome == .published(.fail))
        #expect(out["error.raw_code"] == "payment_declined")
    }

    @Test("a bridge `close` with an empty string body is still a dismiss")
    func emptyStringBody() {
        let out = EventProcessor().feed(#"{"checkout_id":"c-d","payload":{"name":"close","body":"\"\""}}"#)
        #expect(out.outcome == .published(.dismiss))
    }

    @Test("a `checkout` that starts like JSON and is not is a dead letter, not a snapshot dropped without a word")
    func brokenEmbeddedCheckout() {
        let p = EventProcessor()
        #expect(p.feed(#"{"event":"onUpdate","checkout_id":"c-g","checkout":"{not json"}"#).outcome
            == .deadLettered(.invalidEmbeddedJSON))
        #expect(p.feed(#"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":"{\"id\":"}}"#).outcome
            == .deadLettered(.invalidEmbeddedJSON))
        // A string that is not JSON-like at all is simply not a snapshot.
        #expect(p.feed(#"{"event":"onDismiss","checkout_id":"c-g","checkout":"closed by user"}"#).outcome == .published(.dismiss))
    }

    @Test("more placeholder spellings, escaped or padded, are no ids")
    func morePlaceholders() {
        let p = EventProcessor()
        for raw in [#""(null)""#, #""<null>""#, #"" null ""#, #""\u0020""#, #""\u006eull""#, #""[object Object]""#] {
            #expect(p.feed(#"{"event":"onDismiss","checkout_id":"# + raw + "}").outcome == .deadLettered(.missingCheckoutID), "\(raw)")
        }
    }

    @Test("an item quantity summing past 64 bits is null, not a wrapped negative")
    func quantityOverflow() {
        let out = EventProcessor().feed(#"{"event":"onUpdate","checkout":{"id":"q","line_items":[{"id":"a","quantity":9223372036854775807},{"id":"b","quantity":1}]}}"#)
        #expect(out["summary.item_quantity"] == .null)
        #expect(out["summary.line_count"] == 2)
    }

    @Test("a web pixel as Checkout Sheet Kit iOS encodes it (no `type`) is no completion; the real one after it keeps its order")
    func bareSwiftPixel() {
        let p = EventProcessor()
        // PixelEvents.swift's StandardEvent: context, data, id, name, timestamp (corpus line 163).
        let pixel = p.feed(#"{"checkout_id":"px","sdk":"shopify","platform":"ios","payload":{"context":{},"data":{"checkout":{"order":{"id":"123"},"email":"jane@example.com"}},"id":"sh-1","name":"checkout_completed","timestamp":"2023-12-20T16:39:23+0000"}}"#)
        #expect(pixel.topic == "bus.deadletter" && pixel["reason"] == "not_lifecycle")
        #expect(!pixel.text.contains("jane@example.com"))
        let complete = p.feed(#"{"checkout_id":"px","sdk":"shopify","platform":"ios","payload":{"event":"checkoutDidComplete","orderDetails":{"id":"gid://shopify/OrderIdentity/8"}}}"#)
        #expect(complete.topic == "checkout.complete")
        #expect(complete["idempotency_key"] == "gid://shopify/OrderIdentity/8" && complete["repeat"] == false)
        // Named with a `name` but none of a pixel's members: still read by its name.
        let named = p.feed(#"{"checkout_id":"px2","payload":{"name":"checkout_completed","checkout":{"id":"px2"}}}"#)
        #expect(named.topic == "checkout.complete")
        // A callback forwarded with a `name`, its `data` and a `timestamp` is no pixel.
        for (i, callback) in ["checkoutCompleted", "completed", "onCheckoutCompleted", "checkoutDidComplete"].enumerated() {
            let forwarded = p.feed(#"{"checkout_id":"cb-\#(i)","sdk":"shopify","payload":{"name":"\#(callback)","data":{"orderDetails":{"id":"gid://shopify/OrderIdentity/1\#(i)"}},"timestamp":1733000000}}"#)
            #expect(forwarded.topic == "checkout.complete", "\(callback): \(forwarded.text)")
        }
    }

    @Test("Primer's printed failure state: its error read, a paymentFailed's own orderId kept, an orderId in a message never")
    func printedFailureState() {
        let p = EventProcessor()
        let cancel = p.feed(#"{"checkout_id":"pf1","sdk":"primer","payload":{"event":"onCompletion","state":"failure(PrimerFoundation.PrimerError.cancelled(paymentMethodType: \"APPLE_PAY\", diagnosticsId: \"6F1B\"))"}}"#)
        #expect(cancel.topic == "checkout.fail.payment_cancelled")
        let declined = p.feed(#"{"checkout_id":"pf2","sdk":"primer","payload":{"event":"onCompletion","state":"failure(PrimerSDK.PrimerError.paymentFailed(paymentMethodType: Optional(\"PAYMENT_CARD\"), paymentId: \"pay_2\", orderId: Optional(\"ord_2\"), status: \"DECLINED\", diagnosticsId: \"D1\"), checkoutData: nil)"}}"#)
        #expect(declined.topic == "checkout.fail.payment_failed" && declined["summary.order_id"] == "ord_2", "\(declined.text)")
        // A server's message quoting another order's id: not this failure's order.
        let quoted = p.feed(#"{"checkout_id":"pf3","sdk":"primer","payload":{"event":"onCompletion","state":"failure(PrimerSDK.PrimerError.underlyingErrors(errors: [Error Domain=PrimerServer Code=400 \"bad orderId: \"gid://shopify/OrderIdentity/77\"\" UserInfo={}], diagnosticsId: \"D\"))"}}"#)
        #expect(quoted.topic.hasPrefix("checkout.fail") && quoted["summary.order_id"] == .null, "\(quoted.text)")
        #expect(quoted["idempotency_key"] == "pf3")
        // Commas, brackets and escaped quotes inside an earlier argument's string do not split the list.
        let commas = p.feed(#"{"checkout_id":"pf4","sdk":"primer","payload":{"event":"onCompletion","state":"failure(PrimerSDK.PrimerError.paymentFailed(paymentMethodType: Optional(\"PAYMENT_CARD\"), paymentId: \"pay, (4]\\\"x\", orderId: Optional(\"ord_4\"), status: \"DECLINED\", diagnosticsId: \"D4\"), checkoutData: nil)"}}"#)
        #expect(commas.topic == "checkout.fail.payment_failed" && commas["summary.order_id"] == "ord_4", "\(commas.text)")
    }

    @Test("a dead letter's string body holding JSON is redacted inside, still a string; one with nothing to redact is kept as sent")
    func deadLetterStringBody() {
        let p = EventProcessor()
        let body = #"{\"name\": \"checkout_completed\", \"event\": {\"type\": \"standard\", \"data\": {\"checkout\": {\"email\": \"jane@example.com\", \"order\": {\"id\": \"123\"}}}}}"#
        let out = p.feed(#"{"checkout_id":"wp","sdk":"shopify","payload":{"name":"webPixels","body":"\#(body)"}}"#)
        #expect(out.topic == "bus.deadletter" && out["reason"] == "not_lifecycle")
        #expect(!out.text.contains("jane@example.com"), "\(out.text)")
        #expect(out["raw_redacted"] == true)
        let raw = try? JSONSerialization.jsonObject(with: Data((out["raw"]?.stringValue ?? "").utf8)) as? [String: Any]
        let kept = (raw?["payload"] as? [String: Any])?["body"] as? String ?? ""
        #expect(kept.contains(#""email":"[redacted]""#) && kept.contains(#""order":{"id":"123"}"#), "\(kept)")
        // Redacted only in a string within the string; and beside a value the app had masked already.
        let deeper = #"{\"event\": \"{\\\"checkout\\\": {\\\"email\\\": \\\"jane@example.com\\\"}}\"}"#
        let twice = p.feed(#"{"checkout_id":"wp3","sdk":"shopify","payload":{"name":"webPixels","body":"\#(deeper)"}}"#)
        #expect(twice["reason"] == "not_lifecycle" && !twice.text.contains("jane@example.com"), "\(twice.text)")
        let masked = #"{\"buyer\": {\"email\": \"[redacted]\", \"phone\": \"+15551234567\"}}"#
        let partly = p.feed(#"{"checkout_id":"wp4","sdk":"shopify","payload":{"name":"webPixels","body":"\#(masked)"}}"#)
        #expect(partly["reason"] == "not_lifecycle" && !partly.text.contains("5551234567"), "\(partly.text)")
        let plain = #"{\"name\": \"page_viewed\", \"event\": {\"type\": \"standard\", \"data\": {}}}"#
        let viewed = p.feed(#"{"checkout_id":"wp2","sdk":"shopify","payload":{"name":"webPixels","body":"\#(plain)"}}"#)
        #expect(viewed["raw_redacted"] == false, "\(viewed.text)")
    }

    @Test("network identifiers and street lines of other spellings are redacted")
    func moreRedactedNames() {
        let out = EventProcessor().feed(#"{"event":"onUpdate","checkout":{"id":"r","buyer_ip":"1.2.3.4","deviceIp":"5.6.7.8","street":"1 Main St","street2":"Apt 4"}}"#)
        for secret in ["1.2.3.4", "5.6.7.8", "1 Main St", "Apt 4"] { #expect(!out.text.contains(secret), "\(secret)") }
    }

    @Test("a wrapper's sdk is published as its family; a currency in lower case is upper-cased")
    func sdkFamilyAndCurrency() {
        let p = EventProcessor()
        let kit = p.feed(#"{"checkout_id":"c-s","sdk":"shopify-checkout-kit","payload":{"event":"onUpdate","checkout":{"id":"c-s","currency":"eur"}}}"#)
        #expect(kit["source.sdk"] == "shopify")
        #expect(kit["summary.currency"] == "EUR")
        let primer = p.feed(#"{"checkout_id":"c-t","sdk":"Primer iOS","payload":{"state":"dismissed"}}"#)
        #expect(primer["source.sdk"] == "primer")
        let other = p.feed(#"{"checkout_id":"c-u","sdk":"Acme","payload":{"event":"onDismiss"}}"#)
        #expect(other["source.sdk"] == "acme")
    }

    @Test("Primer's onCompletion with its state, a state printed with its values, and an onPaid closure are completes")
    func primerCompletionShapes() {
        let p = EventProcessor()
        let completion = p.feed(#"{"event":"onCompletion","state":"success","checkout_id":"c-o","paymentResult":{"paymentId":"p1","orderId":"o-1"}}"#)
        #expect(completion.outcome == .published(.complete))
        #expect(completion["source.sdk"] == "primer")
        #expect(completion["idempotency_key"] == "o-1")
        let failure = p.feed(#"{"event":"onCompletion","state":"failure","checkout_id":"c-o","error":{"errorId":"payment-failed"}}"#)
        #expect(failure.outcome == .published(.fail))
        let printed = p.feed(#"{"checkout_id":"c-o2","state":"success(PrimerSDK.PaymentResult(paymentId: \"p\"))"}"#)
        #expect(printed.outcome == .published(.complete))
        let paid = p.feed(#"{"event":"onPaid","checkout_id":"c-o3","paymentId":"p3","orderId":"o-3"}"#)
        #expect(paid.outcome == .published(.complete))
        #expect(paid["summary.order_id"] == "o-3")
        // A name nobody knows is still reported as such.
        #expect(p.feed(#"{"event":"onSomething","checkout_id":"c-o4"}"#).outcome == .deadLettered(.unknownEvent))
    }

    @Test("Checkout Kit's event class names (CheckoutCompleteEvent, CheckoutFailureEvent, …) name their kinds")
    func eventClassNames() {
        let p = EventProcessor()
        let done = p.feed(#"{"type":"CheckoutCompleteEvent","checkout":{"id":"ce-1","status":"completed","order":{"id":"o-ce1"}}}"#)
        #expect(done.outcome == .published(.complete))
        #expect(done["idempotency_key"] == "o-ce1")
        let failed = p.feed(#"{"checkout_id":"ce-2","payload":{"type":"CheckoutFailureEvent","error":{"code":"cart_expired","message":"x"}}}"#)
        #expect(failed["error.code"] == "cart_expired")
        #expect(p.feed(#"{"type":"CheckoutStartEvent","checkout":{"id":"ce-3"}}"#).outcome == .published(.start))
        // A relay's own `type` before the callback's name.
        #expect(p.feed(#"{"type":"lifecycle","callback":"onComplete","checkout":{"id":"ce-4","order":{"id":"o-ce4"}}}"#).outcome
            == .published(.complete))
        // Primer's onCompletion with its state one level down.
        let nested = p.feed(#"{"event":"onCompletion","checkout_id":"ce-5","data":{"state":"failure","error":{"errorId":"payment-failed"}}}"#)
        #expect(nested.outcome == .published(.fail))
        #expect(nested["source.sdk"] == "primer")
    }

    // MARK: Shapes found in the SDKs' sources (each beside the corpus lines that copy them)

    /// Checkout Kit React Native's protocol relay (`ProtocolRelay.forwardEnvelope`,
    /// Shopify/checkout-kit `checkout-kit-react-native/android/…/ProtocolRelay.kt`):
    /// `{"type":METHOD,"payload":CHECKOUT}` — bare, and in an app's ingest wrapper. A complete was
    /// dead-lettered `missing_checkout_id` (bare) or published without its snapshot (wrapped).
    @Test("the React Native protocol relay's envelopes: the payload is the checkout, or ec.error's response")
    func protocolRelay() {
        let p = EventProcessor()
        let checkout = #"{"id":"ck-r","status":"completed","currency":"USD","totals":[{"type":"total","amount":2500}],"order":{"id":"O-r"}}"#
        let bare = p.feed(#"{"type":"ec.complete","payload":\#(checkout)}"#)
        #expect(bare.outcome == .published(.complete), "\(bare.text)")
        #expect(bare["checkout_id"] == "ck-r" && bare["idempotency_key"] == "O-r" && bare["summary.total"] == 2500)
        #expect(bare["source.format"] == "ecp")
        let wrapped = p.feed(#"{"checkout_id":"ck-w","platform":"react_native","payload":{"type":"ec.complete","payload":\#(checkout)}}"#)
        #expect(wrapped.outcome == .published(.complete) && wrapped["checkout.id"] == "ck-r", "\(wrapped.text)")
        #expect(wrapped["checkout_id"] == "ck-w" && wrapped["summary.order_id"] == "O-r")
        let change = p.feed(#"{"checkout_id":"ck-u","payload":{"type":"ec.totals.change","payload":{"id":"ck-u","totals":[{"type":"total","amount":7}]}}}"#)
        #expect(change.outcome == .published(.update) && change["summary.total"] == 7, "\(change.text)")
        let error = p.feed(#"{"checkout_id":"ck-e","payload":{"type":"ec.error","payload":{"ucp":{"version":"2026-04-08","status":"error"},"messages":[{"type":"error","code":"cart_expired","content":"Expired","severity":"unrecoverable"}]}}}"#)
        #expect(error.outcome == .published(.fail) && error["error.code"] == "cart_expired", "\(error.text)")
        #expect(p.feed(#"{"checkout_id":"ck-x","payload":{"type":"ec.ready","payload":{}}}"#).outcome
                == .deadLettered(.notLifecycle))
    }

    /// Primer iOS's state printed whole (`String(describing:)` of a `.success(PaymentResult)`, whose
    /// fields are primer-sdk-ios `CheckoutComponents/…/PaymentResult.swift`'s): iOS reports success
    /// when the checkout completed whatever the payment's status, so a failed status is a failure —
    /// as the structured `paymentResult.status` already was. It was published as a complete.
    @Test("a printed Primer success whose payment failed is a payment failure, also under an onCompletion name")
    func printedPrimerSuccessWithAFailedPayment() {
        let p = EventProcessor()
        let failed = #"success(PrimerSDK.PaymentResult(paymentId: \"pay_30\", status: PrimerSDK.PaymentStatus.failed, token: nil, redirectUrl: nil, errorMessage: nil, amount: Optional(1999), currencyCode: Optional(\"EUR\"), paymentMethodType: Optional(\"PROMPTPAY\")))"#
        for raw in [#"{"checkout_id":"p-30","sdk":"primer","state":"\#(failed)"}"#,
                    #"{"checkout_id":"p-30","sdk":"primer","event":"onCompletion","state":"\#(failed)"}"#] {
            let out = p.feed(raw)
            #expect(out.outcome == .published(.fail), "\(out.text)")
            #expect(out["error.code"] == "payment_failed" && out["error.raw_code"] == "failed", "\(out.text)")
        }
        let succeeded = p.feed(#"{"checkout_id":"p-31","sdk":"primer","event":"onCompletion","state":"success(PrimerSDK.PaymentResult(paymentId: \"pay_31\", status: PrimerSDK.PaymentStatus.success))"}"#)
        #expect(succeeded.outcome == .published(.complete), "\(succeeded.text)")
    }

    /// Checkout Kit React Native's preload and render states (ShopifyCheckoutKitModule.kt
    /// `emitPreloadStateChange`; ios/ShopifyCheckoutKit+EventSerialization.swift
    /// `serialize(renderState:)`) spell `failed` and `error` but no buyer saw a checkout: they were
    /// published as terminal failures.
    @Test("preload and render states are no lifecycle: a failed preload or buttons that did not render are no failure")
    func preloadAndRenderStates() {
        let p = EventProcessor()
        for payload in [#"{"requestId":"r-1","type":"failed","reason":"httpError","statusCode":503}"#,
                        #"{"requestId":"r-1","type":"failed","reason":"navigationFailed"}"#,
                        #"{"requestId":"r-1","type":"loading"}"#, #"{"state":"error","reason":"Invalid configuration"}"#,
                        #"{"state":"rendered"}"#, #"{"type":"onRenderStateChange","nativeEvent":{"state":"error","reason":"x"}}"#] {
            let out = p.feed(#"{"checkout_id":"c-1","platform":"react_native","payload":\#(payload)}"#)
            #expect(out.outcome == .deadLettered(.notLifecycle), "\(payload): \(out.text)")
        }
        // Other `state` and `type` shapes keep their meaning: a Primer failure, a callback's error.
        #expect(p.feed(#"{"checkout_id":"c-2","sdk":"primer","payload":{"state":"failure","error":{"errorId":"x"}}}"#).outcome
                == .published(.fail))
        #expect(p.feed(#"{"checkout_id":"c-3","payload":{"state":"error","error":{"code":"cart_expired"}}}"#).outcome
                == .published(.fail))
    }

    @Test("a Primer React Native paymentOutcome: success is a complete with its order, error a failure with its order")
    func primerPaymentOutcome() {
        let p = EventProcessor()
        let success = #"{"status":"success","data":{"payment":{"id":"pay_24","orderId":"ord_24","status":"SUCCESS"}}}"#
        for raw in [#"{"checkout_id":"p-24","sdk":"primer","payload":\#(success)}"#,
                    #"{"checkout_id":"p-24","sdk":"primer","event":"paymentOutcome","payload":\#(success)}"#] {
            let out = p.feed(raw)
            #expect(out.outcome == .published(.complete) && out["summary.order_id"] == "ord_24", "\(out.text)")
        }
        let declined = p.feed(#"{"checkout_id":"p-25","sdk":"primer","payload":{"status":"success","data":{"payment":{"id":"pay_25","orderId":"ord_25","status":"FAILED"}}}}"#)
        #expect(declined.outcome == .published(.fail) && declined["error.code"] == "payment_failed", "\(declined.text)")
        let error = p.feed(#"{"checkout_id":"p-23","sdk":"primer","payload":{"status":"error","error":{"errorId":"payment-failed","diagnosticsId":"d"},"data":{"payment":{"id":"pay_23","orderId":"ord_23"}}}}"#)
        #expect(error.outcome == .published(.fail) && error["summary.order_id"] == "ord_23", "\(error.text)")
    }

    @Test("an event with no wrapper says its own platform, over what its name's spelling suggests")
    func flatEventPlatform() {
        let p = EventProcessor()
        let out = p.feed(#"{"checkout_id":"c-pl","platform":"android","sdk":"shopify","event":"checkoutDidFail","error":{"code":"cart_expired"}}"#)
        #expect(out.outcome == .published(.fail) && out["source.platform"] == "android", "\(out.text)")
        #expect(p.feed(#"{"checkout_id":"c-pl2","event":"checkoutDidFail","error":{"code":"cart_expired"}}"#)["source.platform"]
                == "ios")
    }

    /// The kits' own error property (CheckoutError.swift `httpStatusCode`, CheckoutException.kt),
    /// as an app that encodes the error object itself sends it.
    @Test("httpStatusCode is read as the error's HTTP status")
    func httpStatusCodeIsRead() {
        let p = EventProcessor()
        let out = p.feed(#"{"checkout_id":"c-h","type":"fail","payload":{"error":{"code":"http_error","httpStatusCode":503}}}"#)
        #expect(out.outcome == .published(.fail) && out["error.http_status"] == 503, "\(out.text)")
    }

    @Test("Primer's callbacks along a payment that are no outcome are not_lifecycle, not unknown")
    func primerNonOutcomeCallbacks() {
        let p = EventProcessor()
        for name in ["onTokenizationSuccess", "onCheckoutReceivedAdditionalInfo", "onResumeSuccess", "primerDidReceiveAdditionalInfo"] {
            #expect(p.feed(#"{"checkout_id":"p-n","sdk":"primer","event":"\#(name)","payload":{"x":1}}"#).outcome
                    == .deadLettered(.notLifecycle), "\(name)")
        }
    }

    /// Checkout Sheet Kit React Native 4 on Android sends its bodies under the bare names
    /// (`sendEventWithStringData("complete" | "start", …)` in checkout-sheet-kit-react-native's
    /// `CustomCheckoutEventProcessor.java`, a Jackson-serialised `CheckoutCompleteEvent`
    /// `{orderConfirmation, cart, method}` from checkout-sheet-kit-android's
    /// `lifecycleevents/CheckoutCompleteEvent.kt`). Under those names a complete lost its order id
    /// (and, with no wrapper, was dead-lettered `missing_checkout_id`).
    @Test("Sheet Kit 4 bodies under the bare complete and start names keep their order, cart and totals")
    func sheetKit4BodiesUnderBareNames() {
        let p = EventProcessor()
        let body = #"{"orderConfirmation":{"url":"https://shop.example/orders/1","order":{"id":"gid://shopify/Order/4001"},"number":"1001","isFirstOrder":true},"cart":{"id":"gid://shopify/Cart/c1","lines":[],"cost":{"subtotalAmount":{"amount":"25.00","currencyCode":"USD"},"totalAmount":{"amount":"27.50","currencyCode":"USD"}}}}"#
        let bare = p.feed(#"{"name":"complete","body":\#(jsonStringLiteral(body))}"#)
        #expect(bare.outcome == .published(.complete), "\(bare.text)")
        #expect(bare["summary.order_id"] == "gid://shopify/Order/4001" && bare["idempotency_key"] == "gid://shopify/Order/4001")
        #expect(bare["checkout_id"] == "gid://shopify/Cart/c1" && bare["summary.total"] == 2750, "\(bare.text)")
        let named = p.feed(#"{"checkout_id":"rn4-3","event":"complete","payload":\#(body)}"#)
        #expect(named.outcome == .published(.complete) && named["summary.order_id"] == "gid://shopify/Order/4001",
                "\(named.text)")
        let start = p.feed(#"{"checkout_id":"rn4-2","payload":{"name":"start","body":\#(jsonStringLiteral(#"{"cart":{"id":"gid://shopify/Cart/c2","cost":{"totalAmount":{"amount":"27.50","currencyCode":"USD"}}},"locale":"en-US"}"#))}}"#)
        #expect(start.outcome == .published(.start) && start["summary.total"] == 2750, "\(start.text)")
    }

    /// Checkout Sheet Kit Android passes a WebView load failure's own code (`WebResourceError`'s
    /// `ERROR_HOST_LOOKUP` -2, `ERROR_TIMEOUT` -8) as an `HttpException`'s status
    /// (checkout-sheet-kit-android `BaseWebView.kt` `handleError`); the React Native bridge
    /// forwards it as `CheckoutHTTPError` with `statusCode`. It reached no server: a network error.
    @Test("an Android WebView load failure's negative status is a network error, not an HTTP one")
    func webViewLoadFailureIsANetworkError() {
        let p = EventProcessor()
        for (status, message) in [(-2, "net::ERR_INTERNET_DISCONNECTED"), (-8, "net::ERR_TIMED_OUT")] {
            let out = p.feed(#"{"checkout_id":"x-\#(-status)","platform":"android","payload":{"event":"error","payload":{"__typename":"CheckoutHTTPError","message":"\#(message)","recoverable":false,"code":"http_error","statusCode":\#(status)}}}"#)
            #expect(out.outcome == .published(.fail) && out["error.code"] == "network_error", "\(out.text)")
            #expect(out["error.http_status"] == .null && out["error.raw_code"] == "http_error", "\(out.text)")
        }
        // A real HTTP status keeps its meaning.
        #expect(p.feed(#"{"checkout_id":"x-5","payload":{"event":"error","payload":{"__typename":"CheckoutHTTPError","code":"http_error","statusCode":503}}}"#)["error.code"]
                == "http_error")
    }

    /// Primer Android's `onTokenizeSuccess(PrimerPaymentMethodTokenData)` (sdk-android
    /// `PrimerPaymentMethodTokenData.kt`, `PaymentInstrumentData.kt`) is no lifecycle: dead-lettered
    /// with its raw bytes, whose payment token and instrument data are bearer credentials.
    @Test("a tokenized payment method's token and instrument data are redacted in its dead letter")
    func tokenizedPaymentMethodRedacted() {
        let p = EventProcessor()
        let out = p.feed(#"{"checkout_id":"x-45","sdk":"primer","payload":{"event":"onTokenizeSuccess","paymentMethodTokenData":{"token":"tok_3f9a1c","tokenType":"MULTI_USE","paymentInstrumentType":"KLARNA_CUSTOMER_TOKEN","paymentInstrumentData":{"klarnaCustomerToken":"kct_0a9b8c"},"isVaulted":true}}}"#)
        #expect(out.outcome == .deadLettered(.notLifecycle), "\(out.text)")
        guard case .string(let raw) = out["raw"] else {
            Issue.record("no raw: \(out.text)")
            return
        }
        #expect(!raw.contains("tok_3f9a1c") && !raw.contains("kct_0a9b8c"), "\(raw)")
        #expect(raw.contains(#""tokenType":"MULTI_USE""#), "\(raw)")
    }

    /// Checkout Sheet Kit iOS reports configuration and HTTP failures as
    /// `.checkoutUnavailable(message:code:recoverable:)`, its `code` a `CheckoutUnavailable`
    /// (`.clientError(code: CheckoutErrorCode)`, `.httpError(statusCode:)`) (checkout-sheet-kit-swift
    /// `Sources/ShopifyCheckoutSheetKit/CheckoutError.swift`). An app relays it printed
    /// (`String(describing:)`) or its `CheckoutUnavailable` encoded by `Codable`: the outer case alone
    /// said `sdk_error`; the inner code says which.
    @Test("checkoutUnavailable, printed or encoded: the inner code, the HTTP status and whether it is recoverable")
    func checkoutUnavailableInnerCode() {
        let p = EventProcessor()
        let printed = #"checkoutUnavailable(message: \"Storefront password required\", code: ShopifyCheckoutSheetKit.CheckoutUnavailable.clientError(code: ShopifyCheckoutSheetKit.CheckoutErrorCode.storefrontPasswordRequired), recoverable: false)"#
        let out = p.feed(#"{"checkout_id":"pr-1","event":"checkoutDidFail","error":"\#(printed)"}"#)
        #expect(out["error.code"] == "storefront_password_required" && out["error.terminal"] == true, "\(out.text)")
        let http = p.feed(#"{"checkout_id":"pr-2","event":"checkoutDidFail","error":"checkoutUnavailable(message: \"Not Found\", code: ShopifyCheckoutSheetKit.CheckoutUnavailable.httpError(statusCode: 404), recoverable: true)"}"#)
        #expect(http["error.code"] == "http_error" && http["error.http_status"] == 404, "\(http.text)")
        #expect(http["error.terminal"] == false, "\(http.text)")
        let encoded = p.feed(#"{"checkout_id":"x-4","event":"checkoutDidFail","error":{"checkoutUnavailable":{"message":"Storefront password required","code":{"clientError":{"code":"storefront_password_required"}},"recoverable":false}}}"#)
        #expect(encoded["error.code"] == "storefront_password_required", "\(encoded.text)")
        let encodedHTTP = p.feed(#"{"checkout_id":"x-6","event":"checkoutDidFail","error":{"checkoutUnavailable":{"message":"Not Found","code":{"httpError":{"statusCode":404}},"recoverable":false}}}"#)
        #expect(encodedHTTP["error.code"] == "http_error" && encodedHTTP["error.http_status"] == 404, "\(encodedHTTP.text)")
    }

    /// Primer iOS's `PrimerError.paymentFailed(…, paymentId:, orderId:, status:, …)` (primer-sdk-ios
    /// `PrimerError.swift`) encoded by `Codable`, and its `errorDescription`
    /// (`[payment-failed] … (diagnosticsId: …)`) relayed as an `NSError`'s `localizedDescription`.
    @Test("Primer's encoded paymentFailed names its order; its description alone names its id")
    func primerPaymentFailedDetails() {
        let p = EventProcessor()
        let encoded = p.feed(#"{"checkout_id":"x-65","sdk":"primer","callback":"primerDidFailWithError","error":{"paymentFailed":{"paymentMethodType":"PAYMENT_CARD","paymentId":"pay_1","orderId":"ord_1","status":"FAILED","diagnosticsId":"d-1"}}}"#)
        #expect(encoded["error.code"] == "payment_failed" && encoded["summary.order_id"] == "ord_1", "\(encoded.text)")
        let described = p.feed(#"{"checkout_id":"x-67","sdk":"primer","callback":"primerDidFailWithError","error":{"localizedDescription":"[payment-failed] The payment with id pay_1 was created or resumed but ended up in a FAILED status. (diagnosticsId: d-1)"}}"#)
        #expect(described["error.code"] == "payment_failed" && described["error.raw_code"] == "payment-failed",
                "\(described.text)")
        #expect(described["error.message"] != .null, "\(described.text)")
    }

    /// What the shapes above must not take: each decoded as it did before they were read.
    @Test("the new shapes take nothing that was another event: failures stay failures, snapshots and codes as before")
    func newShapesTakeNothingElse() {
        let p = EventProcessor()
        // A failure that carries a request id or a bare state beside its error, under a lifecycle name.
        let failed = p.feed(#"{"checkout_id":"b4","event":"checkoutDidFail","payload":{"type":"failed","requestId":"r1","error":{"code":"cartExpired"}}}"#)
        #expect(failed.outcome == .published(.fail) && failed["error.code"] == "cart_expired", "\(failed.text)")
        let state = p.feed(#"{"checkout_id":"b1","event":"checkoutDidFail","payload":{"state":"error","reason":"Network down"}}"#)
        #expect(state.outcome == .published(.fail), "\(state.text)")
        // -1 is no status, not a WebView code; a status in the message still counts.
        let minusOne = p.feed(#"{"checkout_id":"h1","event":"checkoutDidFail","error":{"code":"unknown","message":"HTTP 503 Error","statusCode":-1}}"#)
        #expect(minusOne["error.code"] == "http_error" && minusOne["error.http_status"] == 503, "\(minusOne.text)")
        // An `ec.` name over what is no checkout: a null payload, a bridge message, a JSON-RPC response.
        let nullPayload = p.feed(#"{"checkout_id":"a6","event":"ec.complete","payload":null}"#)
        #expect(nullPayload["checkout"] == .null, "\(nullPayload.text)")
        let bridge = p.feed(#"{"checkout_id":"a7","type":"ec.complete","payload":{"name":"completed","body":"{\"orderDetails\":{\"id\":\"o13\"}}"}}"#)
        #expect(bridge.outcome == .published(.complete) && bridge["summary.order_id"] == "o13", "\(bridge.text)")
        // A printed error's message is its own words: a `code: ` inside it names nothing.
        let quoted = p.feed(#"{"checkout_id":"j1","event":"checkoutDidFail","error":"cartExpired(message: \"The cart expired (code: invalid)\")"}"#)
        #expect(quoted["error.code"] == "cart_expired", "\(quoted.text)")
        let redirect = p.feed(#"{"checkout_id":"j2","event":"checkoutDidFail","error":"redirected(statusCode: 302)"}"#)
        #expect(redirect["error.http_status"] == .null, "\(redirect.text)")
        // A bracketed word that is not Primer's description names no code.
        let bracket = p.feed(#"{"checkout_id":"k1","event":"checkoutDidFail","error":{"message":"[Checkout] The checkout failed to load"}}"#)
        #expect(bracket["error.code"] == "unknown", "\(bracket.text)")
        // A text cut at a parenthesis that is no Primer state names nothing.
        #expect(p.feed(#"{"checkout_id":"d14","event":"log","type":"error(\"boom\")"}"#).outcome == .deadLettered(.unknownEvent))
        // A flat event with a cart among other fields is not a Sheet Kit 4 body.
        let flat = p.feed(#"{"event":"checkoutDidComplete","checkout_id":"g10","cart":{"id":"c"},"orderId":"o10","customer":{"id":"u"}}"#)
        #expect(flat.outcome == .published(.complete) && flat["checkout"] == .null, "\(flat.text)")
        // A flat event's `platform` that names no platform is not taken.
        let applePay = p.feed(#"{"checkout_id":"e1","event":"checkoutDidComplete","platform":"APPLE_PAY"}"#)
        #expect(applePay["source.platform"] == "ios", "\(applePay.text)")
        // `{status: success, data: {payment}}` is Primer's only when the wrapper says so.
        #expect(p.feed(#"{"checkout_id":"c1","payload":{"status":"success","data":{"payment":{"id":"x"}}}}"#).outcome
                != .published(.complete))
    }

    /// Primer's client session (`PrimerClientSession`, primer-io/primer-sdk-ios), relayed bare by its
    /// React Native bridge's `onClientSessionUpdate` (`RNTPrimer.swift`), has an `orderDetails`
    /// (`{countryCode, shipping}`) and an `orderId` before any payment: it was published as a
    /// completed order. The kit's `OrderDetails` always has its `id`.
    @Test("a Primer client session's orderDetails is no Checkout Sheet Kit completion, with or without the wrapper's sdk")
    func primerClientSessionIsNoCompletion() {
        let p = EventProcessor()
        let session = #"{"customerId":"cust_1","orderId":"ord_cs_1","currencyCode":"EUR","totalAmount":1000,"orderDetails":{"countryCode":"PT","shipping":null}}"#
        for wrapper in [#""checkout_id":"s1""#, #""checkout_id":"s2","sdk":"primer","platform":"ios""#] {
            let out = p.feed("{\(wrapper),\"payload\":\(session)}")
            #expect(out.outcome == .deadLettered(.unknownShape), "\(out.text)")
        }
        // The kit's own body still completes, by its id or its cart.
        let kit = p.feed(#"{"checkout_id":"s3","payload":{"orderDetails":{"id":"o-77","cart":{"lines":[]}}}}"#)
        #expect(kit.outcome == .published(.complete) && kit["summary.order_id"] == "o-77", "\(kit.text)")
        let cartOnly = p.feed(#"{"checkout_id":"s4","payload":{"orderDetails":{"cart":{"lines":[]}}}}"#)
        #expect(cartOnly.outcome == .published(.complete), "\(cartOnly.text)")
        // Under a wrapper that says Primer too (a relay that labels everything it forwards).
        let labelled = p.feed(#"{"checkout_id":"s5","sdk":"primer","payload":{"orderDetails":{"id":"o-78","cart":{}}}}"#)
        #expect(labelled.outcome == .published(.complete) && labelled["summary.order_id"] == "o-78", "\(labelled.text)")
    }

    /// The drop-in SDKs hand `onTokenizeSuccess` the `PrimerPaymentMethodTokenData` itself, its
    /// `token` at the top (`RNTPrimer.swift`, `PrimerRNEventListener.kt` in
    /// primer-io/primer-sdk-react-native), and `onResumeSuccess` a `resumeToken`: kept verbatim
    /// in the dead letter before, where only a `token` under `paymentMethodTokenData` was redacted.
    @Test("every token in a dead letter is redacted: a drop-in tokenization's at the top, a resume token")
    func topLevelTokensRedacted() {
        let p = EventProcessor()
        let lines = [
            #"{"checkout_id":"t1","sdk":"primer","payload":{"event":"onTokenizeSuccess","token":"tok_9d8s7f","analyticsId":"an_55","tokenType":"SINGLE_USE"}}"#,
            #"{"checkout_id":"t2","sdk":"primer","event":"onResumeSuccess","payload":{"resumeToken":"rt_7f3a9c2e"}}"#,
            #"{"checkout_id":"t3","sdk":"primer","event":"onBeforePaymentCreate","payload":{"clientToken":"ct_55aa"}}"#,
        ]
        for line in lines {
            let out = p.feed(line)
            #expect(out.outcome == .deadLettered(.notLifecycle), "\(out.text)")
            guard case .string(let raw) = out["raw"] else {
                Issue.record("no raw: \(out.text)")
                continue
            }
            #expect(!raw.contains("tok_9d8s7f") && !raw.contains("rt_7f3a9c2e") && !raw.contains("ct_55aa"), "\(raw)")
            #expect(raw.contains("[redacted]"), "\(raw)")
        }
    }

    /// A JVM `Throwable` forwarded as its `toString()` (`<qualified class>: <message>`): its message is
    /// read as any other. Its class says too little: Checkout Sheet Kit Android's
    /// `CheckoutExpiredException` is also a completed or invalid cart (`CheckoutErrorDecoder.kt`), its
    /// `HttpException` also a WebView load that reached no server (`BaseWebView.kt`).
    @Test("a printed Throwable: its message after the class; the class alone names nothing")
    func printedThrowable() {
        let p = EventProcessor()
        let expired = p.feed(#"{"checkout_id":"u1","event":"onCheckoutFailed","error":"com.shopify.checkoutsheetkit.CheckoutExpiredException: Checkout is no longer available with the provided token. Please generate a new checkout URL"}"#)
        #expect(expired["error.code"] == "cart_expired" && expired["error.raw_code"] == .null
                    && expired["error.terminal"] == true, "\(expired.text)")
        let http = p.feed(#"{"checkout_id":"u2","event":"onCheckoutFailed","error":"com.shopify.checkoutsheetkit.HttpException: HTTP 404 Error"}"#)
        #expect(http["error.code"] == "http_error" && http["error.http_status"] == 404, "\(http.text)")
        for message in ["com.shopify.checkoutsheetkit.CheckoutExpiredException: Cart is completed",
                        "com.shopify.checkoutsheetkit.HttpException: net::ERR_INTERNET_DISCONNECTED",
                        "com.stripe.android.core.exception.AuthenticationException: Invalid API Key provided"] {
            let out = p.feed(#"{"checkout_id":"u4","event":"onCheckoutFailed","error":"\#(message)"}"#)
            #expect(out["error.code"] == "unknown" && out["error.raw_code"] == .null, "\(out.text)")
        }
        let sentence = p.feed(#"{"checkout_id":"u3","event":"onCheckoutFailed","error":"Error: Checkout is no longer available"}"#)
        #expect(sentence["error.code"] == "unknown", "\(sentence.text)")
        #expect(RawEventDecoder.printedThrowable("com.example.BoomException")?.name == "BoomException")
        #expect(RawEventDecoder.printedThrowable("com.example.BoomException")?.message == nil)
        #expect(RawEventDecoder.printedThrowable("see docs.example.com: it failed") == nil)
        #expect(RawEventDecoder.printedThrowable("a.b.lowercaseException: x") == nil)
    }

    /// Checkout Sheet Kit Android's `CheckoutCompletedEvent` printed by Kotlin (`CompletedEvent.kt`, a
    /// data class; the kit's sample app logs the event so): the order's id is `OrderDetails`' own.
    @Test("a Kotlin-printed completed event names its order; ids nested deeper are not the order's")
    func printedKotlinCompletedEvent() {
        let text = "CheckoutCompletedEvent(orderDetails=OrderDetails(billingAddress=null, cart=CartInfo(lines=[CartLine(id=line-1, "
            + "merchandiseId=gid://shopify/ProductVariant/1, quantity=1)], price=Price(total=MoneyV2(amount=1.0, currencyCode=CAD))), "
            + "deliveries=[], email=null, id=gid://shopify/OrderIdentity/8, paymentMethods=[], phone=null))"
        #expect(RawEventDecoder.printedKotlinOrderID(text) == "gid://shopify/OrderIdentity/8")
        let withoutID = "CheckoutCompletedEvent(orderDetails=OrderDetails(cart=CartInfo(lines=[CartLine(id=line-1)]), "
            + "deliveries=[DeliveryInfo(details=DeliveryDetails(location=null), id=d-1)], phone=null))"
        #expect(RawEventDecoder.printedKotlinOrderID(withoutID) == nil)
        #expect(RawEventDecoder.printedKotlinOrderID("OrderDetails(id=x)") == nil)
        #expect(RawEventDecoder.printedKotlinOrderID("CheckoutCompletedEvent(orderDetails=OrderDetails(id=null))") == nil)
        // Kotlin quotes no string: a buyer's address or a product's title that prints an id of its
        // own names none (it would have made the order another's, and fulfilment skip it).
        let injected = "CheckoutCompletedEvent(orderDetails=OrderDetails(billingAddress=Address(address1=2 Elm St), "
            + "id=gid://shopify/OrderIdentity/1001, x=(, city=Ottawa), cart=CartInfo(lines=[]), deliveries=[], "
            + "email=b@example.com, id=gid://shopify/OrderIdentity/1002, paymentMethods=[], phone=null))"
        #expect(RawEventDecoder.printedKotlinOrderID(injected) == nil)
        let title = "CheckoutCompletedEvent(orderDetails=OrderDetails(billingAddress=null, cart=CartInfo(lines=[CartLine("
            + "title=Tee)]), id=gid://shopify/OrderIdentity/7, x=([)]), deliveries=[], id=gid://shopify/OrderIdentity/8))"
        #expect(RawEventDecoder.printedKotlinOrderID(title) == nil)
        for id in ["", "abc", "12 3", "NaN"] {
            let odd = "CheckoutCompletedEvent(orderDetails=OrderDetails(email=null, id=gid://shopify/OrderIdentity/\(id)))"
            #expect(RawEventDecoder.printedKotlinOrderID(odd) == nil, "\(id)")
        }
        let long = "CheckoutCompletedEvent(orderDetails=OrderDetails(email=\(String(repeating: "(", count: 70_000))"
        #expect(RawEventDecoder.printedKotlinOrderID(long) == nil)
        let p = EventProcessor()
        let out = p.feed(#"{"checkout_id":"v1","platform":"android","event":"onCheckoutCompleted","data":"\#(text)"}"#)
        #expect(out.outcome == .published(.complete) && out["summary.order_id"] == "gid://shopify/OrderIdentity/8"
                    && out["idempotency_key"] == "gid://shopify/OrderIdentity/8", "\(out.text)")
    }

    @Test("an unwrapped event's own sdk is honoured as its platform is: a Primer callback sharing a Shopify name reads its order")
    func unwrappedEventSaysItsSDK() {
        let p = EventProcessor()
        let done = p.feed(#"{"checkout_id":"us1","sdk":"primer","platform":"android","event":"onCheckoutCompleted","data":{"payment":{"id":"pay_1","orderId":"ord_1"}}}"#)
        #expect(done.outcome == .published(.complete) && done["summary.order_id"] == "ord_1"
                    && done["source.sdk"] == "primer" && done["source.format"] == "primer", "\(done.text)")
        // Without `sdk`, the same name is the Shopify kits' (as before).
        let shopify = p.feed(#"{"checkout_id":"us2","platform":"android","event":"onCheckoutCompleted","data":{"payment":{"id":"pay_2","orderId":"ord_2"}}}"#)
        #expect(shopify.outcome == .published(.complete) && shopify["source.sdk"] == "shopify", "\(shopify.text)")
    }

    @Test("Primer React Native's PaymentOutcome of a failed payment spread among the wrapper's fields is a failure, never a completion")
    func paymentOutcomeSpreadInTheWrapper() {
        let p = EventProcessor()
        let failed = p.feed(#"{"checkout_id":"po1","sdk":"primer","platform":"react_native","status":"error","error":{"errorId":"payment-failed","errorCode":"payment-failed","description":"Payment pay_3 failed"},"data":{"payment":{"id":"pay_3","orderId":"ord_3"}}}"#)
        #expect(failed.topic == "checkout.fail.payment_failed" && failed["summary.order_id"] == "ord_3"
                    && failed["error.terminal"] == false, "\(failed.text)")
        // A success outcome so spread, and a wrapper holding its event in `data`, are as before.
        let done = p.feed(#"{"checkout_id":"po2","sdk":"primer","status":"success","data":{"payment":{"id":"pay_4","orderId":"ord_4"}}}"#)
        #expect(done.outcome == .published(.complete) && done["summary.order_id"] == "ord_4", "\(done.text)")
        let held = p.feed(#"{"checkout_id":"po3","data":{"event":"onCheckoutCompleted","orderDetails":{"id":"O-9","cart":{}}}}"#)
        #expect(held.outcome == .published(.complete), "\(held.text)")
        // Named paymentOutcome (Primer's own name), its success is read without a wrapper's sdk.
        let named = p.feed(#"{"checkout_id":"po4","event":"paymentOutcome","data":{"status":"success","data":{"payment":{"id":"pay_6","orderId":"ord_6"}}}}"#)
        #expect(named.outcome == .published(.complete) && named["summary.order_id"] == "ord_6"
                    && named["source.sdk"] == "primer", "\(named.text)")
    }

    @Test("a React Native kit error instance with no checkout id is missing one, not an unknown event")
    func kitErrorInstanceWithoutCheckout() {
        let p = EventProcessor()
        let bare = p.feed(#"{"code":"cart_expired","message":"Checkout is no longer available","recoverable":false,"name":"CheckoutExpiredError"}"#)
        #expect(bare.topic == "bus.deadletter" && bare["reason"] == "missing_checkout_id", "\(bare.text)")
        // A JavaScript error of another class is no kit error.
        let other = p.feed(#"{"checkout_id":"ke1","payload":{"message":"x is undefined","name":"TypeError"}}"#)
        #expect(other.topic == "bus.deadletter", "\(other.text)")
    }

    @Test("a dead letter's printed Kotlin or Swift value has its buyer fields redacted; a printed value with none is kept as sent")
    func deadLetterPrintedValuesRedacted() throws {
        let p = EventProcessor()
        // Checkout Sheet Kit Android's CheckoutCompletedEvent as Kotlin prints it, no checkout id to file it under.
        let kotlin = "CheckoutCompletedEvent(orderDetails=OrderDetails(billingAddress=Address(address1=100 Street Avenue, "
            + "address2=null, city=Swansea, countryCode=GB, firstName=Andrew, lastName=Person, name=null, phone=+447915123456, "
            + "postalCode=SA1 1AB, referenceId=null, zoneCode=WLS), cart=CartInfo(lines=[], price=Price(discounts=[], "
            + "shipping=null, subtotal=null, taxes=null, total=null), token=ctok), deliveries=[DeliveryInfo(details="
            + "DeliveryDetails(location=Address(address1=9 Elm), name=Home), method=SHIPPING)], email=a.user@shopify.com, "
            + "id=123, paymentMethods=[PaymentMethod(details=CardDetails(last4=4242), type=CREDIT_CARD)], phone=+447915123456))"
        let out = p.feed(#"{"event":"onCheckoutCompleted","data":"\#(kotlin)"}"#)
        #expect(out.topic == "bus.deadletter" && out["reason"] == "missing_checkout_id", "\(out.text)")
        let raw = out["raw"]?.stringValue ?? ""
        for secret in ["a.user@shopify.com", "+447915123456", "100 Street Avenue", "SA1 1AB", "Andrew", "9 Elm", "4242", "ctok"] {
            #expect(!raw.contains(secret), "\(secret) in \(raw)")
        }
        #expect(raw.contains("email=[redacted]") && raw.contains("id=123") && raw.contains("method=SHIPPING")
                    && raw.contains("type=CREDIT_CARD"), "\(raw)")
        #expect(out["raw_redacted"] == true)
        // As Swift prints it: labels with `: `, strings quoted (a comma inside one does not end the value).
        let swift = #"CheckoutCompletedEvent(orderDetails: Kit.OrderDetails(billingAddress: Optional(Kit.Address(address1: Optional(\"1 Main, Apt 2\"))), email: Optional(\"jane@example.com\"), id: \"gid://shopify/OrderIdentity/9\"))"#
        let printed = p.feed(#"{"event":"onCheckoutCompleted","data":"\#(swift)"}"#)
        let swiftRaw = printed["raw"]?.stringValue ?? ""
        #expect(printed.topic == "bus.deadletter" && !swiftRaw.contains("jane@example.com") && !swiftRaw.contains("1 Main")
                    && !swiftRaw.contains("Apt 2") && swiftRaw.contains("OrderIdentity/9"), "\(printed.text)")
        // Kotlin's lists and maps, Swift's dictionaries (quoted keys, AnyHashable ones), and a Kotlin
        // value with a quote in it (Kotlin quotes no string): none leaves the address behind.
        for data in [#"[OrderDetails(email=jane@example.com)]"#, #"{orderDetails=OrderDetails(email=jane@example.com)}"#,
                     #"[\"email\": \"jane@example.com\"]"#, #"Optional([\"email\": \"jane@example.com\"])"#,
                     #"Event(userInfo: [AnyHashable(\"email\"): \"jane@example.com\"])"#,
                     #"Event(note=12\" pizza, email=jane@example.com)"#] {
            let letter = p.feed(#"{"event":"onCheckoutCompleted","data":"\#(data)"}"#)
            let text = letter["raw"]?.stringValue ?? ""
            #expect(letter.topic == "bus.deadletter" && !text.contains("jane@example.com") && text.contains("[redacted]"),
                    "\(data): \(letter.text)")
        }
        // Printed text that names no buyer field is kept byte for byte.
        let plain = #"{"event":"somethingElse","data":"Failure(reason=timeout (after 30 s), retry=true)"}"#
        let kept = p.feed(plain)
        #expect(kept.topic == "bus.deadletter" && kept["raw"]?.stringValue == plain, "\(kept.text)")
    }
}
