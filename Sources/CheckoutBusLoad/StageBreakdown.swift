#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusProtocol
import CheckoutBusTools
import Foundation

/// Where a daemon's CPU goes per event, by stage, for `checkoutbus bench`.
///
/// Two sources, read before and after a round: each thread's CPU from `/proc/PID/task/*/schedstat`
/// (`stat` for the names)
/// (the pipeline is the main thread; the journal's threads are named; libzmq's are `ZMQbg/…`),
/// and the daemon's own stage timings from `stats` (`stages`: the pipeline thread's time in each
/// stage over one event in 64, sampled with a monotonic clock). The pipeline thread's CPU is then
/// split by those timings; whatever the stages do not cover (the loop, polling, acks, heartbeats)
/// is its `rest`.
package struct StageBreakdown {
    /// CPU seconds by thread group: pipeline, prepare (`--pipeline-threads` above 1), zmq-io,
    /// journal-write, journal-sync, other.
    package var threads: [String: Double] = [:]
    /// The `stats` reply's `stages` object (sums in ns and the counts timed).
    package var stages: [String: Double] = [:]
    /// Events the daemon had received.
    package var received: Double = 0

    package static let threadGroups = ["pipeline", "prepare", "zmq-io", "journal-write", "journal-sync", "other"]
    package static let pipelineStages = ["receive", "decode", "rules", "envelope", "journal_append"]

    /// Reads both sources now. `control` is the daemon's control endpoint.
    package static func read(pid: Int32, control: String) -> StageBreakdown {
        var b = StageBreakdown()
        b.threads = threadCPU(pid: pid)
        if let stats = stats(control) {
            b.stages = stats.stages.byName.mapValues(Double.init)
            b.received = Double(stats.counters.received)
        }
        return b
    }

    /// CPU seconds (user + system) of each of `pid`'s threads, summed by group.
    package static func threadCPU(pid: Int32) -> [String: Double] {
        var out: [String: Double] = [:]
        guard let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") else { return out }
        for tid in tids {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
                let (comm, statSeconds) = ThroughputBenchmark.procStat(stat)
            else { continue }
            // `schedstat`'s first field is the thread's time on a CPU in ns; `stat`'s ticks (10 ms)
            // are too coarse for a thread that runs a few hundred ms in a round.
            var seconds = statSeconds
            if let sched = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/schedstat", encoding: .utf8),
                let first = sched.split(separator: " ").first, let ns = Double(first)
            {
                seconds = ns / 1e9
            }
            let group: String
            if tid == String(pid) { group = "pipeline" }
            else if comm.hasPrefix("ZMQbg/IO") { group = "zmq-io" }
            else if comm == "journal-write" || comm == "journal-sync" { group = comm }
            else if comm.hasPrefix("prepare-") { group = "prepare" }
            else { group = "other" }
            out[group, default: 0] += seconds
        }
        return out
    }

    /// The daemon's `stats` reply, or nil if it did not answer within two seconds.
    package static func stats(_ control: String) -> StatsReply? {
        guard let reply = try? StatsCommand.request(control, timeoutSeconds: 2) else { return nil }
        return StatsReply.read(reply)
    }

    /// CPU per event (µs) between `before` and `after`, for `events` events: each thread group,
    /// and the pipeline thread split into its stages plus `publish` and `rest`.
    package static func perEvent(from before: StageBreakdown, to after: StageBreakdown, events: Int) -> [String: Double] {
        let n = Double(max(1, events))
        var out: [String: Double] = [:]
        for g in threadGroups { out[g] = ((after.threads[g] ?? 0) - (before.threads[g] ?? 0)) * 1e6 / n }
        func delta(_ k: String) -> Double { (after.stages[k] ?? 0) - (before.stages[k] ?? 0) }
        let timed = max(1, delta("timed"))
        var sampled: [String: Double] = [:]
        for s in pipelineStages { sampled[s] = delta(s + "_ns") / timed / 1000 }
        // Publication per event published; in the bench every event is published.
        sampled["publish"] = delta("publish_ns") / max(1, delta("publish_timed")) / 1000
        // The samples are wall time: what preemption shorter than the cut-off added, or the
        // clock's own reads, can make them sum to more than the thread's CPU. Then they are
        // scaled down to it (no `rest`); otherwise what they leave is the loop's `rest`.
        let sum = sampled.values.reduce(0, +)
        // With prepare threads, decode and part of rules ran on them as well as on the pipeline.
        let pipeline = out["pipeline"]! + out["prepare"]!
        let scale = sum > pipeline && sum > 0 ? pipeline / sum : 1
        for (k, v) in sampled { out[k] = v * scale }
        out["rest"] = max(0, pipeline - sum * scale)
        out["sampled_over_cpu"] = pipeline > 0 ? sum / pipeline : 0
        return out
    }

    /// One line per part, for the bench's output: medians over the rounds' figures.
    package static func describe(_ rounds: [[String: Double]]) -> [String] {
        func m(_ k: String) -> String { String(format2: ThroughputBenchmark.median(rounds.map { $0[k] ?? 0 })) }
        let total = ThroughputBenchmark.median(rounds.map { r in threadGroups.reduce(0) { $0 + (r[$1] ?? 0) } })
        return [
            "stages, CPU per event (µs, median of the bus rounds; all threads \(String(format2: total))):",
            "  pipeline thread \(m("pipeline"))\(rounds.contains { ($0["prepare"] ?? 0) > 0 } ? " and prepare threads \(m("prepare"))" : ""): receive \(m("receive")), decode \(m("decode")), rules \(m("rules")), envelope \(m("envelope")), journal append \(m("journal_append")), publish \(m("publish")), rest \(m("rest"))",
            "  ZeroMQ I/O \(m("zmq-io")), journal writer \(m("journal-write")), journal sync \(m("journal-sync")), other threads \(m("other"))",
            "  (the pipeline split by its own timing of ~1 event in 64; sampled time / thread CPU \(String(format2x: ThroughputBenchmark.median(rounds.map { $0["sampled_over_cpu"] ?? 0 }))))",
        ]
    }
}
