import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("Lifecycle rules (DESIGN §5)")
struct LifecycleRuleTests {
    static let snapshotA = Fixture.snapshot(quantity: 2)
    /// The same JSON value as `snapshotA`, members reordered and spaced out.
    static let snapshotAReordered = #"""
        { "messages" : [ ] ,
          "totals" : [ {"amount":5400, "type":"subtotal"}, {"type":"tax","amount":100}, {"amount":5500,"type":"total"} ],
          "line_items" : [ { "quantity" : 2, "item" : { "price" : 2500, "title" : "Canvas Tote", "id" : "gid://shopify/ProductVariant/1" }, "id" : "li_1" },
                           { "id" : "li_2", "quantity" : 1, "item" : { "title" : "Enamel Pin", "id" : "gid://shopify/ProductVariant/2", "price" : 400 } } ],
          "currency" : "USD", "status" : "incomplete", "id" : "ck-1" }
        """#
    static let snapshotB = Fixture.snapshot(quantity: 3)

    static func update(_ checkout: String) -> String { Fixture.ecp("ec.line_items.change", checkout: checkout) }

    @Test("an identical consecutive update is suppressed even when key order and whitespace differ")
    func identicalUpdateSuppressed() {
        let p = EventProcessor()
        #expect(p.feed(Self.update(Self.snapshotA)).outcome == .published(.update))
        #expect(p.feed(Self.update(Self.snapshotAReordered)).outcome == .suppressed)
        #expect(p.feed(Self.update(Self.snapshotA)).outcome == .suppressed)
        #expect(p.counters.suppressed == 2)
        #expect(p.counters.publishedByKind[Int(LifecycleKind.update.rawValue)] == 1)
        #expect(p.lastSeq == 1)
    }

    @Test("A → B → A publishes all three updates")
    func abaPublishesThree() {
        let p = EventProcessor()
        let outs = [Self.snapshotA, Self.snapshotB, Self.snapshotAReordered].map { p.feed(Self.update($0)) }
        #expect(outs.map(\.outcome) == [.published(.update), .published(.update), .published(.update)])
        #expect(outs.map { $0["summary.item_quantity"] } == [3, 4, 3])
        #expect(p.counters.suppressed == 0)
    }

    @Test("a large snapshot (1000 line items) is summarised, and its identical update suppressed")
    func largeSnapshot() {
        let lines = (0..<1_000).map { #"{"id":"li_\#($0)","item":{"id":"v\#($0)","title":"Item \#($0)","price":100},"quantity":2}"# }
        let checkout = #"{"id":"ck-big","currency":"USD","line_items":["# + lines.joined(separator: ",")
            + #"],"totals":[{"type":"total","amount":200000}]}"#
        let p = EventProcessor()
        let first = p.feed(Self.update(checkout))
        #expect(first.outcome == .published(.update))
        #expect(first["summary.line_count"] == 1_000)
        #expect(first["summary.item_quantity"] == 2_000)
        #expect(first["summary.total"] == 200_000)
        #expect(first["checkout.line_items.999.item.title"] == "Item 999")
        #expect(p.feed(Self.update(checkout)).outcome == .suppressed)
    }

    @Test("an array reordered is a different snapshot and is published")
    func arrayOrderMatters() {
        let p = EventProcessor()
        let a = #"{"id":"ck-1","line_items":[{"id":"li_1"},{"id":"li_2"}]}"#
        let b = #"{"id":"ck-1","line_items":[{"id":"li_2"},{"id":"li_1"}]}"#
        #expect(p.feed(Self.update(a)).outcome == .published(.update))
        #expect(p.feed(Self.update(b)).outcome == .published(.update))
    }

    @Test("an update identical to the start snapshot is suppressed")
    func startThenIdenticalUpdate() {
        let p = EventProcessor()
        #expect(p.feed(Fixture.ecp("ec.start", checkout: Self.snapshotA)).outcome == .published(.start))
        #expect(p.feed(#"{"event":"checkoutDidUpdate","checkout":"# + Self.snapshotAReordered + "}").outcome == .suppressed)
    }

    @Test("suppression is per checkout: the same snapshot for another checkout is published")
    func suppressionPerCheckout() {
        let p = EventProcessor()
        let snap = #"{"status":"incomplete","totals":[{"type":"total","amount":100}]}"#
        #expect(p.feed(wrap(Self.update(snap), checkoutID: "c-1")).outcome == .published(.update))
        #expect(p.feed(wrap(Self.update(snap), checkoutID: "c-2")).outcome == .published(.update))
        #expect(p.feed(wrap(Self.update(snap), checkoutID: "c-1")).outcome == .suppressed)
    }

    @Test("complete is never suppressed; a second complete is a repeat with the same idempotency key")
    func completeRepeat() {
        let p = EventProcessor()
        let done = Fixture.snapshot(status: "completed", orderID: "gid://shopify/Order/1001")
        #expect(p.feed(Self.update(done)).outcome == .published(.update))
        let first = p.feed(Fixture.ecp("ec.complete", checkout: done))
        let second = p.feed(Fixture.ecp("ec.complete", checkout: done))
        #expect(first.outcome == .published(.complete))
        #expect(second.outcome == .published(.complete))
        #expect(first["repeat"] == false)
        #expect(second["repeat"] == true)
        #expect(first["idempotency_key"] == "gid://shopify/Order/1001")
        #expect(second["idempotency_key"] == "gid://shopify/Order/1001")
        #expect(first["kind_seq"] == 1)
        #expect(second["kind_seq"] == 2)
        // And an update equal to the completed snapshot is still suppressed afterwards.
        #expect(p.feed(Self.update(done)).outcome == .suppressed)
    }

    @Test("without an order id the idempotency key of a complete is the checkout id")
    func idempotencyFallsBackToCheckout() {
        let p = EventProcessor()
        let first = p.feed(#"{"event":"onComplete","checkout":{"id":"ck-7","status":"completed"}}"#)
        let second = p.feed(#"{"event":"onComplete","checkout":{"id":"ck-7","status":"completed"}}"#)
        #expect(first["idempotency_key"] == "ck-7")
        #expect(second["idempotency_key"] == "ck-7")
        #expect(second["repeat"] == true)
    }

    /// The first complete has no order id (key = checkout id); the repeat carries one. The state
    /// table only remembers an order id from the *first* complete, so the repeat's key falls
    /// through to its own order id and differs — a fulfilment worker would record two orders.
    @Test("a repeated complete keeps the first complete's idempotency key even if it now carries an order id")
    func repeatKeepsFirstKey() {
        let p = EventProcessor()
        let first = p.feed(#"{"event":"onComplete","checkout":{"id":"ck-8","status":"completed"}}"#)
        let second = p.feed(#"{"event":"onComplete","checkout":{"id":"ck-8","status":"completed","order":{"id":"gid://shopify/Order/77"}}}"#)
        #expect(second["repeat"] == true)
        #expect(second["idempotency_key"] == first["idempotency_key"])
    }

    /// The state table packs a completed checkout's key (a prefix and the checkout id, a prefix
    /// and a number, else its bytes) and rebuilds it from the id of the event that asks: every
    /// shape, with ids escaped, non-ASCII or sent as a number, comes back as it was published.
    @Test("a repeat's key is the first complete's, whatever its shape and however the checkout id was sent",
          arguments: [
              (#""ck-81""#, "gid://shopify/Order/ck-81"),  // a prefix, then the checkout id
              (#""ck-82""#, "gid://shopify/Order/5678901234567"),  // a prefix, then a number
              (#""ck-83""#, "7f9c2b1e-3d4a-4b5c-9e8f-0a1b2c3d4e57"),  // its bytes
              (#""ck\/84""#, "ord-ck/84"),  // an escaped checkout id
              (#""café-85""#, "commande-café-85"),  // non-ASCII, escaped
              ("8600", "ORD-8600"),  // a checkout id sent as a number
          ])
    func repeatKeepsKeyOfEveryShape(checkoutJSON: String, order: String) {
        let p = EventProcessor()
        func complete(_ orderID: String?) -> String {
            let orderPart = orderID.map { #","order":{"id":"\#($0)"}"# } ?? ""
            return #"{"event":"onComplete","checkout":{"id":\#(checkoutJSON),"status":"completed"\#(orderPart)}}"#
        }
        let first = p.feed(complete(order))
        let second = p.feed(complete(nil))
        let third = p.feed(complete("gid://shopify/Order/other"))
        #expect(first.outcome == .published(.complete))
        #expect(first["idempotency_key"] == .string(order))
        #expect(second["repeat"] == true)
        #expect(second["idempotency_key"] == .string(order))
        #expect(third["idempotency_key"] == .string(order))
    }

    @Test("a repeat keeps the first order id even if the repeat names another")
    func repeatKeepsFirstOrderID() {
        let p = EventProcessor()
        p.feed(Fixture.ecp("ec.complete", checkout: Fixture.snapshot(status: "completed", orderID: "O-1")))
        let second = p.feed(Fixture.ecp("ec.complete", checkout: Fixture.snapshot(status: "completed", orderID: "O-2")))
        #expect(second["repeat"] == true)
        #expect(second["idempotency_key"] == "O-1")
    }

    @Test("a fail after complete is published with after_complete true")
    func failAfterComplete() {
        let p = EventProcessor()
        p.feed(Fixture.ecp("ec.complete", checkout: Fixture.snapshot(status: "completed", orderID: "O-9")))
        let out = p.feed(#"{"event":"checkoutDidFail","checkoutId":"ck-1","error":{"code":"web_content_process_terminated","message":"killed"}}"#)
        #expect(out.outcome == .published(.fail))
        #expect(out["after_complete"] == true)
        #expect(out["idempotency_key"] == "O-9")
        #expect(out.topic == "checkout.fail.web_content_process_terminated")
    }

    @Test("a fail before any start is published, with after_complete false")
    func failBeforeStart() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onCheckoutFailed","checkout_id":"and-3","error":{"code":"web_view_not_supported","message":"No WebView"}}"#)
        #expect(out.outcome == .published(.fail))
        #expect(out["after_complete"] == false)
        #expect(out["repeat"] == false)
        #expect(out["seq"] == 1)
        #expect(out.topic == "checkout.fail.web_view_not_supported")
        // A later start for the same checkout is still published.
        #expect(p.feed(#"{"event":"onCheckoutStarted","checkout":{"id":"and-3"}}"#).outcome == .published(.start))
    }

    @Test("a bare dismiss with only a checkout id from the wrapper is published")
    func bareDismiss() {
        let p = EventProcessor()
        let out = p.feed(#"{"checkout_id":"ck-42","payload":{"event":"dismiss"}}"#)
        #expect(out.outcome == .published(.dismiss))
        #expect(out.topic == "checkout.dismiss")
        #expect(out["checkout_id"] == "ck-42")
        #expect(out["checkout"] == .null)
        #expect(out["error"] == .null)
        // Dismiss is never suppressed: again, and again.
        #expect(p.feed(#"{"checkout_id":"ck-42","payload":{"event":"dismiss"}}"#).outcome == .published(.dismiss))
        #expect(p.feed(#"{"checkout_id":"ck-42","payload":"{\"event\":\"checkoutDidDismiss\"}"}"#).outcome == .published(.dismiss))
    }

    @Test("a Primer failure is not terminal and a later success is still published")
    func primerRetry() {
        let p = EventProcessor()
        let failure = p.feed(wrap(#"{"state":"failure","error":{"errorId":"payment-failed","description":"Card declined","diagnosticsId":"d-1"},"checkoutData":{"payment":{"id":"pay_1","orderId":"ord-5","status":"DECLINED"}}}"#,
                                  checkoutID: "primer-5", sdk: "primer"))
        #expect(failure.outcome == .published(.fail))
        #expect(failure.topic == "checkout.fail.payment_failed")
        #expect(failure["error.terminal"] == false)
        let again = p.feed(wrap(#"{"state":"failure","error":{"errorId":"payment-failed","description":"Card declined","diagnosticsId":"d-2"}}"#,
                                checkoutID: "primer-5", sdk: "primer"))
        #expect(again.outcome == .published(.fail))
        let success = p.feed(wrap(#"{"state":"success","paymentResult":{"paymentId":"pay_2","status":"SUCCESS","amount":1999,"currencyCode":"EUR","paymentMethodType":"PAYMENT_CARD"}}"#,
                                  checkoutID: "primer-5", sdk: "primer"))
        #expect(success.outcome == .published(.complete))
        #expect(success["repeat"] == false)
        #expect(success["checkout_id"] == "primer-5")
        #expect(success["source.sdk"] == "primer")
        #expect(success["kind_seq"] == 1)
    }

    @Test("a terminal failure reported again is a repeat, counted apart; another failure, a non-terminal one or one after a new start is not")
    func failureRepeat() {
        let p = EventProcessor()
        let fail = #"{"event":"onFail","checkout_id":"ck-f","error":{"code":"payment_failed","message":"Card declined"}}"#
        let first = p.feed(fail)
        let second = p.feed(fail)
        #expect(first.outcome == .published(.fail) && second.outcome == .published(.fail))
        #expect(first["repeat"] == false)
        #expect(second["repeat"] == true)
        #expect(second.topic == "checkout.fail.payment_failed")
        let code = StableErrorCode.allCases.firstIndex(of: .paymentFailed)!
        #expect(p.counters.failedByCode[code] == 1)
        #expect(p.counters.repeatedFailures == 1)
        // Another message is another failure, and becomes the one a repeat is compared with.
        let other = p.feed(#"{"event":"onFail","checkout_id":"ck-f","error":{"code":"payment_failed","message":"Insufficient funds"}}"#)
        #expect(other["repeat"] == false)
        #expect(p.feed(#"{"event":"onFail","checkout_id":"ck-f","error":{"code":"payment_failed","message":"Insufficient funds"}}"#)["repeat"] == true)
        // A new start: the buyer tries again, and the same failure is a new one.
        _ = p.feed(#"{"event":"onStart","checkout_id":"ck-f"}"#)
        #expect(p.feed(fail)["repeat"] == false)
        // Another checkout's identical failure is its own.
        #expect(p.feed(#"{"event":"onFail","checkout_id":"ck-g","error":{"code":"payment_failed","message":"Card declined"}}"#)["repeat"] == false)
        #expect(p.counters.failedByCode[code] == 4)
        #expect(p.counters.repeatedFailures == 2)
        // Primer's failures are not terminal: each is an attempt of its own, never a repeat.
        let primer = wrap(#"{"state":"failure","error":{"errorId":"payment-failed","description":"Card declined"}}"#,
                          checkoutID: "primer-r", sdk: "primer")
        #expect(p.feed(primer)["error.terminal"] == false)
        #expect(p.feed(primer)["repeat"] == false)
    }

    @Test("seq is strictly increasing daemon-wide; kind_seq counts per kind")
    func sequences() throws {
        let p = EventProcessor()
        let inputs = [
            Fixture.ecp("ec.start", checkout: Self.snapshotA),  // start 1
            Self.update(Self.snapshotB),  // update 1
            Self.update(Self.snapshotB),  // suppressed: no seq
            "not json",  // dead letter: takes a seq
            Self.update(Self.snapshotA),  // update 2
            #"{"event":"onFail","checkout_id":"ck-1","error":{"code":"network_error"}}"#,  // fail 1
            #"{"event":"onStart","checkout":{"id":"ck-2"}}"#,  // start 2
            Fixture.ecp("ec.complete", checkout: Fixture.snapshot(status: "completed", orderID: "O-1")),  // complete 1
            #"{"checkout_id":"ck-1","payload":{"event":"dismiss"}}"#,  // dismiss 1
            #"{"event":"onDismiss","checkout_id":"ck-2"}"#,  // dismiss 2
        ]
        let outs = inputs.map { p.feed($0) }
        let published = outs.filter { $0.outcome != .suppressed }
        let seqs = published.compactMap { $0["seq"]?.intValue }
        #expect(seqs == Array(1...9))
        #expect(outs.map { $0["kind_seq"]?.intValue } == [1, 1, nil, 1, 2, 1, 2, 1, 1, 2])
        #expect(outs.map { $0["kind"]?.stringValue } == [
            "start", "update", nil, "deadletter", "update", "fail", "start", "complete", "dismiss", "dismiss",
        ])
        #expect(p.lastSeq == 9)
        #expect(p.kindSeq == [2, 2, 1, 1, 2])
        #expect(p.deadLetterSeq == 1)
    }

    @Test("seq continues from startSeq (the journal's last seq after a restart)")
    func startSeq() {
        let p = EventProcessor(startSeq: 41)
        #expect(p.feed(#"{"event":"dismiss","checkout_id":"x"}"#)["seq"] == 42)
        #expect(p.feed(#"{"event":"dismiss","checkout_id":"x"}"#)["seq"] == 43)
    }

    @Test("the fail topic is checkout.fail.<stable code>", arguments: [
        (#"{"code":"cart_expired"}"#, "checkout.fail.cart_expired"),
        (#"{"code":"NETWORK_ERROR"}"#, "checkout.fail.network_error"),
        (#"{"code":"httpError","statusCode":410}"#, "checkout.fail.cart_expired"),
        (#"{"code":"httpError","statusCode":502}"#, "checkout.fail.http_error"),
        (#"{"code":"payment-failed"}"#, "checkout.fail.payment_failed"),
        (#"{"code":"mystery"}"#, "checkout.fail.unknown"),
    ])
    func failTopic(error: String, topic: String) {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"fail","checkout_id":"ck-1","error":"# + error + "}")
        #expect(out.outcome == .published(.fail))
        #expect(out.topic == topic)
        #expect(out.topic.hasPrefix("checkout.fail"))
    }

    @Test("the envelope carries every documented field, with v:1")
    func envelopeFields() {
        let p = EventProcessor()
        let out = p.feed(wrap(Self.update(Fixture.snapshot(id: nil)), checkoutID: "ck-1", eventID: "evt-9"))
        #expect(out.envelope.keys == [
            "v", "seq", "kind_seq", "shard", "kind", "checkout_id", "event_id", "idempotency_key", "source", "received_at",
            "occurred_at", "repeat", "after_complete", "summary", "error", "payment", "checkout",
        ])
        #expect(out["summary"]?.keys == [
            "status", "currency", "total", "subtotal", "line_count", "item_quantity", "order_id",
        ])
        #expect(out["source"]?.keys == ["sdk", "platform", "format"])
        #expect(out["v"] == 1)
        #expect(out["event_id"] == "evt-9")
        #expect(out["idempotency_key"] == "ck-1")
        #expect(out["received_at"] == "2025-12-02T11:39:01.123Z")
    }

    @Test("heartbeat reports the last seq and every kind_seq")
    func heartbeat() {
        let p = EventProcessor()
        p.feed(#"{"event":"onStart","checkout":{"id":"ck-1"}}"#)
        p.feed(#"{"event":"onDismiss","checkout_id":"ck-1"}"#)
        p.feed("[")
        let frames = p.writeHeartbeat(at: Timestamp(milliseconds: 0))
        let hb = readFrames(.published(.start), topic: frames.topic, envelope: frames.envelope)
        #expect(hb.topic == "bus.heartbeat")
        #expect(hb["kind"] == "heartbeat")
        #expect(hb["seq"] == 3)
        #expect(hb["kind_seqs.start"] == 1)
        #expect(hb["kind_seqs.update"] == 0)
        #expect(hb["kind_seqs.dismiss"] == 1)
        #expect(hb["kind_seqs.deadletter"] == 1)
        #expect(hb["sent_at"] == "1970-01-01T00:00:00.000Z")
        #expect(hb["tracked_checkouts"] == 1)
        #expect(hb["started_at"] == nil, "said only when the daemon set it")
        p.startedAt = Timestamp(milliseconds: 1_765_000_000_123)
        let again = p.writeHeartbeat(at: Timestamp(milliseconds: 0))
        let run = readFrames(.published(.start), topic: again.topic, envelope: again.envelope)
        #expect(run["started_at"] == "2025-12-06T05:46:40.123Z")
    }

    @Test("idle checkouts are forgotten after the TTL: a late complete is no longer a repeat")
    func ttlThroughProcessor() {
        var options = EventProcessor.Options()
        options.checkoutTTLSeconds = 60
        let p = EventProcessor(options: options)
        let done = Fixture.ecp("ec.complete", checkout: Fixture.snapshot(status: "completed", orderID: "O-1"))
        #expect(p.feed(done, now: 100)["repeat"] == false)
        #expect(p.feed(done, now: 160)["repeat"] == true)  // 60 s idle: still remembered
        p.tick(now: 221)
        #expect(p.state.count == 0)
        #expect(p.feed(done, now: 221)["repeat"] == false)
    }
}
