#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import SQLite

/// The analytics worker's cursor file (`--cursor PATH`): the whole ``AnalyticsFunnel`` and the
/// `seq` it matches (one per shard), in one JSON file replaced atomically.
///
/// A save writes `PATH.tmp`, `fsync`s it, renames it over `PATH` and `fsync`s the directory, so
/// the file always holds one complete checkpoint: the old one or the new one, never a mix, after
/// `kill -9` or a power loss. The counts and the `seq` travel together, so a restarted worker
/// resumes from exactly the state that matches its position, and the subscriber replays the
/// envelopes after it from the journal: each envelope is counted exactly once.
///
///     {"v":1,"format":"checkoutbus-analytics-state","seq":52310,"max_checkouts":100000,
///      "counters":{"events":…,"started":…,…},"failed_by_code":{…},"failed_after_complete_by_code":{…},
///      "dead_letters_by_reason":{…},"revenue":{"USD":[orders,total,orders_without_total]},
///      "durations":{"max":…,"buckets":[[ms,count],…]},"evicted_checkouts":0,
///      "checkouts":[["id",started_at_ms_or_null,flags],…]}   least recently seen first
///
/// With several shards `seq` is shard 0's and `"shard_seqs":[s0,s1,…]` follows it with every
/// shard's, so the checkpoint records the shard count; a checkpoint without `shard_seqs` (one
/// daemon, or written before shards) is for one shard, and the worker refuses it for several.
/// The positions and the counts are in the same file, so they still travel together: each
/// shard's envelopes are counted exactly once.
///
/// Read back with the package's tape scanner. `Sendable` (no state).
package enum AnalyticsCheckpoint {
    static let format: StaticString = "checkoutbus-analytics-state"

    /// The file a running worker holds locked for the checkpoint at `path` (the checkpoint itself
    /// is replaced by rename, a new file each time).
    package static func lockPath(_ path: String) -> String { path + ".lock" }

    /// Loads the checkpoint at `path`, or returns nil when there is no file yet.
    /// - Throws: ``AnalyticsError`` when the file exists but cannot be read or is not a checkpoint:
    ///   the worker refuses to start rather than count from a wrong position.
    package static func load(path: String, maxCheckouts: Int) throws(AnalyticsError) -> AnalyticsFunnel? {
        let read: [UInt8]?
        do { read = try AtomicFile.read(path) } catch { throw AnalyticsError(error.description) }
        guard let bytes = read else { return nil }
        return try decode(bytes, maxCheckouts: maxCheckouts, path: path)
    }

    /// Replaces the checkpoint at `path` with `funnel` (durably: see the type's discussion).
    package static func save(_ funnel: AnalyticsFunnel, to path: String) throws(AnalyticsError) {
        do { try AtomicFile.write(encode(funnel), to: path, durable: true) } catch { throw AnalyticsError(error.description) }
    }

    static func encode(_ f: AnalyticsFunnel) -> [UInt8] {
        var w = JSONWriter(capacity: 4096 + f.trackedCheckouts * 48)
        w.append(#"{"v":1,"format":""#)
        w.append(format)
        w.append(#"","seq":"#)
        w.append(int: f.shardSeqs[0])
        AnalyticsReport.appendShardSeqs(f.shardSeqs, to: &w)
        w.append(#","max_checkouts":"#)
        w.append(int: f.maxCheckouts)
        w.append(#","counters":"#)
        AnalyticsReport.appendCounters(f.counters, to: &w)
        w.append(#","failed_by_code":"#)
        AnalyticsReport.appendCounts(f.failedByCode, to: &w)
        w.append(#","failed_after_complete_by_code":"#)
        AnalyticsReport.appendCounts(f.failedAfterCompleteByCode, to: &w)
        w.append(#","dead_letters_by_reason":"#)
        AnalyticsReport.appendCounts(f.deadLettersByReason, to: &w)
        w.append(#","revenue":{"#)
        for (i, currency) in f.revenue.keys.sorted().enumerated() {
            let r = f.revenue[currency]!
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            w.appendString(currency)
            w.append(":[")
            w.append(int: r.orders)
            w.append(byte: UInt8(ascii: ","))
            w.append(int: r.total)
            w.append(byte: UInt8(ascii: ","))
            w.append(int: r.ordersWithoutTotal)
            w.append("]")
        }
        w.append(#"},"durations":{"max":"#)
        w.append(int: f.durations.maximum)
        w.append(#","buckets":["#)
        for (i, key) in f.durations.buckets.keys.sorted().enumerated() {
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            w.append("[")
            w.append(int: key)
            w.append(byte: UInt8(ascii: ","))
            w.append(int: f.durations.buckets[key]!)
            w.append("]")
        }
        w.append(#"]},"evicted_checkouts":"#)
        w.append(int: f.evictedCheckouts)
        w.append(#","checkouts":["#)
        let memory = f.checkouts
        for (i, slot) in memory.slotsByRecency().enumerated() {
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            let state = memory.states[slot]
            w.append("[")
            w.appendString(memory.ids[slot])
            w.append(byte: UInt8(ascii: ","))
            if state.startedAt == CheckoutMemory.State.noTime { w.append("null") } else { w.append(int: state.startedAt) }
            w.append(byte: UInt8(ascii: ","))
            w.append(int: Int64(state.flags.rawValue))
            w.append("]")
        }
        w.append("]}\n")
        return w.bytes
    }

    static func decode(_ bytes: [UInt8], maxCheckouts: Int, path: String) throws(AnalyticsError) -> AnalyticsFunnel {
        let doc = JSONDocument()
        doc.maxDepth = 8
        let bad = { (why: String) in AnalyticsError("\(path) is not an analytics checkpoint (\(why)); move it away to start over") }
        let result: Result<AnalyticsFunnel, AnalyticsError> = bytes.withUnsafeBytes { buffer in
            do throws(JSONParseError) { try doc.parse(buffer) } catch { return .failure(bad("\(error)")) }
            let root = doc.root
            guard let v = doc.member(root, "format"), doc.stringEquals(v, format),
                let versionToken = doc.member(root, "v"), doc.int64(versionToken) == 1
            else { return .failure(bad("no format or version 1")) }
            guard let seqToken = doc.member(root, "seq"), let seq = doc.int64(seqToken), seq >= 0 else {
                return .failure(bad("no seq"))
            }
            let f = AnalyticsFunnel(maxCheckouts: maxCheckouts)
            f.shardSeqs = [seq]
            if let list = doc.member(root, "shard_seqs") {
                let seqs = integers(doc, list)
                guard !seqs.isEmpty, seqs[0] == seq, !seqs.contains(where: { $0 < 0 }) else {
                    return .failure(bad("shard_seqs do not match seq"))
                }
                f.shardSeqs = seqs
            }
            guard let counters = doc.object(root, "counters") else { return .failure(bad("no counters")) }
            for field in AnalyticsFunnel.Counters.fields {
                guard let t = doc.member(counters, field.name), let n = doc.int64(t) else {
                    if AnalyticsFunnel.Counters.addedLater.contains("\(field.name)") { continue }
                    return .failure(bad("no counter \(field.name)"))
                }
                guard n >= 0 else { return .failure(bad("a negative counter \(field.name)")) }
                f.counters[keyPath: field.path] = n
            }
            // Every count is of things seen, so never negative (nor past what a sum of them can hold):
            // such a count was written by hand, and counting on from it would report nonsense. A
            // revenue's total is the sum of the totals the envelopes carried, taken as they came.
            var outOfRange: String?
            f.failedByCode = counts(doc, root, "failed_by_code", outOfRange: &outOfRange)
            f.failedAfterCompleteByCode = counts(doc, root, "failed_after_complete_by_code", outOfRange: &outOfRange)
            f.deadLettersByReason = counts(doc, root, "dead_letters_by_reason", outOfRange: &outOfRange)
            if let revenue = doc.object(root, "revenue") {
                doc.forEachMember(revenue) { k, v in
                    let numbers = integers(doc, v)
                    guard let currency = doc.string(k), numbers.count == 3 else { return }
                    if numbers[0] < 0 || numbers[2] < 0 { outOfRange = "revenue" }
                    f.revenue[currency] = AnalyticsFunnel.Revenue(orders: numbers[0], total: numbers[1], ordersWithoutTotal: numbers[2])
                }
            }
            if let durations = doc.object(root, "durations") {
                if let t = doc.member(durations, "max"), let m = doc.int64(t) {
                    if m < 0 { outOfRange = "durations" }
                    f.durations.restore(maximum: m)
                }
                if let buckets = doc.member(durations, "buckets") {
                    // Their sum is the samples' count, which percentiles multiply by up to 100.
                    var total: Int64 = 0
                    doc.forEachElement(buckets) { pair in
                        let numbers = integers(doc, pair)
                        guard numbers.count == 2 else { return }
                        let (sum, overflow) = total.addingReportingOverflow(numbers[1])
                        if numbers[0] < 0 || numbers[1] < 0 || overflow || sum > Int64.max / 128 {
                            outOfRange = "durations"
                            return
                        }
                        total = sum
                        f.durations.restore(bucket: numbers[0], count: numbers[1])
                    }
                }
            }
            var evicted: Int64 = 0
            if let t = doc.member(root, "evicted_checkouts") { evicted = doc.int64(t) ?? 0 }
            if evicted < 0 { outOfRange = "evicted_checkouts" }
            if let outOfRange { return .failure(bad("a negative count in \(outOfRange), or one too large")) }
            if let list = doc.member(root, "checkouts") {
                var malformed = false
                doc.forEachElement(list) { entry in
                    var tokens: [Int] = []
                    doc.forEachElement(entry) { tokens.append($0) }
                    guard tokens.count == 3, let id = doc.string(tokens[0]), let flags = doc.int64(tokens[2]) else {
                        malformed = true
                        return
                    }
                    var state = CheckoutMemory.State()
                    state.startedAt = doc.int64(tokens[1]) ?? CheckoutMemory.State.noTime
                    state.flags = .init(rawValue: UInt8(truncatingIfNeeded: flags))
                    f.checkouts.restore(id: id, state: state)
                }
                if malformed { return .failure(bad("a malformed checkout entry")) }
            }
            // Checkouts beyond a smaller --max-checkouts were evicted just now, oldest first.
            f.checkouts.restore(evicted: evicted + f.checkouts.evicted)
            return .success(f)
        }
        return try result.get()
    }

    private static func integers(_ doc: JSONDocument, _ array: Int) -> [Int64] {
        var out: [Int64] = []
        doc.forEachElement(array) { out.append(doc.int64($0) ?? 0) }
        return out
    }

    private static func counts(_ doc: JSONDocument, _ root: Int, _ key: StaticString,
                               outOfRange: inout String?) -> [String: Int64] {
        var out: [String: Int64] = [:]
        guard let object = doc.object(root, key) else { return out }
        var below = false
        doc.forEachMember(object) { k, v in
            guard let name = doc.string(k), let n = doc.int64(v) else { return }
            if n < 0 { below = true }
            out[name] = n
        }
        if below { outOfRange = "\(key)" }
        return out
    }
}

/// An analytics worker failure: a checkpoint or report that cannot be read or written. `Sendable`.
package struct AnalyticsError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
