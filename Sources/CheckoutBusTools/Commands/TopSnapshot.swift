import CheckoutBusProtocol

/// One `stats` reply as `checkoutbus top` needs it: the daemon's running counters, read with
/// ``StatsReply`` (docs/durability.md, "stats"). `Sendable`; a value.
///
/// Counters only ever grow while a daemon runs, so two snapshots and the time between them give
/// rates (``TopView``). Figures a daemon does not report read as zero, so an older daemon still
/// shows what it has.
package struct TopSnapshot: Sendable, Equatable {
    /// What one subscriber last reported (`report` on the control socket).
    package struct Subscriber: Sendable, Equatable {
        package var lastSeq: Int
        package var missed: Int
        package var recovered: Int
        package var gaps: Int
        /// How far it is behind: the daemon's `last_seq` minus the subscriber's position (never
        /// below 0).
        package var lag: Int
        /// It reports (`state` live); a gone one stopped or fell silent.
        package var live: Bool
        /// Milliseconds since its last report, as the daemon saw it.
        package var ageMilliseconds: Int

        package init(lastSeq: Int, missed: Int = 0, recovered: Int = 0, gaps: Int = 0, lag: Int = 0, live: Bool = true,
                     ageMilliseconds: Int = 0) {
            self.lastSeq = lastSeq
            self.missed = missed
            self.recovered = recovered
            self.gaps = gaps
            self.lag = lag
            self.live = live
            self.ageMilliseconds = ageMilliseconds
        }
    }

    package var lastSeq = 0
    package var durableSeq = 0
    /// The oldest seq the journal still retains: the retention horizon.
    package var firstSeq = 0
    /// Messages received on the ingest sockets.
    package var received = 0
    /// Decoded events received, by raw family (`ecp`, `sheet_bridge`, `callback`, `primer`).
    package var receivedByFamily: [String: Int] = [:]
    /// Lifecycle envelopes published, by kind name.
    package var publishedByKind: [String: Int] = [:]
    package var suppressed = 0
    /// Failures published, by stable code.
    package var failedByCode: [String: Int] = [:]
    /// Failures published as `unknown`, by raw code.
    package var unknownRawCodes: [String: Int] = [:]
    /// Dead letters, by reason.
    package var deadLettered: [String: Int] = [:]
    package var trackedCheckouts = 0
    package var journalBytes = 0
    package var journalSegments = 0
    /// The daemon's fsync p99 since it started (a histogram bucket's upper bound), µs.
    package var fsyncP99Micros = 0
    package var fsyncMaxMicros = 0
    /// By name.
    package var subscribers: [String: Subscriber] = [:]

    package init() {}

    /// Reads a `stats` reply; nil when it is not a JSON object answering `stats` with `ok`.
    package init?(reply: [UInt8]) {
        guard let stats = StatsReply.read(reply) else { return nil }
        self.init(stats)
    }

    /// Reads a `stats` reply (``StatsReply``).
    package init(_ s: StatsReply) {
        let c = s.counters
        func named(_ names: [String], _ values: [Int64]) -> [String: Int] {
            Dictionary(zip(names, values.map { Int($0) }), uniquingKeysWith: +)
        }
        lastSeq = Int(s.lastSeq)
        durableSeq = Int(s.durableSeq)
        firstSeq = Int(s.firstSeq)
        received = Int(c.received)
        receivedByFamily = named(RawFormat.labels, c.receivedByFamily)
        publishedByKind = named(LifecycleKind.allCases.map { String(describing: $0.name) }, c.publishedByKind)
        suppressed = Int(c.suppressed)
        failedByCode = named(StableErrorCode.allCases.map(\.rawValue), c.failedByCode)
        unknownRawCodes = c.unknownRawCodes.mapValues { Int($0) }
        deadLettered = c.deadLettered.mapValues { Int($0) }
        trackedCheckouts = Int(c.trackedCheckouts)
        journalBytes = Int(s.journal.bytes)
        journalSegments = Int(s.journal.segments)
        fsyncP99Micros = Int(s.journal.fsyncP99Micros)
        fsyncMaxMicros = Int(s.journal.fsyncMaxMicros)
        for entry in s.subscribers {
            let r = entry.row
            // The daemon's lag counts from the seq through which the subscriber has everything it
            // follows; an older daemon sends none, and last_seq is what there is.
            let lag = r.lag ?? max(0, s.lastSeq - r.lastSeq)
            subscribers[entry.name] = Subscriber(
                lastSeq: Int(r.lastSeq), missed: Int(r.missed), recovered: Int(r.recovered), gaps: Int(r.gaps),
                lag: Int(lag), live: r.state == "live", ageMilliseconds: Int(r.ageMilliseconds))
        }
    }

    /// Lifecycle envelopes published, all kinds.
    package var published: Int { publishedByKind.values.reduce(0, +) }

    /// Several shards as one: counters, journal and checkouts added, seqs added (each shard
    /// numbers its own), fsync figures the worst shard's. A subscriber that reports to several
    /// shards under one name (a sharded subscriber) has its seqs, drops and lags added: its lag is
    /// the sum of its lag on each shard it reports to.
    package static func summed(_ shards: [TopSnapshot]) -> TopSnapshot {
        var total = TopSnapshot()
        func add(_ a: inout [String: Int], _ b: [String: Int]) { a.merge(b, uniquingKeysWith: +) }
        for s in shards {
            total.lastSeq += s.lastSeq
            total.durableSeq += s.durableSeq
            total.firstSeq += s.firstSeq
            total.received += s.received
            add(&total.receivedByFamily, s.receivedByFamily)
            add(&total.publishedByKind, s.publishedByKind)
            total.suppressed += s.suppressed
            add(&total.failedByCode, s.failedByCode)
            add(&total.unknownRawCodes, s.unknownRawCodes)
            add(&total.deadLettered, s.deadLettered)
            total.trackedCheckouts += s.trackedCheckouts
            total.journalBytes += s.journalBytes
            total.journalSegments += s.journalSegments
            total.fsyncP99Micros = max(total.fsyncP99Micros, s.fsyncP99Micros)
            total.fsyncMaxMicros = max(total.fsyncMaxMicros, s.fsyncMaxMicros)
            // Saturating sums: a subscriber may report any count (a seq near 2^63 trapped here).
            func sum(_ a: Int, _ b: Int) -> Int {
                let (s, overflow) = a.addingReportingOverflow(b)
                return overflow ? (b > 0 ? Int.max : Int.min) : s
            }
            total.subscribers.merge(s.subscribers) {
                Subscriber(lastSeq: sum($0.lastSeq, $1.lastSeq), missed: sum($0.missed, $1.missed),
                           recovered: sum($0.recovered, $1.recovered), gaps: sum($0.gaps, $1.gaps),
                           lag: sum($0.lag, $1.lag), live: $0.live || $1.live,
                           ageMilliseconds: min($0.ageMilliseconds, $1.ageMilliseconds))
            }
        }
        return total
    }
}
