/// The order of `checkoutbus flood --sweep`'s steps, apart from running them: up from FROM by
/// STEP until a step misses; then, because the step just below a miss is the boundary where a run
/// holds or misses on the host's noise, that step again, and the one below it, until one holds a
/// second time. The answer is the highest rate that held twice (or, when nothing missed or flood's
/// own limit stopped the climb, the highest that held once: the top of the sweep, or a floor).
package struct SweepPlan: Sendable {
    /// What a step's run found.
    package enum Outcome: Sendable {
        case held
        /// Over the SLO, lost envelopes, or the bus holding the producers back.
        case missedByBus
        /// Flood could not keep the rate (its limit, not the bus's).
        case missedByTool
        /// SIGINT or SIGTERM: the plan ends with what held so far.
        case interrupted
    }

    package let rates: [Int]
    /// The highest rate that held on the way up.
    package private(set) var highestHeld: Int?
    /// Set once the plan is over.
    package private(set) var answer: Int?
    /// True when the answer is only a floor: flood's own limit stopped the climb.
    package private(set) var toolLimited = false
    /// True when the answer held twice (the climb ended on a miss of the bus's).
    package private(set) var confirmed = false
    /// True when every step of the climb held: the answer is the top of the sweep, not a boundary.
    package private(set) var topped = false
    /// True when a signal ended the plan.
    package private(set) var interrupted = false
    /// True once the plan has its answer (or none): ``next()`` is nil.
    package var isOver: Bool { over }
    private var climbing = 0
    private var again: Int?
    private var over = false

    package init(from: Int, to: Int, step: Int) {
        rates = Array(stride(from: from, through: to, by: step))
    }

    /// The next step to run (`again`: a rate that already held once), or nil when the plan is over.
    package func next() -> (rate: Int, again: Bool)? {
        if over { return nil }
        if let again { return (again, true) }
        return climbing < rates.count ? (rates[climbing], false) : nil
    }

    /// Records the outcome of the step `next()` gave.
    package mutating func record(_ outcome: Outcome) {
        guard let (rate, isAgain) = next() else { return }
        if outcome == .interrupted {
            answer = isAgain ? answer : highestHeld
            interrupted = true
            over = true
            return
        }
        if isAgain {
            if outcome == .held {
                answer = rate
                confirmed = true
                over = true
            } else {
                let below = rates.lastIndex { $0 < rate }
                again = below.map { rates[$0] }
                if again == nil { over = true }
            }
            return
        }
        switch outcome {
        case .held:
            highestHeld = rate
            climbing += 1
            if climbing == rates.count {
                answer = rate
                topped = true
                over = true
            }
        case .missedByTool:
            answer = highestHeld
            toolLimited = true
            over = true
        case .interrupted:
            break
        case .missedByBus:
            again = highestHeld
            if again == nil { over = true }
        }
    }
}
