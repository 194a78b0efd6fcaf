import Foundation
import Testing

@Suite("hostile input over the wire", .serialized, .timeLimit(.minutes(4)))
struct HostileInputTests {
    /// Every acknowledged event gets an answer, and the daemon's counters add up.
    static func sendAll(_ lines: [String], to daemon: DaemonProcess) throws -> (acked: Int, rejected: Int) {
        let result = try send(lines, to: daemon.ingestAcked, arguments: ["--acked", "--timeout", "10"])
        let summary = result.stderr.split(separator: "\n").first { $0.hasPrefix("sent=") } ?? ""
        var acked = 0
        var rejected = 0
        for part in summary.split(separator: " ") {
            let kv = part.split(separator: "=")
            if kv.first == "acked" { acked = Int(kv[1]) ?? 0 }
            if kv.first == "rejected" { rejected = Int(kv[1]) ?? 0 }
        }
        return (acked, rejected)
    }

    @Test("wrong types in every field: each event answered, none fatal, the counts add up")
    func wrongTypes() throws {
        let daemon = try DaemonProcess()
        let values = ["1", "true", "null", "[]", "{}", "\"x\"", "-1.5e300"]
        var lines: [String] = []
        for v in values {
            // The ingest wrapper's fields.
            for field in ["checkout_id", "event_id", "platform", "sdk", "occurred_at"] {
                lines.append(#"{"\#(field)":\#(v),"checkout_id":"wt-w","payload":{"event":"onCheckoutStarted"}}"#)
                lines.append(#"{"checkout_id":"wt-\#(field)","\#(field)":\#(v),"payload":{"event":"onCheckoutStarted"}}"#)
            }
            lines.append(#"{"checkout_id":"wt-p","payload":\#(v)}"#)
            // Callback events.
            lines.append(#"{"event":\#(v),"checkout":{"id":"wt-c"}}"#)
            lines.append(#"{"event":"onCheckoutUpdated","checkout":\#(v)}"#)
            lines.append(#"{"event":"onCheckoutFailed","checkoutId":"wt-f","error":\#(v)}"#)
            lines.append(#"{"event":"onCheckoutFailed","checkoutId":"wt-f","error":{"code":\#(v),"message":\#(v),"statusCode":\#(v)}}"#)
            // Embedded Checkout Protocol.
            lines.append(#"{"jsonrpc":"2.0","method":\#(v),"params":{"checkout":{"id":"wt-e"}}}"#)
            lines.append(#"{"jsonrpc":"2.0","method":"ec.start","params":\#(v)}"#)
            lines.append(#"{"jsonrpc":"2.0","method":"ec.totals.change","params":{"checkout":{"id":\#(v),"totals":\#(v),"currency":\#(v),"line_items":\#(v)}}}"#)
            // Sheet bridge.
            lines.append(#"{"name":"completed","body":\#(v)}"#)
            lines.append(#"{"name":"error","body":"[{\"group\":\#(v == "\"x\"" ? "1" : v),\"code\":1}]"}"#)
            // Primer.
            lines.append(#"{"checkout_id":"wt-pr","payload":{"event":"primerDidCompleteCheckoutWithData","paymentResult":{"amount":\#(v),"currencyCode":\#(v),"orderId":\#(v)}}}"#)
            lines.append(#"{"checkout_id":"wt-pr","payload":{"event":"primerDidFailWithError","error":{"errorId":\#(v),"description":\#(v)}}}"#)
        }
        let (acked, rejected) = try Self.sendAll(lines, to: daemon)
        #expect(acked + rejected == lines.count, "every event answered")
        #expect(rejected > 0)
        let stats = try ControlClient(daemon.control).request(#"{"op":"stats"}"#).status
        let counters = try #require(stats["counters"] as? [String: Any])
        let published = (counters["published"] as? [String: Int] ?? [:]).values.reduce(0, +)
        let dead = (counters["deadlettered"] as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect(counters["received"] as? Int == lines.count)
        // Outcomes add up; the same string event_id used twice is a retry, answered as a duplicate.
        let suppressed = counters["suppressed"] as? Int ?? 0
        let duplicates = counters["duplicates"] as? Int ?? 0
        #expect(published + dead + suppressed + duplicates == lines.count)
        #expect((counters["deadlettered"] as? [String: Int])?["wrong_type"] ?? 0 > 0)
        #expect(daemon.process.isRunning)
        #expect(daemon.terminate() == 0)
    }

    @Test("a flood of unknown checkout ids keeps state bounded by --max-checkouts")
    func unknownIDsFlood() throws {
        let daemon = try DaemonProcess(["--max-checkouts", "1000"])
        let lines = (0..<20_000).map { #"{"checkout_id":"flood-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        let (acked, rejected) = try Self.sendAll(lines, to: daemon)
        #expect(acked == 20_000)
        #expect(rejected == 0)
        let stats = try ControlClient(daemon.control).request(#"{"op":"stats"}"#).status
        let counters = try #require(stats["counters"] as? [String: Any])
        #expect(counters["tracked_checkouts"] as? Int == 1000)
        #expect(counters["evicted_checkouts"] as? Int == 19_000)
        #expect(daemon.terminate() == 0)
    }

    @Test("huge and deeply nested messages are dead-lettered with their reason, the daemon lives on")
    func hugeAndDeep() throws {
        let daemon = try DaemonProcess()
        // Over --max-message-bytes (1 MiB), under the wire limit (twice that): dead-lettered, head kept.
        let huge = #"{"checkout_id":"big","payload":{"event":"onCheckoutUpdated","checkout":{"id":"big","pad":""# + String(repeating: "x", count: 3 << 19) + #""}}}"#
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        let (acked, rejected) = try Self.sendAll([huge, deep, #"{"checkout_id":"ok","payload":{"event":"onCheckoutStarted"}}"#], to: daemon)
        #expect(acked == 1)
        #expect(rejected == 2)
        let records = try ControlClient(daemon.control).replayAll(prefix: "bus.deadletter")
        #expect(records.map { $0.2["reason"] as? String } == ["oversized", "too_deep"])
        #expect(records.first?.2["raw_truncated"] as? Bool == true)
        #expect(records.first?.2["size"] as? Int == huge.utf8.count)
        #expect(daemon.process.isRunning)
        #expect(daemon.terminate() == 0)
    }
}
