import CheckoutBusTools
import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Deterministic synthetic checkout lifecycles for load tests, with the outcome the daemon must
/// produce for each event known in advance.
///
/// Every checkout draws its raw family and platform spelling from a seeded generator: Embedded
/// Checkout Protocol, callback events in iOS/Android/SwiftUI/React Native spellings, the Checkout
/// Sheet Kit bridge for outcomes, and Primer (with retries: failures before a success). Lifecycles
/// contain consecutive identical updates (keys reordered) that must be suppressed, repeated
/// completes, failures before start, and dismissals. Events of about `window` checkouts are
/// interleaved, as concurrent buyers would be. Every event is wrapped in the ingest wrapper whose
/// `event_id` carries a fixed-width field the driver stamps with the send time.
///
/// `Sendable`: a value; ``makeEvents()`` and ``Stream`` are pure given the seed.
package struct FloodGenerator: Sendable {
    /// One raw event and what the daemon must do with it.
    package struct Event: Sendable {
        package var bytes: [UInt8]
        /// Byte offset of the 19-digit send-time field inside `bytes`.
        package var stampOffset: Int
        /// The kind expected on the bus, or nil when the event must be suppressed.
        package var expected: LifecycleKind?
        /// The checkout the event belongs to.
        package var checkoutID = ""
    }

    package var checkouts: Int
    package var seed: UInt64
    package var window = 64
    package var runID: String

    package init(checkouts: Int, seed: UInt64, runID: String) {
        self.checkouts = checkouts
        self.seed = seed
        self.runID = runID
    }

    /// Expected counts for a generated list.
    package static func expectedCounts(_ events: [Event]) -> (published: [Int], suppressed: Int) {
        var published = [Int](repeating: 0, count: LifecycleKind.allCases.count)
        var suppressed = 0
        for e in events {
            if let k = e.expected { published[Int(k.rawValue)] += 1 } else { suppressed += 1 }
        }
        return (published, suppressed)
    }

    /// Every event of the run, in one list (tests, small runs). Flood itself streams them
    /// (``Stream``) and never holds more than the interleaving window.
    package func makeEvents() -> [Event] {
        var out: [Event] = []
        var stream = Stream(self, producer: 0, of: 1)
        while let e = stream.next() { out.append(e) }
        return out
    }

    /// The events of one producer's share of the checkouts (indices `producer`, `producer + of`, …),
    /// made as they are asked for: O(1) work and memory per event, whatever the number of checkouts.
    ///
    /// Each lifecycle is drawn from a generator seeded by the run's seed and the checkout's index
    /// alone, so a checkout's events are the same whichever producer sends them; only the
    /// interleaving differs. Event numbers (in `event_id`) are unique across producers.
    /// `Sendable`: a value; lives with the producer that iterates it.
    package struct Stream: IteratorProtocol, Sendable {
        private let generator: FloodGenerator
        private let producer: Int
        private let producers: Int
        private var interleave: SplitMix64
        private var active: [(events: [Event], next: Int)] = []
        private var nextCheckout: Int
        private var counter = 0

        package init(_ generator: FloodGenerator, producer: Int, of producers: Int) {
            precondition(producers > 0 && producer >= 0 && producer < producers)
            self.generator = generator
            self.producer = producer
            self.producers = producers
            interleave = SplitMix64(seed: generator.seed &* 0x2545_F491_4F6C_DD1D &+ UInt64(producer))
            nextCheckout = producer
            active.reserveCapacity(generator.window)
        }

        package mutating func next() -> Event? {
            while active.count < generator.window && nextCheckout < generator.checkouts {
                var rng = SplitMix64(seed: generator.seed ^ (UInt64(nextCheckout) &* 0x9E37_79B9_7F4A_7C15))
                active.append((generator.lifecycle(index: nextCheckout, rng: &rng, counter: &counter,
                                                   producer: producer, producers: producers), 0))
                nextCheckout += producers
            }
            guard !active.isEmpty else { return nil }
            let pick = Int(interleave.next() % UInt64(active.count))
            let event = active[pick].events[active[pick].next]
            active[pick].next += 1
            if active[pick].next == active[pick].events.count {
                active.swapAt(pick, active.count - 1)
                active.removeLast()
            }
            return event
        }
    }

    // MARK: Lifecycles

    private func lifecycle(index: Int, rng: inout SplitMix64, counter: inout Int, producer: Int, producers: Int) -> [Event] {
        let id = "\(runID)-\(index)"
        var events: [Event] = []
        func add(_ payload: String, sdk: String, platform: String, _ expected: LifecycleKind?) {
            counter += 1
            events.append(FloodGenerator.wrap(payload, checkoutID: id, sdk: sdk, platform: platform,
                                              eventNumber: (counter - 1) * producers + producer + 1, runID: runID,
                                              expected: expected))
        }
        let family = rng.next() % 10
        if family >= 8 {
            // Primer: failed attempts (not terminal) then success or dismissal.
            let platform = ["ios", "android", "react_native"][Int(rng.next() % 3)]
            let names = RawSpellings.primerNames[platform]!
            for attempt in 0..<Int(rng.next() % 3) {
                let code = ["payment-failed", "bad-network", "payment-cancelled"][Int(rng.next() % 3)]
                add(#"{"event":"\#(names.fail)","error":{"errorId":"\#(code)","description":"attempt \#(attempt) failed","diagnosticsId":"diag-\#(index)-\#(attempt)"},"checkoutData":{"payment":{"id":"pay-\#(index)-\#(attempt)","orderId":"ord-\#(id)","status":"DECLINED"}}}"#,
                    sdk: "primer", platform: platform, .fail)
            }
            if rng.next() % 10 < 8 {
                add(#"{"event":"\#(names.complete)","paymentResult":{"paymentId":"pay-\#(index)","status":"SUCCESS","amount":\#(1000 + index % 9000),"currencyCode":"EUR","paymentMethodType":"PAYMENT_CARD","orderId":"ord-\#(id)"}}"#,
                    sdk: "primer", platform: platform, .complete)
            } else {
                add(#"{"event":"\#(names.dismiss)"}"#, sdk: "primer", platform: platform, .dismiss)
            }
            return events
        }
        let useECP = family < 4
        let spelling = RawSpellings.callbackSpellings[Int(rng.next() % UInt64(RawSpellings.callbackSpellings.count))]
        let platform = spelling.platform
        func snapshotEvent(_ kind: LifecycleKind, _ quantity: Int, reordered: Bool, order: String? = nil) -> String {
            let snap = FloodGenerator.snapshot(id: id, quantity: quantity, index: index, reordered: reordered, order: order)
            if useECP {
                let method: String
                switch kind {
                case .start: method = "ec.start"
                case .complete: method = "ec.complete"
                default: method = ["ec.line_items.change", "ec.totals.change", "ec.buyer.change"][quantity % 3]
                }
                return #"{"jsonrpc":"2.0","method":"\#(method)","params":{"checkout":\#(snap)}}"#
            }
            return #"{"event":"\#(spelling.name(kind))","checkout":\#(snap)}"#
        }
        let failFirst = rng.next() % 50 == 0
        if failFirst {
            add(#"{"event":"\#(spelling.name(.fail))","error":{"code":"web_view_not_supported","message":"no web view"}}"#,
                sdk: "shopify", platform: platform, .fail)
            return events
        }
        var quantity = 1
        add(snapshotEvent(.start, quantity, reordered: false), sdk: "shopify", platform: platform, .start)
        for _ in 0..<(1 + Int(rng.next() % 4)) {
            quantity += 1
            add(snapshotEvent(.update, quantity, reordered: false), sdk: "shopify", platform: platform, .update)
            if rng.next() % 10 < 3 {
                // The same snapshot again, keys reordered: suppressed.
                add(snapshotEvent(.update, quantity, reordered: true), sdk: "shopify", platform: platform, nil)
            }
        }
        let outcome = rng.next() % 20
        if outcome < 12 {
            let order = "gid://shopify/Order/\(id)"
            if family == 7 {
                let body = #"{\"orderDetails\":{\"id\":\"\#(order)\",\"cart\":{\"lines\":[{\"title\":\"Tote\",\"quantity\":\#(quantity)}],\"price\":{\"total\":{\"amount\":\"\#(quantity * 25).00\",\"currencyCode\":\"USD\"}}}}}"#
                add(#"{"name":"completed","body":"\#(body)"}"#, sdk: "shopify", platform: platform, .complete)
            } else {
                add(snapshotEvent(.complete, quantity, reordered: false, order: order), sdk: "shopify", platform: platform, .complete)
            }
            if rng.next() % 10 == 0 {
                add(snapshotEvent(.complete, quantity, reordered: false, order: order), sdk: "shopify", platform: platform, .complete)
            }
        } else if outcome < 17 {
            let codes = ["cart_expired", "NETWORK_ERROR", "httpError", "invalid_cart", "web_content_process_terminated"]
            let code = codes[Int(rng.next() % UInt64(codes.count))]
            if family == 6 {
                add(#"{"name":"error","body":"[{\"group\":\"expired\",\"code\":\"\#(code)\",\"reason\":\"failed\"}]"}"#,
                    sdk: "shopify", platform: platform, .fail)
            } else {
                add(#"{"event":"\#(spelling.name(.fail))","error":{"code":"\#(code)","message":"failed","statusCode":410}}"#,
                    sdk: "shopify", platform: platform, .fail)
            }
        }
        add(#"{"event":"\#(spelling.name(.dismiss))"}"#, sdk: "shopify", platform: platform, .dismiss)
        return events
    }

    package static func snapshot(id: String, quantity: Int, index: Int, reordered: Bool, order: String?) -> String {
        let price = 1000 + index % 4000
        let lines = #"[{"id":"li_1","item":{"id":"gid://shopify/ProductVariant/\#(index % 97)","title":"Canvas Tote","price":\#(price)},"quantity":\#(quantity),"totals":[{"type":"subtotal","amount":\#(price * quantity)}]},{"id":"li_2","item":{"id":"gid://shopify/ProductVariant/7","title":"Enamel Mug","price":1450},"quantity":1,"totals":[{"type":"subtotal","amount":1450}]}]"#
        let totals = #"[{"type":"subtotal","amount":\#(price * quantity + 1450)},{"type":"tax","amount":\#((price * quantity + 1450) / 10)},{"type":"total","amount":\#((price * quantity + 1450) * 11 / 10)}]"#
        let orderPart = order.map { #","order":{"id":"\#($0)","permalink_url":"https://shop.example/orders/\#(index)"}"# } ?? ""
        let buyer = #"{"email":"buyer\#(index)@example.com","first_name":"Ada","last_name":"Lovelace"}"#
        let links = #"[{"type":"terms_of_service","url":"https://shop.example/policies/terms"}]"#
        if reordered {
            return #"{"links":\#(links),"totals":\#(totals),"buyer":\#(buyer),"line_items":\#(lines),"currency":"USD","status":"incomplete","id":"\#(id)"\#(orderPart),"messages":[]}"#
        }
        return #"{"id":"\#(id)","status":"incomplete","currency":"USD","messages":[],"line_items":\#(lines),"totals":\#(totals),"buyer":\#(buyer),"links":\#(links)\#(orderPart)}"#
    }

    /// Wraps a raw payload; `event_id` is `<run>:<n>:<19 digits of send time>`.
    package static func wrap(_ payload: String, checkoutID: String, sdk: String, platform: String, eventNumber: Int,
                     runID: String, expected: LifecycleKind?) -> Event {
        let head = #"{"event_id":"\#(runID):\#(eventNumber):"#
        let text = head + "0000000000000000000" + #"","checkout_id":"\#(checkoutID)","sdk":"\#(sdk)","platform":"\#(platform)","payload":\#(payload)}"#
        return Event(bytes: Array(text.utf8), stampOffset: head.utf8.count, expected: expected, checkoutID: checkoutID)
    }

}
