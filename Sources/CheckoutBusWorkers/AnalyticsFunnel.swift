import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import SQLite

/// The analytics worker's whole state: the funnel counters, failures by code, revenue by currency,
/// the start-to-complete durations, the open checkouts it remembers, and the `seq` it matches.
///
/// Every number is a pure function of the envelopes applied, in `seq` order, and of
/// ``maxCheckouts``: replaying the same envelopes onto the state saved at some `seq` gives exactly
/// the state a worker that never stopped would hold. That is what makes the worker's counts exact
/// across `kill -9` (``AnalyticsCheckpoint``).
///
/// Definitions (docs/workers.md):
/// - `started`: `start` envelopes. `started_checkouts`: checkouts whose first `start` the worker
///   saw (a later `start` of a checkout it still remembers is not counted again).
/// - `completed`: orders, the `complete` envelopes with `repeat` false; `repeat_completes` the others.
/// - `failed`: `fail` envelopes with `repeat` false, by code; `repeat_failures` the others.
/// - `completed_after_start`: orders of checkouts whose `start` the worker saw and still remembers;
///   `completed_without_start` the rest (Primer sends no `start`; or the checkout was forgotten).
/// - `conversion_rate` = `completed_after_start` / `started_checkouts`.
/// - `abandoned`: checkouts dismissed before any `complete` (counted once, at the first such dismiss).
/// - revenue: `summary.total` of orders, by `summary.currency` (`XXX` when it has none).
/// - time to complete: `received_at` of the first `complete` minus that of the first `start`, one
///   sample per `completed_after_start`.
///
/// Not `Sendable`: owned by the worker's subscriber thread.
package final class AnalyticsFunnel {
    /// The funnel's event counts. `Sendable`.
    package struct Counters: Sendable, Equatable {
        /// Envelopes applied (lifecycle and dead letters).
        package var events: Int64 = 0
        package var started: Int64 = 0
        package var startedCheckouts: Int64 = 0
        package var updated: Int64 = 0
        package var completed: Int64 = 0
        package var repeatCompletes: Int64 = 0
        package var completedAfterStart: Int64 = 0
        package var completedWithoutStart: Int64 = 0
        package var failed: Int64 = 0
        /// Terminal `fail` envelopes with `repeat:true`: a checkout's last failure reported again,
        /// not counted in `failed` nor by code.
        package var repeatFailures: Int64 = 0
        package var failedAfterComplete: Int64 = 0
        package var dismissed: Int64 = 0
        package var abandoned: Int64 = 0
        package var deadLetters: Int64 = 0
        /// Envelopes that could not be read (not JSON, no checkout id): counted, otherwise ignored.
        package var unreadable: Int64 = 0

        /// Counters a state file written before them may lack (read as 0).
        static let addedLater: Set<String> = ["repeat_failures"]

        /// Names in the report and the state file, with key paths, in report order.
        static var fields: [(name: StaticString, path: WritableKeyPath<Counters, Int64>)] { [
            ("events", \.events), ("started", \.started), ("started_checkouts", \.startedCheckouts),
            ("updated", \.updated), ("completed", \.completed), ("repeat_completes", \.repeatCompletes),
            ("completed_after_start", \.completedAfterStart), ("completed_without_start", \.completedWithoutStart),
            ("failed", \.failed), ("repeat_failures", \.repeatFailures), ("failed_after_complete", \.failedAfterComplete),
            ("dismissed", \.dismissed),
            ("abandoned", \.abandoned), ("dead_letters", \.deadLetters), ("unreadable", \.unreadable),
        ] }
    }

    /// Orders and their total in one currency. `Sendable`.
    package struct Revenue: Sendable, Equatable {
        package var orders: Int64 = 0
        /// Sum of `summary.total` in minor units.
        package var total: Int64 = 0
        /// Orders whose envelope had no `summary.total` (counted in `orders`, adding nothing).
        package var ordersWithoutTotal: Int64 = 0
    }

    /// Per shard, the `seq` of its last envelope applied (0: none); one element for a single daemon.
    /// An old checkpoint (one `seq`) is shard 0's.
    package internal(set) var shardSeqs: [Int64] = [0]
    /// The `seq` of the last envelope applied (0: none); with several shards, the sum of
    /// ``shardSeqs`` — a measure of progress, not a position.
    package var lastSeq: Int64 {
        get { shardSeqs.count == 1 ? shardSeqs[0] : shardSeqs.reduce(0, +) }
        set { shardSeqs = [newValue] }
    }
    package internal(set) var counters = Counters()
    package internal(set) var failedByCode: [String: Int64] = [:]
    package internal(set) var failedAfterCompleteByCode: [String: Int64] = [:]
    package internal(set) var deadLettersByReason: [String: Int64] = [:]
    package internal(set) var revenue: [String: Revenue] = [:]
    package internal(set) var durations = DurationHistogram()
    let checkouts: CheckoutMemory

    /// The most checkouts remembered at once (least recently seen forgotten first).
    package var maxCheckouts: Int { checkouts.capacity }
    package var trackedCheckouts: Int { checkouts.count }
    package var evictedCheckouts: Int64 { checkouts.evicted }

    /// The currency code revenue without a currency is filed under (ISO 4217's "no currency").
    package static let noCurrency = "XXX"

    private let document = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)

    /// - Parameters:
    ///   - maxCheckouts: the most checkouts remembered at once.
    ///   - shards: how many shards' positions it keeps.
    package init(maxCheckouts: Int, shards: Int = 1) {
        checkouts = CheckoutMemory(capacity: maxCheckouts)
        shardSeqs = [Int64](repeating: 0, count: max(1, shards))
    }

    /// The fields of one envelope the funnel reads.
    struct Fields {
        var checkoutID: String?
        var receivedAt: Int64?
        var isRepeat = false
        var afterComplete = false
        var currency: String?
        var total: Int64?
        var code: String?
        var reason: String?
    }

    /// Applies one envelope (``BusEnvelope/bytes`` as published, in `seq` order within its shard).
    /// - Parameter shard: the position in ``shardSeqs`` it advances (0 for a single daemon, which
    ///   may itself be one shard of several).
    package func apply(_ envelope: BusEnvelope, shard: Int = 0) {
        counters.events += 1
        shardSeqs[shard] = envelope.seq
        guard let fields = read(envelope.bytes) else {
            counters.unreadable += 1
            return
        }
        if envelope.kind == .deadletter {
            counters.deadLetters += 1
            deadLettersByReason[fields.reason ?? "unknown", default: 0] += 1
            return
        }
        guard let id = fields.checkoutID else {
            counters.unreadable += 1
            return
        }
        switch envelope.kind {
        case .start:
            counters.started += 1
            let slot = checkouts.slot(for: id, insert: true)!
            if !checkouts.states[slot].has(.started) {
                checkouts.states[slot].insert(.started)
                checkouts.states[slot].startedAt = fields.receivedAt ?? CheckoutMemory.State.noTime
                counters.startedCheckouts += 1
            }
        case .update:
            counters.updated += 1
            _ = checkouts.slot(for: id, insert: false)
        case .complete:
            let slot = checkouts.slot(for: id, insert: true)!
            if fields.isRepeat {
                counters.repeatCompletes += 1
                checkouts.states[slot].insert(.completed)
                return
            }
            counters.completed += 1
            let state = checkouts.states[slot]
            if state.has(.started) && !state.has(.completed) {
                counters.completedAfterStart += 1
                if state.startedAt != CheckoutMemory.State.noTime, let done = fields.receivedAt {
                    durations.record(max(0, done - state.startedAt))
                }
            } else {
                counters.completedWithoutStart += 1
            }
            checkouts.states[slot].insert(.completed)
            let currency = fields.currency ?? AnalyticsFunnel.noCurrency
            var r = revenue[currency] ?? Revenue()
            r.orders += 1
            if let total = fields.total {
                r.total = r.total.addingReportingOverflow(total).overflow ? Int64.max : r.total + total
            } else {
                r.ordersWithoutTotal += 1
            }
            revenue[currency] = r
        case .fail:
            if fields.isRepeat {
                counters.repeatFailures += 1
                _ = checkouts.slot(for: id, insert: false)
                return
            }
            counters.failed += 1
            let code = fields.code ?? AnalyticsFunnel.code(fromTopic: envelope.topic)
            failedByCode[code, default: 0] += 1
            if fields.afterComplete {
                counters.failedAfterComplete += 1
                failedAfterCompleteByCode[code, default: 0] += 1
            }
            _ = checkouts.slot(for: id, insert: false)
        case .dismiss:
            counters.dismissed += 1
            let slot = checkouts.slot(for: id, insert: true)!
            let state = checkouts.states[slot]
            if !state.has(.completed) && !state.has(.abandoned) {
                counters.abandoned += 1
                checkouts.states[slot].insert(.abandoned)
            }
        case .deadletter:
            break
        }
    }

    /// The stable code from a `checkout.fail.<code>` topic.
    static func code(fromTopic topic: [UInt8]) -> String {
        let prefix = "checkout.fail.".utf8
        guard topic.starts(with: prefix), topic.count > prefix.count else { return "unknown" }
        return String(decoding: topic[prefix.count...], as: UTF8.self)
    }

    /// Reads the fields the funnel needs with the package's tape scanner (no Foundation JSON).
    private func read(_ bytes: [UInt8]) -> Fields? {
        bytes.withUnsafeBytes { buffer -> Fields? in
            do throws(JSONParseError) { try document.parse(buffer) } catch { return nil }
            let doc = document
            let root = doc.root
            guard doc.kind(root) == .object else { return nil }
            var f = Fields()
            if let t = doc.member(root, "checkout_id") { f.checkoutID = doc.string(t) }
            if let t = doc.member(root, "received_at"), let s = doc.string(t) { f.receivedAt = AnalyticsFunnel.milliseconds(rfc3339: s) }
            if let t = doc.member(root, "repeat") { f.isRepeat = doc.bool(t) ?? false }
            if let t = doc.member(root, "after_complete") { f.afterComplete = doc.bool(t) ?? false }
            if let summary = doc.object(root, "summary") {
                if let t = doc.member(summary, "currency") { f.currency = doc.string(t) }
                if let t = doc.member(summary, "total") { f.total = doc.int64(t) }
            }
            if let error = doc.object(root, "error"), let t = doc.member(error, "code") { f.code = doc.string(t) }
            if let t = doc.member(root, "reason") { f.reason = doc.string(t) }
            return f
        }
    }

    /// Milliseconds since the epoch of an RFC 3339 time as the daemon writes it
    /// (`2026-12-02T11:50:08.948Z`): the client's reader (``JournalPosition/milliseconds(rfc3339:)``).
    static func milliseconds(rfc3339 text: String) -> Int64? { JournalPosition.milliseconds(rfc3339: text) }
}

/// Start-to-complete durations in milliseconds, bounded: exact below 1024 ms, above that each value
/// kept to 10 significant bits (within 0.2%), so at most a few thousand buckets ever exist.
///
/// Percentiles are nearest-rank: the p-th percentile of n samples is the ⌈p·n⌉-th smallest
/// (bucketed as above). `Sendable` (a value).
package struct DurationHistogram: Sendable, Equatable {
    /// Bucket (its smallest value) → samples.
    package private(set) var buckets: [Int64: Int64] = [:]
    package private(set) var count: Int64 = 0
    /// The largest sample, exactly.
    package private(set) var maximum: Int64 = 0

    package init() {}

    /// The bucket a value falls in: the value itself below 1024, else its top 10 bits.
    package static func bucket(_ value: Int64) -> Int64 {
        guard value >= 1024 else { return max(0, value) }
        let shift = (63 - value.leadingZeroBitCount) - 9
        return (value >> shift) << shift
    }

    package mutating func record(_ milliseconds: Int64) {
        buckets[DurationHistogram.bucket(milliseconds), default: 0] += 1
        count += 1
        maximum = max(maximum, milliseconds)
    }

    mutating func restore(bucket: Int64, count n: Int64) {
        buckets[bucket, default: 0] += n
        count += n
    }

    mutating func restore(maximum m: Int64) { maximum = m }

    /// The nearest-rank percentile, `per` in 1…100 (50 for the median); nil without samples.
    package func percentile(_ per: Int64) -> Int64? {
        guard count > 0 else { return nil }
        let rank = (per * count + 99) / 100  // ⌈per·n/100⌉, at least 1
        var seen: Int64 = 0
        for key in buckets.keys.sorted() {
            seen += buckets[key]!
            if seen >= max(rank, 1) { return key }
        }
        return buckets.keys.max()
    }
}

/// The checkouts the funnel remembers, least recently seen forgotten first once ``capacity`` is
/// reached: whether each started (and when), completed, or was counted abandoned.
///
/// Memory per remembered checkout: its id (inline up to 15 bytes, else a heap allocation), a
/// dictionary entry, and 32 bytes of state and links — measured at about 160 bytes with 18-byte
/// ids (docs/workers.md), so about 16 MB for 100,000 checkouts.
///
/// Not `Sendable`: owned by the funnel.
final class CheckoutMemory {
    struct State: Equatable {
        static let noTime = Int64.min
        struct Flag: OptionSet {
            let rawValue: UInt8
            static let started = Flag(rawValue: 1)
            static let completed = Flag(rawValue: 2)
            static let abandoned = Flag(rawValue: 4)
        }
        var startedAt: Int64 = State.noTime
        var flags: Flag = []
        func has(_ f: Flag) -> Bool { flags.contains(f) }
        mutating func insert(_ f: Flag) { flags.insert(f) }
    }

    let capacity: Int
    private(set) var evicted: Int64 = 0
    private var index: [String: Int32] = [:]
    private(set) var ids: [String] = []
    var states: [State] = []
    /// Doubly linked recency list over slots: `head` least recently seen, `tail` most.
    private var older: [Int32] = []
    private var newer: [Int32] = []
    private var head: Int32 = -1
    private var tail: Int32 = -1

    init(capacity: Int) { self.capacity = max(1, capacity) }

    var count: Int { index.count }

    /// The slot of `id`, marked most recently seen; inserted (evicting the least recent when full)
    /// when missing and `insert` is set, else nil when missing.
    func slot(for id: String, insert: Bool) -> Int? {
        if let s = index[id] {
            moveToTail(s)
            return Int(s)
        }
        guard insert else { return nil }
        let s: Int32
        if index.count >= capacity {
            // Reuse the least recently seen checkout's slot.
            s = head
            unlink(s)
            index[ids[Int(s)]] = nil
            evicted += 1
            ids[Int(s)] = id
            states[Int(s)] = State()
        } else {
            s = Int32(ids.count)
            ids.append(id)
            states.append(State())
            older.append(-1)
            newer.append(-1)
        }
        index[id] = s
        link(s)
        return Int(s)
    }

    /// Slots from least to most recently seen.
    func slotsByRecency() -> [Int] {
        var out: [Int] = []
        out.reserveCapacity(index.count)
        var s = head
        while s >= 0 {
            out.append(Int(s))
            s = newer[Int(s)]
        }
        return out
    }

    /// Restores a remembered checkout (in recency order, least recent first) from a checkpoint.
    func restore(id: String, state: State) {
        if let slot = slot(for: id, insert: true) { states[slot] = state }
    }

    func restore(evicted: Int64) { self.evicted = evicted }

    private func unlink(_ s: Int32) {
        let o = older[Int(s)], n = newer[Int(s)]
        if o >= 0 { newer[Int(o)] = n } else { head = n }
        if n >= 0 { older[Int(n)] = o } else { tail = o }
        older[Int(s)] = -1
        newer[Int(s)] = -1
    }

    private func link(_ s: Int32) {
        older[Int(s)] = tail
        newer[Int(s)] = -1
        if tail >= 0 { newer[Int(tail)] = s } else { head = s }
        tail = s
    }

    private func moveToTail(_ s: Int32) {
        guard tail != s else { return }
        unlink(s)
        link(s)
    }
}
