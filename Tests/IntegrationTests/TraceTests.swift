import CheckoutBusCore
import Foundation
import Testing

// `checkoutbus trace` against real daemons: the story of one checkout read back from the journal
// over the control socket, with its verdict; json; an unknown checkout; only the owning shard asked.

/// One checkout's lifecycle as raw events: a start, an update and its identical repeat (suppressed),
/// a failure and the producer's retry of it (same event_id), a complete, a repeated complete, and a
/// failure after the complete. `order` names the order.
func traceLifecycle(_ checkout: String, order: String) -> [String] {
    let snapshot = #"{"id":"\#(checkout)","status":"incomplete","currency":"USD","totals":[{"type":"total","amount":2500}]}"#
    let completed = #"{"id":"\#(checkout)","status":"completed","currency":"USD","totals":[{"type":"total","amount":2500}],"order":{"id":"\#(order)"}}"#
    let fail = #"{"event":"checkoutDidFail","checkout_id":"\#(checkout)","event_id":"\#(checkout)-fail","error":{"code":"httpError","message":"Gone","statusCode":410}}"#
    return [
        #"{"event":"checkoutDidStart","checkout_id":"\#(checkout)","event_id":"\#(checkout)-start","platform":"ios","payload":{"checkout":\#(snapshot)}}"#,
        #"{"checkout_id":"\#(checkout)","event_id":"\#(checkout)-u1","payload":{"jsonrpc":"2.0","method":"ec.totals.change","params":{"checkout":\#(snapshot.replacingOccurrences(of: "2500", with: "3000"))}}}"#,
        #"{"checkout_id":"\#(checkout)","event_id":"\#(checkout)-u2","payload":{"jsonrpc":"2.0","method":"ec.totals.change","params":{"checkout":\#(snapshot.replacingOccurrences(of: "2500", with: "3000"))}}}"#,
        fail,
        fail,
        #"{"event":"checkoutDidComplete","checkout_id":"\#(checkout)","event_id":"\#(checkout)-c1","platform":"ios","payload":{"checkout":\#(completed)}}"#,
        #"{"event":"checkoutDidComplete","checkout_id":"\#(checkout)","event_id":"\#(checkout)-c2","platform":"ios","payload":{"checkout":\#(completed)}}"#,
        #"{"event":"checkoutDidFail","checkout_id":"\#(checkout)","event_id":"\#(checkout)-late","error":{"code":"httpError","message":"Gone","statusCode":410}}"#,
    ]
}

/// A checkout id `trace-<run>-<i>` owned by `shard` of `count`.
func checkoutOwned(by shard: Int, of count: Int, run: String) -> String {
    var i = 0
    while ShardMap.owner(of: "trace-\(run)-\(i)", count: count) != shard { i += 1 }
    return "trace-\(run)-\(i)"
}

/// Runs `checkoutbus trace ARGUMENTS`, stdout and stderr apart.
func runTrace(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
    let p = Process()
    p.executableURL = Products.url("checkoutbus")
    p.arguments = ["trace"] + arguments
    let out = Pipe()
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.start()
    let output = PipeLineReader(out.fileHandleForReading).readAll(timeout: 30).joined(separator: "\n")
    let errors = PipeLineReader(err.fileHandleForReading).readAll(timeout: 5).joined(separator: "\n")
    return (waitForExit(p, timeout: 30), output, errors)
}

@Suite("checkoutbus trace", .serialized, .timeLimit(.minutes(4)))
struct TraceTests {
    @Test("a failure, a retry and a repeated complete: every envelope in order, suppressed counts, the verdict")
    func storyOfOneCheckout() throws {
        let daemon = try DaemonProcess()
        let checkout = "gid://shopify/Checkout/trace-1"
        let other = "gid://shopify/Checkout/trace-2"
        // Another checkout's events interleave; acknowledged sending returns once all are journaled.
        var lines: [String] = []
        for (a, b) in zip(traceLifecycle(checkout, order: "gid://shopify/Order/1001"),
                          traceLifecycle(other, order: "gid://shopify/Order/2002")) {
            lines += [a, b]
        }
        #expect(try send(lines, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        // A dead letter that names the checkout (the wrapper's checkout_id, an event nobody knows).
        let deadLetter = #"{"checkout_id":"\#(checkout)","event_id":"dl-1","payload":{"event":"checkoutDidExplode"}}"#
        #expect(try send([deadLetter], to: daemon.ingestAcked, arguments: ["--acked"]).status == 1)

        let pretty = try runTrace([checkout, "--control", daemon.control, "--data-dir", daemon.dataDirectory.path])
        #expect(pretty.status == 0, "\(pretty.errors)")
        let eventLines = pretty.output.split(separator: "\n").filter { $0.hasPrefix("#") }
        let kinds = eventLines.map { $0.split(separator: " ", omittingEmptySubsequences: true)[2] }
        #expect(kinds == ["start", "update", "fail", "complete", "complete", "fail", "deadletter"], "\(pretty.output)")
        #expect(!eventLines.contains { $0.contains("trace-2") })
        #expect(eventLines[2].contains("code=http_gone") || eventLines[2].contains("code="), "\(eventLines[2])")
        #expect(eventLines[4].contains("[repeat]"))
        #expect(eventLines[5].contains("[after_complete]"))
        #expect(eventLines[6].contains("reason=unknown_event"))
        #expect(pretty.output.contains("1 identical update suppressed"), "\(pretty.output)")
        #expect(pretty.output.contains(
            "verdict: completed, order gid://shopify/Order/1001, 1 failure before, 1 repeat complete, "
                + "1 failure after complete (the order stands), 1 dead letter"), "\(pretty.output)")

        let json = try runTrace([checkout, "--control", daemon.control, "--format", "json"])
        #expect(json.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        let events = try #require(object["events"] as? [[String: Any]])
        #expect(events.map { $0.string("kind") } == ["start", "update", "fail", "complete", "complete", "fail", "deadletter"])
        let seqs = events.compactMap { $0.int("seq") }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count)
        #expect(events[3].string("order_id") == "gid://shopify/Order/1001")
        #expect(events[4].bool("repeat") == true && events[5].bool("after_complete") == true)
        #expect(events[0]["suppressed_after"] is NSNull, "without --data-dir the suppressed counts are unknown")
        #expect(object.string("verdict")?.hasPrefix("completed, order gid://shopify/Order/1001, 1 failure before") == true)
    }

    @Test("an unknown checkout: says so, exit 1; a daemon that does not answer: exit 3")
    func unknownCheckout() throws {
        let daemon = try DaemonProcess()
        #expect(try send(traceLifecycle("known", order: "o-1"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let unknown = try runTrace(["nobody", "--control", daemon.control])
        #expect(unknown.status == 1)
        #expect(unknown.output.contains("verdict: unknown checkout"), "\(unknown.output)")
        let json = try runTrace(["nobody", "--control", daemon.control, "--format", "json"])
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any])
        #expect((object["events"] as? [Any])?.isEmpty == true)
        daemon.terminate()
        #expect(try runTrace(["known", "--control", daemon.control, "--timeout", "1"]).status == 3)
    }

    @Test("with two shards only the owner is asked; a list in the wrong order is refused")
    func onlyTheOwningShard() throws {
        let shards = try (0..<2).map { try DaemonProcess(["--shard", "\($0)/2"]) }
        let run = String(UInt32.random(in: 0...UInt32.max))
        for shard in 0..<2 {
            let checkout = checkoutOwned(by: shard, of: 2, run: run)
            #expect(try send(traceLifecycle(checkout, order: "order-\(shard)"), to: shards[shard].ingestAcked,
                             arguments: ["--acked"]).status == 0)
        }
        for shard in 0..<2 {
            let checkout = checkoutOwned(by: shard, of: 2, run: run)
            // The other shard's endpoint has nothing behind it: asking it would time out (exit 3).
            var controls = ["tcp://127.0.0.1:1", "tcp://127.0.0.1:1"]
            controls[shard] = shards[shard].control
            let trace = try runTrace([checkout, "--control", controls.joined(separator: ","), "--timeout", "5"])
            #expect(trace.status == 0, "\(trace.errors)")
            #expect(trace.output.contains("(shard \(shard)/2"))
            #expect(trace.output.contains("verdict: completed, order order-\(shard)"), "\(trace.output)")
        }
        let checkout = checkoutOwned(by: 0, of: 2, run: run)
        let swapped = try runTrace([checkout, "--control", "\(shards[1].control),\(shards[0].control)"])
        #expect(swapped.status == 3)
        #expect(swapped.errors.contains("is shard 1/2"), "\(swapped.errors)")
    }

    /// Before, the daemon answered `ok` with no records and `next == from`, and trace asked again
    /// for ever (this test then failed at its bounds, trace killed after 30 s).
    @Test("a journal segment that cannot be read: trace and tail --since stop at once with journal_unreadable")
    func unreadableSegment() throws {
        let daemon = try DaemonProcess()
        let checkout = "gid://shopify/Checkout/trace-unreadable"
        #expect(try send(traceLifecycle(checkout, order: "gid://shopify/Order/3003"), to: daemon.ingestAcked,
                         arguments: ["--acked"]).status == 0)
        // The daemon goes on writing through its own descriptor; a replay must open the file by name.
        let segments = try journalSegments(daemon)
        try #require(segments.count == 1)
        try FileManager.default.removeItem(at: segments[0])

        let started = Date()
        let trace = try runTrace([checkout, "--control", daemon.control, "--timeout", "5"])
        #expect(trace.status == 3, "\(trace.errors)")
        #expect(Date().timeIntervalSince(started) < 5, "trace stopped at the refusal, not at a bound")
        #expect(trace.errors.contains("journal_unreadable"), "\(trace.errors)")
        #expect(trace.errors.contains(segments[0].lastPathComponent) && trace.errors.contains("errno 2"), "\(trace.errors)")

        let tailStarted = Date()
        let tail = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control,
                                               "--since", "1"], timeout: 20)
        #expect(tail.status != 0, "\(tail.output)")
        #expect(Date().timeIntervalSince(tailStarted) < 15, "tail stopped, not killed")
        #expect(tail.output.contains("journal_unreadable"), "\(tail.output)")
        #expect(daemon.stderrText.contains("journal: a segment cannot be read"), "\(daemon.stderrText)")
        #expect(daemon.terminate() == 0)
    }
}
