import Testing

import CheckoutBusProtocol
@testable import CheckoutBusTools

/// `checkoutbus top`'s figures from two stats snapshots, without a daemon or a terminal.
@Suite("top view")
struct TopViewTests {
    static func snapshot(received: Int, updates: Int, suppressed: Int, lastSeq: Int,
                         failed: [String: Int] = [:], subscribers: [String: Int] = [:],
                         missed: [String: Int] = [:]) -> TopSnapshot {
        var s = StatsReply()
        s.lastSeq = Int64(lastSeq)
        s.firstSeq = 1
        s.durableSeq = Int64(lastSeq)
        s.counters.received = Int64(received)
        s.counters.receivedByFamily = RawFormat.labels.map { $0 == "ecp" ? Int64(received / 2) : $0 == "primer" ? Int64(received - received / 2) : 0 }
        s.counters.publishedByKind = LifecycleKind.allCases.map { $0 == .start ? 10 : $0 == .update ? Int64(updates) : 0 }
        s.counters.suppressed = Int64(suppressed)
        s.counters.failedByCode = StableErrorCode.allCases.map { Int64(failed[$0.rawValue] ?? 0) }
        s.counters.deadLettered = ["invalid_json": UInt64(received / 100)]
        s.counters.trackedCheckouts = 7
        s.journal.bytes = 4096
        s.journal.segments = 1
        s.journal.fsyncP99Micros = 250
        // Rows as an older daemon wrote them, without `lag`: the snapshot works it out.
        for name in Set(subscribers.keys).union(missed.keys).sorted() {
            s.subscribers.append(.init(name: name, row: .init(
                state: "live", lastSeq: Int64(subscribers[name] ?? 0), lag: nil, missed: Int64(missed[name] ?? 0))))
        }
        return TopSnapshot(s)
    }

    @Test("rates are counter differences over the elapsed time; the suppression ratio is of updates")
    func rates() {
        let before = Self.snapshot(received: 1000, updates: 100, suppressed: 100, lastSeq: 900)
        let after = Self.snapshot(received: 3000, updates: 400, suppressed: 200, lastSeq: 2600)
        let f = TopView.figures(previous: before, current: after, elapsed: 2)
        #expect(f.eventsIn == 1000)
        #expect(f.eventsInByFamily["ecp"] == 500 && f.eventsInByFamily["primer"] == 500)
        #expect(f.published == 150)
        #expect(f.publishedByKind["update"] == 150 && f.publishedByKind["start"] == 0)
        #expect(f.suppressed == 50)
        #expect(f.suppressionRatio == 0.25)  // 100 suppressed of 300 updates + 100 suppressed
        #expect(f.deadLettersByReason["invalid_json"] == 10)
    }

    @Test("without a previous snapshot there are no rates; a counter that went down counts as 0")
    func firstRoundAndRestart() {
        let s = Self.snapshot(received: 1000, updates: 100, suppressed: 100, lastSeq: 900)
        let first = TopView.figures(previous: nil, current: s, elapsed: 1)
        #expect(first.eventsIn == nil && first.suppressionRatio == nil)
        #expect(TopView(shards: [.init(endpoint: "a", previous: nil, current: s)], elapsed: 1).line()
            .contains("events_in_per_s=- "))
        let restarted = TopView.figures(previous: s, current: Self.snapshot(received: 10, updates: 1, suppressed: 0, lastSeq: 5),
                                        elapsed: 1)
        #expect(restarted.eventsIn == 0)
    }

    @Test("a subscriber's lag is the daemon's last seq minus its own, summed over the shards it reports to")
    func lag() {
        let a = Self.snapshot(received: 0, updates: 0, suppressed: 0, lastSeq: 500, subscribers: ["ops-tail": 480, "slow": 100])
        let b = Self.snapshot(received: 0, updates: 0, suppressed: 0, lastSeq: 300, subscribers: ["ops-tail": 290])
        #expect(a.subscribers["ops-tail"]?.lag == 20 && a.subscribers["slow"]?.lag == 400)
        let view = TopView(shards: [.init(endpoint: "tcp://a", previous: a, current: a),
                                    .init(endpoint: "tcp://b", previous: b, current: b)], elapsed: 1)
        let rows = view.subscriberRows()
        #expect(rows.map(\.name) == ["slow", "ops-tail"])  // by lag, largest first
        #expect(rows.map(\.report.lag) == [400, 30])
        var byShard = view
        byShard.byShard = true
        #expect(byShard.subscriberRows().map { "\($0.name)@\($0.shard!)=\($0.report.lag)" }
            == ["slow@tcp://a=400", "ops-tail@tcp://a=20", "ops-tail@tcp://b=10"])
        let screen = view.screen(interval: 1).joined(separator: "\n")
        #expect(screen.contains("LAG") && screen.contains("ops-tail") && screen.contains("  400"))
    }

    /// Any control client may report any seq: two shards' near 2^63 trapped on the sum.
    @Test("a subscriber's figures summed over shards saturate rather than trap")
    func saturatingSums() {
        var a = TopSnapshot()
        a.subscribers["w"] = .init(lastSeq: Int.max - 1, missed: Int.max, lag: 5)
        var b = TopSnapshot()
        b.subscribers["w"] = .init(lastSeq: Int.max - 1, missed: 1, lag: 7)
        let total = TopSnapshot.summed([a, b])
        #expect(total.subscribers["w"]?.lastSeq == Int.max)
        #expect(total.subscribers["w"]?.missed == Int.max)
        #expect(total.subscribers["w"]?.lag == 12)
    }

    @Test("the failures table keeps the top N codes, by rate, by total or by name")
    func topFailures() {
        let before = Self.snapshot(received: 0, updates: 0, suppressed: 0, lastSeq: 0,
                                   failed: ["cart_expired": 100, "network_error": 0, "payment_failed": 10, "unknown": 500])
        let after = Self.snapshot(received: 0, updates: 0, suppressed: 0, lastSeq: 0,
                                  failed: ["cart_expired": 101, "network_error": 50, "payment_failed": 40, "unknown": 500,
                                           "sdk_error": 0])
        var view = TopView(shards: [.init(endpoint: "a", previous: before, current: after)], elapsed: 1, topN: 3)
        let f = view.summedFigures!
        #expect(view.failureRows(f).map(\.code) == ["network_error", "payment_failed", "cart_expired"])
        view.sort = view.sort.next
        #expect(view.sort == .total)
        #expect(view.failureRows(f).map(\.code) == ["unknown", "cart_expired", "network_error"])
        view.sort = view.sort.next
        #expect(view.failureRows(f).map(\.code) == ["cart_expired", "network_error", "payment_failed"])
        view.topN = 10
        #expect(view.failureRows(f).map(\.code) == ["cart_expired", "network_error", "payment_failed", "unknown"])
        #expect(view.failureRows(f).first { $0.code == "unknown" }?.rate == 0)
        #expect(view.sort.next == .rate)
    }

    @Test("shards are summed, or side by side with a total; a shard that did not answer says so")
    func shards() {
        let a1 = Self.snapshot(received: 100, updates: 0, suppressed: 0, lastSeq: 10)
        let a2 = Self.snapshot(received: 300, updates: 0, suppressed: 0, lastSeq: 20)
        let b1 = Self.snapshot(received: 1000, updates: 0, suppressed: 0, lastSeq: 10)
        let b2 = Self.snapshot(received: 1600, updates: 0, suppressed: 0, lastSeq: 30)
        var view = TopView(shards: [.init(endpoint: "tcp://a", previous: a1, current: a2),
                                    .init(endpoint: "tcp://b", previous: b1, current: b2),
                                    .init(endpoint: "tcp://c", previous: nil, current: nil)], elapsed: 2)
        #expect(view.summedFigures?.eventsIn == 400)
        #expect(view.summedFigures?.current.lastSeq == 50)
        #expect(view.line().contains("events_in_per_s=400.0") && view.line().contains("no_answer=tcp://c"))
        view.byShard = true
        let lines = view.screen(width: 160, height: 50, interval: 1)
        #expect(lines.contains("tcp://c: no answer"))
        let eventsRow = lines.first { $0.hasPrefix("events in/s") }
        #expect(eventsRow?.split(separator: " ", omittingEmptySubsequences: true).suffix(5)
            == ["100.0", "300.0", "no", "answer", "400.0"])
        #expect(lines.allSatisfy { $0.count <= 160 })
    }
}
