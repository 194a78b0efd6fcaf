import Foundation
import Testing

import CheckoutBusCore
import CheckoutBusProtocol

/// Checkout Kit web's Universal Checkout: one session spans a checkout per shop, and its web content
/// posts its notifications as JSON-RPC batches (`Shopify/checkout-kit`,
/// `platforms/web/src/universal.protocol.ts` and `universal.types.ts` @798af20f; the payloads below are
/// `platforms/web/src/__fixtures__/provisional-universal-checkout-batches.json` @798af20f, members
/// taken whole).
@Suite("Universal Checkout: sessions, batches and entries")
struct UniversalCheckoutTests {
    static let session = "gid://shopify/UniversalCheckoutSession/123"

    /// The fixture's batch `name` (an array of JSON-RPC members), as compact JSON.
    static func batch(_ name: String) throws -> [Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Corpus/universal-checkout-batches.json").standardized
        let all = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        return try #require(all[name] as? [Any])
    }

    static func json(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }

    /// `payload` in the ingest wrapper, under checkout id `checkout` and event id `event`.
    static func wrapped(_ payload: Any, checkout: String = session, event: String) throws -> String {
        try json(["checkout_id": checkout, "event_id": event, "sdk": "shopify", "platform": "web", "payload": payload])
    }

    @Test("two shops' completes wrapped in their session's id are two checkouts and two orders")
    func sessionIDInTheWrapper() throws {
        let p = EventProcessor()
        let starts = try Self.batch("start")
        let completes = try Self.batch("complete")
        for (i, member) in starts.enumerated() {
            let out = p.feed(try Self.wrapped(member, event: "start-\(i)"))
            #expect(out.outcome == .published(.start))
            #expect(out["checkout_id"] == .string(["gid://shopify/Checkout/123", "gid://shopify/Checkout/456"][i]))
        }
        let first = p.feed(try Self.wrapped(completes[0], event: "complete-0"))
        let second = p.feed(try Self.wrapped(completes[1], event: "complete-1"))
        #expect(first.outcome == .published(.complete) && second.outcome == .published(.complete))
        #expect(first["checkout_id"] == "gid://shopify/Checkout/123")
        #expect(second["checkout_id"] == "gid://shopify/Checkout/456")
        #expect(first["repeat"] == false && second["repeat"] == false)
        #expect(first["idempotency_key"] == "gid://shopify/Order/123")
        #expect(second["idempotency_key"] == "gid://shopify/Order/456")
        #expect(second["summary.total"] == 8000)
        // Each checkout's own repeat is still a repeat, under its own key.
        let again = p.feed(try Self.wrapped(completes[1], event: "complete-1-again"))
        #expect(again["repeat"] == true && again["idempotency_key"] == "gid://shopify/Order/456")
        // A resource error names no checkout of its own: the wrapper's id stands.
        let error = p.feed(try Self.wrapped(try Self.batch("error")[0], event: "error-0"))
        #expect(error.outcome == .published(.fail))
        #expect(error["checkout_id"] == .string(Self.session))
        #expect(error["error.code"] == "unknown" && error["error.raw_code"] == "universal_checkout_unavailable")
    }

    @Test("a wrapper's checkout id that is not the payload's session still wins, also right after a session's")
    func otherWrapperIDsWin() throws {
        let p = EventProcessor()
        let session = p.feed(try Self.wrapped(try Self.batch("complete")[0], event: "c-0"))
        #expect(session["checkout_id"] == "gid://shopify/Checkout/123")
        let out = p.feed(try Self.wrapped(try Self.batch("complete")[1], checkout: "app-checkout-9", event: "c"))
        #expect(out["checkout_id"] == "app-checkout-9")
        #expect(out["idempotency_key"] == "gid://shopify/Order/456")
        let ordinary = p.feed(#"{"checkout_id":"app-7","payload":{"jsonrpc":"2.0","method":"ec.start","#
            + #""params":{"checkout":{"id":"gid://shopify/Checkout/7"}}}}"#)
        #expect(ordinary["checkout_id"] == "app-7")
    }

    @Test("a batch of one member is that event; of several, a dead letter `batch`, never a part of it")
    func batches() throws {
        let p = EventProcessor()
        let update = try Self.batch("update")
        #expect(update.count == 1)
        let one = p.feed(try Self.wrapped(update, event: "u"))
        #expect(one.outcome == .published(.update))
        #expect(one["checkout_id"] == "gid://shopify/Checkout/123" && one["summary.total"] == 24000)
        // The same batch as JSON in a string, and unwrapped at the top level.
        let asString = try Self.wrapped(try Self.json(update), checkout: "ck-s", event: "u-s")
        #expect(p.feed(asString).outcome == .published(.update))
        #expect(p.feed(try Self.json(try Self.batch("start"))).outcome == .deadLettered(.batch))
        for name in ["start", "complete", "error"] {
            let batch = try Self.batch(name)
            #expect(batch.count == 2)
            for wrapped in [try Self.wrapped(batch, event: name), try Self.wrapped(try Self.json(batch), event: name)] {
                #expect(p.feed(wrapped).outcome == .deadLettered(.batch), "\(name)")
            }
        }
        #expect(p.feed(try Self.wrapped([Any](), event: "empty")).outcome == .deadLettered(.wrongType))
        #expect(p.feed(try Self.wrapped(["ec.start"], event: "strings")).outcome == .deadLettered(.wrongType))
        // Nothing of a dead-lettered batch was published.
        #expect(p.counters.publishedByKind[Int(LifecycleKind.complete.rawValue)] == 0)
    }

    /// `<shopify-universal-checkout>`'s DOM events: `detail` lists `{context, checkout}` or
    /// `{context, scope, error}` entries (`UniversalCheckoutResourceEventDetail`,
    /// `UniversalCheckoutErrorEventDetail`; codes `UniversalCheckoutErrorCode`).
    @Test("a web component event whose detail lists one entry is that entry's event; several, a batch")
    func detailEntries() throws {
        let p = EventProcessor()
        let member = try #require(try Self.batch("complete")[0] as? [String: Any])
        let params = try #require(member["params"] as? [String: Any])
        let context: [String: Any] = ["sessionId": Self.session, "revision": 3, "shopId": "gid://shopify/Shop/123"]
        let entry: [String: Any] = ["context": context, "checkout": try #require(params["checkout"])]
        let complete = p.feed(try Self.wrapped(["type": "complete", "detail": [entry]], event: "d-1"))
        #expect(complete.outcome == .published(.complete))
        #expect(complete["checkout_id"] == "gid://shopify/Checkout/123")
        #expect(complete["idempotency_key"] == "gid://shopify/Order/123" && complete["summary.total"] == 24000)
        let two = p.feed(try Self.wrapped(["type": "complete", "detail": [entry, entry]], event: "d-2"))
        #expect(two.outcome == .deadLettered(.batch))
        let errorEntry: [String: Any] = ["context": context, "scope": "resource",
                                         "error": ["code": "cart_expired", "message": "Cart expired"]]
        let error = p.feed(try Self.wrapped(["type": "error", "detail": [errorEntry]], event: "d-3"))
        #expect(error.outcome == .published(.fail))
        #expect(error["error.code"] == "cart_expired" && error["error.message"] == "Cart expired")
        // A `detail` list that is not of entries is left alone: read as before, also beside `data`.
        let plain = p.feed(#"{"checkout_id":"ck-d","event":"checkoutDidComplete","detail":["x"],"#
            + #""checkout":{"id":"ck-d"}}"#)
        #expect(plain.outcome == .published(.complete))
        let issues = p.feed(#"{"checkout_id":"ck-e","event":"checkoutDidFail","detail":[{"field":"email"},"#
            + #"{"field":"zip"}],"error":{"code":"invalid_cart","message":"bad"}}"#)
        #expect(issues.topic == "checkout.fail.invalid_cart")
        let beside = p.feed(#"{"checkout_id":"ck-f","event":"checkoutDidComplete","data":{"checkout":{"id":"ck-f"}},"#
            + #""detail":[{"checkout":{"id":"x"}},{"checkout":{"id":"y"}}]}"#)
        #expect(beside.outcome == .published(.complete) && beside["checkout_id"] == "ck-f")
    }

    @Test("error causes the SDKs state in other words: an unsupported browser, checkout.liquid, Primer's bracketed id")
    func errorCauses() {
        let p = EventProcessor()
        // Shopify/checkout-kit, platforms/web/src/components/shopify-checkout/shopify-checkout.ts @32e96f1e.
        let browser = p.feed(#"{"checkout_id":"w-1","sdk":"shopify","payload":{"type":"error","detail":{"error":"#
            + #"{"code":"unsupported_browser","message":"This browser does not support: native_dialog."}}}}"#)
        #expect(browser.topic == "checkout.fail.web_view_not_supported")
        #expect(browser["error.raw_code"] == "unsupported_browser")
        // checkout-sheet-kit-android CheckoutEventProcessor.kt 1.x–2.x, forwarded by React Native as `message` alone.
        let liquid = p.feed(#"{"checkout_id":"r-1","sdk":"shopify","platform":"android","event":"error","payload":"#
            + #"{"message":"The checkout URL provided has resulted in an error. The store is still using "#
            + #"checkout.liquid, whereas the checkout SDK only supports checkout with extensibility."}}"#)
        #expect(liquid.topic == "checkout.fail.configuration_error" && liquid["error.raw_code"] == .null)
        // primer-sdk-react-native 2.16.x ios/DataModels/PrimerErrorRN.swift: `errorId` is the NSError
        // domain, the id is in the description (primer-sdk-ios PrimerError.errorDescription's format).
        func primer(_ description: String) -> Output {
            p.feed(#"{"checkout_id":"q-1","sdk":"primer","platform":"ios","event":"onError","payload":{"error":"#
                + #"{"errorId":"PrimerSDK.PrimerError","description":"\#(description)"},"checkoutData":null}}"#)
        }
        let cancelled = primer("[payment-cancelled] Payment method APPLE_PAY cancelled (diagnosticsId: 1234)")
        #expect(cancelled.topic == "checkout.fail.payment_cancelled")
        #expect(cancelled["error.raw_code"] == "payment-cancelled")
        let unknown = primer("[no-such-id] Something (diagnosticsId: 1234)")
        #expect(unknown.topic == "checkout.fail.unknown" && unknown["error.raw_code"] == "PrimerSDK.PrimerError")
        #expect(primer("[] nothing").topic == "checkout.fail.unknown")
    }
}
