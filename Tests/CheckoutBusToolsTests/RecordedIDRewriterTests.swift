import Testing

import CheckoutBusTools

/// `replay --rewrite-ids`: each copy's ids rewritten wherever they stand whole, nothing else touched.
@Suite("recorded id rewriter")
struct RecordedIDRewriterTests {
    static func copy(_ line: String, _ k: Int) -> String {
        var out: [UInt8] = []
        RecordedIDRewriter.render(RecordedIDRewriter.template(Array(line.utf8)), copy: k, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test("checkout, order and event ids in the wrapper, the snapshot and the bridge's body string")
    func everyPlaceAnIDStands() {
        let line = #"{"checkout_id":"legacy-7","event_id":"evt-7","payload":{"name":"completed","body":"{\"orderDetails\":{\"id\":\"gid://shopify/Order/2002\"}}"}}"#
        #expect(Self.copy(line, 4) == #"{"checkout_id":"legacy-7~r4","event_id":"evt-7~r4","payload":{"name":"completed","body":"{\"orderDetails\":{\"id\":\"gid://shopify/Order/2002~r4\"}}"}}"#)
        let ecp = #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":{"id":"c-1","line_items":[{"id":"li_1"}],"order":{"id":"o-9"}}}}"#
        #expect(Self.copy(ecp, 0) == #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":{"id":"c-1~r0","line_items":[{"id":"li_1"}],"order":{"id":"o-9~r0"}}}}"#)
    }

    @Test("an id inside a longer one is left alone; a line without ids or JSON is kept as it is")
    func wholeIDsOnly() {
        let line = #"{"checkout_id":"c-1","note":"c-10 and c-1x, but c-1 counts"}"#
        #expect(Self.copy(line, 2) == #"{"checkout_id":"c-1~r2","note":"c-10 and c-1x, but c-1~r2 counts"}"#)
        #expect(Self.copy(#"{"event":"onCheckoutDismissed"}"#, 1) == #"{"event":"onCheckoutDismissed"}"#)
        #expect(Self.copy("not json", 1) == "not json")
    }
}
