import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

/// One raw event of DESIGN §3, in two forms: standing alone with its own checkout id (in the
/// snapshot or an event field) and bare, for the ingest wrapper to supply the id.
struct RawCase: Sendable, CustomTestStringConvertible {
    var label: String
    /// The event with its own checkout id; `nil` when the shape has no place for one.
    var standalone: String?
    /// The checkout id the standalone form must produce.
    var standaloneID: String? = nil
    /// The event with no checkout id.
    var bare: String
    /// The checkout id the bare form still yields on its own (`order:<order id>` when an order id
    /// is known), or `nil` when it must be dead-lettered as missing_checkout_id.
    var bareID: String? = nil
    var kind: LifecycleKind
    var format: String
    var sdk: String
    /// The platform the event name implies (`nil`: none, published as null).
    var platform: String?
    var error: ExpectedError? = nil

    struct ExpectedError: Sendable {
        var code: String
        var rawCode: String?
        var httpStatus: Int64?
        var terminal: Bool
        var message: String?
    }

    var testDescription: String { label }

    var kindName: String { "\(kind)" }
}

enum RawCases {
    static func snapshot(withID: Bool, orderID: String? = nil) -> String {
        Fixture.snapshot(id: withID ? "ck-1" : nil, orderID: orderID)
    }

    // MARK: Embedded Checkout Protocol

    static let ecpChangeMethods = [
        "ec.line_items.change", "ec.messages.change", "ec.totals.change",
        "ec.fulfillment.change", "ec.buyer.change", "ec.payment.change",
    ]

    static let ecpErrorParams = #"""
        "messages":[
          {"type":"warning","code":"low_stock","content":"Only 2 left"},
          {"type":"error","code":"invalid_phone","severity":"recoverable","content":"Phone is invalid"},
          {"type":"error","code":"cart_expired","severity":"unrecoverable","content":"Your cart expired"},
          {"type":"error","code":"network_error","severity":"unrecoverable","content":"Later one"}]
        """#

    static let ecp: [RawCase] = {
        var cases: [RawCase] = [
            RawCase(label: "ec.start",
                    standalone: Fixture.ecp("ec.start", checkout: snapshot(withID: true)), standaloneID: "ck-1",
                    bare: Fixture.ecp("ec.start", checkout: snapshot(withID: false)),
                    kind: .start, format: "ecp", sdk: "shopify", platform: nil),
        ]
        for m in ecpChangeMethods {
            cases.append(RawCase(label: m,
                                 standalone: Fixture.ecp(m, checkout: snapshot(withID: true)), standaloneID: "ck-1",
                                 bare: Fixture.ecp(m, checkout: snapshot(withID: false)),
                                 kind: .update, format: "ecp", sdk: "shopify", platform: nil))
        }
        cases.append(RawCase(label: "ec.complete",
                             standalone: Fixture.ecp("ec.complete", checkout: snapshot(withID: true, orderID: "gid://shopify/Order/1001")),
                             standaloneID: "ck-1",
                             bare: Fixture.ecp("ec.complete", checkout: snapshot(withID: false, orderID: "gid://shopify/Order/1001")),
                             bareID: "order:gid://shopify/Order/1001",
                             kind: .complete, format: "ecp", sdk: "shopify", platform: nil))
        cases.append(RawCase(label: "ec.error",
                             standalone: #"{"jsonrpc":"2.0","method":"ec.error","params":{"checkout_id":"ck-1","# + ecpErrorParams + "}}",
                             standaloneID: "ck-1",
                             bare: #"{"jsonrpc":"2.0","method":"ec.error","params":{"# + ecpErrorParams + "}}",
                             kind: .fail, format: "ecp", sdk: "shopify", platform: nil,
                             error: .init(code: "cart_expired", rawCode: "cart_expired", httpStatus: nil, terminal: true,
                                          message: "Your cart expired")))
        return cases
    }()

    // MARK: Checkout Sheet Kit bridge

    static let orderDetailsBody =
        #"{"orderDetails":{"id":"gid://shopify/OrderIdentity/2002","cart":{"lines":[{"title":"Mug","quantity":3,"price":{"amount":12.5,"currencyCode":"CAD"}}],"price":{"total":{"amount":"41.25","currencyCode":"CAD"},"subtotal":{"amount":"37.50","currencyCode":"CAD"}}}}}"#

    static let bridge: [RawCase] = [
        RawCase(label: "bridge completed",
                standalone: #"{"name":"completed","body":"# + jsonStringLiteral(orderDetailsBody) + "}",
                standaloneID: "order:gid://shopify/OrderIdentity/2002",
                bare: #"{"name":"completed","body":"# + jsonStringLiteral(orderDetailsBody) + "}",
                bareID: "order:gid://shopify/OrderIdentity/2002",
                kind: .complete, format: "sheet_bridge", sdk: "shopify", platform: nil),
        RawCase(label: "bridge error (group, code, reason)",
                standalone: nil,
                bare: #"{"name":"error","body":"[{\"group\":\"expired\",\"code\":\"cart_expired\",\"reason\":\"Cart is expired\"}]"}"#,
                kind: .fail, format: "sheet_bridge", sdk: "shopify", platform: nil,
                error: .init(code: "cart_expired", rawCode: "cart_expired", httpStatus: nil, terminal: true,
                             message: "Cart is expired")),
        RawCase(label: "bridge error (group only)",
                standalone: nil,
                bare: #"{"name":"error","body":"[{\"group\":\"configuration\",\"reason\":\"Storefront not configured\"},{\"group\":\"expired\"}]"}"#,
                kind: .fail, format: "sheet_bridge", sdk: "shopify", platform: nil,
                error: .init(code: "configuration_error", rawCode: "configuration", httpStatus: nil, terminal: true,
                             message: "Storefront not configured")),
    ]

    // MARK: SDK callback events

    static func callback(_ name: String, kind: LifecycleKind, platform: String?, idKey: String = "checkout_id",
                         error: String = #"{"code":"cart_expired","message":"Cart expired"}"#,
                         expected: RawCase.ExpectedError? = nil) -> RawCase {
        let event = "\"event\":\(jsonStringLiteral(name))"
        let standalone: String
        let bare: String
        switch kind {
        case .start, .update, .complete:
            standalone = "{\(event),\"checkout\":\(snapshot(withID: true))}"
            bare = "{\(event),\"checkout\":\(snapshot(withID: false))}"
        case .fail:
            standalone = "{\(event),\"\(idKey)\":\"ck-1\",\"error\":\(error)}"
            bare = "{\(event),\"error\":\(error)}"
        case .dismiss:
            standalone = "{\(event),\"\(idKey)\":\"ck-1\"}"
            bare = "{\(event)}"
        }
        return RawCase(label: "callback \(name)", standalone: standalone, standaloneID: "ck-1", bare: bare,
                       kind: kind, format: "callback", sdk: "shopify", platform: platform,
                       error: kind == .fail
                           ? (expected ?? .init(code: "cart_expired", rawCode: "cart_expired", httpStatus: nil,
                                                terminal: true, message: "Cart expired"))
                           : nil)
    }

    static let callbacks: [RawCase] = [
        // iOS delegate
        callback("checkoutDidStart", kind: .start, platform: "ios"),
        callback("checkoutDidUpdate", kind: .update, platform: "ios"),
        callback("checkoutDidComplete", kind: .complete, platform: "ios"),
        callback("checkoutDidFail", kind: .fail, platform: "ios", idKey: "checkoutId",
                 error: #"{"code":"httpError","message":"Gone","statusCode":410}"#,
                 expected: .init(code: "cart_expired", rawCode: "httpError", httpStatus: 410, terminal: true, message: "Gone")),
        callback("checkoutDidDismiss", kind: .dismiss, platform: "ios", idKey: "checkoutId"),
        callback("checkoutDidCancel", kind: .dismiss, platform: "ios"),
        // Android listener
        callback("onCheckoutStarted", kind: .start, platform: "android"),
        callback("onCheckoutUpdated", kind: .update, platform: "android"),
        callback("onCheckoutCompleted", kind: .complete, platform: "android"),
        callback("onCheckoutFailed", kind: .fail, platform: "android",
                 error: #"{"code":"NETWORK_ERROR","message":"Unable to resolve host"}"#,
                 expected: .init(code: "network_error", rawCode: "NETWORK_ERROR", httpStatus: nil, terminal: true,
                                 message: "Unable to resolve host")),
        callback("onCheckoutDismissed", kind: .dismiss, platform: "android"),
        callback("onCheckoutCanceled", kind: .dismiss, platform: "android"),
        // React Native and SwiftUI
        callback("onStart", kind: .start, platform: nil),
        callback("onUpdate", kind: .update, platform: nil),
        callback("onComplete", kind: .complete, platform: nil),
        callback("onFail", kind: .fail, platform: nil,
                 error: #"{"code":"storefront_password_required","message":"Password required"}"#,
                 expected: .init(code: "storefront_password_required", rawCode: "storefront_password_required",
                                 httpStatus: nil, terminal: true, message: "Password required")),
        callback("onDismiss", kind: .dismiss, platform: nil),
        // React Native legacy
        callback("completed", kind: .complete, platform: nil),
        callback("error", kind: .fail, platform: nil,
                 error: #"{"code":"CartCompleted","message":"Already paid"}"#,
                 expected: .init(code: "cart_completed", rawCode: "CartCompleted", httpStatus: nil, terminal: true,
                                 message: "Already paid")),
        callback("close", kind: .dismiss, platform: nil),
        // Bare kinds
        callback("start", kind: .start, platform: nil),
        callback("update", kind: .update, platform: nil),
        callback("complete", kind: .complete, platform: nil),
        callback("fail", kind: .fail, platform: nil,
                 error: #"{"code":"invalid_cart","message":"Out of stock","http_status":422}"#,
                 expected: .init(code: "invalid_cart", rawCode: "invalid_cart", httpStatus: 422, terminal: true,
                                 message: "Out of stock")),
        callback("dismiss", kind: .dismiss, platform: nil),
    ]

    // MARK: Primer

    static let paymentResult =
        #""paymentResult":{"paymentId":"pay_2","status":"SUCCESS","amount":1999,"currencyCode":"EUR","paymentMethodType":"PAYMENT_CARD"}"#
    static let primerError =
        #""error":{"errorId":"payment-failed","description":"Card declined","diagnosticsId":"d-1"}"#
    static let checkoutData = #""checkoutData":{"payment":{"id":"pay_1","orderId":"ord-5","status":"DECLINED"}}"#
    static let declined = RawCase.ExpectedError(code: "payment_failed", rawCode: "payment-failed", httpStatus: nil,
                                                 terminal: false, message: "Card declined")

    static let primer: [RawCase] = [
        RawCase(label: "primer state success",
                standalone: #"{"state":"success","checkout_id":"pr-1","# + paymentResult + "}",
                standaloneID: "pr-1",
                bare: #"{"state":"success","# + paymentResult + "}",
                kind: .complete, format: "primer", sdk: "primer", platform: nil),
        RawCase(label: "primer state dismissed",
                standalone: #"{"state":"dismissed","checkout_id":"pr-1"}"#, standaloneID: "pr-1",
                bare: #"{"state":"dismissed"}"#,
                kind: .dismiss, format: "primer", sdk: "primer", platform: nil),
        RawCase(label: "primer state failure",
                standalone: #"{"state":"failure","checkout_id":"pr-1","# + primerError + "," + checkoutData + "}",
                standaloneID: "pr-1",
                bare: #"{"state":"failure","# + primerError + "," + checkoutData + "}",
                bareID: "order:ord-5",
                kind: .fail, format: "primer", sdk: "primer", platform: nil, error: declined),
        RawCase(label: "primerDidCompleteCheckoutWithData",
                standalone: #"{"callback":"primerDidCompleteCheckoutWithData","data":{"payment":{"id":"pay_3","orderId":"ord-7"}}}"#,
                standaloneID: "order:ord-7",
                bare: #"{"callback":"primerDidCompleteCheckoutWithData","data":{"payment":{"id":"pay_3","orderId":"ord-7"}}}"#,
                bareID: "order:ord-7",
                kind: .complete, format: "primer", sdk: "primer", platform: "ios"),
        RawCase(label: "primerDidFailWithError",
                standalone: #"{"callback":"primerDidFailWithError","checkoutId":"pr-1","error":{"errorId":"bad-network","description":"Offline","diagnosticsId":"d-2"}}"#,
                standaloneID: "pr-1",
                bare: #"{"callback":"primerDidFailWithError","error":{"errorId":"bad-network","description":"Offline","diagnosticsId":"d-2"}}"#,
                kind: .fail, format: "primer", sdk: "primer", platform: "ios",
                error: .init(code: "network_error", rawCode: "bad-network", httpStatus: nil, terminal: false, message: "Offline")),
        RawCase(label: "primerDidDismiss",
                standalone: #"{"callback":"primerDidDismiss","checkout_id":"pr-1"}"#, standaloneID: "pr-1",
                bare: #"{"callback":"primerDidDismiss"}"#,
                kind: .dismiss, format: "primer", sdk: "primer", platform: "ios"),
        RawCase(label: "Android onCheckoutCompleted with checkoutData",
                standalone: #"{"event":"onCheckoutCompleted","checkout_id":"pr-1","checkoutData":{"payment":{"id":"pay_4","orderId":"ord-8"}}}"#,
                standaloneID: "pr-1",
                bare: #"{"event":"onCheckoutCompleted","checkoutData":{"payment":{"id":"pay_4","orderId":"ord-8"}}}"#,
                bareID: "order:ord-8",
                kind: .complete, format: "primer", sdk: "primer", platform: "android"),
        RawCase(label: "Android onFailed",
                standalone: #"{"event":"onFailed","checkout_id":"pr-1","error":{"errorId":"invalid-client-token","description":"Token invalid","diagnosticsId":"d-3"}}"#,
                standaloneID: "pr-1",
                bare: #"{"event":"onFailed","error":{"errorId":"invalid-client-token","description":"Token invalid","diagnosticsId":"d-3"}}"#,
                kind: .fail, format: "primer", sdk: "primer", platform: "android",
                error: .init(code: "session_invalid", rawCode: "invalid-client-token", httpStatus: nil, terminal: false,
                             message: "Token invalid")),
        RawCase(label: "Android onDismissed",
                standalone: #"{"event":"onDismissed","checkout_id":"pr-1"}"#, standaloneID: "pr-1",
                bare: #"{"event":"onDismissed"}"#,
                kind: .dismiss, format: "primer", sdk: "primer", platform: "android"),
        RawCase(label: "RN onCheckoutComplete",
                standalone: #"{"event":"onCheckoutComplete","checkout_id":"pr-1","checkoutData":{"payment":{"id":"pay_5","orderId":"ord-9"}}}"#,
                standaloneID: "pr-1",
                bare: #"{"event":"onCheckoutComplete","checkoutData":{"payment":{"id":"pay_5","orderId":"ord-9"}}}"#,
                bareID: "order:ord-9",
                kind: .complete, format: "primer", sdk: "primer", platform: "react_native"),
        RawCase(label: "RN onError",
                standalone: #"{"event":"onError","checkout_id":"pr-1","# + primerError + "}",
                standaloneID: "pr-1",
                bare: #"{"event":"onError","# + primerError + "}",
                kind: .fail, format: "primer", sdk: "primer", platform: "react_native", error: declined),
        // RN onDismiss is spelled like Checkout Kit's onDismiss: only the wrapper's sdk tells them apart.
        RawCase(label: "RN onDismiss (wrapper sdk primer)",
                standalone: nil,
                bare: #"{"event":"onDismiss"}"#,
                kind: .dismiss, format: "primer", sdk: "primer", platform: nil),
    ]

    static let all: [RawCase] = ecp + bridge + callbacks + primer
    static let standalone: [RawCase] = all.filter { $0.standalone != nil }
}

@Suite("Decoding every raw family (DESIGN §3)")
struct DecodingTests {
    static func checkError(_ out: Output, _ c: RawCase, sourceLocation: SourceLocation = #_sourceLocation) {
        if let e = c.error {
            #expect(out.topic == "checkout.fail.\(e.code)", sourceLocation: sourceLocation)
            #expect(out["error.code"] == .string(e.code), sourceLocation: sourceLocation)
            #expect(out["error.raw_code"] == (e.rawCode.map(J.string) ?? .null), sourceLocation: sourceLocation)
            #expect(out["error.http_status"] == (e.httpStatus.map(J.int) ?? .null), sourceLocation: sourceLocation)
            #expect(out["error.terminal"] == .bool(e.terminal), sourceLocation: sourceLocation)
            if let m = e.message { #expect(out["error.message"] == .string(m), sourceLocation: sourceLocation) }
        } else {
            #expect(out.topic == "checkout.\(c.kindName)", sourceLocation: sourceLocation)
            #expect(out["error"] == .null, sourceLocation: sourceLocation)
        }
    }

    @Test("standalone: kind, checkout id from the snapshot or event, source", arguments: RawCases.standalone)
    func standalone(_ c: RawCase) throws {
        let p = EventProcessor()
        let out = p.feed(try #require(c.standalone))
        #expect(out.outcome == .published(c.kind))
        #expect(out["v"] == 1)
        #expect(out["kind"] == .string(c.kindName))
        #expect(out["checkout_id"] == .string(try #require(c.standaloneID)))
        #expect(out["source.sdk"] == .string(c.sdk))
        #expect(out["source.format"] == .string(c.format))
        #expect(out["source.platform"] == (c.platform.map(J.string) ?? .null))
        #expect(out["event_id"] == .null)
        #expect(out["occurred_at"] == .null)
        #expect(out["received_at"] == "2025-12-02T11:39:01.123Z")
        #expect(out["repeat"] == false)
        #expect(out["after_complete"] == false)
        Self.checkError(out, c)
    }

    @Test("wrapped with a payload object: the wrapper supplies checkout_id, event_id, occurred_at, sdk, platform",
          arguments: RawCases.all)
    func wrappedObject(_ c: RawCase) {
        let platform = c.platform ?? "react_native"
        let p = EventProcessor()
        let out = p.feed(wrap(c.bare, checkoutID: "w-1", platform: platform, sdk: c.sdk))
        #expect(out.outcome == .published(c.kind))
        #expect(out["kind"] == .string(c.kindName))
        #expect(out["checkout_id"] == "w-1")
        #expect(out["event_id"] == "evt-1")
        #expect(out["occurred_at"] == "2026-12-02T11:39:01.000Z")
        #expect(out["source.sdk"] == .string(c.sdk))
        #expect(out["source.platform"] == .string(platform))
        #expect(out["source.format"] == .string(c.format))
        Self.checkError(out, c)
    }

    @Test("wrapper and snapshot fields read in one pass keep lookup semantics: first of repeated, spellings in order, escaped names")
    func onePassFieldSemantics() {
        let p = EventProcessor()
        let snap = #"{"id":"snap-id","currencyCode":"EUR","currency":"USD","order":{"id":"O-9"},"#
            + #""lines":[{"quantity":5}],"line_items":[{"quantity":2},{"quantity":1}],"#
            + #""totals":[{"type":"total","amount":700}],"status":"incomplete","status":"ignored"}"#
        let event = #"{"method":"ec.line_items.change","jsonrpc":"2.0","params":{"checkout":\#(snap)}}"#
        // `checkoutId` before `checkout_id`: the snake-case spelling still wins; the first `sdk`
        // wins over a repeat; an escaped `event_id` is still the event id.
        let out = p.feed(#"{"checkoutId":"camel","checkout_id":"snake","sdk":"Shopify","sdk":"primer","#
            + #""event_id":"evt-9","payload":\#(event)}"#)
        #expect(out.outcome == .published(.update))
        #expect(out["checkout_id"] == "snake")
        #expect(out["event_id"] == "evt-9")
        #expect(out["source.sdk"] == "shopify")
        #expect(out["summary.currency"] == "USD")
        #expect(out["summary.status"] == "incomplete")
        #expect(out["summary.line_count"] == 2)
        #expect(out["summary.item_quantity"] == 3)
        #expect(out["summary.total"] == 700)
        #expect(out["summary.order_id"] == "O-9")
        // Without a wrapper the snapshot's own id names the checkout.
        let bare = EventProcessor().feed(event)
        #expect(bare["checkout_id"] == "snap-id")
        // An `orderDetails` that is not an object gives way to `order_details`, which the summary reads.
        let older = #"{"id":"ck-7","orderDetails":"not an object","order_details":{"id":"O-7","status":"confirmed"}}"#
        let out7 = EventProcessor().feed(#"{"method":"ec.complete","jsonrpc":"2.0","params":{"checkout":\#(older)}}"#)
        #expect(out7["checkout_id"] == "ck-7")
        #expect(out7["summary.order_id"] == "O-7")
        #expect(out7["summary.status"] == "confirmed")
    }

    @Test("wrapped with the payload as a JSON string decodes the same", arguments: RawCases.all)
    func wrappedString(_ c: RawCase) {
        let platform = c.platform ?? "react_native"
        let p = EventProcessor()
        let out = p.feed(wrap(c.bare, checkoutID: "w-2", platform: platform, sdk: c.sdk, eventID: "evt-2",
                              payloadAsString: true))
        #expect(out.outcome == .published(c.kind))
        #expect(out["checkout_id"] == "w-2")
        #expect(out["event_id"] == "evt-2")
        #expect(out["source.sdk"] == .string(c.sdk))
        #expect(out["source.platform"] == .string(platform))
        #expect(out["source.format"] == .string(c.format))
        Self.checkError(out, c)
    }

    @Test("bare events without a wrapper: an order id stands in for the checkout id, else missing_checkout_id",
          arguments: RawCases.all)
    func bareWithoutID(_ c: RawCase) {
        let p = EventProcessor()
        let out = p.feed(c.bare)
        if let id = c.bareID {
            #expect(out.outcome == .published(c.kind))
            #expect(out["checkout_id"] == .string(id))
        } else {
            #expect(out.outcome == .deadLettered(.missingCheckoutID))
            #expect(out.topic == "bus.deadletter")
            #expect(out["reason"] == "missing_checkout_id")
        }
    }

    // MARK: Family details

    @Test("ECP: the snapshot is kept whole, extension keys included, and summarised")
    func ecpSnapshot() {
        let checkout = #"{"id":"ck-9","status":"completed","currency":"USD","line_items":[{"id":"li_1","item":{"id":"v1","title":"Canvas Tote","price":2500},"quantity":2}],"totals":[{"type":"subtotal","amount":5000},{"type":"tax","amount":400},{"type":"total","amount":5400}],"order":{"id":"gid://shopify/Order/1001"},"com.example.loyalty":{"points":54}}"#
        let p = EventProcessor()
        let out = p.feed(Fixture.ecp("ec.complete", checkout: checkout))
        #expect(out.outcome == .published(.complete))
        #expect(out["checkout.id"] == "ck-9")
        #expect(out["checkout"]?[key: "com.example.loyalty"]?["points"] == 54)
        #expect(out["checkout.line_items.0.item.title"] == "Canvas Tote")
        #expect(out["summary.status"] == "completed")
        #expect(out["summary.currency"] == "USD")
        #expect(out["summary.total"] == 5400)
        #expect(out["summary.subtotal"] == 5000)
        #expect(out["summary.line_count"] == 1)
        #expect(out["summary.item_quantity"] == 2)
        #expect(out["summary.order_id"] == "gid://shopify/Order/1001")
        #expect(out["idempotency_key"] == "gid://shopify/Order/1001")
        #expect(out["payment"] == .null)
    }

    @Test("ECP ec.error: the first message of type error and severity unrecoverable wins, also inside params.checkout")
    func ecpErrorChoice() {
        let p = EventProcessor()
        let inCheckout = #"{"jsonrpc":"2.0","method":"ec.error","params":{"checkout":{"id":"ck-3","messages":[{"type":"error","code":"invalid_phone","severity":"recoverable","content":"x"},{"type":"info","code":"fyi","severity":"unrecoverable"},{"type":"error","code":"web_content_process_terminated","severity":"unrecoverable","content":"Crashed"}]}}}"#
        let out = p.feed(inCheckout)
        #expect(out.outcome == .published(.fail))
        #expect(out["checkout_id"] == "ck-3")
        #expect(out.topic == "checkout.fail.web_content_process_terminated")
        #expect(out["error.raw_code"] == "web_content_process_terminated")
        #expect(out["error.message"] == "Crashed")
        #expect(out["error.terminal"] == true)
    }

    @Test("ECP: an unknown ec.* notification is an unknown event; a non-object checkout is wrong_type")
    func ecpUnknown() {
        let p = EventProcessor()
        #expect(p.feed(#"{"jsonrpc":"2.0","method":"ec.teleport","params":{"checkout":{"id":"ck-1"}}}"#).outcome
                == .deadLettered(.unknownEvent))
        #expect(p.feed(#"{"jsonrpc":"2.0","method":"ec.start","params":{"checkout":"ck-1"}}"#).outcome
                == .deadLettered(.wrongType))
    }

    @Test("ECP: a method is read the same whether escaped, non-ASCII or plain")
    func ecpMethodSpellings() {
        let p = EventProcessor()
        func feed(_ method: String, id: String = "", n: Int = 0) -> EventProcessor.Outcome {
            p.feed(#"{"jsonrpc":"2.0","# + id + #""method":"# + method + #","params":{"checkout":{"id":"ck-1","n":"#
                   + String(n) + "}}}").outcome
        }
        #expect(feed(#""ec.\u0073tart""#) == .published(.start))
        #expect(feed(#""ec.buyer\u002echange""#, n: 1) == .published(.update))
        #expect(feed(#""ec.buyer.change""#, id: #""id":7,"#, n: 2) == .published(.update))
        #expect(feed(#""ec.buyer.changed""#, id: #""id":7,"#) == .deadLettered(.notLifecycle))
        #expect(feed(#""ec.é.change""#, n: 3) == .published(.update))
        #expect(feed(#""ec.\u0301x.change""#) == .deadLettered(.unknownEvent))
        #expect(feed(#""ec.""#) == .deadLettered(.unknownEvent))
        #expect(feed("7") == .deadLettered(.wrongType))
    }

    @Test("Sheet bridge completed: older orderDetails are summarised from MoneyV2 prices")
    func bridgeCompleted() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"name":"completed","body":"# + jsonStringLiteral(RawCases.orderDetailsBody) + "}",
                              checkoutID: "legacy-7"))
        #expect(out.outcome == .published(.complete))
        #expect(out["checkout_id"] == "legacy-7")
        #expect(out["idempotency_key"] == "gid://shopify/OrderIdentity/2002")
        #expect(out["summary.order_id"] == "gid://shopify/OrderIdentity/2002")
        #expect(out["summary.status"] == "completed")
        #expect(out["summary.currency"] == "CAD")
        #expect(out["summary.total"] == 4125)
        #expect(out["summary.subtotal"] == 3750)
        #expect(out["summary.line_count"] == 1)
        #expect(out["summary.item_quantity"] == 3)
        // The body string was parsed: the envelope carries it as an object, not a string.
        #expect(out["checkout.orderDetails.cart.lines.0.title"] == "Mug")
    }

    @Test("Sheet bridge: a body that is not JSON is invalid_embedded_json")
    func bridgeBadBody() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"name":"completed","body":"{not json"}"#))
        #expect(out.outcome == .deadLettered(.invalidEmbeddedJSON))
        #expect(out["reason"] == "invalid_embedded_json")
    }

    @Test("Primer success: payment result is carried and summarised")
    func primerSuccess() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"state":"success","# + RawCases.paymentResult + "}", checkoutID: "primer-5",
                              sdk: "primer"))
        #expect(out.outcome == .published(.complete))
        #expect(out["payment.paymentId"] == "pay_2")
        #expect(out["payment.paymentMethodType"] == "PAYMENT_CARD")
        #expect(out["summary.status"] == "SUCCESS")
        #expect(out["summary.currency"] == "EUR")
        #expect(out["summary.total"] == 1999)
        #expect(out["checkout"] == .null)
        #expect(out["idempotency_key"] == "primer-5")
    }

    @Test("Primer failure carries checkoutData.payment and its order id")
    func primerFailurePayment() {
        let p = EventProcessor()
        let out = p.feed(#"{"state":"failure","checkout_id":"pr-1","# + RawCases.primerError + "," + RawCases.checkoutData + "}")
        #expect(out.outcome == .published(.fail))
        #expect(out["payment.id"] == "pay_1")
        #expect(out["summary.order_id"] == "ord-5")
        #expect(out["error.terminal"] == false)
    }

    @Test("Primer success with a PaymentResult and checkoutData.payment: the order id comes from the latter, also without a checkout id")
    func primerSuccessOrderFromCheckoutData() {
        let p = EventProcessor()
        let body = #"{"state":"success","paymentResult":{"paymentId":"pay_10","status":"SETTLED","amount":1500,"currencyCode":"GBP"},"checkoutData":{"payment":{"id":"pay_10","orderId":"ord-10"}}}"#
        let bare = p.feed(body)
        #expect(bare.outcome == .published(.complete))
        #expect(bare["checkout_id"] == "order:ord-10")
        #expect(bare["summary.order_id"] == "ord-10")
        #expect(bare["idempotency_key"] == "ord-10")
        #expect(bare["payment.paymentId"] == "pay_10")
        let wrapped = p.feed(wrap(body, checkoutID: "cs-9", sdk: "primer"))
        #expect(wrapped.outcome == .published(.complete))
        #expect(wrapped["checkout_id"] == "cs-9")
        #expect(wrapped["summary.order_id"] == "ord-10")
        #expect(wrapped["idempotency_key"] == "ord-10")
    }

    @Test("a wrapper's platform is spelled as the decoder infers it: iOS, React Native, react-native, ReactNative")
    func platformSpellings() {
        let p = EventProcessor()
        let cases = [("iOS", "ios"), ("ios", "ios"), ("Android", "android"), ("React Native", "react_native"),
                     ("react-native", "react_native"), ("ReactNative", "react_native"), ("reactnative", "react_native"),
                     ("react_native", "react_native"), ("Flutter", "flutter")]
        for (i, (given, published)) in cases.enumerated() {
            let out = p.feed(wrap(#"{"event":"dismiss"}"#, checkoutID: "pf-\(i)", platform: given))
            #expect(out["source.platform"] == .string(published), "\(given)")
        }
    }

    @Test("an error given as a bare string: a code is normalised and kept as raw_code, a sentence is kept as the message")
    func stringErrors() {
        let p = EventProcessor()
        let code = p.feed(#"{"event":"fail","checkout_id":"ck-1","error":"network_error"}"#)
        #expect(code.topic == "checkout.fail.network_error")
        #expect(code["error.raw_code"] == "network_error")
        #expect(code["error.message"] == "network_error")
        let dotted = p.feed(#"{"event":"checkoutDidFail","checkout_id":"ck-2","error":"CheckoutError.cartExpired"}"#)
        #expect(dotted.topic == "checkout.fail.cart_expired")
        #expect(dotted["error.raw_code"] == "CheckoutError.cartExpired")
        let sentence = p.feed(#"{"event":"onCheckoutFailed","checkout_id":"ck-3","error":"The operation couldn’t be completed. (NSURLErrorDomain error -1009.)"}"#)
        #expect(sentence.topic == "checkout.fail.unknown")
        #expect(sentence["error.raw_code"] == .null)
        #expect(sentence["error.message"] == "The operation couldn’t be completed. (NSURLErrorDomain error -1009.)")
        #expect(sentence["error.terminal"] == true)
        let primer = p.feed(wrap(#"{"state":"failure","error":"Payment declined by issuer"}"#, checkoutID: "cs-5", sdk: "primer"))
        #expect(primer.outcome == .published(.fail))
        #expect(primer["error.message"] == "Payment declined by issuer")
        #expect(primer["error.terminal"] == false)
        let primerCode = p.feed(wrap(#"{"state":"failure","error":"payment-failed"}"#, checkoutID: "cs-6", sdk: "primer"))
        #expect(primerCode.topic == "checkout.fail.payment_failed")
        #expect(primerCode["error.raw_code"] == "payment-failed")
        // A code or status on the event itself still wins over a string beside it.
        let own = p.feed(#"{"event":"fail","checkout_id":"ck-8","code":"storefront_password_required","error":"Storefront password required"}"#)
        #expect(own.topic == "checkout.fail.storefront_password_required")
        #expect(own["error.raw_code"] == "storefront_password_required")
        #expect(own["error.message"] == "Storefront password required")
        let status = p.feed(#"{"event":"onCheckoutFailed","checkout_id":"ck-9","statusCode":410,"error":"Gone"}"#)
        #expect(status.topic == "checkout.fail.cart_expired")
        #expect(status["error.http_status"] == 410)
        let primerOwn = p.feed(wrap(#"{"state":"failure","errorId":"payment-failed","description":"Card declined","error":"Card declined"}"#,
                                    checkoutID: "cs-10", sdk: "primer"))
        #expect(primerOwn.topic == "checkout.fail.payment_failed")
        // An error object still wins, and a typename alone is read as the group.
        let typename = p.feed(#"{"event":"error","checkout_id":"ck-7","error":{"__typename":"CheckoutExpiredError","message":"Cart expired","recoverable":false}}"#)
        #expect(typename.topic == "checkout.fail.cart_expired")
        #expect(typename["error.raw_code"] == "CheckoutExpiredError")
    }

    @Test("Primer: an inline session's initialisation failure is terminal")
    func primerInitFailure() {
        let p = EventProcessor()
        let out = p.feed(wrap(#"{"state":"failure","phase":"initializing","error":{"errorId":"invalid-client-token","description":"bad token","diagnosticsId":"d"}}"#,
                              sdk: "primer"))
        #expect(out.outcome == .published(.fail))
        #expect(out["error.code"] == "session_invalid")
        #expect(out["error.terminal"] == true)
    }

    @Test("Callback onDismiss without a wrapper is read as Checkout Kit's")
    func ambiguousOnDismiss() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onDismiss","checkout_id":"ck-1"}"#)
        #expect(out.outcome == .published(.dismiss))
        #expect(out["source.sdk"] == "shopify")
        #expect(out["source.format"] == "callback")
    }

    @Test("Callback events read ids beside the event name and under data/detail")
    func callbackIDs() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onCheckoutStarted","event_id":"e-9","occurredAt":"2026-01-02T03:04:05Z","data":{"checkout":{"id":"ck-5","status":"incomplete"}}}"#)
        #expect(out.outcome == .published(.start))
        #expect(out["checkout_id"] == "ck-5")
        #expect(out["event_id"] == "e-9")
        #expect(out["occurred_at"] == "2026-01-02T03:04:05Z")
        #expect(out["summary.status"] == "incomplete")
    }

    @Test("ids beside the event name, read in one pass: spellings in order, the first of a repeat, escaped names")
    func callbackIDSpellings() {
        // Camel-case spellings before snake-case ones, a repeat, an escaped name: the snake-case
        // spelling wins wherever it stands, the first of a repeat wins, and `occurred_at` is read
        // before `occurredAt` and `timestamp`.
        let out = EventProcessor().feed(#"{"event":"onCheckoutStarted","eventId":"camel","checkoutId":"ck-camel","#
            + #""orderId":"o-camel","timestamp":"2026-01-01T00:00:00Z","occurredAt":"2026-01-02T00:00:00Z","#
            + #""event_id":"snake","event_id":"repeat","check\u006fut_id":"ck-snake","order_id":"o-snake","#
            + #""occurred_at":"2026-01-03T00:00:00Z","data":{"checkout":{"status":"incomplete"}}}"#)
        #expect(out.outcome == .published(.start))
        #expect(out["event_id"] == "snake")
        #expect(out["checkout_id"] == "ck-snake")
        #expect(out["occurred_at"] == "2026-01-03T00:00:00Z")
        #expect(out["summary.order_id"] == "o-snake" && out["idempotency_key"] == "o-snake")
        // The preferred spelling decides even when its value is unusable as a time: no fallback.
        let objectTime = EventProcessor().feed(#"{"event":"onCheckoutStarted","checkout_id":"ck-1","occurredAt":{"t":1},"#
            + #""timestamp":"2026-01-01T00:00:00Z","data":{"checkout":{"status":"incomplete"}}}"#)
        #expect(objectTime.outcome == .published(.start))
        #expect(objectTime["occurred_at"] == nil || objectTime["occurred_at"] == .null)
        // Only a camel-case spelling: it is read.
        let camel = EventProcessor().feed(#"{"event":"onCheckoutStarted","checkoutId":"ck-2","eventId":"e-2","#
            + #""timestamp":1767225600000,"data":{"checkout":{"status":"incomplete"}}}"#)
        #expect(camel["checkout_id"] == "ck-2")
        #expect(camel["event_id"] == "e-2")
        #expect(camel["occurred_at"] != nil && camel["occurred_at"] != .null)
    }

    @Test("an error object's fields, read in two passes: each field's spellings in order, whatever order they arrive in")
    func errorFieldSpellings() {
        func fail(_ error: String) -> Output {
            EventProcessor().feed(#"{"checkout_id":"ck-1","payload":{"event":"onCheckoutFailed","error":"# + error + "}}")
        }
        // Later spellings first in the text: the earlier spelling of each field still wins.
        let out = fail(#"{"continueUrl":"https://b","error_code":"cart_expired","isRecoverable":false,"status":500,"#
            + #""errorMessage":"flat","reason":"r","description":"d","message":"m","__typename":"T","group":"expired","#
            + #""httpStatus":503,"statusCode":410,"recoverable":true,"continue_url":"https://a","code":null,"errorId":"payment_declined"}"#)
        #expect(out.outcome == .published(.fail))
        #expect(out["error.raw_code"] == "payment_declined")  // `code` is null: the next code field with a value
        #expect(out["error.message"] == "m")
        #expect(out["error.http_status"] == 410)
        #expect(out["error.terminal"] == false)  // `recoverable` before `isRecoverable`
        #expect(out["error.continue_url"] == "https://a")
        // Without `message`, the next spelling; without any, `errorMessage`.
        #expect(fail(#"{"code":"x","reason":"r","description":"d"}"#)["error.message"] == "d")
        #expect(fail(#"{"code":"x","error_message":"e2","errorMessage":"e1"}"#)["error.message"] == "e1")
        #expect(fail(#"{"code":"x","status_code":502,"status":504}"#)["error.http_status"] == 502)
        // An NSError of Foundation's URL loading is the network's, whatever its code.
        #expect(fail(#"{"code":-1009,"domain":"NSURLErrorDomain"}"#)["error.code"] == "network_error")
        // A code that is a Codable enum case.
        #expect(fail(#"{"code":{"cartExpired":{}}}"#)["error.raw_code"] == "cartExpired")
        // `group` before `__typename`; the first of a repeated key; an escaped key by its decoded name.
        let grouped = fail(#"{"__typename":"T","group":"expired","message":"first","message":"second","stat\u0075sCode":404}"#)
        #expect(grouped["error.raw_code"] == "expired" && grouped["error.code"] == "cart_expired")
        #expect(grouped["error.message"] == "first")
        #expect(grouped["error.http_status"] == 404)
    }

    @Test("Numeric ids are accepted as identifiers")
    func numericIDs() {
        let p = EventProcessor()
        let out = p.feed(#"{"checkout_id":12345,"event_id":678,"payload":{"event":"dismiss"}}"#)
        #expect(out.outcome == .published(.dismiss))
        #expect(out["checkout_id"] == "12345")
        #expect(out["event_id"] == "678")
    }

    /// The decoder kept the last wrapper's event id until a message's wrapper was read, and a message
    /// that is no object was rejected before that: each took the last event's id, and the second of
    /// them was taken for a retry of the first and never published.
    @Test("a message that is not an object carries no earlier message's event id, and is never a duplicate")
    func rejectedBeforeTheWrapper() {
        let p = EventProcessor()
        #expect(p.feed(#"{"checkout_id":"c-1","event_id":"order-E1","payload":{"event":"dismiss"}}"#).outcome
                == .published(.dismiss))
        for raw in ["null", "1", #""x""#, "[]", "[1,2]", "true"] {
            let out = p.feed(raw)
            #expect(out.outcome == .deadLettered(.unknownShape), "\(raw)")
            #expect(out["event_id"] == .null, "\(raw)")
        }
        #expect(p.counters.deadLetteredTotal == 6)
    }

    @Test("A wrapper whose payload is neither object nor string is wrong_type; a non-object string payload is unknown_shape")
    func wrapperPayloadTypes() {
        let p = EventProcessor()
        #expect(p.feed(#"{"checkout_id":"c","payload":42}"#).outcome == .deadLettered(.wrongType))
        #expect(p.feed(#"{"checkout_id":"c","payload":"[1,2]"}"#).outcome == .deadLettered(.unknownShape))
        #expect(p.feed(#"{"checkout_id":"c","payload":"{oops"}"#).outcome == .deadLettered(.invalidEmbeddedJSON))
    }

    // MARK: Not lifecycle

    @Test("requests, web pixels and blocking events are not lifecycle events", arguments: [
        #"{"jsonrpc":"2.0","method":"ec.ready","params":{"checkout":{"id":"ck-1"}}}"#,
        #"{"jsonrpc":"2.0","id":1,"method":"ec.ready","params":{}}"#,
        #"{"jsonrpc":"2.0","method":"ec.auth","params":{"checkout_id":"ck-1"}}"#,
        #"{"jsonrpc":"2.0","id":2,"method":"ec.payment.credential_request","params":{"checkout":{"id":"ck-1"}}}"#,
        #"{"jsonrpc":"2.0","id":3,"method":"ec.fulfillment.address_change_request","params":{"checkout":{"id":"ck-1"}}}"#,
        #"{"jsonrpc":"2.0","method":"ec.window.open_request","params":{"url":"https://shop.example"}}"#,
        #"{"name":"webPixels","body":"{\"name\":\"page_viewed\"}"}"#,
        #"{"name":"checkoutBlockingEvent","body":"{}"}"#,
        wrap(#"{"name":"webPixels","body":"{\"name\":\"checkout_started\"}"}"#),
        wrap(#"{"jsonrpc":"2.0","method":"ec.ready","params":{}}"#, payloadAsString: true),
        #"{"event":"checkoutDidClickLink","checkout_id":"ck-1","url":"https://x"}"#,
        #"{"event":"onWebPixelEvent","checkout_id":"ck-1"}"#,
    ])
    func notLifecycle(json: String) {
        let p = EventProcessor()
        let out = p.feed(json)
        #expect(out.outcome == .deadLettered(.notLifecycle))
        #expect(out.topic == "bus.deadletter")
        #expect(out["reason"] == "not_lifecycle")
        #expect(out["raw"] == .string(json))
        #expect(p.counters.deadLettered["not_lifecycle"] == 1)
    }

    @Test("unknown event names in known shapes are unknown_event", arguments: [
        #"{"event":"checkoutDidTeleport","checkout_id":"ck-1"}"#,
        #"{"name":"checkoutExploded","body":"{}"}"#,
        #"{"state":"levitating","checkout_id":"ck-1"}"#,
        wrap(#"{"event":"bogus"}"#),
    ])
    func unknownEvent(json: String) {
        let p = EventProcessor()
        let out = p.feed(json)
        #expect(out.outcome == .deadLettered(.unknownEvent))
        #expect(out["reason"] == "unknown_event")
    }

    @Test("formats are counted per family")
    func formatCounters() {
        let p = EventProcessor()
        p.feed(Fixture.ecp("ec.start", checkout: Fixture.snapshot()))
        p.feed(wrap(#"{"name":"error","body":"[{\"code\":\"cart_expired\"}]"}"#))
        p.feed(#"{"event":"onFail","checkout_id":"x","error":{"code":"sdk_error"}}"#)
        p.feed(#"{"event":"dismiss","checkout_id":"x"}"#)
        p.feed(#"{"state":"dismissed","checkout_id":"y"}"#)
        #expect(p.counters.receivedByFormat == [1, 1, 2, 1])
        #expect(p.counters.received == 5)
    }
}

/// The decoder remembers the names it has lately read (their string and what the name tables say
/// of them): a long-lived processor must publish exactly what a fresh one does, whatever names
/// came before, including more distinct names than it remembers and names it must not take.
@Suite("Decoding: remembered event names change nothing")
struct RememberedNameTests {
    /// Callback and Primer names of every platform, unknown and non-lifecycle ones, an escaped
    /// spelling, a printed Swift case that gives way to its known prefix, and a known name padded past
    /// what is remembered: 25 in all.
    static let names: [String] = [
        "checkoutDidStart", "checkoutDidUpdate", "checkoutDidComplete", "checkoutDidFail", "checkoutDidDismiss",
        "onCheckoutStarted", "onCheckoutUpdated", "onCheckoutCompleted", "onCheckoutFailed", "onCheckoutDismissed",
        "onStart", "onUpdate", "onComplete", "onFail", "onDismiss", "primerDidCompleteCheckoutWithData",
        "primerDidFailWithError", "primerDidDismiss", "onCheckoutComplete", "someUnknownCallback",
        "primerDidTokenizePaymentMethod", "onCheck\\u006futStarted", "completed", "success(PrimerSDK.PaymentResult(id: 1))",
        // Known once folded, but too long to be remembered.
        "onCheckoutUpdated" + String(repeating: " ", count: 100),
    ]

    static func event(_ name: String, _ i: Int) -> String {
        let snapshot = Fixture.snapshot(id: "rn-\(i % 7)", quantity: 1 + i % 3)
        return wrap(#"{"event":"\#(name)","checkout":\#(snapshot)}"#, checkoutID: "rn-\(i % 7)", eventID: "e-\(i)")
    }

    @Test("a long-lived processor publishes what a fresh one does, name after name")
    func sameAsFresh() {
        let longLived = EventProcessor()
        // Three passes in different orders: every name is met cold, remembered, and after eviction.
        let order = Array(Self.names.indices) + Array(Self.names.indices.reversed()) + Array(Self.names.indices)
        for (i, n) in order.enumerated() {
            let text = Self.event(Self.names[n], i)
            let fresh = EventProcessor().feed(text)
            let kept = longLived.feed(text)
            if case .suppressed = kept.outcome { continue }  // the long-lived one has seen this checkout
            #expect(kept.topic == fresh.topic, "\(Self.names[n])")
            #expect(kept["kind"] == fresh["kind"], "\(Self.names[n])")
            #expect(kept["source.format"] == fresh["source.format"], "\(Self.names[n])")
            #expect(kept["source.platform"] == fresh["source.platform"], "\(Self.names[n])")
            #expect(kept["source.sdk"] == fresh["source.sdk"], "\(Self.names[n])")
            if case .deadLettered(let reason) = fresh.outcome {
                #expect(kept.outcome == .deadLettered(reason), "\(Self.names[n])")
                #expect(kept["reason"] == fresh["reason"], "\(Self.names[n])")
            }
        }
    }

    /// The same as ``sameAsFresh()``, comparing one event's output from the two processors.
    /// - Returns: the fresh processor's topic.
    @discardableResult
    static func expectSame(_ longLived: EventProcessor, _ text: String, _ what: String) -> String? {
        let fresh = EventProcessor().feed(text)
        let kept = longLived.feed(text)
        if case .suppressed = kept.outcome { return fresh.topic }
        #expect(kept.topic == fresh.topic, "\(what)")
        #expect(kept["kind"] == fresh["kind"], "\(what)")
        #expect(kept["source.format"] == fresh["source.format"], "\(what)")
        #expect(kept["source.platform"] == fresh["source.platform"], "\(what)")
        #expect(kept["source.sdk"] == fresh["source.sdk"], "\(what)")
        #expect(kept.outcome == fresh.outcome, "\(what)")
        return fresh.topic
    }

    @Test("the platform a name gives away is the same when the name is remembered (no platform on the wrapper)")
    func platformFromRememberedName() {
        let longLived = EventProcessor()
        let cases: [(name: String, sdk: String, platform: J)] = [
            ("checkoutDidStart", "shopify", "ios"), ("onCheckoutStarted", "shopify", "android"), ("onStart", "shopify", .null),
            ("primerDidCompleteCheckoutWithData", "primer", "ios"), ("onCheckoutCompleted", "primer", "android"),
            ("onCheckoutComplete", "primer", "react_native"), ("onCheck\\u006futStarted", "shopify", "android"),
        ]
        for round in 0..<3 {
            for (i, c) in cases.enumerated() {
                let n = round * cases.count + i
                let snapshot = Fixture.snapshot(id: "pl-\(n)", quantity: 1)
                let text = wrap(#"{"event":"\#(c.name)","checkout":\#(snapshot)}"#,
                                checkoutID: "pl-\(n)", platform: nil, sdk: c.sdk, eventID: "e-\(n)")
                let out = longLived.feed(text)
                #expect(out["source.platform"] == c.platform, "\(c.name), round \(round)")
                #expect(out["source.sdk"] == .string(c.sdk), "\(c.name), round \(round)")
            }
        }
    }

    @Test("a callback name's platform prefix is matched as String.hasPrefix matches it, by grapheme")
    func prefixByGrapheme() {
        let names = ["checkoutDidComplete", "checkoutDid", "checkoutDi", "", "checkoutdidComplete",
                     "checkoutDid\u{301}Complete", "checkoutDid\u{200D}Complete", "checkoutDidé", "checkoutDid😀",
                     "onCheckoutStarted", "onCheckout\u{308}", "primerDidDismiss", "primerDid\u{FE0F}x", "onCheckout-x"]
        for name in names {
            for prefix in ["checkoutDid", "onCheckout", "primerDid"] as [StaticString] {
                #expect(RawEventDecoder.starts(name, with: prefix) == name.hasPrefix(String(describing: prefix)),
                        "\(name) / \(prefix)")
            }
        }
        // A combining mark after the prefix joins its last letter: no platform from the name.
        #expect(RawEventDecoder.platform(forCallback: "checkoutDid\u{301}Complete") == nil)
        #expect(RawEventDecoder.platform(forCallback: "checkoutDidComplete") == "ios")
    }

    @Test("names on the wrapper (the payload naming none) are remembered too, and change nothing")
    func wrapperNames() {
        let longLived = EventProcessor()
        let order = Array(Self.names.indices) + Array(Self.names.indices.reversed())
        for (i, n) in order.enumerated() {
            let snapshot = Fixture.snapshot(id: "wn-\(i % 5)", quantity: 1 + i % 4)
            let text = #"{"checkout_id":"wn-\#(i % 5)","event_id":"we-\#(i)","event":"\#(Self.names[n])","payload":{"checkout":\#(snapshot)}}"#
            Self.expectSame(longLived, text, "wrapper's \(Self.names[n])")
        }
    }

    @Test("hundreds of spellings of known names, more than the table has slots, sharing slots: each decodes as when fresh")
    func manySpellings() {
        let longLived = EventProcessor()
        let bases = ["onCheckoutUpdated", "checkoutDidComplete", "primerDidFailWithError", "onDismiss", "checkoutDidStart"]
        // Folding keeps letters and digits only, lower-cased: an underscore anywhere, or an upper-case
        // letter, spells the same name with other bytes.
        var spellings: [String] = []
        for base in bases {
            let chars = Array(base)
            for k in 1..<chars.count {
                spellings.append(String(chars[..<k]) + "_" + String(chars[k...]))
                spellings.append(String(chars[..<k]).uppercased() + String(chars[k...]))
                spellings.append(String(chars[..<k]) + "-" + String(chars[k...]).uppercased())
                spellings.append(String(chars[..<k]) + " " + String(chars[k...]))
            }
        }
        #expect(spellings.count > 300)
        var lifecycle = 0
        for pass in 0..<2 {
            for (i, name) in spellings.enumerated() {
                let text = Self.event(name, i + pass * spellings.count)
                if let topic = Self.expectSame(longLived, text, "\(name), pass \(pass)"), topic.hasPrefix("checkout.") { lifecycle += 1 }
            }
        }
        // Most spellings are known lifecycle names (over 200 distinct ones, so many share a slot);
        // the rest both processors dead-letter alike.
        #expect(lifecycle > 400)
    }
}
