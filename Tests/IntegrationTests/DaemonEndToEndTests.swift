import Foundation
import Testing

/// The real daemon, spawned on ephemeral ports, fed by `checkoutbus send`, observed by separate
/// `checkoutbus tail` subscriber processes.
@Suite("checkoutbusd end to end", .serialized, .timeLimit(.minutes(4)))
struct DaemonEndToEndTests {
    @Test("the ready line reports the endpoints as bound, on tcp ephemeral ports")
    func readyLineTCP() throws {
        let daemon = try DaemonProcess()
        for key in ["ingest", "publish"] {
            let endpoint = try #require(daemon.ready[key] as? String)
            #expect(endpoint.hasPrefix("tcp://127.0.0.1:"))
            let port = Int(endpoint.split(separator: ":").last ?? "") ?? 0
            #expect(port > 0 && port < 65536, "\(key) = \(endpoint)")
        }
        #expect(daemon.ready["ready"] as? Bool == true)
        #expect(daemon.terminate() == 0)
    }

    @Test("checkoutbusd runs on jemalloc: the start log names it only when it serves the process's allocations, and it is mapped")
    func runsOnJemalloc() throws {
        let daemon = try DaemonProcess()
        // The process works on it, end to end; and once an event went through, the loop runs, so
        // the start line (logged just before it) is written.
        let tail = try TailProcess(from: daemon.publish, count: 1)
        try send([#"{"event":"checkoutDidDismiss","checkout_id":"je-1"}"#], to: daemon.ingest)
        #expect(try tail.envelopes().first?.string("checkout_id") == "je-1")
        // Named only once jemalloc counts allocated bytes: linked but not interposed would say glibc.
        #expect(daemon.stderrText.contains("allocator=\"jemalloc 5."), "\(daemon.stderrText.prefix(2000))")
        // Read to the end: a /proc file reports size 0, and a whole-file read may stop at a page.
        let file = try #require(FileHandle(forReadingAtPath: "/proc/\(daemon.process.processIdentifier)/maps"))
        let maps = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
        try file.close()
        #expect(maps.contains("libjemalloc.so"))
        #expect(daemon.terminate() == 0)
    }

    @Test("ipc:// endpoints work end to end")
    func ipcEndpoints() throws {
        let dir = TestScratch.url("cb-ipc-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let daemon = try DaemonProcess(ingest: "ipc://\(dir.path)/in.sock", publish: "ipc://\(dir.path)/out.sock")
        #expect(daemon.ingest == "ipc://\(dir.path)/in.sock")
        let tail = try TailProcess(from: daemon.publish, count: 1)
        try send([#"{"event":"checkoutDidDismiss","checkout_id":"ipc-1"}"#], to: daemon.ingest)
        let got = try tail.envelopes()
        #expect(got.first?.string("kind") == "dismiss")
        #expect(got.first?.string("checkout_id") == "ipc-1")
    }

    @Test("the shipped tour sample: all four families, typed topics, normalised codes, suppression")
    func tourSample() throws {
        let daemon = try DaemonProcess()
        let tail = try TailProcess(from: daemon.publish, count: 12)
        let sample = Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl")
        let lines = try String(contentsOf: sample, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(lines.count == 13)
        let result = try send(lines, to: daemon.ingest)
        #expect(result.status == 0)
        #expect(result.stderr.contains("sent=13"))
        let envelopes = try tail.envelopes()
        #expect(envelopes.count == 12)
        let kinds = envelopes.map { $0.string("kind") ?? "?" }
        // Line 3 repeats line 2's snapshot with keys reordered: suppressed.
        #expect(kinds == ["start", "update", "update", "complete", "complete", "fail", "fail", "fail", "dismiss",
                          "fail", "complete", "deadletter"])
        let seqs = envelopes.compactMap { $0.int("seq") }
        #expect(seqs == Array(1...12))
        let formats = envelopes.prefix(11).map { $0.object("source")?.string("format") ?? "?" }
        #expect(Set(formats) == ["ecp", "sheet_bridge", "callback", "primer"])
        let codes = envelopes.filter { $0.string("kind") == "fail" }.map { $0.object("error")?.string("code") ?? "?" }
        #expect(codes == ["cart_expired", "network_error", "cart_expired", "payment_failed"])
        let complete = envelopes[3]
        #expect(complete.string("idempotency_key") == "gid://shopify/Order/1001")
        #expect(complete.object("summary")?.int("total") == 5400)
        #expect(complete.object("summary")?.string("currency") == "USD")
        #expect(complete.object("checkout")?.string("buyer") == "[redacted]")
        let legacy = envelopes[4]
        #expect(legacy.object("summary")?.int("total") == 4125)
        #expect(legacy.string("event_id") == "evt-legacy-7-complete")
        let primerFail = envelopes[9]
        #expect(primerFail.object("error")?.bool("terminal") == false)
        #expect(primerFail.object("payment")?.string("orderId") == "ord-5")
        let deadLetter = envelopes[11]
        #expect(deadLetter.string("reason") == "not_lifecycle")
        #expect(deadLetter.string("raw")?.contains("webPixels") == true)
        #expect(daemon.terminate() == 0)
    }

    @Test("subscribers filter by topic prefix: checkout.fail.<code> reaches only its code")
    func topicPrefixFiltering() throws {
        let daemon = try DaemonProcess()
        let networkOnly = try TailProcess(from: daemon.publish, topics: ["checkout.fail.network_error"], count: 1)
        let allFails = try TailProcess(from: daemon.publish, topics: ["checkout.fail"], count: 2)
        try send([
            #"{"event":"onCheckoutFailed","checkout_id":"f-1","error":{"code":"CART_EXPIRED","message":"x"}}"#,
            #"{"event":"checkoutDidFail","checkout_id":"f-2","error":{"code":"networkError","message":"y"}}"#,
        ], to: daemon.ingest)
        let one = try networkOnly.envelopes()
        #expect(one.map { $0.string("checkout_id") } == ["f-2"])
        let two = try allFails.envelopes()
        #expect(two.map { $0.object("error")?.string("code") } == ["cart_expired", "network_error"])
    }

    @Test("lifecycle rules over the wire: repeat complete, fail after complete, A→B→A")
    func lifecycleRulesOverTheWire() throws {
        let daemon = try DaemonProcess()
        let tail = try TailProcess(from: daemon.publish, count: 7)
        func ecp(_ method: String, _ total: Int, order: String? = nil) -> String {
            let orderPart = order.map { #","order":{"id":"\#($0)"}"# } ?? ""
            return #"{"jsonrpc":"2.0","method":"\#(method)","params":{"checkout":{"id":"r-1","currency":"USD","totals":[{"type":"total","amount":\#(total)}]\#(orderPart)}}}"#
        }
        try send([
            ecp("ec.start", 100),
            ecp("ec.totals.change", 200),  // B
            ecp("ec.totals.change", 100),  // A again: published
            ecp("ec.totals.change", 100),  // identical: suppressed
            ecp("ec.complete", 100, order: "o-9"),
            ecp("ec.complete", 100, order: "o-9"),  // repeat, never suppressed
            #"{"event":"onCheckoutFailed","checkout_id":"r-1","error":{"code":"render_process_gone"}}"#,
            #"{"event":"onCheckoutDismissed","checkout_id":"r-1"}"#,  // sentinel: nothing may arrive in between
        ], to: daemon.ingest)
        let got = try tail.envelopes()
        // Seven inputs in, one suppressed: the sentinel dismiss is the seventh envelope only if nothing else came.
        #expect(got.map { $0.string("kind") ?? "" } == ["start", "update", "update", "complete", "complete", "fail",
                                                       "dismiss"])
        let completes = got.filter { $0.string("kind") == "complete" }
        #expect(completes.map { $0.bool("repeat") } == [false, true])
        #expect(Set(completes.map { $0.string("idempotency_key") }) == ["o-9"])
        #expect(completes.map { $0.int("kind_seq") } == [1, 2])
        let fail = try #require(got.first { $0.string("kind") == "fail" })
        #expect(fail.bool("after_complete") == true)
        #expect(fail.object("error")?.string("code") == "web_content_process_terminated")
    }
}
