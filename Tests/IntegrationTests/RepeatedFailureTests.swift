import Foundation
import Testing

/// A terminal failure reported again for the same checkout (the Android kit drops its own second
/// report; wrappers and retries do not): published with `repeat: true`, counted apart, and still a
/// repeat after the daemon restarts (docs/envelope.md, docs/error-codes.md).
@Suite("repeated failures", .serialized, .timeLimit(.minutes(4)))
struct RepeatedFailureTests {
    static let fail = #"{"event_id":"EVID","checkout_id":"ck-rf","payload":{"event":"onCheckoutFailed","error":{"code":"cart_expired","message":"Cart expired"}}}"#

    static func event(_ id: String) -> String { fail.replacingOccurrences(of: "EVID", with: id) }

    @Test("the same terminal failure twice: the second is repeat:true, counted in repeated_failures and not by code; also after a restart")
    func repeatedOverTheWire() throws {
        let daemon = try DaemonProcess()
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout.fail"], count: 2)
        #expect(try send([Self.event("rf-1"), Self.event("rf-2")], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let envelopes = try tail.envelopes()
        #expect(envelopes.map { $0["repeat"] as? Bool } == [false, true], "\(envelopes)")
        #expect(envelopes.allSatisfy { ($0["error"] as? [String: Any])?["code"] as? String == "cart_expired" })
        let stats = try ControlClient(daemon.control).stats()
        let counters = try #require(stats["counters"] as? [String: Any])
        #expect(counters["repeated_failures"] as? Int == 1)
        #expect((counters["failed_by_code"] as? [String: Any])?["cart_expired"] as? Int == 1)
        let metrics = try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
        #expect(metric(metrics, "checkoutbus_failures_repeated_total") == 1)
        #expect(metric(metrics, "checkoutbus_failures_total{code=\"cart_expired\"}") == 1)
        #expect(daemon.terminate() == 0)

        // The state is rebuilt from the journal: the same failure is still a repeat.
        let again = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let tail2 = try TailProcess(from: again.publish, topics: ["checkout.fail"], count: 1)
        #expect(try send([Self.event("rf-3")], to: again.ingestAcked, arguments: ["--acked"]).status == 0)
        let after = try tail2.envelopes()
        #expect(after.first?["repeat"] as? Bool == true, "\(after)")
        #expect(again.terminate() == 0)
    }

    @Test("failures published as unknown show by raw code in stats, /metrics and top")
    func unknownRawCodesOverTheWire() throws {
        let daemon = try DaemonProcess()
        let events = ["u-1", "u-2"].map {
            #"{"event_id":"\#($0)","checkout_id":"\#($0)","payload":{"event":"onCheckoutFailed","error":{"code":"stripe-new-thing","message":"x"}}}"#
        } + [#"{"event_id":"u-3","checkout_id":"u-3","payload":{"event":"onCheckoutFailed","error":{"code":"quote\"d"}}}"#]
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let stats = try ControlClient(daemon.control).stats()
        let unknown = (stats["counters"] as? [String: Any])?["unknown_raw_codes"] as? [String: Any]
        #expect(unknown?["stripe-new-thing"] as? Int == 2, "\(unknown ?? [:])")
        #expect(unknown?["quote\"d"] as? Int == 1, "\(unknown ?? [:])")
        let metrics = try httpGet(try #require(daemon.ready["metrics"] as? String), "/metrics").body
        #expect(metric(metrics, "checkoutbus_failures_unknown_total{raw_code=\"stripe-new-thing\"}") == 2)
        #expect(metric(metrics, "checkoutbus_failures_unknown_total{raw_code=\"quote\\\"d\"}") == 1)
        // Without a terminal, top writes a line; with one, the table says "unknown, by raw code:".
        let top = try runTool("checkoutbus", ["top", "--control", daemon.control, "--interval", "0.2", "--once"])
        #expect(top.output.contains("unknown_raw_code.stripe-new-thing=2"), "\(top.output)")
        let json = try runTool("checkoutbus", ["top", "--control", daemon.control, "--interval", "0.2", "--once", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.output.utf8)) as? [String: Any]
        #expect((object?["unknown_raw_codes"] as? [String: Any])?["stripe-new-thing"] as? Int == 2, "\(json.output)")
        #expect(daemon.terminate() == 0)
    }
}
