import Foundation
import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

/// The daemon replays its journal's last envelopes into a fresh processor at start
/// (`EventProcessor.restore(envelope:…)`). These tests publish with one processor, restore its
/// envelopes into a second, and check the second behaves as the first would have.
@Suite("state rebuilt from published envelopes (restart)")
struct StateRestoreTests {
    static let wallNow = Timestamp(milliseconds: fixedReceivedAt + 60_000)

    /// A snapshot with buyer details, which the default (redacted) envelope hides.
    static func snapshotWithBuyer(email: String, quantity: Int = 2) -> String {
        let base = Fixture.snapshot(quantity: quantity)
        return String(base.dropLast()) + #","buyer":{"email":""# + email + #""},"shipping_address":{"zip":"94107"}}"#
    }

    static func update(_ checkout: String) -> String { Fixture.ecp("ec.line_items.change", checkout: checkout) }

    /// Restores `outputs` (envelopes of published events, in order) into a new processor.
    static func restored(_ outputs: [Output], options: EventProcessor.Options = .init(),
                         wallNow: Timestamp = wallNow, now: UInt32 = 2_000) -> EventProcessor {
        let p = EventProcessor(options: options)
        for (i, o) in outputs.enumerated() where !o.text.isEmpty {
            let ok = Array(o.text.utf8).withUnsafeBytes {
                p.restore(envelope: $0, seq: UInt64(i + 1), wallNow: wallNow, now: now)
            }
            #expect(ok)
        }
        p.finishRestore(now: now)
        return p
    }

    /// A legacy kit's `completed` whose body is JSON in a string as deep as the daemon takes (64
    /// levels): its envelope holds that snapshot one level down. Restored with the raw events'
    /// limit, it was not read at all: the order's key and the event id were forgotten by a restart.
    @Test("an envelope one level deeper than the deepest raw event is restored: key, repeat and event id kept")
    func deepestEnvelopeRestored() {
        let a = EventProcessor()
        let note = String(repeating: #"{"n":"#, count: 62) + #""x""# + String(repeating: "}", count: 62)
        let body = #"{"orderDetails":{"id":"gid://shopify/OrderIdentity/deep","note":\#(note)}}"#
        var escaped = ""
        for c in body { escaped += c == "\"" ? "\\\"" : String(c) }
        let event = #"{"checkout_id":"deep-1","event_id":"evt-deep","payload":{"name":"completed","body":""#
            + escaped + #""}}"#
        let first = a.feed(event)
        #expect(first.outcome == .published(.complete))
        #expect(first["idempotency_key"] == "gid://shopify/OrderIdentity/deep")
        var options = EventProcessor.Options()
        options.dedupeWindow = 100
        let b = Self.restored([first], options: options)
        #expect(b.feed(event, now: 2_001).outcome == .duplicate(1))
        let again = b.feed(event.replacingOccurrences(of: "evt-deep", with: "evt-deep-2"), now: 2_002)
        #expect(again["repeat"] == true && again["idempotency_key"] == "gid://shopify/OrderIdentity/deep")
    }

    @Test("a terminal failure repeated after a restart is still a repeat; after a restored start it is not")
    func failureRepeatAfterRestart() {
        let a = EventProcessor()
        let fail = #"{"event":"onFail","checkout_id":"ck-r","error":{"code":"cart_expired","message":"Cart expired"}}"#
        let first = a.feed(fail)
        #expect(first["repeat"] == false)
        let b = Self.restored([first])
        #expect(b.feed(fail, now: 2_001)["repeat"] == true)
        let start = a.feed(#"{"event":"onStart","checkout_id":"ck-r"}"#)
        let c = Self.restored([first, start])
        #expect(c.feed(fail, now: 2_001)["repeat"] == false)
    }

    @Test("a complete repeated after a restart is a repeat under the first complete's key, even with an order id now")
    func completeKeepsKey() {
        let a = EventProcessor()
        let first = a.feed(#"{"event":"onComplete","checkout":{"id":"ck-8","status":"completed"}}"#)
        #expect(first["idempotency_key"] == "ck-8")
        let b = Self.restored([first])
        let again = b.feed(#"{"event":"onComplete","checkout":{"id":"ck-8","status":"completed","order":{"id":"gid://shopify/Order/77"}}}"#, now: 2_001)
        #expect(again.outcome == .published(.complete))
        #expect(again["repeat"] == true)
        #expect(again["idempotency_key"] == "ck-8")
        let failed = b.feed(#"{"event":"onFail","checkout":{"id":"ck-8"},"error":{"code":"payment_failed"}}"#, now: 2_002)
        #expect(failed["after_complete"] == true)
    }

    @Test("after a restart a repeat carries the first complete's key in every packed shape, ids escaped or numeric",
          arguments: [
              (#""ck-91""#, "ord-ck-91"), (#""ck-92""#, "gid://shopify/Order/5678901234567"),
              (#""ck-93""#, "7f9c2b1e-3d4a-4b5c-9e8f-0a1b2c3d4e57"), (#""caf\u00e9-94""#, "commande-café-94"), ("9500", "ORD-9500"),
          ])
    func completeKeepsKeyOfEveryShape(checkoutJSON: String, order: String) {
        let a = EventProcessor()
        let first = a.feed(#"{"event":"onComplete","checkout":{"id":\#(checkoutJSON),"status":"completed","order":{"id":"\#(order)"}}}"#)
        #expect(first["idempotency_key"] == .string(order))
        let b = Self.restored([first])
        let again = b.feed(#"{"event":"onComplete","checkout":{"id":\#(checkoutJSON),"status":"completed"}}"#, now: 2_001)
        #expect(again["repeat"] == true)
        #expect(again["idempotency_key"] == .string(order))
    }

    @Test("a checkout the journal never completed is not completed after a restart")
    func notCompletedStaysOpen() {
        let a = EventProcessor()
        let start = a.feed(Fixture.ecp("ec.start", checkout: Fixture.snapshot(id: "ck-9")))
        let b = Self.restored([start])
        let done = b.feed(Fixture.ecp("ec.complete", checkout: Fixture.snapshot(id: "ck-9", status: "completed", orderID: "O-9")), now: 2_001)
        #expect(done["repeat"] == false)
        #expect(done["idempotency_key"] == "O-9")
    }

    @Test("with buyer data redacted, an unchanged update after a restart is suppressed and a changed one published")
    func redactedSnapshotSuppressed() {
        let a = EventProcessor()
        let snap = Self.snapshotWithBuyer(email: "a@example.com")
        let published = a.feed(Self.update(snap))
        #expect(published.text.contains("[redacted]"))
        #expect(!published.text.contains("a@example.com"))

        let b = Self.restored([published])
        #expect(b.feed(Self.update(snap), now: 2_001).outcome == .suppressed)
        // Matched once in redacted form; the raw hash is kept from then on.
        #expect(b.feed(Self.update(snap), now: 2_002).outcome == .suppressed)
        #expect(b.feed(Self.update(Self.snapshotWithBuyer(email: "a@example.com", quantity: 5)), now: 2_003).outcome
            == .published(.update))
        #expect(b.counters.suppressed == 2)

        let c = Self.restored([published])
        #expect(c.feed(Self.update(Self.snapshotWithBuyer(email: "a@example.com", quantity: 3)), now: 2_001).outcome
            == .published(.update))
    }

    @Test("with buyer data kept, an unchanged update after a restart is suppressed")
    func fullSnapshotSuppressed() {
        var options = EventProcessor.Options()
        options.keepBuyerData = true
        let a = EventProcessor(options: options)
        let snap = Self.snapshotWithBuyer(email: "a@example.com")
        let published = a.feed(Self.update(snap))
        #expect(published.text.contains("a@example.com"))
        let b = Self.restored([published], options: options)
        #expect(b.feed(Self.update(snap), now: 2_001).outcome == .suppressed)
        #expect(b.feed(Self.update(Self.snapshotWithBuyer(email: "b@example.com")), now: 2_002).outcome == .published(.update))
    }

    @Test("a fail's snapshot is not what later updates are compared with, after a restart as before it")
    func failSnapshotNotRestored() {
        let a = EventProcessor()
        let one = Fixture.snapshot(quantity: 1)
        let two = Fixture.snapshot(quantity: 2)
        let outs = [
            a.feed(Self.update(one)),
            a.feed(#"{"jsonrpc":"2.0","method":"ec.error","params":{"checkout":"# + two + #","error":{"code":"payment_failed"}}}"#),
        ]
        #expect(outs[1].outcome == .published(.fail))
        #expect(a.feed(Self.update(two)).outcome == .published(.update))
        let b = Self.restored(outs)
        #expect(b.feed(Self.update(two), now: 2_001).outcome == .published(.update))
        let c = Self.restored(outs)
        #expect(c.feed(Self.update(one), now: 2_001).outcome == .suppressed)
    }

    @Test("an envelope received longer ago than the idle TTL restores no state, but its event id")
    func expiredNotRestored() {
        var options = EventProcessor.Options()
        options.checkoutTTLSeconds = 30
        options.dedupeWindow = 100
        let a = EventProcessor(options: options)
        let text = #"{"event_id":"e-1","checkout_id":"ck-5","payload":{"event":"checkoutDidComplete","checkout":{"id":"ck-5","status":"completed"}}}"#
        let first = a.feed(text)
        #expect(first.outcome == .published(.complete))
        // Restored 60 s after it was received: older than the TTL.
        let b = Self.restored([first], options: options)
        #expect(b.state.count == 0)
        let retry = Array(text.utf8).withUnsafeBytes { b.process($0, receivedAt: Self.wallNow, now: 2_001).outcome }
        #expect(retry == .duplicate(1))
        let other = b.feed(#"{"event":"onComplete","checkout":{"id":"ck-5","status":"completed"}}"#, now: 2_001)
        #expect(other["repeat"] == false)
        // Restored 10 s after: within the TTL, and it keeps its age (expires 20 s later).
        let c = Self.restored([first], options: options, wallNow: Timestamp(milliseconds: fixedReceivedAt + 10_000))
        #expect(c.state.count == 1)
        c.tick(now: 2_015)
        #expect(c.state.count == 1)
        c.tick(now: 2_025)
        #expect(c.state.count == 0)
    }

    @Test("a checkout kept alive by later envelopes stays completed, though its complete is older than the TTL")
    func oldCompleteKeptByLaterEvents() {
        var options = EventProcessor.Options()
        options.checkoutTTLSeconds = 30
        let a = EventProcessor(options: options)
        let done = a.feed(#"{"event":"onComplete","checkout":{"id":"ck-6","status":"completed"}}"#, now: 1_000)
        let dismissed = a.feed(#"{"event":"onDismiss","checkout":{"id":"ck-6"}}"#,
                               receivedAt: fixedReceivedAt + 20_000, now: 1_020)
        // Restarted 35 s after the complete, 15 s after the dismiss: live, and completed.
        let b = Self.restored([done, dismissed], options: options, wallNow: Timestamp(milliseconds: fixedReceivedAt + 35_000))
        #expect(b.state.count == 1)
        let again = b.feed(#"{"event":"onComplete","checkout":{"id":"ck-6","status":"completed","order":{"id":"O-6"}}}"#, now: 2_001)
        #expect(again["repeat"] == true)
        #expect(again["idempotency_key"] == "ck-6")
        #expect(b.counters.publishedByKind[Int(LifecycleKind.complete.rawValue)] == 1)
        #expect(b.state.expired == 0 && b.state.evicted == 0)
    }

    @Test("a checkout idle past the TTL between two envelopes starts afresh, as it did live")
    func gapPastTTLResets() {
        var options = EventProcessor.Options()
        options.checkoutTTLSeconds = 30
        let a = EventProcessor(options: options)
        let done = a.feed(#"{"event":"onComplete","checkout":{"id":"ck-4","status":"completed"}}"#, now: 1_000)
        let started = a.feed(#"{"event":"onStart","checkout":{"id":"ck-4","status":"open"}}"#,
                             receivedAt: fixedReceivedAt + 40_000, now: 1_040)
        let b = Self.restored([done, started], options: options, wallNow: Timestamp(milliseconds: fixedReceivedAt + 45_000))
        let complete = b.feed(#"{"event":"onComplete","checkout":{"id":"ck-4","status":"completed","order":{"id":"O-4"}}}"#, now: 2_001)
        #expect(complete["repeat"] == false)
        #expect(complete["idempotency_key"] == "O-4")
    }

    @Test("the key restored is the last complete's; a fail after a complete restores completion on its own")
    func lastKeyAndFailAfterComplete() {
        let a = EventProcessor()
        #expect(a.feed(#"{"event":"onComplete","checkout":{"id":"ck-3","status":"completed","order":{"id":"O-3"}}}"#).outcome
            == .published(.complete))
        let failed = a.feed(#"{"event":"onFail","checkout":{"id":"ck-3"},"error":{"code":"payment_failed"}}"#)
        #expect(failed["after_complete"] == true)
        #expect(failed["idempotency_key"] == "O-3")
        // Only the fail is within the replayed records.
        let b = Self.restored([failed])
        let again = b.feed(#"{"event":"onComplete","checkout":{"id":"ck-3","status":"completed"}}"#, now: 2_001)
        #expect(again["repeat"] == true)
        #expect(again["idempotency_key"] == "O-3")

        // A checkout evicted live and completed again under a new key: the newer key wins.
        let c = EventProcessor()
        let first = c.feed(#"{"event":"onComplete","checkout":{"id":"ck-2","status":"completed","order":{"id":"O-1"}}}"#)
        let fresh = EventProcessor()
        let second = fresh.feed(#"{"event":"onComplete","checkout":{"id":"ck-2","status":"completed","order":{"id":"O-2"}}}"#)
        #expect(second["repeat"] == false)
        let d = Self.restored([first, second])
        #expect(d.feed(#"{"event":"onComplete","checkout":{"id":"ck-2","status":"completed"}}"#, now: 2_001)["idempotency_key"] == "O-2")
    }

    @Test("what is not a lifecycle envelope is skipped")
    func notAnEnvelope() {
        let p = EventProcessor()
        for text in ["", "{", "[]", #"{"kind":"update"}"#, #"{"kind":"heartbeat","checkout_id":"x"}"#] {
            let ok = Array(text.utf8).withUnsafeBytes { p.restore(envelope: $0, seq: 1, wallNow: Self.wallNow, now: 1) }
            #expect(!ok, "\(text)")
        }
        #expect(p.state.count == 0)
    }

    @Test("received_at is read back exactly as it is written")
    func timestampRoundTrip() {
        for ms: Int64 in [0, 1, 951_782_400_000, 1_764_675_541_123, 4_107_542_399_999, 1_709_164_800_000] {
            var w = JSONWriter()
            Timestamp(milliseconds: ms).write(to: &w)
            let text = w.bytes
            let parsed = text.withUnsafeBytes { Timestamp(rfc3339: UnsafeRawBufferPointer(rebasing: $0.dropFirst().dropLast())) }
            #expect(parsed?.milliseconds == ms, "\(String(decoding: text, as: UTF8.self))")
        }
        for bad in ["2026-12-02T11:39:01Z", "2026-13-02T11:39:01.123Z", "2026-12-02 11:39:01.123Z", "2026-12-02T11:39:01.12xZ"] {
            let parsed = Array(bad.utf8).withUnsafeBytes { Timestamp(rfc3339: $0) }
            #expect(parsed == nil, "\(bad)")
        }
    }
}
