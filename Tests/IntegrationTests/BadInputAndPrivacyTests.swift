import Foundation
import Testing

@Suite("bad input, privacy and daemon flags", .serialized, .timeLimit(.minutes(4)))
struct BadInputAndPrivacyTests {
    @Test("every kind of bad input is dead-lettered with its reason and raw bytes; the daemon lives on")
    func deadLetters() throws {
        let daemon = try DaemonProcess(["--max-message-bytes", "2048"])
        let tail = try TailProcess(from: daemon.publish, count: 9)
        var input: [UInt8] = []
        func line(_ s: String) { input += Array(s.utf8) + [0x0A] }
        line(#"{"event":"checkoutDidStart","checkout":{"id":"bad-1""#)            // truncated JSON
        input += Array(#"{"event":"start","checkout":{"id":"caf"#.utf8) + [0xC3, 0x28] + Array(#""}}"#.utf8) + [0x0A]
        line(#"[1,2,3]"#)                                                        // unknown shape
        line(#"{"event":"checkoutDidExplode","checkout_id":"x"}"#)               // unknown event
        line(#"{"jsonrpc":"2.0","method":"ec.ready","params":{}}"#)              // not lifecycle
        line(#"{"event":"checkoutDidDismiss"}"#)                                 // no checkout id
        line(#"{"event":"onCheckoutStarted","checkout":{"id":"big","note":""# + String(repeating: "x", count: 4000) + #""}}"#)
        line(String(repeating: "[", count: 200) + String(repeating: "]", count: 200))  // too deep
        line(#"{"event":"onCheckoutStarted","checkout":{"id":"still-alive"}}"#)  // the daemon still works
        let result = try sendBytes(input, to: daemon.ingest)
        #expect(result.status == 0)
        let got = try tail.envelopes()
        let reasons = got.prefix(8).map { $0.string("reason") ?? "-" }
        #expect(reasons == ["invalid_json", "invalid_utf8", "unknown_shape", "unknown_event", "not_lifecycle",
                            "missing_checkout_id", "oversized", "too_deep"])
        #expect(got.prefix(8).allSatisfy { $0.string("kind") == "deadletter" && $0.string("raw") != nil })
        // The invalid byte survives as an escape, so the raw input is recoverable.
        #expect(got[1].string("raw")?.contains("\u{00C3}") == true)
        #expect(got[6].int("size") ?? 0 > 2048)
        #expect(got[8].string("checkout_id") == "still-alive")
        // Every dead letter is counted, by reason, in the heartbeat (answered at once on subscribe).
        let heartbeat = try TailProcess(from: daemon.publish, topics: ["bus.heartbeat"], count: 1)
        let counters = try #require(try heartbeat.envelopes().first?.object("counters"))
        #expect(counters.int("received") == 9)
        let byReason = try #require(counters.object("deadlettered"))
        for reason in ["invalid_json", "invalid_utf8", "unknown_shape", "unknown_event", "not_lifecycle",
                       "missing_checkout_id", "oversized", "too_deep"] {
            #expect(byReason.int(reason) == 1, "\(reason)")
        }
        #expect(daemon.terminate() == 0)
    }

    static let completedOrder = #"""
        {"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":{"id":"gid://shopify/Checkout/p-1","status":"completed","currency":"USD","buyer":{"email":"ada@example.com","first_name":"Ada","last_name":"Lovelace","phone_number":"+15555550100"},"line_items":[{"id":"li_1","item":{"id":"v1","title":"Canvas Tote","price":2500},"quantity":1}],"fulfillment":{"methods":[{"id":"m1","type":"shipping","destinations":[{"id":"d1","address":{"street_address":"12 Analytical Row","address_locality":"London","postal_code":"N1 9GU","first_name":"Ada"}}]}]},"payment":{"selected_instrument_id":"pi_1","instruments":[{"id":"pi_1","handler_id":"card","type":"card","brand":"visa","last_digits":"4242","billing_address":{"street_address":"12 Analytical Row"}}]},"totals":[{"type":"subtotal","amount":2500},{"type":"total","amount":2500}],"order":{"id":"gid://shopify/Order/77","permalink_url":"https://shop.example/orders/77"}}}}
        """#

    @Test("a rejected event's acknowledgement names the event id its wrapper or body gave, so a producer can match it")
    func rejectionNamesEventID() throws {
        let daemon = try DaemonProcess()
        let wrapped = try sendBytes(Array(#"{"checkout_id":"c-1","event_id":"dl-1","payload":{"name":"webPixels","body":"{}"}}"#.utf8) + [0x0A],
                                    to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(wrapped.status != 0)
        #expect(wrapped.stderr.contains("first rejection: not_lifecycle (seq 1, event_id dl-1)"), "\(wrapped.stderr)")
        let bare = try sendBytes(Array(#"{"event":"somethingNew","event_id":"dl-2","checkout":{"id":"c-2"}}"#.utf8) + [0x0A],
                                 to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(bare.stderr.contains("first rejection: unknown_event (seq 2, event_id dl-2)"), "\(bare.stderr)")
        // Input that is not JSON has no id to give.
        let broken = try sendBytes(Array(#"{"event_id":"dl-3","#.utf8) + [0x0A], to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(broken.stderr.contains("first rejection: invalid_json (seq 3, event_id -)"), "\(broken.stderr)")
        #expect(daemon.terminate() == 0)
    }

    @Test("buyer and payment details are redacted by default")
    func redactedByDefault() throws {
        let daemon = try DaemonProcess()
        let tail = try TailProcess(from: daemon.publish, count: 1)
        try send([Self.completedOrder], to: daemon.ingest)
        let envelope = try #require(try tail.envelopes().first)
        let text = String(decoding: try JSONSerialization.data(withJSONObject: envelope), as: UTF8.self)
        for secret in ["ada@example.com", "Lovelace", "+15555550100", "Analytical Row", "4242", "N1 9GU"] {
            #expect(!text.contains(secret), "\(secret) leaked")
        }
        let checkout = try #require(envelope.object("checkout"))
        #expect(checkout.string("buyer") == "[redacted]")
        #expect(text.contains("Canvas Tote"))
        #expect(envelope.object("summary")?.string("order_id") == "gid://shopify/Order/77")
    }

    @Test("--buyer-data full keeps them")
    func fullBuyerData() throws {
        let daemon = try DaemonProcess(["--buyer-data", "full"])
        let tail = try TailProcess(from: daemon.publish, count: 1)
        try send([Self.completedOrder], to: daemon.ingest)
        let envelope = try #require(try tail.envelopes().first)
        #expect(envelope.object("checkout")?.object("buyer")?.string("email") == "ada@example.com")
    }

    @Test("SIGTERM drains what was received and exits 0")
    func sigtermDrains() throws {
        let daemon = try DaemonProcess()
        let count = 2000
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout.dismiss"], count: count)
        let lines = (0..<count).map { #"{"event":"checkoutDidDismiss","checkout_id":"drain-\#($0)"}"# }
        #expect(try send(lines, to: daemon.ingest).status == 0)
        // "Received" is the daemon's count, not the sender's: bytes still in the kernel's socket
        // buffer when ingest closes were never received (on a loaded machine they can be).
        let control = try ControlClient(daemon.control)
        #expect(try waitUntil(timeout: 20) {
            (try control.stats()["counters"] as? [String: Any])?.int("received") == count
        })
        #expect(daemon.terminate() == 0)
        let got = try tail.envelopes()
        #expect(got.count == count)
        #expect(daemon.stderrText.contains("msg=stopped"))
    }

    @Test("--help documents every flag; a bad flag is refused with exit 2")
    func helpAndBadFlags() throws {
        let help = try runTool("checkoutbusd", ["--help"])
        #expect(help.status == 0)
        for flag in ["--ingest", "--publish", "--data-dir", "--buyer-data", "--max-message-bytes", "--max-checkouts",
                     "--checkout-ttl", "--publish-hwm", "--ingest-hwm", "--heartbeat-ms", "--log-level", "--help", "--version"] {
            #expect(help.output.contains(flag), "\(flag) missing from --help")
        }
        let bad = try runTool("checkoutbusd", ["--no-such-flag"])
        #expect(bad.status == 2)
        #expect(bad.output.contains("unknown flag --no-such-flag"))
        let badEndpoint = try runTool("checkoutbusd", ["--ingest", "127.0.0.1:7700"])
        #expect(badEndpoint.status == 2)
    }

    @Test("a port already in use is a clear error, exit 1")
    func portInUse() throws {
        let first = try DaemonProcess()
        let otherData = TestScratch.url("cb-\(UUID().uuidString)")
        let second = try runTool("checkoutbusd", ["--ingest", first.ingest, "--publish", "tcp://127.0.0.1:*",
                                                  "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*",
                                                  "--data-dir", otherData.path])
        #expect(second.status == 1)
        #expect(second.output.contains("--ingest \(first.ingest): address already in use"), "\(second.output)")
    }

    @Test("a second daemon on the same data directory is refused, exit 1")
    func dataDirectoryInUse() throws {
        let first = try DaemonProcess()
        let second = try runTool("checkoutbusd", ["--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*",
                                                  "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*",
                                                  "--data-dir", first.dataDirectory.path])
        #expect(second.status == 1)
        #expect(second.output.contains("in use by another checkoutbusd"))
        // The first daemon is unharmed.
        #expect(first.process.isRunning)
    }
}
