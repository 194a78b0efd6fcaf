import CheckoutBusCore
import CheckoutBusProtocol
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--error-map`: an operator maps a raw code the built-in table does not know (or maps otherwise),
/// at start and live with SIGHUP; a bad file never replaces a good map (docs/error-codes.md,
/// "Mappings operators own").
@Suite("operators' error maps", .serialized, .timeLimit(.minutes(5)))
struct ErrorMapTests {
    @Test("a map file: exact lines, per family, patterns; a bad line is named")
    func parsing() throws {
        let map = try ErrorMap(parsing: """
            # comment
            stripe-new-thing = payment_failed
            primer:additional-info-unhandled = sdk_error   # only Primer's
            suffix:mandate-config = configuration_error

            prefix:klarna- = payment_failed
            """)
        #expect(map.count == 4)
        #expect(throws: ErrorMap.ParseError.self) { try ErrorMap(parsing: "a = b = c\nno-equals-sign") }
        do {
            _ = try ErrorMap(parsing: "ok = sdk_error\n\nbad = not_a_code")
            Issue.record("a bad code was taken")
        } catch {
            #expect(error.line == 3)
            #expect(error.reason.contains("not_a_code"))
        }
        // Terminal-ness: one word after the code, never for ecp (always terminal).
        #expect(try ErrorMap(parsing: "primer:x = payment_failed terminal\ny = sdk_error recoverable").count == 2)
        for (text, says) in [("x = sdk_error fatal", "expected terminal or recoverable"),
                             ("x = sdk_error terminal now", "one word at most"),
                             ("ecp:x = sdk_error recoverable", "ecp failures are always terminal")] {
            do {
                _ = try ErrorMap(parsing: text)
                Issue.record("taken: \(text)")
            } catch {
                #expect(error.reason.contains(says), "\(error.reason)")
            }
        }
        do {
            _ = try ErrorMap(parsing: " = sdk_error")
            Issue.record("an empty raw code was taken")
        } catch {
            #expect(error.line == 1)
        }
    }

    static func fail(_ id: String, _ raw: String, sdk: String = "shopify") -> String {
        #"{"event_id":"\#(id)","checkout_id":"\#(id)","payload":{"event":"onCheckoutFailed","error":{"code":"\#(raw)","message":"m"}}}"#
    }

    /// The stable code the daemon publishes for `raw`.
    static func published(_ daemon: DaemonProcess, _ id: String, _ raw: String) throws -> String? {
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout.fail"], count: 1, timeout: 20)
        #expect(try send([fail(id, raw)], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        return (try tail.envelopes().first?["error"] as? [String: Any])?["code"] as? String
    }

    @Test("the daemon maps with the file, SIGHUP changes a code live, a bad file is refused with its line and changes nothing")
    func liveOverTheWire() throws {
        let dir = TestScratch.url("errormap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent("error-map")
        try "stripe-new-thing = payment_failed\nsuffix:mandate-config = configuration_error\n".write(to: file, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(["--error-map", file.path])
        #expect(try Self.published(daemon, "m-1", "stripe-new-thing") == "payment_failed")
        #expect(try Self.published(daemon, "m-2", "paypal-mandate-config") == "configuration_error")
        // An override of the built-in table: network_error is the table's; the map says otherwise.
        try "stripe-new-thing = sdk_error\nnetwork_error = http_error\n".write(to: file, atomically: true, encoding: .utf8)
        kill(daemon.process.processIdentifier, SIGHUP)
        #expect(waitUntil(10) { daemon.stderrText.contains("error map reloaded") }, "\(daemon.stderrText.suffix(300))")
        #expect(try Self.published(daemon, "m-3", "stripe-new-thing") == "sdk_error")
        #expect(try Self.published(daemon, "m-4", "network_error") == "http_error")
        // A bad file: logged with its line, and the map in force stays.
        try "stripe-new-thing = payment_failed\nbroken line\n".write(to: file, atomically: true, encoding: .utf8)
        kill(daemon.process.processIdentifier, SIGHUP)
        #expect(waitUntil(10) { daemon.stderrText.contains("error map reload failed") })
        #expect(daemon.stderrText.contains("error-map:2") || daemon.stderrText.contains(":2: expected RAW = CODE"), "\(daemon.stderrText.suffix(400))")
        #expect(try Self.published(daemon, "m-5", "stripe-new-thing") == "sdk_error")
        #expect(daemon.terminate() == 0)

        // At start a bad file stops the daemon, naming the line.
        let refused = try runTool("checkoutbusd", ["--error-map", file.path, "--data-dir", dir.appendingPathComponent("d2").path,
                                                   "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*",
                                                   "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*",
                                                   "--metrics", "off"])
        #expect(refused.status != 0)
        #expect(refused.output.contains(":2: expected RAW = CODE"), "\(refused.output)")
    }

    @Test("a map's terminal-ness: a Primer failure mapped terminal is published terminal and its repeat flagged; a callback failure mapped recoverable is not terminal")
    func terminalness() throws {
        let dir = TestScratch.url("errormap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let file = dir.appendingPathComponent("error-map")
        try "primer:3ds-failed = payment_failed terminal\nsoft-decline = payment_failed recoverable\n".write(to: file, atomically: true, encoding: .utf8)
        let daemon = try DaemonProcess(["--error-map", file.path])
        let primer = #"{"checkout_id":"pt-1","sdk":"primer","payload":{"state":"failure","error":{"errorId":"3ds-failed","description":"3DS failed"}}}"#
        let unmapped = #"{"checkout_id":"pt-2","sdk":"primer","payload":{"state":"failure","error":{"errorId":"payment-failed","description":"declined"}}}"#
        let callback = Self.fail("pt-3", "soft-decline")
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout.fail"], count: 4, timeout: 20)
        #expect(try send([primer, primer, unmapped, callback], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let envelopes = try tail.envelopes()
        try #require(envelopes.count == 4)
        func field(_ i: Int, _ name: String) -> Any? { (envelopes[i]["error"] as? [String: Any])?[name] }
        #expect(field(0, "terminal") as? Bool == true)
        #expect(field(0, "code") as? String == "payment_failed")
        #expect(envelopes[0]["repeat"] as? Bool != true)
        // The same terminal failure again: a repeat, as the map made it terminal.
        #expect(envelopes[1]["repeat"] as? Bool == true, "\(envelopes[1])")
        // A Primer failure the map does not name keeps the SDK's terminal-ness (a retryable attempt).
        #expect(field(2, "terminal") as? Bool == false)
        // A callback failure (terminal as sent) mapped recoverable.
        #expect(field(3, "terminal") as? Bool == false, "\(envelopes[3])")
        #expect(daemon.terminate() == 0)
    }

    @Test("checkoutbus decode --error-map shows what a map does before the daemon loads it; a bad map exits 2")
    func decodeWithMap() throws {
        let dir = TestScratch.url("errormap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let map = dir.appendingPathComponent("map")
        let events = dir.appendingPathComponent("events.jsonl")
        try "primer:additional-info-unhandled = sdk_error\n".write(to: map, atomically: true, encoding: .utf8)
        try (#"{"checkout_id":"p-1","sdk":"primer","payload":{"state":"failure","error":{"errorId":"additional-info-unhandled","description":"x"}}}"# + "\n"
             + #"{"checkout_id":"s-1","payload":{"event":"onCheckoutFailed","error":{"code":"additional-info-unhandled"}}}"# + "\n")
            .write(to: events, atomically: true, encoding: .utf8)
        let without = try runTool("checkoutbus", ["decode", events.path])
        #expect(without.output.contains("checkout.fail.unknown p-1"), "\(without.output)")
        let with = try runTool("checkoutbus", ["decode", "--error-map", map.path, events.path])
        #expect(with.output.contains("checkout.fail.sdk_error p-1"), "\(with.output)")
        // The line is Primer's only: the same id from a Shopify callback stays unknown.
        #expect(with.output.contains("checkout.fail.unknown s-1"), "\(with.output)")
        try "additional-info-unhandled = sdk\n".write(to: map, atomically: true, encoding: .utf8)
        let bad = try runTool("checkoutbus", ["decode", "--error-map", map.path, events.path])
        #expect(bad.status == 2)
        #expect(bad.output.contains(":1: `sdk` is not a stable code"), "\(bad.output)")
    }
}
