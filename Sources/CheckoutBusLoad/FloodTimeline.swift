#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import CheckoutBusJSON
import Foundation
import CheckoutBusRuntime

/// A flood run second by second: as JSON lines (`--timeline`) and as one self-contained HTML page
/// of SVG charts (`--report`), drawn here with no script at all, so a stall, a daemon restart or
/// a slow subscriber shows at a glance. `Sendable`; a value.
package struct FloodTimeline: Sendable {
    /// One row per second from the start of sending.
    package struct Row: Sendable {
        package var second: Int
        package var sent: Int
        package var published: Int
        /// Of the events sent this second, those the generator expects the daemon to suppress.
        package var suppressed: Int
        package var deadLetters: Int
        package var p50: Double?
        package var p99: Double?
        package var p999: Double?
        package var max: Double?
        package var acked: Int
        package var ackP50: Double?
        package var ackP99: Double?
        package var sendLagMax: Double
        package var heldBackMillis: Double
        package var subscriberBusy: Double
    }

    package let rows: [Row]
    package let acked: Bool
    /// How much of its second the last row lasted (0…1]: its counts are of that part only.
    package let lastSecondFraction: Double

    package init(_ outcome: FloodRun.Outcome) {
        acked = outcome.configuration.acked
        let n = outcome.timeline.count
        lastSecondFraction = n == 0 ? 1 : Swift.min(1, Swift.max(0, outcome.seconds - Double(n - 1)))
        rows = outcome.timeline.enumerated().map { i, s in
            Row(second: i, sent: s.sent, published: s.published, suppressed: s.expectedSuppressed,
                deadLetters: s.deadLetters, p50: s.latency.histogram.map { $0.micros(0.5) },
                p99: s.latency.histogram.map { $0.micros(0.99) }, p999: s.latency.histogram.map { $0.micros(0.999) },
                max: s.latency.histogram.map { Double($0.maximum) / 1000 }, acked: s.acked,
                ackP50: s.ack.histogram.map { $0.micros(0.5) }, ackP99: s.ack.histogram.map { $0.micros(0.99) },
                sendLagMax: Double(s.maxSendLagNanos) / 1000, heldBackMillis: Double(s.heldBackNanos) / 1e6,
                subscriberBusy: s.subscriberBusy)
        }
    }

    /// `{"t":0,"sent":…,"published":…,"suppressed":…,"deadletters":…,"p50_us":…,"p99_us":…,"max_us":…,
    /// "acked":…,"ack_p50_us":…,"ack_p99_us":…,"send_lag_max_us":…,"held_back_ms":…,"subscriber_busy":…}`
    /// per line; a latency is null in a second when nothing arrived.
    package var jsonLines: String {
        var w = JSONWriter(capacity: 256 * max(1, rows.count))
        for r in rows {
            append(r, to: &w)
            w.append("\n")
        }
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// The rows as one JSON array (in `flood --json`, for `--compare`).
    package func appendRows(to w: inout JSONWriter) {
        w.append("[")
        for (i, r) in rows.enumerated() {
            if i > 0 { w.append(",") }
            append(r, to: &w)
        }
        w.append("]")
    }

    private func append(_ r: Row, to w: inout JSONWriter) {
        func number(_ v: Double?) {
            if let v { w.appendRaw(String(format2: v)) } else { w.append("null") }
        }
        w.append("{\"t\":")
        w.append(int: r.second)
        w.append(",\"sent\":")
        w.append(int: r.sent)
        w.append(",\"published\":")
        w.append(int: r.published)
        w.append(",\"suppressed\":")
        w.append(int: r.suppressed)
        w.append(",\"deadletters\":")
        w.append(int: r.deadLetters)
        w.append(",\"p50_us\":")
        number(r.p50)
        w.append(",\"p99_us\":")
        number(r.p99)
        w.append(",\"p99_9_us\":")
        number(r.p999)
        w.append(",\"max_us\":")
        number(r.max)
        if acked {
            w.append(",\"acked\":")
            w.append(int: r.acked)
            w.append(",\"ack_p50_us\":")
            number(r.ackP50)
            w.append(",\"ack_p99_us\":")
            number(r.ackP99)
        }
        w.append(",\"send_lag_max_us\":")
        number(r.sendLagMax)
        w.append(",\"held_back_ms\":")
        number(r.heldBackMillis)
        w.append(",\"subscriber_busy\":")
        w.appendRaw(String(format2x: r.subscriberBusy))
        w.append("}")
    }

    package func writeJSONLines(to path: String) throws { try FloodTimeline.write(jsonLines, to: path) }

    package func writeHTML(to path: String, report: FloodReport, baseline: FloodBaseline? = nil) throws {
        try FloodTimeline.write(html(report: report, baseline: baseline), to: path)
    }

    static func write(_ text: String, to path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ToolError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ToolError("cannot write \(path): \(String(cString: strerror(errno)))") }
            done += n
        }
    }

    // MARK: HTML

    /// One series of a chart: a name, a colour, a value per second (nil: a gap in the line).
    struct Series {
        let name: String
        let colour: String
        let values: [Double?]
        /// Drawn dashed: a baseline run's (`--compare`).
        var dashed = false
    }

    package func html(report: FloodReport, baseline: FloodBaseline? = nil) -> String {
        let t = rows
        // The last second lasted only part of one: its counts per second of what it lasted, not a
        // drop (none drawn when under a tenth of a second).
        let last = t.count - 1
        func rate(_ i: Int, _ v: Int) -> Double? {
            guard i == last, lastSecondFraction < 1, t.count > 1 else { return Double(v) }
            return lastSecondFraction >= 0.1 ? Double(v) / lastSecondFraction : nil
        }
        var rates = [
            Series(name: "sent", colour: "#1f77b4", values: t.enumerated().map { rate($0.offset, $0.element.sent) }),
            Series(name: "published", colour: "#2ca02c", values: t.enumerated().map { rate($0.offset, $0.element.published) }),
            Series(name: "suppressed (expected)", colour: "#ff7f0e", values: t.enumerated().map { rate($0.offset, $0.element.suppressed) }),
            Series(name: "dead letters", colour: "#d62728", values: t.enumerated().map { rate($0.offset, $0.element.deadLetters) }),
        ]
        if let baseline {
            rates.append(Series(name: "baseline published", colour: "#2ca02c", values: baseline.published, dashed: true))
        }
        var charts: [String] = []
        let partial = lastSecondFraction < 1 && t.count > 1
            ? "The last second lasted \(String(format2: lastSecondFraction)) s: its rates are per second of that part." : nil
        charts.append(FloodTimeline.chart(id: "rate", title: "Events per second", unit: "events/s", series: rates, note: partial))
        var latency = [
            Series(name: "p50", colour: "#2ca02c", values: t.map { $0.p50.map { $0 / 1000 } }),
            Series(name: "p99", colour: "#d62728", values: t.map { $0.p99.map { $0 / 1000 } }),
            Series(name: "p99.9", colour: "#9467bd", values: t.map { $0.p999.map { $0 / 1000 } }),
            Series(name: "max", colour: "#7f7f7f", values: t.map { $0.max.map { $0 / 1000 } }),
        ]
        if acked {
            latency.append(Series(name: "ack p50", colour: "#17becf", values: t.map { $0.ackP50.map { $0 / 1000 } }))
            latency.append(Series(name: "ack p99", colour: "#8c564b", values: t.map { $0.ackP99.map { $0 / 1000 } }))
        }
        if let baseline {
            latency.append(Series(name: "baseline p99", colour: "#d62728", values: baseline.p99, dashed: true))
        }
        charts.append(FloodTimeline.chart(id: "latency", title: "End-to-end latency of what arrived each second",
                                          unit: "ms", series: latency, logarithmic: true))
        charts.append(FloodTimeline.chart(id: "tool", title: "flood itself: behind schedule (max) and held back by the bus",
                                          unit: "ms", series: [
            Series(name: "behind schedule, max", colour: "#1f77b4", values: t.map { $0.sendLagMax / 1000 }),
            Series(name: "held back by the bus", colour: "#ff7f0e", values: t.map { $0.heldBackMillis }),
        ]))
        charts.append(FloodTimeline.chart(id: "busy", title: "flood's busiest subscriber", unit: "% busy", series: [
            Series(name: "subscriber busy", colour: "#17becf", values: t.map { $0.subscriberBusy * 100 }),
        ]))
        let summary = FloodTimeline.escape(report.text)
        let config = report.outcome.configuration
        var runRows: [(String, String, String?)] = [
            ("command", report.info.command, baseline?.command),
            ("build", report.info.build, baseline?.build),
            ("host", report.info.host, baseline?.host),
            ("started", report.info.startedAt, baseline?.startedAt),
            ("seed · run", "\(config.generator.seed) · \(config.generator.runID)", baseline.map { "\($0.seed) · \($0.runID)" }),
        ]
        runRows.append(("throughput", "\(Int(report.throughput)) published/s", baseline.map { "\(Int($0.throughput)) published/s" }))
        let figures: [(String, Double, Double?)] = [
            ("latency p50", report.latency.micros(0.5), baseline?.p50Micros), ("latency p99", report.latency.micros(0.99), baseline?.p99Micros),
            ("latency p99.9", report.latency.micros(0.999), baseline?.p999Micros),
            ("latency max", Double(report.latency.maximum) / 1000, baseline?.maxMicros),
        ]
        for (name, v, b) in figures { runRows.append((name, "\(String(format2: v)) µs", b.map { "\(String(format2: $0)) µs" })) }
        runRows.append(("flood CPU", "\(String(format2: report.cpuMicrosPerEvent)) µs/event", baseline.map { "\(String(format2: $0.cpuMicrosPerEvent)) µs/event" }))
        var table = "<table><tr><th></th><th>this run</th>" + (baseline == nil ? "" : "<th>baseline (\(FloodTimeline.escape(baseline!.file)))</th><th>this ÷ baseline</th>") + "</tr>\n"
        let ratios: [String: Double?] = [
            "throughput": baseline.map { report.throughput / Swift.max($0.throughput, 1e-9) },
            "latency p50": baseline.map { report.latency.micros(0.5) / Swift.max($0.p50Micros, 1e-9) },
            "latency p99": baseline.map { report.latency.micros(0.99) / Swift.max($0.p99Micros, 1e-9) },
            "latency p99.9": baseline.map { report.latency.micros(0.999) / Swift.max($0.p999Micros, 1e-9) },
            "flood CPU": baseline.map { report.cpuMicrosPerEvent / Swift.max($0.cpuMicrosPerEvent, 1e-9) },
        ]
        for (name, mine, theirs) in runRows {
            table += "<tr><th>\(name)</th><td>\(FloodTimeline.escape(mine))</td>"
            if baseline != nil {
                let ratio = (ratios[name] ?? nil).map { String(format2: $0) } ?? ""
                table += "<td>\(FloodTimeline.escape(theirs ?? "-"))</td><td>\(ratio)</td>"
            }
            table += "</tr>\n"
        }
        table += "</table>"
        return """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><title>checkoutbus flood report</title>
            <style>
            body { font: 14px system-ui, sans-serif; margin: 24px; color: #222; max-width: 980px; }
            h1 { font-size: 20px; } h2 { font-size: 15px; margin: 24px 0 4px; }
            pre { background: #f6f6f6; padding: 12px; font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
            table { border-collapse: collapse; font-size: 12px; } th, td { text-align: left; padding: 2px 12px 2px 0; vertical-align: top; overflow-wrap: anywhere; } th { white-space: nowrap; }
            svg { background: #fff; border: 1px solid #ddd; }
            .legend span { margin-right: 16px; } .legend i { display: inline-block; width: 12px; height: 3px; vertical-align: middle; margin-right: 4px; }
            .note { font-size: 12px; color: #666; }
            </style></head><body>
            <h1>checkoutbus flood — \(t.count) s, limited by \(report.limitedBy.rawValue)\(report.outcome.interrupted ? " (interrupted)" : "")</h1>
            \(table)
            \(charts.joined(separator: "\n"))
            <h2>Report</h2>
            <pre>\(summary)</pre>
            </body></html>

            """
    }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "&": out += "&amp;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }

    /// `0.25` for a value under 1 (an axis label).
    static func hundredths(_ v: Double) -> String {
        let h = Int((v * 100).rounded())
        return "0.\(h < 10 ? "0" : "")\(h)"
    }

    /// An SVG line chart, seconds along x; a nil value breaks its line.
    /// A step of 1, 2 or 5 × 10ⁿ that cuts `range` into about four.
    static func niceStep(_ range: Double) -> Double {
        guard range > 0, range.isFinite else { return 1 }
        let raw = range / 4
        let magnitude = pow(10, floor(log10(raw)))
        let f = raw / magnitude
        return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * magnitude
    }

    static func chart(id: String, title: String, unit: String, series: [Series], logarithmic: Bool = false, note: String? = nil) -> String {
        let (width, height, left, right, top, bottom) = (960.0, 240.0, 64.0, 12.0, 12.0, 28.0)
        let plotW = width - left - right
        let plotH = height - top - bottom
        let n = series.map(\.values.count).max() ?? 0
        let all = series.flatMap { $0.values.compactMap { $0 } }.filter { $0.isFinite }
        let positive = all.filter { $0 > 0 }
        let log = logarithmic && !positive.isEmpty
        var lo = log ? (positive.min() ?? 1) : 0
        var hi = Swift.max(all.max() ?? 1, log ? lo * 10 : 1)
        if log {
            lo = pow(10, floor(log10(lo)))
            hi = pow(10, ceil(log10(hi)))
        } else {
            // Round ticks (0, 2500, 5000, …): the top is the first step at or above the highest value.
            let step = niceStep(hi)
            hi = Swift.max(step, (hi / step).rounded(.up) * step)
        }
        func x(_ i: Int) -> Double { left + (n > 1 ? Double(i) / Double(n - 1) : 0.5) * plotW }
        func y(_ v: Double) -> Double {
            let f = log ? (log10(Swift.max(v, lo)) - log10(lo)) / (log10(hi) - log10(lo)) : v / hi
            return top + plotH * (1 - Swift.min(1, Swift.max(0, f)))
        }
        func fmt(_ v: Double) -> String { String(format2: v) }
        var svg = "<h2>\(escape(title))</h2>\n<div class=\"legend\">"
        for s in series {
            let style = s.dashed ? "background:repeating-linear-gradient(90deg,\(s.colour) 0 4px,transparent 4px 7px)" : "background:\(s.colour)"
            svg += "<span><i style=\"\(style)\"></i>\(escape(s.name))</span>"
        }
        svg += "</div>\n<svg id=\"chart-\(id)\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" preserveAspectRatio=\"xMinYMin meet\" viewBox=\"0 0 \(Int(width)) \(Int(height))\">\n"
        // Grid and y labels.
        var ticks: [Double] = []
        if log {
            var v = lo
            while v <= hi * 1.0001 { ticks.append(v); v *= 10 }
        } else {
            let step = niceStep(hi)
            ticks = stride(from: 0.0, through: hi * 1.0001, by: step).map { $0 }
        }
        for v in ticks {
            let yy = y(v)
            svg += "<line x1=\"\(fmt(left))\" y1=\"\(fmt(yy))\" x2=\"\(fmt(width - right))\" y2=\"\(fmt(yy))\" stroke=\"#eee\"/>"
            let label = v == 0 ? "0" : v >= 100 ? String(Int(v.rounded())) : v >= 1 ? fmt(v) : FloodTimeline.hundredths(v)
            svg += "<text x=\"\(fmt(left - 6))\" y=\"\(fmt(yy + 4))\" font-size=\"11\" text-anchor=\"end\" fill=\"#666\">\(label)</text>\n"
        }
        svg += "<text x=\"12\" y=\"\(fmt(top + plotH / 2))\" font-size=\"11\" fill=\"#666\" transform=\"rotate(-90 12 \(fmt(top + plotH / 2)))\" text-anchor=\"middle\">\(escape(unit))</text>\n"
        // x labels: about ten.
        let step = Swift.max(1, n / 10)
        for i in stride(from: 0, to: n, by: step) {
            svg += "<text x=\"\(fmt(x(i)))\" y=\"\(fmt(height - 8))\" font-size=\"11\" text-anchor=\"middle\" fill=\"#666\">\(i) s</text>"
        }
        svg += "\n<line x1=\"\(fmt(left))\" y1=\"\(fmt(top + plotH))\" x2=\"\(fmt(width - right))\" y2=\"\(fmt(top + plotH))\" stroke=\"#999\"/>\n"
        for s in series {
            var d = ""
            var drawing = false
            for (i, v) in s.values.enumerated() {
                guard let v, v.isFinite else {
                    drawing = false
                    continue
                }
                d += (drawing ? "L" : "M") + "\(fmt(x(i))),\(fmt(y(v)))"
                drawing = true
            }
            // A lone point still shows as a dot.
            let dash = s.dashed ? " stroke-dasharray=\"6 4\" opacity=\"0.7\"" : ""
            svg += "<path class=\"series\" data-name=\"\(escape(s.name))\" d=\"\(d)\" fill=\"none\" stroke=\"\(s.colour)\" stroke-width=\"2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"\(dash)/>\n"
        }
        svg += "</svg>"
        if let note { svg += "\n<div class=\"note\">\(escape(note))</div>" }
        return svg
    }
}

/// A run to compare with (`flood --compare OLD.json`): what its `--json` line says, and its
/// seconds. `Sendable`; a value.
package struct FloodBaseline: Sendable {
    package var file: String
    package var command = "?", build = "?", host = "?", startedAt = "?", runID = "?"
    package var seed: Int = 0
    package var throughput: Double = 0
    package var p50Micros: Double = 0, p99Micros: Double = 0, p999Micros: Double = 0, maxMicros: Double = 0
    package var cpuMicrosPerEvent: Double = 0
    /// Per second: published, and p99 in ms.
    package var published: [Double?] = []
    package var p99: [Double?] = []

    /// Reads the last JSON line of `path` (the output of `flood --json`).
    /// - Throws: ``ToolError`` when it cannot be read or is not a flood report.
    package init(path: String) throws {
        file = path
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let line = text.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
            let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], o["sent"] != nil
        else { throw ToolError("--compare \(path): not the output of checkoutbus flood --json") }
        func number(_ v: Any?) -> Double? { (v as? NSNumber)?.doubleValue }
        let run = o["run"] as? [String: Any] ?? [:]
        command = run["command"] as? String ?? "?"
        build = run["build"] as? String ?? "?"
        host = run["host"] as? String ?? "?"
        startedAt = run["started_at"] as? String ?? "?"
        runID = o["run_id"] as? String ?? "?"
        seed = (o["seed"] as? NSNumber)?.intValue ?? 0
        throughput = number(o["throughput"]) ?? 0
        let latency = o["latency_us"] as? [String: Any] ?? [:]
        p50Micros = number(latency["p50"]) ?? 0
        p99Micros = number(latency["p99"]) ?? 0
        p999Micros = number(latency["p99_9"]) ?? 0
        maxMicros = number(latency["max"]) ?? 0
        cpuMicrosPerEvent = number((o["tool"] as? [String: Any])?["cpu_us_per_event"]) ?? 0
        let rows = o["timeline"] as? [[String: Any]] ?? []
        published = rows.map { number($0["published"]) }
        // Its last second, as this run's: per second of the part it lasted.
        if let total = number(o["seconds"]), rows.count > 1 {
            let fraction = Swift.min(1, Swift.max(0, total - Double(rows.count - 1)))
            if fraction < 1 { published[rows.count - 1] = fraction >= 0.1 ? published[rows.count - 1].map { $0 / fraction } : nil }
        }
        p99 = rows.map { number($0["p99_us"]).map { $0 / 1000 } }
    }
}
