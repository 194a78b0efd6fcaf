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
}
