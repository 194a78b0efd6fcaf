import Testing

import CheckoutBusCore
import CheckoutBusProtocol

@Suite("stage timing in the processor")
struct StageTimesTests {
    static func run(_ p: EventProcessor, _ text: String, timed: Bool = false) -> ProcessingResult {
        Array(text.utf8).withUnsafeBytes {
            p.process($0, receivedAt: Timestamp(milliseconds: fixedReceivedAt), now: 1_000, timed: timed)
        }
    }

    @Test("a timed event's result carries its decode, rules and envelope time; an untimed one's carries none")
    func timedEvent() throws {
        let p = EventProcessor()
        let first = Self.run(p, #"{"event":"onStart","checkout":{"id":"ck-1"}}"#, timed: true)
        #expect(first.outcome == .published(.start))
        let t = try #require(first.stages)
        // Each stage did work between two reads of a monotonic clock, and the clock moved.
        #expect(t.decode + t.rules + t.envelope > 0)
        #expect(t.envelope > 0)

        let untimed = Self.run(p, #"{"event":"onDismiss","checkout":{"id":"ck-1"}}"#)
        #expect(untimed.outcome == .published(.dismiss))
        #expect(untimed.stages == nil)
    }

    @Test("a suppressed update has no envelope time; a dead letter is not sampled")
    func suppressedAndDeadLetter() throws {
        let p = EventProcessor()
        let update = Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(id: "ck-2"))
        _ = Self.run(p, update)
        let suppressed = Self.run(p, update, timed: true)
        #expect(suppressed.outcome == .suppressed)
        #expect(try #require(suppressed.stages).envelope == 0)

        let deadLetter = Self.run(p, "{not json", timed: true)
        #expect(deadLetter.outcome == .deadLettered(.invalidJSON))
        #expect(deadLetter.stages == nil)
    }

    /// A message's context, what its prepare found and the event it decoded, until its commit (as
    /// the daemon's slots).
    final class Slot {
        let context = EventDecodeContext()
        var prepared: PreparedEvent?
        var event: DecodedEvent?
    }

    @Test("messages prepared apart, each in its own context, and committed in order publish what processing them one by one does")
    func preparedApart() throws {
        let messages = [
            #"{"event":"onStart","checkout":{"id":"ck-1"}}"#,
            Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(id: "ck-1")),
            Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(id: "ck-1")),
            "{not json",
            #"{"event":"onDismiss","checkout":{"id":"ck-1"}}"#,
        ].map { Array($0.utf8) }
        let sequential = EventProcessor()
        let expected = messages.map { m in
            m.withUnsafeBytes { b in
                let r = sequential.process(b, receivedAt: Timestamp(milliseconds: fixedReceivedAt), now: 1_000)
                return (r.outcome, r.seq, r.publication.map { Array($0.envelope) })
            }
        }
        let committer = EventProcessor()
        // Every message is prepared before the first is committed, as the daemon's parallel path does.
        let slots = messages.map { _ in Slot() }
        for (m, slot) in zip(messages, slots) {
            m.withUnsafeBytes { b in
                slot.prepared = EventProcessor.prepare(b, options: committer.options, eventIDWindow: false, in: slot.context,
                                                       timed: true, into: &slot.event) { _, _ in }
            }
        }
        for i in messages.indices {
            let result = messages[i].withUnsafeBytes { b in
                committer.commit(b, slots[i].context, slots[i].prepared!, slots[i].event.take(),
                                 receivedAt: Timestamp(milliseconds: fixedReceivedAt), now: 1_000)
            }
            #expect(result.outcome == expected[i].0)
            #expect(result.seq == expected[i].1)
            #expect(result.publication.map { Array($0.envelope) } == expected[i].2)
            // Timed when it was prepared: every message that decoded carries its stages.
            #expect((result.stages != nil) == (i != 3))
        }
    }

    @Test("a sample longer than the preemption cut-off is discarded, not summed")
    func discardsPreempted() {
        var s = StageTimes()
        s.add(receive: 100, decode: 1_000, rules: 800, envelope: 600, journalAppend: 50)
        s.add(receive: 100, decode: StageTimes.preemptedAfter, rules: 800, envelope: 600, journalAppend: 50)
        s.addPublish(400)
        s.addPublish(StageTimes.preemptedAfter + 1)
        #expect(s.samples == 1)
        #expect(s.discarded == 2)
        #expect(s.decode == 1_000)
        #expect(s.rules == 800)
        #expect(s.publishSamples == 1)
        #expect(s.publish == 400)
    }

    @Test("the sampling interval stays within 33...95, averages about 64 and does not repeat one value")
    func intervals() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let draws = (0..<10_000).map { _ in StageTimes.nextInterval(&state) }
        #expect(draws.allSatisfy { (33...95).contains($0) })
        let mean = Double(draws.reduce(0, +)) / Double(draws.count)
        #expect(abs(mean - Double(StageTimes.sampleInterval)) < 2)
        #expect(Set(draws).count > 50)
        // Never a multiple of 64 at every step: the daemon reads 512 at a time.
        #expect(draws.contains { 512 % $0 != 0 })
    }
}
