import Testing

@testable import CheckoutBusTools

// The verdict of `checkoutbus trace` for each way a checkout can end, and the suppressed counts
// placed between envelopes; over the wire in Tests/IntegrationTests/TraceTests.swift.
@Suite("trace: the verdict")
struct CheckoutStoryTests {
    func story(_ entries: [TraceEntry], suppressed: [Int64]? = nil) -> CheckoutStory {
        var story = CheckoutStory(checkoutID: "c-1", shard: 0, shards: 1)
        story.firstSeq = 1
        story.lastSeq = 100
        story.entries = entries
        story.suppressedSeqs = suppressed
        return story
    }

    func entry(_ seq: Int64, _ kind: String, code: String? = nil, terminal: Bool? = nil, order: String? = nil,
               repeated: Bool = false, afterComplete: Bool = false) -> TraceEntry {
        var e = TraceEntry(seq: seq, kind: kind)
        e.code = code
        e.terminal = terminal
        e.orderID = order
        e.isRepeat = repeated
        e.afterComplete = afterComplete
        return e
    }

    @Test("completed, with failures before, repeats and a failure after")
    func completed() {
        let s = story([entry(1, "start"), entry(2, "fail", code: "payment_failed", terminal: false),
                       entry(3, "fail", code: "payment_failed", terminal: false), entry(4, "complete", order: "o-1"),
                       entry(5, "complete", order: "o-1", repeated: true), entry(6, "fail", code: "cart_completed", afterComplete: true)])
        #expect(s.verdict == "completed, order o-1, 2 failures before, 1 repeat complete, 1 failure after complete (the order stands)")
    }

    @Test("failed, dismissed, still open, in progress, unknown")
    func notCompleted() {
        #expect(story([entry(1, "start"), entry(2, "fail", code: "cart_expired", terminal: true)]).verdict
            == "failed: cart_expired, no order")
        #expect(story([entry(2, "fail", code: "payment_failed", terminal: false), entry(3, "fail", code: "payment_failed", terminal: false)]).verdict
            == "failed, checkout still open: payment_failed, no order, 2 failures in all")
        #expect(story([entry(1, "start"), entry(2, "fail", code: "network_error"), entry(3, "dismiss")]).verdict
            == "dismissed, no order, 1 failure before")
        #expect(story([entry(1, "start"), entry(2, "update"), entry(3, "deadletter")]).verdict
            == "no outcome yet: last update at ?, no order, 1 dead letter")
        #expect(story([]).verdict == "unknown checkout: nothing in the journal of shard 0/1 (seqs 1–100)")
    }

    @Test("suppressed updates are counted between the envelopes they followed; unknown without the log")
    func suppressedCounts() {
        let entries = [entry(3, "start"), entry(10, "update"), entry(20, "complete", order: "o")]
        let s = story(entries, suppressed: [2, 10, 12, 19, 25])
        #expect(s.suppressedBefore == 1)
        #expect([0, 1, 2].map { s.suppressed(after: $0) } == [0, 3, 1])
        #expect(story(entries).suppressed(after: 0) == nil)
        #expect(story(entries).json().contains(#""suppressed_after":null"#))
    }
}
