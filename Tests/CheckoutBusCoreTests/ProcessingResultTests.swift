import Foundation
import Testing

import CheckoutBusCore
import CheckoutBusProtocol

@Suite("what process returns")
struct ProcessingResultTests {
    static func run(_ p: EventProcessor, _ text: String) -> ProcessingResult {
        Array(text.utf8).withUnsafeBytes { p.process($0, receivedAt: Timestamp(milliseconds: fixedReceivedAt), now: 1_000) }
    }

    @Test("a published event carries its seq, kind, kind_seq, event id and frames")
    func published() throws {
        let p = EventProcessor()
        _ = Self.run(p, #"{"event":"onStart","checkout":{"id":"ck-1"}}"#)
        let result = Self.run(p, wrap(#"{"event":"onDismiss"}"#, checkoutID: "ck-1", eventID: "e-2"))
        #expect(result.outcome == .published(.dismiss))
        #expect(result.seq == 2)
        #expect(result.eventID == "e-2")
        let publication = try #require(result.publication)
        #expect(publication.seq == 2)
        #expect(publication.kind == .dismiss)
        #expect(publication.kindSeq == 1)
        let out = readOutput(result)
        #expect(out.topic == "checkout.dismiss")
        #expect(out["seq"] == 2)
        #expect(out["kind_seq"] == 1)
        #expect(out["event_id"] == "e-2")
    }

    @Test("a dead letter carries its own kind_seq and the dead-letter kind")
    func deadLettered() throws {
        let p = EventProcessor()
        _ = Self.run(p, #"{"event":"onStart","checkout":{"id":"ck-1"}}"#)
        let result = Self.run(p, "[")
        #expect(result.outcome == .deadLettered(.invalidJSON))
        let publication = try #require(result.publication)
        #expect((publication.seq, publication.kind, publication.kindSeq) == (2, .deadletter, 1))
        #expect(readOutput(result).topic == "bus.deadletter")
    }

    @Test("a suppressed update publishes nothing and names the seq before it and its checkout")
    func suppressed() {
        let p = EventProcessor()
        func update(_ id: String) -> String {
            wrap(Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(quantity: 2)), checkoutID: "ck-1", eventID: id)
        }
        #expect(Self.run(p, update("u-1")).outcome == .published(.update))
        let again = Self.run(p, update("u-2"))
        #expect(again.outcome == .suppressed)
        #expect(again.publication == nil)
        #expect(again.seq == 1)
        #expect(again.eventID == "u-2")
        #expect(again.suppressedCheckoutID == "ck-1")
        // The ids' bytes, copied from the message (gone by now) for the suppressed-id log.
        var ids: [String] = []
        again.withSuppressedIDs { checkout, id in
            ids = [String(decoding: checkout, as: UTF8.self), String(decoding: id, as: UTF8.self)]
        }
        #expect(ids == ["ck-1", "u-2"])
        // An escaped checkout id, and a long one, are kept as their decoded text.
        let long = String(repeating: "k", count: 200)
        for (checkout, expected) in [(#"ck\u002d2"#, "ck-2"), (long, long)] {
            let text = wrap(Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(quantity: 2)), checkoutID: "x", eventID: "u")
                .replacingOccurrences(of: #""checkout_id":"x""#, with: #""checkout_id":""# + checkout + #"""#)
            _ = Self.run(p, text)
            let repeated = Self.run(p, text)
            #expect(repeated.outcome == .suppressed)
            var got: [String] = []
            repeated.withSuppressedIDs { c, e in got = [String(decoding: c, as: UTF8.self), String(decoding: e, as: UTF8.self)] }
            #expect(got == [expected, "u"])
        }
        // Without an event id there is nothing to keep.
        let noID = Self.run(p, wrap(Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(quantity: 2)),
                                    checkoutID: "ck-1", eventID: nil))
        #expect(noID.outcome == .suppressed && noID.suppressedCheckoutID == nil)
        var called = false
        noID.withSuppressedIDs { _, _ in called = true }
        #expect(!called)
    }

    @Test("a heartbeat between processing and publishing leaves the event's frames as they were")
    func heartbeatKeepsEventFrames() throws {
        let p = EventProcessor()
        let result = Self.run(p, #"{"event":"onStart","checkout":{"id":"ck-1"}}"#)
        let publication = try #require(result.publication)
        let before = (Array(publication.topic), Array(publication.envelope))
        let heartbeat = p.writeHeartbeat(at: Timestamp(milliseconds: 0))
        #expect(String(decoding: heartbeat.topic, as: UTF8.self) == "bus.heartbeat")
        #expect(Array(publication.topic) == before.0)
        #expect(Array(publication.envelope) == before.1)
        #expect(readOutput(result)["kind"] == "start")
    }
}
