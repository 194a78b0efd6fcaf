import CheckoutBusClient
import Foundation
import Testing

/// Every request of `Tests/Golden/control-requests.tsv` (what ControlRequestWire and the Python
/// client write, byte for byte) sent to a real daemon: each one is answered `ok`.
@Suite("control requests: the golden ones, over the wire")
struct ControlProtocolTests {
    @Test("every golden control request is one the daemon answers ok (a report before the forget of its name)")
    func goldenRequestsAreAnswered() throws {
        let daemon = try DaemonProcess()
        let text = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("Tests/Golden/control-requests.tsv"), encoding: .utf8)
        let golden = Dictionary(text.split(separator: "\n").map { line -> (String, String) in
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }, uniquingKeysWith: { a, _ in a })
        let order = ["replay", "replay-checkout", "replay-bare", "stats", "stats-bare", "seek", "report", "report-plain", "forget"]
        #expect(Set(order) == Set(golden.keys), "every golden request is sent: \(golden.keys.sorted())")
        for name in order {
            let request = try #require(golden[name])
            let reply = try #require(try ControlRequest.send(Array(request.utf8), to: daemon.control, timeoutSeconds: 5), "\(name): no answer")
            let object = try JSONSerialization.jsonObject(with: Data(reply)) as? [String: Any]
            #expect(object?["ok"] as? Bool == true, "\(name): \(String(decoding: reply, as: UTF8.self))")
        }
    }
}
