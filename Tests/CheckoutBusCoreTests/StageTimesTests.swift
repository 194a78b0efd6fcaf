import Testing

import CheckoutBusCore
import CheckoutBusProtocol

@Suite("stage timing in the processor")
struct StageTimesTests {
    static func run(_ p: EventProcessor, _ text: String) -> ProcessingResult { ProcessingResultTests.run(p, text) }

    @Test("a timed event reports its decode, rules and envelope time; the flag is cleared by the call")
    func timedEvent() throws {
        let p = EventProcessor()
        p.timeNextEvent = true
        let first = Self.run(p, #"{"event":"onStart","checkout":{"id":"ck-1"}}"#)
        #expect(first.outcome == .published(.start))
        #expect(p.timeNextEvent == false)
        let t = try #require(p.lastStageTimes)
        // Each stage did work between two reads of a monotonic clock, and the clock moved.
        #expect(t.decode + t.rules + t.envelope > 0)
        #expect(t.envelope > 0)

        // Not timed: the last timing stays as it was, untouched by this event.
        _ = Self.run(p, #"{"event":"onDismiss","checkout":{"id":"ck-1"}}"#)
        #expect(p.lastStageTimes?.decode == t.decode)
    }

    @Test("a suppressed update has no envelope time; a dead letter is not sampled")
    func suppressedAndDeadLetter() throws {
        let p = EventProcessor()
        let update = Fixture.ecp("ec.line_items.change", checkout: Fixture.snapshot(id: "ck-2"))
        _ = Self.run(p, update)
        p.timeNextEvent = true
        #expect(Self.run(p, update).outcome == .suppressed)
        #expect(try #require(p.lastStageTimes).envelope == 0)

        p.timeNextEvent = true
        #expect(Self.run(p, "{not json").outcome == .deadLettered(.invalidJSON))
        #expect(p.lastStageTimes == nil)
        #expect(p.timeNextEvent == false)
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
