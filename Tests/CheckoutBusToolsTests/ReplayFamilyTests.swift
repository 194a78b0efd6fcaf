import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol
@testable import CheckoutBusTools

// `replay` re-encodes an envelope in its raw family; every family and kind is listed here from
// RawFormat and LifecycleKind, so a family added without its replay form fails this test (over the
// wire: ReplayTests, with recordings of the tour and of a flood).
@Suite("replay: every family and kind back in its raw shape")
struct ReplayFamilyTests {
    /// The kinds a family has no raw form for: replayed as a callback of the same platform
    /// (ReplayCommand.rawEvent).
    static let noForm: Set<String> = ["sheet_bridge/update", "ecp/dismiss", "primer/start", "primer/update"]

    func envelope(_ family: RawFormat, _ kind: LifecycleKind) -> String {
        let sdk = family == .primer ? "primer" : "shopify"
        var text = #"{"seq":7,"kind":"\#(kind.name)","checkout_id":"c-1","event_id":"e-7","#
            + #""source":{"format":"\#(family.label)","sdk":"\#(sdk)","platform":"ios"}"#
        if kind == .fail {
            text += #","error":{"code":"network_error","raw_code":"NETWORK_ERROR","message":"declined","terminal":true}"#
        } else if kind != .dismiss {
            text += #","checkout":{"id":"c-1","status":"\#(kind == .complete ? "completed" : "incomplete")","currency":"USD","#
                + #""order":\#(kind == .complete ? #"{"id":"gid://shopify/Order/1"}"# : "null")}"#
        }
        return text + "}"
    }

    /// `envelope` replayed as `kind` (ReplayCommand.rawEvent) and that raw event decoded again,
    /// handed to `check` with the raw text while both documents are alive.
    func replay(_ envelope: String, as kind: LifecycleKind, check: (String, borrowing DecodedEvent) -> Void) throws {
        let doc = JSONDocument()
        try doc.parseOwned(Array(envelope.utf8))
        var w = JSONWriter(capacity: 1024)
        ReplayCommand.rawEvent(from: doc, kind: "\(kind.name)", into: &w)
        let raw = String(decoding: w.bytes, as: UTF8.self)
        let back = JSONDocument()
        try back.parseOwned(Array(raw.utf8))
        let event = try RawEventDecoder().decode(back)
        check(raw, event)
    }

    @Test("each family × kind decodes back to its family (or, where the family has no such form, a callback) and its kind",
          arguments: RawFormat.allCases)
    func roundTrip(_ family: RawFormat) throws {
        for kind in LifecycleKind.allCases {
            try replay(envelope(family, kind), as: kind) { raw, event in
                let expected: RawFormat = Self.noForm.contains("\(family.label)/\(kind.name)") ? .callback : family
                #expect(event.kind == kind, "\(family.label)/\(kind.name): \(raw)")
                #expect(event.format == expected, "\(family.label)/\(kind.name) came back as \(event.format.label): \(raw)")
                if kind == .fail {
                    #expect(event.error?.code == .networkError, "\(raw)")
                }
            }
        }
    }

    /// A bridge `completed` whose body the kit could not read is published with `checkout: null`;
    /// replayed as `"body":"{}"` it came back with an empty snapshot.
    @Test("a bridge start or complete without a snapshot comes back without one, still a bridge event")
    func bridgeEventWithoutSnapshot() throws {
        for kind in [LifecycleKind.start, .complete] {
            let envelope = #"{"seq":7,"kind":"\#(kind.name)","checkout_id":"c-1","event_id":"e-7","#
                + #""source":{"format":"sheet_bridge","sdk":"shopify","platform":"android"},"checkout":null}"#
            try replay(envelope, as: kind) { raw, event in
                #expect(event.kind == kind && event.format == .sheetBridge, "\(raw)")
                #expect(event.snapshot == nil, "\(raw)")
            }
        }
    }
}
