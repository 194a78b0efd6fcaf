import Testing

@testable import CheckoutBusLoad
import CheckoutBusTools

// The order of `flood --sweep`'s steps and its answer; over the wire in
// Tests/IntegrationTests/FloodScaleTests.swift.
@Suite("flood --sweep: the plan")
struct SweepPlanTests {
    /// Runs a plan against `held(rate, again)`; returns the steps run and the plan.
    func run(_ from: Int, _ to: Int, _ step: Int, _ outcome: (Int, Bool) -> SweepPlan.Outcome) -> ([String], SweepPlan) {
        var plan = SweepPlan(from: from, to: to, step: step)
        var steps: [String] = []
        while let (rate, again) = plan.next() {
            steps.append((again ? "again " : "") + String(rate))
            plan.record(outcome(rate, again))
            if steps.count > 100 { break }
        }
        return (steps, plan)
    }

    @Test("every step holds: the top is the answer, held once")
    func allHold() {
        let (steps, plan) = run(1000, 3000, 1000) { _, _ in .held }
        #expect(steps == ["1000", "2000", "3000"])
        #expect(plan.answer == 3000 && plan.topped && !plan.confirmed && !plan.toolLimited)
    }

    @Test("a miss of the bus, twice: the step below runs again and is the answer when it holds again")
    func confirmedBelowMiss() {
        let (steps, plan) = run(1000, 5000, 1000) { rate, _ in rate >= 4000 ? .missedByBus : .held }
        #expect(steps == ["1000", "2000", "3000", "4000", "again 4000", "again 3000"])
        #expect(plan.answer == 3000 && plan.confirmed && !plan.topped)
    }

    @Test("a boundary step that held on noise: it misses again, so the sweep steps down until one holds twice")
    func noisyBoundary() {
        // 3000 held once by luck; on its second run it misses, as does 2000's; 1000 holds again.
        let (steps, plan) = run(1000, 5000, 1000) { rate, again in
            if !again { return rate >= 4000 ? .missedByBus : .held }
            return rate >= 2000 ? .missedByBus : .held
        }
        #expect(steps == ["1000", "2000", "3000", "4000", "again 4000", "again 3000", "again 2000", "again 1000"])
        #expect(plan.answer == 1000 && plan.confirmed)
    }

    @Test("nothing holds twice, or the first step misses: no answer")
    func none() {
        let (steps, plan) = run(1000, 3000, 1000) { rate, again in again || rate > 1000 ? .missedByBus : .held }
        #expect(steps == ["1000", "2000", "again 2000", "again 1000"])
        #expect(plan.answer == nil)
        let (first, firstPlan) = run(1000, 3000, 1000) { _, _ in .missedByBus }
        #expect(first == ["1000", "again 1000"] && firstPlan.answer == nil && firstPlan.highestHeld == nil)
    }

    @Test("flood's own limit ends the climb: the highest held is a floor, not run again")
    func toolLimit() {
        let (steps, plan) = run(1000, 5000, 1000) { rate, _ in rate >= 3000 ? .missedByTool : .held }
        #expect(steps == ["1000", "2000", "3000"])
        #expect(plan.answer == 2000 && plan.toolLimited && !plan.confirmed && !plan.topped)
        // Flood's limit at the very first step: no answer, and inconclusive (tool-limited), not "none held".
        let (first, firstPlan) = run(1000, 5000, 1000) { _, _ in .missedByTool }
        #expect(first == ["1000"] && firstPlan.answer == nil && firstPlan.toolLimited)
    }

    @Test("interrupted: the plan ends; an answer only from the climb, never an unconfirmed boundary")
    func interrupted() {
        let (steps, plan) = run(1000, 5000, 1000) { rate, _ in rate >= 3000 ? .interrupted : .held }
        #expect(steps == ["1000", "2000", "3000"] && plan.answer == 2000 && !plan.toolLimited && plan.interrupted && !plan.topped)
        let (again, againPlan) = run(1000, 5000, 1000) { rate, again in again ? .interrupted : rate >= 3000 ? .missedByBus : .held }
        #expect(again == ["1000", "2000", "3000", "again 3000"] && againPlan.answer == nil)
    }

    @Test("a lone miss that holds when run again was noise: the climb goes on past it")
    func noiseMiss() {
        // 3000 misses once (a spike), holds on its second run; 5000 misses twice: the boundary.
        let (steps, plan) = run(1000, 6000, 1000) { rate, again in
            if rate == 3000 { return again ? .held : .missedByBus }
            return rate >= 5000 ? .missedByBus : .held
        }
        #expect(steps == ["1000", "2000", "3000", "again 3000", "4000", "5000", "again 5000", "again 4000"])
        #expect(plan.answer == 4000 && plan.confirmed)
    }
}
