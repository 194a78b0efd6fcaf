import Testing

import CheckoutBusCore

/// Shapes that real bridges and relays send around the documented families (docs/raw-shapes.md,
/// "Bridges and relays"): a complete among them must never be dead-lettered for its packaging.
@Suite("bridge and relay packaging")
struct BridgeShapeTests {
    static let snapshot = #"{"id":"ck-b","status":"completed","currency":"USD","totals":[{"type":"total","amount":2500}],"order":{"id":"O-b"}}"#

    /// `snapshot` as a JSON string literal (the way a bridge serialises it).
    static var snapshotString: String { jsonStringLiteral(snapshot) }

    struct Case: Sendable, CustomTestStringConvertible {
        let label: String
        let raw: String
        var kind: LifecycleKind = .complete
        var checkoutID = "ck-b"
        var eventID: String?
        var testDescription: String { label }
    }

    static let cases: [Case] = [
        Case(label: "name in `type`, snapshot under an `event` object",
             raw: #"{"type":"checkoutDidComplete","event":{"checkout":\#(snapshot)}}"#),
        Case(label: "event name beside wrapper fields; the payload names none",
             raw: #"{"event":"checkoutDidComplete","checkout_id":"ck-b","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "Redux-style action: `type` and `payload`",
             raw: #"{"type":"checkoutDidComplete","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "name in `callback`, snapshot in `payload`",
             raw: #"{"callback":"onComplete","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "snapshot under `payload` beside `event`",
             raw: #"{"event":"onComplete","payload":{"checkout":\#(snapshot)}}"#),
        Case(label: "snapshot under a `body` object",
             raw: #"{"event":"onCheckoutCompleted","body":{"checkout":\#(snapshot)}}"#),
        Case(label: "Flutter method channel: `method` and `arguments`",
             raw: #"{"method":"onCheckoutCompleted","arguments":{"checkout":\#(snapshot)}}"#),
        Case(label: "Flutter event channel: `data` as a JSON string",
             raw: #"{"event":"onComplete","data":\#(jsonStringLiteral(#"{"checkout":\#(snapshot)}"#))}"#),
        Case(label: "`checkout` as a JSON string",
             raw: #"{"event":"checkoutDidComplete","checkout":\#(snapshotString)}"#),
        Case(label: "ECP `params.checkout` as a JSON string",
             raw: #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":\#(snapshotString)}}"#),
        Case(label: "ECP `params` as a JSON string",
             raw: #"{"jsonrpc":"2.0","method":"ec.complete","params":\#(jsonStringLiteral(#"{"checkout":\#(snapshot)}"#))}"#),
        Case(label: "wrapper with `data` instead of `payload`",
             raw: #"{"checkout_id":"ck-b","event_id":"e-1","data":{"event":"onComplete","checkout":\#(snapshot)}}"#,
             eventID: "e-1"),
        Case(label: "wrapper with `body` instead of `payload`",
             raw: #"{"checkout_id":"ck-b","platform":"ios","body":{"event":"checkoutDidComplete","checkout":\#(snapshot)}}"#),
        Case(label: "a relay's wrapper around a wrapper: the outer event id wins, the inner checkout id fills in",
             raw: #"{"event_id":"relay-1","payload":{"checkout_id":"ck-b","event_id":"e-2","payload":{"event":"onComplete","checkout":\#(snapshot)}}}"#,
             eventID: "relay-1"),
        Case(label: "wrapper payload JSON-encoded twice",
             raw: #"{"checkout_id":"ck-b","event_id":"e-3","payload":\#(jsonStringLiteral(jsonStringLiteral(#"{"event":"onComplete","checkout":\#(snapshot)}"#)))}"#,
             eventID: "e-3"),
        Case(label: "bridge `body` JSON-encoded twice",
             raw: #"{"checkout_id":"ck-b","payload":{"name":"completed","body":\#(jsonStringLiteral(jsonStringLiteral(#"{"orderDetails":{"id":"O-b"}}"#)))}}"#),
        Case(label: "UTF-8 byte order mark before the JSON",
             raw: "\u{FEFF}" + #"{"event":"onComplete","checkout":\#(snapshot)}"#),
        Case(label: "dotted name like the bus's own topic",
             raw: #"{"event":"checkout.complete","checkout":\#(snapshot)}"#),
        Case(label: "ECP `ec.error` with `params` null and the id in the wrapper",
             raw: #"{"checkout_id":"ck-b","payload":{"jsonrpc":"2.0","method":"ec.error","params":null}}"#, kind: .fail),
    ]

    @Test("each packaging decodes to its event", arguments: cases)
    func decodes(_ c: Case) {
        let p = EventProcessor()
        let out = p.feed(c.raw)
        #expect(out.outcome == .published(c.kind), "\(out.text)")
        #expect(out["checkout_id"] == .string(c.checkoutID))
        if let id = c.eventID { #expect(out["event_id"] == .string(id)) }
        if c.kind == .complete && !c.raw.contains("orderDetails") {
            #expect(out["summary.total"] == 2500)
            #expect(out["idempotency_key"] == "O-b")
        }
    }

    @Test("a JSON string that is not JSON is left alone where it is optional, and still a dead letter as a payload")
    func notJSONInString() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onComplete","checkout_id":"ck-s","data":"{not json"}"#)
        #expect(out.outcome == .published(.complete))
        #expect(out["checkout"] == .null)
        #expect(p.feed(#"{"checkout_id":"ck-s","payload":"{not json"}"#).outcome == .deadLettered(.invalidEmbeddedJSON))
        // An event name that merely is a string is not taken for embedded JSON.
        #expect(p.feed(#"{"event":"onDismiss","checkout_id":"ck-s"}"#).outcome == .published(.dismiss))
    }

    @Test("blank and placeholder ids are no ids: they would merge every checkout that sent them")
    func placeholderIDs() {
        let p = EventProcessor()
        for id in ["", "   ", "undefined", "null", "NULL", "None", "nil", "NaN"] {
            let out = p.feed(#"{"event":"onDismiss","checkout_id":\#(jsonStringLiteral(id))}"#)
            #expect(out.outcome == .deadLettered(.missingCheckoutID), "\(id)")
        }
        // The snapshot's own id is used when the wrapper's is a placeholder.
        let out = p.feed(#"{"checkout_id":"undefined","event_id":"null","payload":{"event":"onComplete","checkout":\#(Self.snapshot)}}"#)
        #expect(out["checkout_id"] == "ck-b")
        #expect(out["event_id"] == .null)
        // Ids that only look alike are ids.
        for id in ["nullable", "none-1", "0", "undefined2"] {
            #expect(p.feed(#"{"event":"onDismiss","checkout_id":\#(jsonStringLiteral(id))}"#)["checkout_id"] == .string(id))
        }
    }

    @Test("the wrapper's platform is trimmed")
    func platformTrimmed() {
        let out = EventProcessor().feed(#"{"checkout_id":"ck-p","platform":" Android ","payload":{"event":"onDismiss"}}"#)
        #expect(out["source.platform"] == "android")
    }
}
