/// The order of `checkoutbus flood --sweep`'s steps, apart from running them: up from FROM by
/// STEP until a step misses. A miss is run again before it counts (a lone miss that holds the
/// second time was the host's noise, and the climb goes on); a miss that misses again is the
/// boundary, and the step below it runs again, and the one below that, until one holds a second
/// time. The answer is the highest rate that held twice (or, when nothing missed or flood's own
/// limit stopped the climb, the highest that held once: the top of the sweep, or a floor).
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
    private var climbing = 0
    /// A climb's step that missed, to run again before the miss counts.
    private var missAgain: Int?
    /// A step below the boundary, to run again until one holds a second time.
    private var again: Int?
    private var over = false

    package init(from: Int, to: Int, step: Int) {
        rates = Array(stride(from: from, through: to, by: step))
    }

    /// The next step to run (`again`: a rate that already held once), or nil when the plan is over.
    package func next() -> (rate: Int, again: Bool)? {
        if over { return nil }
        if let missAgain { return (missAgain, true) }
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
        if isAgain, missAgain == nil {
            // Below the boundary: the answer once one holds a second time.
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
        // The climb, or a climb's miss run again.
        let retried = missAgain != nil
        missAgain = nil
        switch outcome {
        case .held:
            // (After a retry: the miss was noise, and the climb goes on.)
            climbed(rate)
        case .missedByTool:
            answer = highestHeld
            toolLimited = true
            over = true
        case .interrupted:
            break
        case .missedByBus where retried:
            // Missed twice: the boundary. The highest held step runs again.
            again = highestHeld
            if again == nil { over = true }
        case .missedByBus:
            // A miss runs again before it counts.
            missAgain = rate
        }
    }

    /// `rate` held on the climb: the next step, or the top's answer.
    private mutating func climbed(_ rate: Int) {
        highestHeld = rate
        climbing += 1
        if climbing == rates.count {
            answer = rate
            topped = true
            over = true
        }
    }
}
