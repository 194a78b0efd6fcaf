import Foundation
import CheckoutBusProtocol

/// What `checkoutbus top` shows: two rounds of `stats` snapshots and the time between them turned
/// into screen lines (or one line for a pipe). Pure: no sockets, no clock, no terminal.
/// `Sendable`; a value.
///
/// A rate is the difference of a daemon counter between the two snapshots divided by the elapsed
/// seconds (a counter that went down — a restarted daemon — counts as 0). A subscriber's lag is
/// the daemon's `last_seq` minus the `last_seq` it last reported.
package struct TopView: Sendable {
    /// How the failures and subscribers tables are ordered; `s` cycles through them.
    package enum Sort: String, Sendable, CaseIterable {
        /// Failures by rate, subscribers by lag (largest first).
        case rate
        /// Failures by total, subscribers by drops (largest first).
        case total
        /// By code or name.
        case name

        package var next: Sort { Sort.allCases[(Sort.allCases.firstIndex(of: self)! + 1) % Sort.allCases.count] }
    }

    /// One shard's endpoint and its two snapshots (nil: it did not answer that round).
    package struct Shard: Sendable {
        package var endpoint: String
        package var previous: TopSnapshot?
        package var current: TopSnapshot?

        package init(endpoint: String, previous: TopSnapshot?, current: TopSnapshot?) {
            self.endpoint = endpoint
            self.previous = previous
            self.current = current
        }
    }

    package var shards: [Shard]
    /// Seconds between the two rounds.
    package var elapsed: Double
    package var sort: Sort = .rate
    /// Rows of the failures table.
    package var topN = 5
    /// Shards side by side rather than summed.
    package var byShard = false
    /// Gone subscribers listed too (key g); by default only live ones.
    package var showGone = false

    package init(shards: [Shard], elapsed: Double, sort: Sort = .rate, topN: Int = 5, byShard: Bool = false) {
        self.shards = shards
        self.elapsed = elapsed
        self.sort = sort
        self.topN = topN
        self.byShard = byShard
    }

    // MARK: figures

    /// The figures of one column: a shard, or every answering shard summed.
    package struct Figures: Sendable, Equatable {
        package var eventsIn: Double?
        package var eventsInByFamily: [String: Double] = [:]
        package var published: Double?
        package var publishedByKind: [String: Double] = [:]
        package var suppressed: Double?
        /// Suppressed ÷ (suppressed + updates published) over the interval; nil with no updates.
        package var suppressionRatio: Double?
        package var failuresByCode: [String: Double] = [:]
        package var deadLettersByReason: [String: Double] = [:]
        package var current: TopSnapshot
    }

    /// Rates between two snapshots of one column (`previous` nil: the current figures, no rates).
    package static func figures(previous: TopSnapshot?, current: TopSnapshot, elapsed: Double) -> Figures {
        var f = Figures(current: current)
        guard let p = previous, elapsed > 0 else { return f }
        func rate(_ now: Int, _ before: Int) -> Double { Double(max(0, now - before)) / elapsed }
        func rates(_ now: [String: Int], _ before: [String: Int]) -> [String: Double] {
            Dictionary(uniqueKeysWithValues: now.map { ($0.key, rate($0.value, before[$0.key] ?? 0)) })
        }
        f.eventsIn = rate(current.received, p.received)
        f.eventsInByFamily = rates(current.receivedByFamily, p.receivedByFamily)
        f.published = rate(current.published, p.published)
        f.publishedByKind = rates(current.publishedByKind, p.publishedByKind)
        f.suppressed = rate(current.suppressed, p.suppressed)
        let updates = max(0, (current.publishedByKind["update"] ?? 0) - (p.publishedByKind["update"] ?? 0))
        let suppressed = max(0, current.suppressed - p.suppressed)
        f.suppressionRatio = updates + suppressed > 0 ? Double(suppressed) / Double(updates + suppressed) : nil
        f.failuresByCode = rates(current.failedByCode, p.failedByCode)
        f.deadLettersByReason = rates(current.deadLettered, p.deadLettered)
        return f
    }

    /// Every answering shard summed (nil when none answered).
    package var summedFigures: Figures? {
        let answering = shards.filter { $0.current != nil }
        guard !answering.isEmpty else { return nil }
        let current = TopSnapshot.summed(answering.map { $0.current! })
        // Rates only when every answering shard answered last round too, so none is counted from zero.
        let previous = answering.allSatisfy { $0.previous != nil } ? TopSnapshot.summed(answering.map { $0.previous! }) : nil
        return TopView.figures(previous: previous, current: current, elapsed: elapsed)
    }

    /// One failures-table row.
    package struct FailureRow: Sendable, Equatable {
        package var code: String
        package var rate: Double?
        package var total: Int
    }

    /// The top ``topN`` stable codes of `figures`, in ``sort`` order (codes never seen left out).
    package func failureRows(_ f: Figures) -> [FailureRow] {
        let rows = f.current.failedByCode.filter { $0.value > 0 }.map {
            FailureRow(code: $0.key, rate: f.failuresByCode[$0.key], total: $0.value)
        }
        let sorted = rows.sorted { a, b in
            switch sort {
            case .rate where (a.rate ?? 0) != (b.rate ?? 0): return (a.rate ?? 0) > (b.rate ?? 0)
            case .total where a.total != b.total, .rate where a.total != b.total: return a.total > b.total
            default: return a.code < b.code
            }
        }
        return Array(sorted.prefix(topN))
    }

    /// One subscribers-table row.
    package struct SubscriberRow: Sendable, Equatable {
        package var name: String
        /// The shard's endpoint, or nil when summed.
        package var shard: String?
        package var report: TopSnapshot.Subscriber
        /// Drops per second over the interval (nil without a previous report).
        package var dropRate: Double?
    }

    /// Every subscriber reported, in ``sort`` order: summed over the shards, or one row per shard.
    package func subscriberRows() -> [SubscriberRow] {
        var rows: [SubscriberRow] = []
        if byShard {
            for shard in shards {
                guard let current = shard.current else { continue }
                for (name, r) in current.subscribers where r.live || showGone {
                    rows.append(SubscriberRow(name: name, shard: shard.endpoint, report: r,
                                              dropRate: dropRate(r, shard.previous?.subscribers[name])))
                }
            }
        } else if let f = summedFigures {
            let answering = shards.filter { $0.current != nil }
            let previous = answering.allSatisfy { $0.previous != nil }
                ? TopSnapshot.summed(answering.map { $0.previous! }) : nil
            for (name, r) in f.current.subscribers where r.live || showGone {
                rows.append(SubscriberRow(name: name, shard: nil, report: r, dropRate: dropRate(r, previous?.subscribers[name])))
            }
        }
        return rows.sorted { a, b in
            switch sort {
            case .rate where a.report.lag != b.report.lag: return a.report.lag > b.report.lag
            case .total where a.report.missed != b.report.missed: return a.report.missed > b.report.missed
            default: return (a.name, a.shard ?? "") < (b.name, b.shard ?? "")
            }
        }
    }

    private func dropRate(_ now: TopSnapshot.Subscriber, _ before: TopSnapshot.Subscriber?) -> Double? {
        guard let before, elapsed > 0 else { return nil }
        return Double(max(0, now.missed - before.missed)) / elapsed
    }

    // MARK: the screen

    /// The full screen, each line cut to `width` columns and the whole to `height` lines.
    package func screen(width: Int = 160, height: Int = 50, interval: Double) -> [String] {
        var lines: [String] = []
        let mode = shards.count == 1 ? "1 shard" : "\(shards.count) shards, \(byShard ? "side by side" : "summed")"
        lines.append("checkoutbus top — \(mode) — every \(TopView.number(interval))s — sort: \(sort.rawValue)"
            + "   q quit · s sort · g gone · +/- interval")
        for shard in shards where shard.current == nil { lines.append("\(shard.endpoint): no answer") }
        lines.append("")
        if byShard && shards.count > 1 {
            lines += sideBySide()
        } else if let f = summedFigures {
            lines += summary(f)
        } else {
            lines.append("no shard answered")
        }
        if let f = summedFigures {
            lines.append("")
            let failures = failureRows(f)
            lines.append("FAILURES (top \(topN))".padding(34) + "/s".leftPadding(10) + "total".leftPadding(12))
            if failures.isEmpty { lines.append("  none") }
            for row in failures {
                lines.append(("  " + row.code).padding(34) + TopView.rate(row.rate).leftPadding(10)
                    + String(row.total).leftPadding(12))
            }
            // What the unknown ones were sent as: a new SDK error id to map (docs/runbook.md).
            let unknown = f.current.unknownRawCodes.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
            if !unknown.isEmpty {
                lines.append("  unknown, by raw code: " + unknown.prefix(topN).map { "\($0.key.isEmpty ? "(none)" : $0.key)=\($0.value)" }
                    .joined(separator: " "))
            }
            lines.append("")
            lines.append("DEAD LETTERS".padding(34) + "/s".leftPadding(10) + "total".leftPadding(12))
            let dead = f.current.deadLettered.filter { $0.value > 0 }.sorted { $0.key < $1.key }
            if dead.isEmpty { lines.append("  none") }
            for (reason, total) in dead {
                lines.append(("  " + reason).padding(34) + TopView.rate(f.deadLettersByReason[reason]).leftPadding(10)
                    + String(total).leftPadding(12))
            }
        }
        lines.append("")
        let rows = subscriberRows()
        var header = "SUBSCRIBER".padding(28)
        if byShard { header += "SHARD".padding(26) }
        header += "SEEN".leftPadding(8) + "LAST SEQ".leftPadding(12) + "LAG".leftPadding(10) + "DROPS/s".leftPadding(10) + "MISSED".leftPadding(10)
            + "RECOVERED".leftPadding(11) + "GAPS".leftPadding(8)
        lines.append(header)
        if rows.isEmpty { lines.append(showGone ? "  none reported" : "  none live") }
        for row in rows {
            var line = ("  " + row.name + (row.report.live ? "" : " (gone)")).padding(28)
            if byShard { line += (row.shard ?? "").padding(26) }
            line += (TopView.number(Double(row.report.ageMilliseconds) / 1000) + "s").leftPadding(8)
                + String(row.report.lastSeq).leftPadding(12) + (row.report.live ? String(row.report.lag) : "-").leftPadding(10)
                + TopView.rate(row.dropRate).leftPadding(10) + String(row.report.missed).leftPadding(10)
                + String(row.report.recovered).leftPadding(11) + String(row.report.gaps).leftPadding(8)
            lines.append(line)
        }
        return Array(lines.prefix(height)).map { String($0.prefix(width)) }
    }

    private func summary(_ f: Figures) -> [String] {
        let s = f.current
        func byName(_ rates: [String: Double], _ order: [String]) -> String {
            let names = order.filter { rates[$0] != nil } + rates.keys.filter { !order.contains($0) }.sorted()
            return names.map { "\($0) \(TopView.rate(rates[$0]))" }.joined(separator: "  ")
        }
        return [
            "events in/s     " + TopView.rate(f.eventsIn).leftPadding(10) + "   "
                + byName(f.eventsInByFamily, TopView.families),
            "published/s     " + TopView.rate(f.published).leftPadding(10) + "   "
                + byName(f.publishedByKind, TopView.kinds),
            "suppressed/s    " + TopView.rate(f.suppressed).leftPadding(10) + "   ratio "
                + TopView.percent(f.suppressionRatio) + " of updates",
            "seq             last \(s.lastSeq)  durable \(s.durableSeq)  retained from \(s.firstSeq)"
                + " (\(max(0, s.lastSeq - s.firstSeq + (s.lastSeq > 0 ? 1 : 0))) seqs)",
            "journal         \(TopView.bytes(s.journalBytes)) in \(s.journalSegments) segment(s)"
                + "  fsync p99 \(s.fsyncP99Micros) µs (max \(s.fsyncMaxMicros) µs)",
            "checkouts       \(s.trackedCheckouts) tracked",
        ]
    }

    private func sideBySide() -> [String] {
        let columns: [(String, Figures?)] = shards.map { shard in
            (shard.endpoint, shard.current.map { TopView.figures(previous: shard.previous, current: $0, elapsed: elapsed) })
        } + [("total", summedFigures)]
        let width = 22
        func row(_ label: String, _ value: (Figures) -> String) -> String {
            label.padding(18) + columns.map { ($0.1.map(value) ?? "no answer").leftPadding(width) }.joined()
        }
        return [
            "".padding(18) + columns.map { column in
                let label = column.0.hasPrefix("tcp://") ? String(column.0.dropFirst(6)) : column.0
                return String(label.suffix(width - 2)).leftPadding(width)
            }.joined(),
            row("events in/s") { TopView.rate($0.eventsIn) },
            row("published/s") { TopView.rate($0.published) },
            row("suppressed ratio") { TopView.percent($0.suppressionRatio) },
            row("failures/s") { TopView.rate($0.failuresByCode.isEmpty ? nil : $0.failuresByCode.values.reduce(0, +)) },
            row("dead letters/s") {
                TopView.rate($0.eventsIn == nil ? nil : $0.deadLettersByReason.values.reduce(0, +))
            },
            row("last seq") { String($0.current.lastSeq) },
            row("retained from") { String($0.current.firstSeq) },
            row("journal") { TopView.bytes($0.current.journalBytes) },
            row("fsync p99 µs") { String($0.current.fsyncP99Micros) },
            row("tracked") { String($0.current.trackedCheckouts) },
        ]
    }

    // MARK: one line

    /// One `key=value` line for a pipe: the summed rates, and each subscriber's lag.
    package func line() -> String {
        guard let f = summedFigures else {
            return "shards=\(shards.count) answering=0"
        }
        var parts = [
            "shards=\(shards.count)", "answering=\(shards.filter { $0.current != nil }.count)",
            "events_in_per_s=\(TopView.rate(f.eventsIn))", "published_per_s=\(TopView.rate(f.published))",
            "suppressed_ratio=\(f.suppressionRatio.map { TopView.number($0, digits: 3) } ?? "-")",
            "failures_per_s=\(TopView.rate(f.eventsIn == nil ? nil : f.failuresByCode.values.reduce(0, +)))",
            "deadletters_per_s=\(TopView.rate(f.eventsIn == nil ? nil : f.deadLettersByReason.values.reduce(0, +)))",
            "last_seq=\(f.current.lastSeq)", "first_seq=\(f.current.firstSeq)", "journal_bytes=\(f.current.journalBytes)",
            "fsync_p99_us=\(f.current.fsyncP99Micros)", "tracked_checkouts=\(f.current.trackedCheckouts)",
        ]
        for row in subscriberRows() {
            parts.append("subscriber.\(row.name).lag=\(row.report.lag)")
            parts.append("subscriber.\(row.name).missed=\(row.report.missed)")
        }
        if let f = summedFigures {
            for (raw, n) in f.current.unknownRawCodes.sorted(by: { $0.key < $1.key }) {
                parts.append("unknown_raw_code.\(raw.isEmpty ? "(none)" : raw)=\(n)")
            }
        }
        for shard in shards where shard.current == nil { parts.append("no_answer=\(shard.endpoint)") }
        return parts.joined(separator: " ")
    }

    /// The same as ``line()``, as one JSON object.
    package func json() -> String {
        var object: [String: Any] = ["shards": shards.count, "answering": shards.filter { $0.current != nil }.count]
        if let f = summedFigures {
            object["events_in_per_s"] = f.eventsIn ?? NSNull()
            object["events_in_per_s_by_family"] = f.eventsInByFamily
            object["published_per_s"] = f.published ?? NSNull()
            object["published_per_s_by_kind"] = f.publishedByKind
            object["suppressed_ratio"] = f.suppressionRatio ?? NSNull()
            object["failures_per_s_by_code"] = f.failuresByCode.filter { $0.value > 0 }
            object["unknown_raw_codes"] = f.current.unknownRawCodes
            object["deadletters_per_s_by_reason"] = f.deadLettersByReason.filter { $0.value > 0 }
            object["last_seq"] = f.current.lastSeq
            object["first_seq"] = f.current.firstSeq
            object["journal_bytes"] = f.current.journalBytes
            object["fsync_p99_us"] = f.current.fsyncP99Micros
            object["tracked_checkouts"] = f.current.trackedCheckouts
            var subscribers: [String: Any] = [:]
            for row in subscriberRows() {
                subscribers[row.name] = ["last_seq": row.report.lastSeq, "lag": row.report.lag, "missed": row.report.missed,
                                         "recovered": row.report.recovered]
            }
            object["subscribers"] = subscribers
        }
        object["no_answer"] = shards.filter { $0.current == nil }.map(\.endpoint)
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    // MARK: formatting

    static let families = RawFormat.labels
    static let kinds = LifecycleKind.allCases.map { "\($0.name)" }

    /// A rate with one decimal, or `-` before there are two rounds.
    static func rate(_ v: Double?) -> String { v.map { number($0) } ?? "-" }

    static func percent(_ v: Double?) -> String { v.map { number($0 * 100) + "%" } ?? "-" }

    static func number(_ v: Double, digits: Int = 1) -> String { String(format: "%.\(digits)f", v) }

    static func bytes(_ n: Int) -> String {
        switch n {
        case ..<10_000: return "\(n) B"
        case ..<10_000_000: return number(Double(n) / 1000) + " kB"
        default: return number(Double(n) / 1_000_000) + " MB"
        }
    }
}

extension String {
    /// Left-aligned in `width` columns (never cut).
    fileprivate func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }

    /// Right-aligned in `width` columns (never cut).
    package func leftPadding(_ width: Int) -> String {
        count >= width ? " " + self : String(repeating: " ", count: width - count) + self
    }
}
