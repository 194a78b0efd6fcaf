import Foundation
import Testing

import CheckoutBusProtocol

/// The control requests as every sender writes them, byte for byte against
/// `Tests/Golden/control-requests.tsv` — the same file the Python client's
/// `tests/test_wire_golden.py` checks its copy against. Over the wire, IntegrationTests'
/// "every golden control request is one the daemon answers" sends each to a real daemon.
@Suite("control requests: one codec, golden bytes")
struct ControlRequestWireTests {
    static let golden = GoldenFile.tsv("control-requests.tsv")

    static let written: [(String, [UInt8])] = [
        ("replay", ControlRequestWire.replay(from: 1000, prefixes: ["checkout.complete"], limit: 1000, req: 7)),
        ("replay-checkout", ControlRequestWire.replay(from: 1, prefixes: ["checkout.", "bus.deadletter"], limit: 10000,
                                                      checkoutID: "gid://shopify/Checkout/c-1")),
        ("replay-bare", ControlRequestWire.replay(from: 5)),
        ("stats", ControlRequestWire.stats(req: 3)),
        ("stats-bare", ControlRequestWire.stats()),
        ("seek", ControlRequestWire.seek(timeMilliseconds: 1_733_443_200_000)),
        ("forget", ControlRequestWire.forget(subscriber: "fulfil-1")),
        ("report", ControlRequestWire.report(.init(subscriber: "fulfil-1", lastSeq: 42, missed: 3, recovered: 3, gaps: 1,
                                                   throughSeq: 45, final: true, durable: true, rejected: 2), req: 9)),
        ("report-plain", ControlRequestWire.report(.init(subscriber: "tail", lastSeq: 0, missed: 0, recovered: 0, gaps: 0,
                                                         throughSeq: 0), req: 10)),
    ]

    @Test("each request is the golden file's line of its name, and the file has no line the codec does not write")
    func golden() {
        #expect(Self.golden.count == Self.written.count, "\(Self.golden.keys.sorted())")
        for (name, bytes) in Self.written {
            #expect(String(decoding: bytes, as: UTF8.self) == Self.golden[name], "\(name)")
        }
    }

    @Test("a request is one JSON object whose op comes first")
    func wellFormed() throws {
        for (name, bytes) in Self.written {
            let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
            #expect(object?["op"] is String, "\(name)")
            #expect(bytes.starts(with: Array(#"{"op":""#.utf8)), "\(name)")
        }
    }
}
