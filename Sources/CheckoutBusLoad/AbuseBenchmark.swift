#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import Foundation
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus bench`'s abuse round: live latency at a fixed rate while impatient and hostile
/// clients hammer the daemon's side doors (``ClientStorm``: four clients replaying the journal's
/// first 10,000 records in a loop, a `/metrics` scraper, a subscriber churning subscriptions, 50
/// subscribers that never read, multipart control requests, stalled HTTP heads), against the same storm aimed at a twin daemon
/// on a copy of the journal. The twin's figure is what the machine's CPU contention alone costs;
/// the difference between the two is what the storm does to the bus itself.
///
/// Prints figures, never pass/fail. Not `Sendable`; runs on the calling thread.
package struct AbuseBenchmark {
    /// Live events per second while the storm runs (0 skips the round).
    package var rate = 5000.0
    /// Live events per measurement.
    package var events = 15_000
    /// Twin-then-self alternations.
    package var rounds = 2
    /// Records written before the round, for the storm to replay.
    package var prefill = 50_000
    package var daemonArguments: [String] = []
    package var producerQueue: Int32 = 10_000

    package init() {}

    package func say(_ s: String) { FileHandleWriter.standardOutput(s + "\n") }

    /// `checkoutbus bench abuse`: the round alone, in a scratch directory.
    /// - Returns: the exit status.
    package func runAlone() -> Int32 {
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("cb-abuse-\(getpid())")
        defer { try? FileManager.default.removeItem(at: tmp) }
        do {
            try run(in: tmp)
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus bench abuse: \(error)\n")
            return 1
        }
    }

    /// Runs the round with its daemons' data directories under `directory`.
    package func run(in directory: URL) throws {
        guard rate > 0 else { return }
        let fm = FileManager.default
        let main = directory.appendingPathComponent("abuse-bus")
        let twinDirectory = directory.appendingPathComponent("abuse-twin")
        func start(_ dir: URL) throws -> ThroughputBenchmark.BusProcess {
            try ThroughputBenchmark.BusProcess("checkoutbusd", [
                "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*", "--data-dir", dir.path,
                "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*",
                // The defaults a user runs with: --max-subscribers and --subscriber-memory set the
                // mark the never-reading subscribers fill.
                "--log-level", "warning",
            ] + daemonArguments)
        }
        // The journal both daemons replay from: written once, then copied.
        let first = try start(main)
        _ = try drive(first, events: prefill, run: "abuse-prefill", rate: nil)
        first.stop()
        try fm.copyItem(at: main, to: twinDirectory)
        let bus = try start(main)
        defer { bus.stop() }
        let twin = try start(twinDirectory)
        defer { twin.stop() }
        say("abuse round: live p99 at \(Int(rate))/s (\(events) events) with four replaying clients, a /metrics scraper, a subscription churner, 20 subscribers that never read, multipart control requests and 100 stalled HTTP heads")
        say("  storm on twin = the same storm on a second daemon with a copy of the journal (the host's CPU contention alone)")
        let quiet = try drive(bus, events: events, run: "abuse-quiet", rate: rate)
        say("  no storm: \(quiet.line)")
        var twinP99: [Double] = []
        var selfP99: [Double] = []
        for round in 1...rounds {
            for (name, target) in [("storm on twin", twin), ("storm on bus ", bus)] {
                let storm = ClientStorm(control: target.ready["control"] as? String, metrics: target.ready["metrics"] as? String,
                                        publish: target.publish)
                let started = Date()
                let m = try drive(bus, events: events, run: "abuse-\(round)-\(name.hasSuffix("twin") ? "t" : "s")", rate: rate)
                let tally = storm.stop()
                let seconds = max(0.001, Date().timeIntervalSince(started))
                if name.hasSuffix("twin") { twinP99.append(m.p99) } else { selfP99.append(m.p99) }
                say("  round \(round) \(name): \(m.line); storm \(Int(Double(tally.pages) / seconds)) pages/s (\(Int(Double(tally.records) / seconds)) records/s), \(Int(Double(tally.scrapes) / seconds)) scrapes/s, \(Int(Double(tally.subscriptions) / seconds)) subscriptions/s, \(Int(Double(tally.multipart) / seconds)) multipart requests/s")
            }
        }
        let t = ThroughputBenchmark.median(twinP99)
        let s = ThroughputBenchmark.median(selfP99)
        say("abuse median p99: no storm \(String(format2: quiet.p99)) µs, storm on twin \(String(format2: t)) µs, storm on bus \(String(format2: s)) µs (bus/twin \(String(format2x: s / max(t, 0.001))))")
    }

    package struct Measurement {
        var p50: Double
        var p99: Double
        var max: Double
        var received: Int
        var sent: Int

        var line: String {
            "p50 \(String(format2: p50)) µs, p99 \(String(format2: p99)) µs, max \(String(format2: max)) µs (\(received)/\(sent) received)"
        }
    }

    private func drive(_ target: ThroughputBenchmark.BusProcess, events: Int, run: String, rate: Double?) throws -> Measurement {
        var batch = ThroughputBenchmark.snapshots(events, run: run)
        let driver = try LoadDriver(ingest: target.ingest, publish: target.publish, target: .daemon,
                                    sendHighWaterMark: producerQueue)
        try driver.synchronize()
        let r = try driver.run(&batch, rate: rate, expected: { _ in events })
        let sorted = r.latencies.sorted()
        return Measurement(p50: r.latencyMicros(0.5, sorted: sorted), p99: r.latencyMicros(0.99, sorted: sorted),
                           max: r.latencyMicros(1.0, sorted: sorted), received: r.received, sent: r.sent)
    }
}
