#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import CheckoutBusCore
import Foundation
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The flood's findings, as text for people or one JSON object: what the bus published against
/// what the generator expects, latencies, and what limited the run — the bus, the requested rate,
/// or flood itself (its producers behind their schedule, or a subscriber that did not keep up).
/// `Sendable`.
package struct FloodReport: Sendable {
    /// Who set the pace of a run.
    package enum Limit: String, Sendable {
        /// The bus: it held the producers back, or published more slowly than they sent.
        case bus
        /// The requested `--rate`, kept: nothing else was in the way.
        case rate
        /// flood's producers: behind their schedule, or flat out while the bus took everything.
        case producers
        /// A flood subscriber busy nearly all the time: envelopes waited for it, not for the bus.
        case subscriber

        package var isTool: Bool { self == .producers || self == .subscriber }
    }

    package let outcome: FloodRun.Outcome
    package let expectedPublished: [Int]
    package let expectedSuppressed: Int
    package let latency: LatencyHistogram
    package let ack: LatencyHistogram
    package let sendLag: LatencyHistogram
    /// This process's CPU seconds (user + system) over the run.
    package let cpuSeconds: Double
    /// The daemon's own arrival-to-publication histogram over the run, when `--metrics` was given.
    package let daemonPipeline: DaemonHistogram?
    /// The daemon's memory before and after the run, when `--memory` was given.
    package var daemonMemory: DaemonMemory.Growth?
    /// What was run, where, by which build and when: so two reports can be compared and a run
    /// repeated.
    package var info = FloodRunInfo()

    package init(outcome: FloodRun.Outcome, cpuSeconds: Double = 0, daemonPipeline: DaemonHistogram? = nil) {
        self.outcome = outcome
        expectedPublished = outcome.expectedPublished
        expectedSuppressed = outcome.expectedSuppressed
        latency = outcome.latency
        ack = outcome.ack
        sendLag = outcome.sendLag
        self.cpuSeconds = cpuSeconds
        self.daemonPipeline = daemonPipeline
    }

    private var first: FloodRun.SubscriberResult { outcome.subscribers[0] }
    package var published: Int { first.receivedByKind.reduce(0, +) }
    package var deadLetters: Int { first.deadLetters }
    package var suppressed: Int { outcome.sent - published - deadLetters }
    /// Envelopes some subscriber never received (gaps in `seq`), summed over subscribers.
    package var missed: UInt64 { outcome.subscribers.reduce(0) { $0 + $1.missed } }
    /// The first subscriber's outages of the bus (silences without a heartbeat) and what was lost across them.
    package var outages: Int { first.outages }
    package var lostInOutages: UInt64 { first.lostInOutages }
    package var acked: Int { outcome.producers.reduce(0) { $0 + $1.acked } }
    package var rejected: Int { outcome.producers.reduce(0) { $0 + $1.rejected } }
    package var unanswered: Int { outcome.producers.reduce(0) { $0 + $1.unanswered } }
    package var throughput: Double { outcome.seconds > 0 ? Double(first.received) / outcome.seconds : 0 }
    package var cpuMicrosPerEvent: Double { outcome.sent > 0 ? cpuSeconds * 1e6 / Double(outcome.sent) : 0 }

    package var ok: Bool {
        outcome.subscribers.allSatisfy { $0.receivedByKind == expectedPublished && $0.deadLetters == 0 }
            && !outcome.timedOut && !outcome.interrupted && outcome.errors.isEmpty
            && rejected == 0 && unanswered == 0
    }

    /// Who set the pace (see ``Limit``).
    package var limitedBy: Limit {
        let sendSeconds = max(outcome.sendSeconds, 1e-9)
        let heldBack = outcome.heldBackSeconds / Double(outcome.configuration.producers) / sendSeconds
        if outages > 0 { return .bus }
        if outcome.subscriberBusy > 0.9 || missed > 0 && !outcome.interrupted { return .subscriber }
        if heldBack > 0.05 { return .bus }
        if outcome.configuration.rate != nil {
            // Behind the schedule without the bus holding them back: the producers' own doing (too
            // busy, or their thread not given a core on a loaded host).
            return isBehindSchedule ? .producers : .rate
        }
        // Flat out, never held back: the producers were the limit if they were busy all along
        // and the subscribers had it all soon after sending ended.
        let drained = outcome.seconds <= sendSeconds * 1.1 + 0.5
        return outcome.producerBusy > 0.9 && drained ? .producers : .bus
    }

    /// The producers sent under 95% of the requested rate, or 1% of events went out over 1 ms late.
    package var isBehindSchedule: Bool {
        guard let rate = outcome.configuration.rate else { return false }
        return Double(outcome.sent) / max(outcome.sendSeconds, 1e-9) < rate * 0.95 || sendLag.quantile(0.99) > 1_000_000
    }

    package var limitText: String {
        switch limitedBy {
        case .bus:
            if outages > 0 { return "the bus: \(outages) outage(s) with not even a heartbeat for over \(String(format2: Double(FloodRun.outageNanos) / 1e9)) s (\(lostInOutages) envelopes published but never received across them)" }
            return "the bus (flood kept up with it)"
        case .rate: return "the requested rate (kept; nothing else in the way)"
        case .producers:
            if isBehindSchedule {
                return "FLOOD ITSELF: its producers fell behind their schedule (p99 \(us(sendLag.quantile(0.99))) µs, max \(us(sendLag.maximum)) µs) without the bus holding them back (busy \(percent(outcome.producerBusy)): \(outcome.producerBusy > 0.9 ? "add --producers" : "their threads waited for a core on this host")); bursts sent to catch up queue in the bus and inflate its latency"
            }
            return "FLOOD ITSELF: its producers (busy \(percent(outcome.producerBusy))) could not send faster and the bus took everything; the throughput is the tool's — add --producers"
        case .subscriber:
            if missed > 0 {
                return "FLOOD ITSELF: its subscribers missed \(missed) envelopes (gaps in seq: dropped at the daemon's --publish-hwm because they did not read fast enough, or lost in a daemon crash); counts and latencies are short of the bus's"
            }
            return "FLOOD ITSELF: a subscriber was busy \(percent(outcome.subscriberBusy)) of the run; latencies include its queue — use fewer --subscribers"
        }
    }

    private func ms(_ h: LatencyHistogram, _ q: Double) -> String { String(Int(h.quantile(q) / 1_000_000)) }

    private func percent(_ x: Double) -> String { "\(Int((x * 100).rounded()))%" }
    private func us(_ nanos: UInt64) -> String { String(format2: Double(nanos) / 1000) }

    package var text: String {
        let config = outcome.configuration
        let rate = Int(Double(outcome.sent) / max(outcome.sendSeconds, 1e-9))
        var s = "sent        \(outcome.sent) events in \(String(format2: outcome.sendSeconds)) s (\(rate) events/s) by \(config.producers) producer(s)\(config.acked ? ", acknowledged" : "")\n"
        s += "published   \(published) (expected \(expectedPublished.reduce(0, +)))\n"
        for k in LifecycleKind.allCases {
            let i = Int(k.rawValue)
            let mark = first.receivedByKind[i] == expectedPublished[i] ? "" : "   MISMATCH"
            s += "  \(String(describing: k.name).padded(10)) \(first.receivedByKind[i]) (expected \(expectedPublished[i]))\(mark)\n"
        }
        s += "suppressed  \(suppressed) (expected \(expectedSuppressed))\n"
        s += "deadletters \(deadLetters) (expected 0)\n"
        if first.foreign > 0 { s += "other       \(first.foreign) envelopes of other traffic on the bus, not this run's (run \(config.generator.runID)): left out\n" }
        if missed > 0 { s += "missed      \(missed) (gaps in seq: published, never received)\n" }
        if outages > 0 { s += "outages     \(outages): silences over \(String(format2: Double(FloodRun.outageNanos) / 1e9)) s without a heartbeat; \(lostInOutages) envelopes published but never received across them\n" }
        if outcome.subscribers.count > 1 {
            s += "subscribers \(outcome.subscribers.count), received " + outcome.subscribers.map { String($0.received) }.joined(separator: ", ") + "\n"
        }
        s += "throughput  \(Int(throughput)) published/s\n"
        s += "latency     p50 \(String(format2: latency.micros(0.5))) µs  p90 \(String(format2: latency.micros(0.9))) µs  p99 \(String(format2: latency.micros(0.99))) µs  p99.9 \(String(format2: latency.micros(0.999))) µs  max \(us(latency.maximum)) µs\n"
        if config.acked {
            s += "acks        \(acked) acked, \(rejected) rejected, \(unanswered) unanswered; p50 \(String(format2: ack.micros(0.5))) µs  p90 \(String(format2: ack.micros(0.9))) µs  p99 \(String(format2: ack.micros(0.99))) µs  p99.9 \(String(format2: ack.micros(0.999))) µs\n"
        }
        if !first.toDaemon.isEmpty {
            s += "split       flood → daemon's received_at p50 \(ms(first.toDaemon, 0.5)) p99 \(ms(first.toDaemon, 0.99)) ms; received_at → flood's subscriber p50 \(ms(first.daemonToRead, 0.5)) p99 \(ms(first.daemonToRead, 0.99)) ms (1 ms resolution)\n"
        }
        if let d = daemonPipeline {
            s += "daemon      arrival to publication (its /metrics): \(d.text)\n"
        }
        if let m = daemonMemory { s += "memory      \(m.text)\n" }
        var tool = "flood       CPU \(String(format2: cpuMicrosPerEvent)) µs per event; producers busy \(percent(outcome.producerBusy)), subscribers busy \(percent(outcome.subscriberBusy))"
        if config.rate != nil {
            tool += "; behind schedule p99 \(us(sendLag.quantile(0.99))) µs, max \(us(sendLag.maximum)) µs"
        }
        tool += "; held back by the bus \(String(format2: outcome.heldBackSeconds)) s\n"
        s += tool
        s += "limited by  \(limitText)\n"
        for e in outcome.errors { s += "error       \(e)\n" }
        if outcome.interrupted {
            s += "result      INTERRUPTED: the report covers what was sent before the signal\n"
        } else {
            s += ok ? "result      OK: nothing lost, nothing unexpected\n" : "result      FAILED: the bus did not publish what the generator expects\(outcome.timedOut ? " (nothing more arrived)" : "")\n"
        }
        return s
    }

    private static func appendPercentiles(_ h: LatencyHistogram, to w: inout JSONWriter) {
        w.append("{\"p50\":")
        w.appendRaw(String(format2: h.micros(0.5)))
        w.append(",\"p90\":")
        w.appendRaw(String(format2: h.micros(0.9)))
        w.append(",\"p99\":")
        w.appendRaw(String(format2: h.micros(0.99)))
        w.append(",\"p99_9\":")
        w.appendRaw(String(format2: h.micros(0.999)))
        w.append(",\"max\":")
        w.appendRaw(String(format2: Double(h.maximum) / 1000))
        w.append("}")
    }

    package var json: String {
        let config = outcome.configuration
        var w = JSONWriter(capacity: 1024)
        w.append("{\"run_id\":")
        w.appendString(config.generator.runID)
        w.append(",\"run\":{\"command\":")
        w.appendString(info.command)
        w.append(",\"build\":")
        w.appendString(info.build)
        w.append(",\"host\":")
        w.appendString(info.host)
        w.append(",\"started_at\":")
        w.appendString(info.startedAt)
        w.append("}")
        w.append(",\"seed\":")
        w.append(int: Int64(bitPattern: config.generator.seed))
        w.append(",\"sent\":")
        w.append(int: outcome.sent)
        w.append(",\"seconds\":")
        w.appendRaw(String(format2: outcome.seconds))
        w.append(",\"send_seconds\":")
        w.appendRaw(String(format2: outcome.sendSeconds))
        w.append(",\"producers\":")
        w.append(int: config.producers)
        w.append(",\"subscribers\":")
        w.append(int: config.subscribers)
        w.append(",\"acked\":")
        w.append(bool: config.acked)
        w.append(",\"published\":")
        w.append(int: published)
        w.append(",\"expected_published\":")
        w.append(int: expectedPublished.reduce(0, +))
        w.append(",\"published_by_kind\":")
        FloodReport.appendByKind(first.receivedByKind, to: &w)
        w.append(",\"expected_by_kind\":")
        FloodReport.appendByKind(expectedPublished, to: &w)
        w.append(",\"received_by_subscriber\":[")
        for (i, sub) in outcome.subscribers.enumerated() {
            if i > 0 { w.append(",") }
            w.append(int: sub.received)
        }
        w.append("],\"missed\":")
        w.append(int: Int(missed))
        w.append(",\"outages\":")
        w.append(int: outages)
        w.append(",\"lost_in_outages\":")
        w.append(int: Int(lostInOutages))
        w.append(",\"suppressed\":")
        w.append(int: suppressed)
        w.append(",\"expected_suppressed\":")
        w.append(int: expectedSuppressed)
        w.append(",\"deadletters\":")
        w.append(int: deadLetters)
        w.append(",\"other_traffic\":")
        w.append(int: first.foreign)
        w.append(",\"throughput\":")
        w.append(int: Int(throughput))
        w.append(",\"latency_us\":")
        FloodReport.appendPercentiles(latency, to: &w)
        if config.acked {
            w.append(",\"acks\":{\"acked\":")
            w.append(int: acked)
            w.append(",\"rejected\":")
            w.append(int: rejected)
            w.append(",\"unanswered\":")
            w.append(int: unanswered)
            w.append("},\"ack_latency_us\":")
            FloodReport.appendPercentiles(ack, to: &w)
        }
        if !first.toDaemon.isEmpty {
            w.append(",\"split_ms\":{\"to_daemon\":{\"p50\":")
            w.append(int: Int(first.toDaemon.quantile(0.5) / 1_000_000))
            w.append(",\"p99\":")
            w.append(int: Int(first.toDaemon.quantile(0.99) / 1_000_000))
            w.append("},\"daemon_to_subscriber\":{\"p50\":")
            w.append(int: Int(first.daemonToRead.quantile(0.5) / 1_000_000))
            w.append(",\"p99\":")
            w.append(int: Int(first.daemonToRead.quantile(0.99) / 1_000_000))
            w.append("}}")
        }
        if let d = daemonPipeline {
            w.append(",\"daemon_pipeline_us\":")
            d.appendJSON(to: &w)
        }
        if let m = daemonMemory {
            w.append(",\"daemon_memory\":")
            m.appendJSON(to: &w)
        }
        w.append(",\"tool\":{\"cpu_us_per_event\":")
        w.appendRaw(String(format2: cpuMicrosPerEvent))
        w.append(",\"producer_busy\":")
        w.appendRaw(String(format2x: outcome.producerBusy))
        w.append(",\"subscriber_busy\":")
        w.appendRaw(String(format2x: outcome.subscriberBusy))
        w.append(",\"held_back_s\":")
        w.appendRaw(String(format2: outcome.heldBackSeconds))
        if config.rate != nil {
            w.append(",\"send_lag_us\":")
            FloodReport.appendPercentiles(sendLag, to: &w)
        }
        w.append("},\"limited_by\":")
        w.appendString(limitedBy.rawValue)
        w.append(",\"tool_limited\":")
        w.append(bool: limitedBy.isTool)
        w.append(",\"timed_out\":")
        w.append(bool: outcome.timedOut)
        w.append(",\"interrupted\":")
        w.append(bool: outcome.interrupted)
        if !outcome.errors.isEmpty {
            w.append(",\"errors\":[")
            for (i, e) in outcome.errors.enumerated() {
                if i > 0 { w.append(",") }
                w.appendString(e)
            }
            w.append("]")
        }
        w.append(",\"ok\":")
        w.append(bool: ok)
        // Second by second, as --timeline writes it: what --compare overlays.
        w.append(",\"timeline\":")
        FloodTimeline(outcome).appendRows(to: &w)
        w.append("}")
        return String(decoding: w.bytes, as: UTF8.self)
    }
}

/// The daemon's `checkoutbus_pipeline_latency_seconds` histogram (arrival to publication), read
/// from its `/metrics` before and after a run; the difference covers the run. Its quantiles are
/// bucket upper bounds, as Prometheus's are. `Sendable`.
package struct DaemonHistogram: Sendable {
    /// (upper bound in seconds, cumulative count), `+Inf` as `.infinity`.
    package var buckets: [(bound: Double, count: Int)]

    /// Parses the histogram out of a `/metrics` body.
    package init?(metrics body: String) {
        var b: [(Double, Int)] = []
        for line in body.split(separator: "\n") where line.hasPrefix("checkoutbus_pipeline_latency_seconds_bucket{le=\"") {
            let rest = line.dropFirst("checkoutbus_pipeline_latency_seconds_bucket{le=\"".count)
            guard let q = rest.firstIndex(of: "\""), let space = rest.lastIndex(of: " "),
                let count = Int(rest[rest.index(after: space)...])
            else { continue }
            let le = rest[..<q]
            b.append((le == "+Inf" ? .infinity : Double(le) ?? .infinity, count))
        }
        guard !b.isEmpty else { return nil }
        buckets = b
    }

    private init(buckets: [(bound: Double, count: Int)]) { self.buckets = buckets }

    /// What was observed between `before` and `self`.
    package func since(_ before: DaemonHistogram) -> DaemonHistogram {
        DaemonHistogram(buckets: buckets.enumerated().map { i, b in
            (b.bound, b.count - (i < before.buckets.count ? before.buckets[i].count : 0))
        })
    }

    package var count: Int { buckets.last?.count ?? 0 }

    /// The upper bound (seconds) of the bucket holding quantile `q`.
    package func bound(_ q: Double) -> Double {
        let rank = max(1, Int((Double(count) * q).rounded(.up)))
        return buckets.first { $0.count >= rank }?.bound ?? .infinity
    }

    private func micros(_ q: Double) -> String {
        let b = bound(q)
        if b.isFinite { return "≤ " + String(format2: b * 1e6) }
        let last = buckets.last { $0.bound.isFinite }?.bound ?? 0
        return "> " + String(format2: last * 1e6)
    }

    package var text: String {
        "\(count) events; p50 \(micros(0.5)) µs  p90 \(micros(0.9)) µs  p99 \(micros(0.99)) µs  p99.9 \(micros(0.999)) µs"
    }

    package func appendJSON(to w: inout JSONWriter) {
        w.append("{\"count\":")
        w.append(int: count)
        for (name, q) in [("p50_le", 0.5), ("p90_le", 0.9), ("p99_le", 0.99), ("p99_9_le", 0.999)] {
            w.append(",")
            w.appendString(name)
            w.append(":")
            let b = bound(q)
            if b.isFinite { w.appendRaw(String(format2: b * 1e6)) } else { w.append("null") }
        }
        w.append("}")
    }
}

/// What a flood run was: the command as typed, the build, the host and the start (in its report
/// and its `--json`). `Sendable`; a value.
package struct FloodRunInfo: Sendable {
    package var command: String
    package var build: String
    package var host: String
    package var startedAt: String

    package init(startedAt: Int64 = BusClock.wallMilliseconds()) {
        command = CommandLine.arguments.map { FloodRunInfo.quoted($0) }.joined(separator: " ")
        build = "checkoutbus \(CheckoutBusVersion.current) (\(CheckoutBusVersion.revision))"
        var u = utsname()
        var name = "?"
        var system = ""
        if uname(&u) == 0 {
            name = withUnsafeBytes(of: &u.nodename) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            system = withUnsafeBytes(of: &u.sysname) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) } + " "
                + withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) } + ", "
        }
        host = "\(name) (\(system)\(sysconf(Int32(_SC_NPROCESSORS_ONLN))) cores)"
        self.startedAt = Timestamp(milliseconds: startedAt).rfc3339
    }

    /// `arg` as a shell reads it back: quoted when it holds anything but plain characters.
    static func quoted(_ arg: String) -> String {
        let plain = !arg.isEmpty && arg.unicodeScalars.allSatisfy {
            CharacterSet.alphanumerics.contains($0) || "-_./:=,@%+*".unicodeScalars.contains($0)
        }
        return plain ? arg : "'" + arg.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

/// The daemon's resident memory, tracked checkouts and the bytes its state table holds, from its
/// `/metrics` (`process_resident_memory_bytes`, `checkoutbus_tracked_checkouts`,
/// `checkoutbus_state_bytes`, which a daemon before it lacks): `flood --memory`. `Sendable`.
package struct DaemonMemory: Sendable, Equatable {
    package var residentBytes: Int64
    package var trackedCheckouts: Int64
    package var stateBytes: Int64?

    package init(residentBytes: Int64, trackedCheckouts: Int64, stateBytes: Int64? = nil) {
        self.residentBytes = residentBytes
        self.trackedCheckouts = trackedCheckouts
        self.stateBytes = stateBytes
    }

    /// Reads both gauges out of a `/metrics` body; nil when either is missing.
    package init?(metrics body: String) {
        var rss: Int64?
        var tracked: Int64?
        var state: Int64?
        for line in body.split(separator: "\n") {
            if line.hasPrefix("process_resident_memory_bytes ") {
                rss = Int64(line.dropFirst("process_resident_memory_bytes ".count))
            } else if line.hasPrefix("checkoutbus_tracked_checkouts ") {
                tracked = Int64(line.dropFirst("checkoutbus_tracked_checkouts ".count))
            } else if line.hasPrefix("checkoutbus_state_bytes ") {
                state = Int64(line.dropFirst("checkoutbus_state_bytes ".count))
            }
        }
        guard let rss, let tracked else { return nil }
        self.init(residentBytes: rss, trackedCheckouts: tracked, stateBytes: state)
    }

    /// Waits until a daemon that has stopped receiving has handed back what its queues held: it
    /// does so after a heartbeat interval without input (1 s by default), and its resident memory
    /// then holds what it tracks. Every memory reading after a flood waits this long.
    static func settle() {
        usleep(2_500_000)
    }

    /// The daemon's figures now, from `http://address/metrics`.
    static func read(_ address: String) throws -> DaemonMemory {
        let (status, body) = try HTTPProbe.get(address, "/metrics")
        guard status == 200, let m = DaemonMemory(metrics: body) else {
            throw ToolError("no process_resident_memory_bytes and checkoutbus_tracked_checkouts at http://\(address)/metrics (status \(status))")
        }
        return m
    }

    /// The change over a run.
    package struct Growth: Sendable, Equatable {
        package var before: DaemonMemory
        package var after: DaemonMemory

        package init(before: DaemonMemory, after: DaemonMemory) {
            self.before = before
            self.after = after
        }

        /// Resident bytes gained per checkout the daemon tracks more than before; nil when it tracks none more.
        package var bytesPerCheckout: Double? {
            let checkouts = after.trackedCheckouts - before.trackedCheckouts
            guard checkouts > 0 else { return nil }
            return Double(after.residentBytes - before.residentBytes) / Double(checkouts)
        }

        /// The state table's bytes per tracked checkout after the run (what it holds in use over
        /// what it tracks); nil from a daemon that does not export them, or tracking none.
        package var stateBytesPerCheckout: Double? {
            guard let state = after.stateBytes, after.trackedCheckouts > 0 else { return nil }
            return Double(state) / Double(after.trackedCheckouts)
        }

        package var text: String {
            func mb(_ b: Int64) -> String { String(format2: Double(b) / 1_048_576) }
            let delta = after.residentBytes - before.residentBytes
            var s = "daemon resident \(mb(before.residentBytes)) → \(mb(after.residentBytes)) MiB (\(delta >= 0 ? "+" : "−")\(mb(abs(delta))) MiB), "
                + "tracked checkouts \(before.trackedCheckouts) → \(after.trackedCheckouts): "
                + (bytesPerCheckout.map { "\(String(format2: $0)) resident bytes per tracked checkout more" } ?? "no more checkouts tracked")
            if let state = after.stateBytes, let per = stateBytesPerCheckout {
                s += "; state table \(mb(state)) MiB, \(String(format2: per)) bytes per tracked checkout"
            }
            return s
        }

        func appendJSON(to w: inout JSONWriter) {
            w.append("{\"resident_bytes_before\":")
            w.append(int: before.residentBytes)
            w.append(",\"resident_bytes_after\":")
            w.append(int: after.residentBytes)
            w.append(",\"tracked_before\":")
            w.append(int: before.trackedCheckouts)
            w.append(",\"tracked_after\":")
            w.append(int: after.trackedCheckouts)
            w.append(",\"bytes_per_checkout\":")
            if let b = bytesPerCheckout { w.appendRaw(String(format2: b)) } else { w.append("null") }
            w.append(",\"state_bytes\":")
            if let b = after.stateBytes { w.append(int: b) } else { w.append("null") }
            w.append(",\"state_bytes_per_checkout\":")
            if let b = stateBytesPerCheckout { w.appendRaw(String(format2: b)) } else { w.append("null") }
            w.append("}")
        }
    }
}
