import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import SQLite

/// What the analytics worker tells people: the `--report` JSON file and the summary line on stderr.
///
/// The report (docs/workers.md has every field):
///
///     {"v":1,"generated_at":"2026-12-02T14:01:07.112Z","last_seq":52310,
///      "funnel":{"events":…,"started":…,"started_checkouts":…,"updated":…,"completed":…,
///                "repeat_completes":…,"completed_after_start":…,"completed_without_start":…,"failed":…,
///                "failed_after_complete":…,"dismissed":…,"abandoned":…,"dead_letters":…,"unreadable":…},
///      "conversion_rate":0.6012,"failed_by_code":{"cart_expired":12,…},"failed_after_complete_by_code":{},
///      "dead_letters_by_reason":{},"revenue":{"EUR":{"orders":3,"total":15000,"orders_without_total":0}},
///      "time_to_complete_ms":{"count":…,"p50":…,"p90":…,"max":…},
///      "checkouts":{"tracked":…,"max":100000,"evicted":0}}
///
/// With several shards `last_seq` is the sum of every shard's position, and `"shard_seqs":[…]`
/// after it gives each (shard order).
///
/// `Sendable` (no state).
package enum AnalyticsReport {
    /// `,"shard_seqs":[…]`, each shard's position, when there are several (the report and the
    /// checkpoint write the same member).
    static func appendShardSeqs(_ seqs: [Int64], to w: inout JSONWriter) {
        guard seqs.count > 1 else { return }
        w.append(#","shard_seqs":["#)
        for (i, seq) in seqs.enumerated() {
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            w.append(int: seq)
        }
        w.append("]")
    }

    /// The report as JSON bytes (one line and a newline).
    package static func encode(_ f: AnalyticsFunnel, generatedAt: Timestamp) -> [UInt8] {
        var w = JSONWriter(capacity: 2048)
        w.append(#"{"v":1,"generated_at":"#)
        generatedAt.write(to: &w)
        w.append(#","last_seq":"#)
        w.append(int: f.lastSeq)
        AnalyticsReport.appendShardSeqs(f.shardSeqs, to: &w)
        w.append(#","funnel":"#)
        appendCounters(f.counters, to: &w)
        w.append(#","conversion_rate":"#)
        if let rate = conversionRate(f) { appendDecimal(rate, to: &w) } else { w.append("null") }
        w.append(#","failed_by_code":"#)
        appendCounts(f.failedByCode, to: &w)
        w.append(#","failed_after_complete_by_code":"#)
        appendCounts(f.failedAfterCompleteByCode, to: &w)
        w.append(#","dead_letters_by_reason":"#)
        appendCounts(f.deadLettersByReason, to: &w)
        w.append(#","revenue":{"#)
        for (i, currency) in f.revenue.keys.sorted().enumerated() {
            let r = f.revenue[currency]!
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            w.appendString(currency)
            w.append(#":{"orders":"#)
            w.append(int: r.orders)
            w.append(#","total":"#)
            w.append(int: r.total)
            w.append(#","orders_without_total":"#)
            w.append(int: r.ordersWithoutTotal)
            w.append("}")
        }
        w.append(#"},"time_to_complete_ms":{"count":"#)
        w.append(int: f.durations.count)
        for (name, per) in [("p50", 50), ("p90", 90)] as [(StaticString, Int64)] {
            w.append(#",""#)
            w.append(name)
            w.append(#"":"#)
            if let v = f.durations.percentile(per) { w.append(int: v) } else { w.append("null") }
        }
        w.append(#","max":"#)
        if f.durations.count > 0 { w.append(int: f.durations.maximum) } else { w.append("null") }
        w.append(#"},"checkouts":{"tracked":"#)
        w.append(int: f.trackedCheckouts)
        w.append(#","max":"#)
        w.append(int: f.maxCheckouts)
        w.append(#","evicted":"#)
        w.append(int: f.evictedCheckouts)
        w.append("}}\n")
        return w.bytes
    }

    /// `completed_after_start / started_checkouts`, or nil before any start.
    package static func conversionRate(_ f: AnalyticsFunnel) -> Double? {
        guard f.counters.startedCheckouts > 0 else { return nil }
        return Double(f.counters.completedAfterStart) / Double(f.counters.startedCheckouts)
    }

    /// One line for people:
    /// `analytics: seq=… events=… started=… completed=… repeat=… failed=… abandoned=… conversion=61.20% …`.
    package static func summaryLine(_ f: AnalyticsFunnel) -> String {
        let c = f.counters
        var line = "analytics: seq=\(f.lastSeq)"
            + (f.shardSeqs.count > 1 ? " shard_seqs=\(f.shardSeqs.map(String.init).joined(separator: ","))" : "")
            + " events=\(c.events) started=\(c.startedCheckouts) updated=\(c.updated)"
            + " completed=\(c.completed) repeat=\(c.repeatCompletes) failed=\(c.failed)"
            + " failed_after_complete=\(c.failedAfterComplete) dismissed=\(c.dismissed) abandoned=\(c.abandoned)"
        if let rate = conversionRate(f) {
            let basisPoints = Int64((rate * 10_000).rounded())
            line += " conversion=\(basisPoints / 100).\(basisPoints % 100 < 10 ? "0" : "")\(basisPoints % 100)%"
        } else {
            line += " conversion=-"
        }
        let revenue = f.revenue.keys.sorted().map { "\($0):\(f.revenue[$0]!.total)" }.joined(separator: ",")
        line += " revenue=\(revenue.isEmpty ? "-" : revenue)"
        let codes = f.failedByCode.keys.sorted().map { "\($0):\(f.failedByCode[$0]!)" }.joined(separator: ",")
        line += " fail_codes=\(codes.isEmpty ? "-" : codes)"
        if let p50 = f.durations.percentile(50), let p90 = f.durations.percentile(90) {
            line += " ttc_p50_ms=\(p50) ttc_p90_ms=\(p90)"
        }
        return line
    }

    /// `{"name":count,…}`, keys sorted.
    /// The funnel's counters as one JSON object, in their declared order (report and checkpoint).
    static func appendCounters(_ counters: AnalyticsFunnel.Counters, to w: inout JSONWriter) {
        w.append("{")
        for (i, field) in AnalyticsFunnel.Counters.fields.enumerated() {
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            w.appendString(field.name)
            w.append(byte: UInt8(ascii: ":"))
            w.append(int: counters[keyPath: field.path])
        }
        w.append("}")
    }

    static func appendCounts(_ counts: [String: Int64], to w: inout JSONWriter) {
        w.append("{")
        for (i, key) in counts.keys.sorted().enumerated() {
            if i > 0 { w.append(byte: UInt8(ascii: ",")) }
            w.appendString(key)
            w.append(byte: UInt8(ascii: ":"))
            w.append(int: counts[key]!)
        }
        w.append("}")
    }

    /// A ratio in 0…1 with six decimals (`0.601234`).
    static func appendDecimal(_ value: Double, to w: inout JSONWriter) {
        let millionths = Int64((value * 1_000_000).rounded())
        w.append(int: millionths / 1_000_000)
        w.append(byte: UInt8(ascii: "."))
        let fraction = String(millionths % 1_000_000)
        for _ in fraction.count..<6 { w.append(byte: UInt8(ascii: "0")) }
        var digits = fraction
        digits.withUTF8 { w.appendRaw(UnsafeRawBufferPointer($0)) }
    }
}
