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
import ZeroMQ

/// `checkoutbus bench`: the daemon against the raw ZeroMQ forwarder in one run, same producer and
/// subscriber, alternating rounds; then latency at a fixed rate and memory per tracked checkout.
///
/// Prints medians and ratios, never pass/fail. Not `Sendable`; runs on the calling thread and
/// spawns the daemon and the forwarder as processes found beside its own executable.
package struct ThroughputBenchmark {
    package var rounds = 5
    /// Uncounted rounds per target before the counted ones.
    package var warmupRounds = 1
    package var events = 200_000
    package var latencyRate = 10_000.0
    package var latencyEvents = 30_000
    package var memoryCheckouts = 1_000_000
    /// Checkouts of flood's mix in the second memory run (after a warm-up of as many).
    package var memoryMixCheckouts = 200_000
    package var daemonArguments: [String] = []
    /// Messages the producer may queue ahead of the target (`ZMQ_SNDHWM` of its PUSH socket).
    /// Bounded, so that neither target is measured with the load driver's own backlog in the way:
    /// a 1,000,000-message queue slowed the raw forwarder's rounds by about a fifth (the driver's
    /// CPU per message rose from ~2.4 to ~3.2 µs) and the daemon's hardly at all.
    package var producerQueue: Int32 = 10_000
    /// The abuse round that ends the run (its `rate` 0 skips it).
    package var abuse = AbuseBenchmark()

    package init() {}

    package static var binDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    /// A spawned bus process and the endpoints from its ready line.
    package final class BusProcess {
        let process = Process()
        let ingest: String
        let publish: String
        /// The whole ready line.
        let ready: [String: Any]

        init(_ executable: String, _ arguments: [String]) throws {
            process.executableURL = ThroughputBenchmark.binDirectory.appendingPathComponent(executable)
            process.arguments = arguments
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            var line = Data()
            let handle = out.fileHandleForReading
            while !line.contains(0x0A) {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                line.append(chunk)
            }
            guard let obj = try? JSONSerialization.jsonObject(with: line.prefix { $0 != 0x0A }) as? [String: Any],
                let ingest = obj["ingest"] as? String, let publish = obj["publish"] as? String
            else { throw ToolError("\(executable) printed no ready line") }
            self.ingest = ingest
            self.publish = publish
            self.ready = obj
        }

        var pid: Int32 { process.processIdentifier }

        /// SIGTERM, then SIGKILL if it has not exited within five seconds.
        func stop() {
            if process.isRunning { process.terminate() }
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    /// Distinct ~1 KB update snapshots, one checkout each, in the ingest wrapper.
    package static func snapshots(_ n: Int, run: String) -> [FloodGenerator.Event] {
        (0..<n).map { i in
            let snap = FloodGenerator.snapshot(id: "\(run)-\(i)", quantity: 1 + i % 5, index: i, reordered: false, order: nil)
            return FloodGenerator.wrap(#"{"jsonrpc":"2.0","method":"ec.line_items.change","params":{"checkout":\#(snap)}}"#,
                                       checkoutID: "\(run)-\(i)", sdk: "shopify", platform: "ios", eventNumber: i,
                                       runID: run, expected: .update)
        }
    }

    package static func rssKilobytes(_ pid: Int32) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return 0
    }

    package func say(_ s: String) { FileHandleWriter.standardOutput(s + "\n") }

    package func run() -> Int32 {
        do {
            let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("cb-bench-\(getpid())")
            defer { try? FileManager.default.removeItem(at: tmp) }
            // The forwarder's queue, and the same on the bus: a few subscribers, each with 1 M
            // messages of room (so --subscriber-memory does not lower it).
            let hwm = "1000000"
            let daemon = try BusProcess("checkoutbusd", [
                "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*", "--data-dir", tmp.path,
                "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*",
                "--publish-hwm", hwm, "--max-subscribers", "4", "--subscriber-memory", "4294967296", "--log-level", "warning",
            ] + daemonArguments)
            defer { daemon.stop() }
            let raw = try BusProcess("checkoutbus", ["forwarder", "--hwm", hwm])
            defer { raw.stop() }
            let sample = ThroughputBenchmark.snapshots(1, run: "size")[0].bytes.count
            say("checkoutbus bench: \(rounds) rounds of \(events) distinct ~\(sample)-byte update snapshots, alternating")
            say("  bus = checkoutbusd (decode, rules, envelope, publish); raw = zmq_proxy PULL→PUB doing no work")
            say("  one producer (PUSH, a queue of \(producerQueue)) and one subscriber (SUB) on one thread, for both")
            if !daemonArguments.isEmpty { say("  checkoutbusd \(daemonArguments.joined(separator: " "))") }
            for round in stride(from: 1, through: warmupRounds, by: 1) {
                for (name, target) in [("raw", raw), ("bus", daemon)] {
                    let r = try drive(target, isDaemon: name == "bus", events: events, run: "w\(round)\(name)", rate: nil).result
                    say("  warm-up \(round) \(name): \(Int(Double(r.received) / r.seconds)) msg/s (not counted)")
                }
            }
            var busRates: [Double] = []
            var rawRates: [Double] = []
            // CPU per message (µs, user + system, all threads): the target's and the driver's.
            var cpu: [String: (target: [Double], driver: [Double])] = ["bus": ([], []), "raw": ([], [])]
            // The daemon's CPU per event by thread and stage, each bus round.
            var stages: [[String: Double]] = []
            let control = daemon.ready["control"] as? String ?? ""
            for round in 1...rounds {
                for (name, target) in [("raw", raw), ("bus", daemon)] {
                    let before = name == "bus" ? StageBreakdown.read(pid: daemon.pid, control: control) : nil
                    let (r, targetCPU, driverCPU) = try drive(target, isDaemon: name == "bus", events: events,
                                                              run: "r\(round)\(name)", rate: nil)
                    if let before {
                        let after = StageBreakdown.read(pid: daemon.pid, control: control)
                        stages.append(StageBreakdown.perEvent(from: before, to: after,
                                                              events: Int(after.received - before.received)))
                    }
                    let rate = Double(r.received) / r.seconds
                    if name == "bus" { busRates.append(rate) } else { rawRates.append(rate) }
                    let perTarget = targetCPU * 1e6 / Double(max(1, r.received))
                    let perDriver = driverCPU * 1e6 / Double(max(1, r.received))
                    cpu[name]!.target.append(perTarget)
                    cpu[name]!.driver.append(perDriver)
                    say("  round \(round) \(name): \(Int(rate)) msg/s (\(r.received)/\(r.sent) received\(r.timedOut ? ", TIMED OUT" : "")); CPU per message \(String(format2: perTarget)) µs, driver \(String(format2: perDriver)) µs")
                }
            }
            let busMedian = ThroughputBenchmark.median(busRates)
            let rawMedian = ThroughputBenchmark.median(rawRates)
            say("throughput median: bus \(Int(busMedian)) msg/s, raw \(Int(rawMedian)) msg/s, ratio bus/raw \(String(format2x: busMedian / rawMedian))")
            let busCPU = ThroughputBenchmark.median(cpu["bus"]!.target)
            let rawCPU = ThroughputBenchmark.median(cpu["raw"]!.target)
            say("CPU per message median: bus \(String(format2: busCPU)) µs, raw \(String(format2: rawCPU)) µs (bus/raw \(String(format2x: busCPU / max(rawCPU, 0.001)))); load driver \(String(format2: ThroughputBenchmark.median(cpu["bus"]!.driver))) µs in bus rounds, \(String(format2: ThroughputBenchmark.median(cpu["raw"]!.driver))) µs in raw rounds")
            for line in StageBreakdown.describe(stages) { say(line) }

            for (name, target) in [("raw", raw), ("bus", daemon)] {
                let r = try drive(target, isDaemon: name == "bus", events: latencyEvents, run: "lat\(name)",
                                  rate: latencyRate).result
                let sorted = r.latencies.sorted()
                say("latency at \(Int(latencyRate))/s \(name): p50 \(String(format2: r.latencyMicros(0.5, sorted: sorted))) µs, p90 \(String(format2: r.latencyMicros(0.9, sorted: sorted))) µs, p99 \(String(format2: r.latencyMicros(0.99, sorted: sorted))) µs, p99.9 \(String(format2: r.latencyMicros(0.999, sorted: sorted))) µs")
            }

            if memoryCheckouts > 0 {
                defer { try? FileManager.default.removeItem(atPath: tmp.path + "-m") }
                let fresh = try ThroughputBenchmark.memoryDaemon(
                    tmp.path + "-m", hwm: hwm, maxCheckouts: memoryCheckouts * 2,
                    ["--max-subscribers", "4", "--subscriber-memory", "4294967296"])
                defer { fresh.stop() }
                let driver = try LoadDriver(ingest: fresh.ingest, publish: fresh.publish, target: .daemon)
                try driver.synchronize()
                var warm = (0..<1000).map { i in
                    FloodGenerator.wrap(#"{"event":"onCheckoutStarted"}"#, checkoutID: "warm-\(i)", sdk: "shopify",
                                        platform: "android", eventNumber: i, runID: "warm", expected: .start)
                }
                _ = try driver.run(&warm, rate: nil, expected: { $0 })
                let before = ThroughputBenchmark.rssKilobytes(fresh.pid)
                var starts = (0..<memoryCheckouts).map { i in
                    FloodGenerator.wrap(#"{"event":"onCheckoutStarted"}"#, checkoutID: "m-\(i)", sdk: "shopify",
                                        platform: "android", eventNumber: i, runID: "mem", expected: .start)
                }
                let r = try driver.run(&starts, rate: nil, expected: { $0 })
                DaemonMemory.settle()
                let after = ThroughputBenchmark.rssKilobytes(fresh.pid)
                let perCheckout = Double(after - before) * 1024 / Double(max(1, r.received))
                say("memory: RSS \(before) kB → \(after) kB over \(r.received) distinct checkouts: \(String(format2: perCheckout)) bytes per tracked checkout")
            }
            if memoryMixCheckouts > 0 { try measureMixMemory(in: tmp.path + "-x", hwm: hwm, say: say) }
            try abuse.run(in: tmp)
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus bench: \(error)\n")
            return 1
        }
    }

    /// A fresh daemon for a memory run: ephemeral ports, `dataDir`, room for `maxCheckouts`, and
    /// `extra` flags.
    private static func memoryDaemon(_ dataDir: String, hwm: String, maxCheckouts: Int, _ extra: [String] = []) throws -> BusProcess {
        try BusProcess("checkoutbusd", [
            "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*", "--data-dir", dataDir,
            "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*",
            "--publish-hwm", hwm, "--log-level", "warning", "--max-checkouts", String(maxCheckouts),
        ] + extra)
    }

    /// Memory per tracked checkout on flood's realistic mix (starts, updates and suppressed
    /// repeats, completes and repeated completes, failures, dismissals: what a checkout leaves
    /// behind in the state table, idempotency key included): a fresh daemon takes a warm-up mix of
    /// `memoryMixCheckouts` checkouts (what a daemon allocates once, its queues and batches, is not
    /// counted), then as many new ones; the growth of its resident memory over the second, per
    /// checkout it tracks more, and its state table's own bytes per tracked checkout (`/metrics`).
    private func measureMixMemory(in dataDir: String, hwm: String, say: (String) -> Void) throws {
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let daemon = try ThroughputBenchmark.memoryDaemon(dataDir, hwm: hwm, maxCheckouts: memoryMixCheckouts * 3)
        defer { daemon.stop() }
        guard let metrics = daemon.ready["metrics"] as? String else { throw ToolError("the daemon's ready line names no metrics address") }
        let driver = try LoadDriver(ingest: daemon.ingest, publish: daemon.publish, target: .daemon)
        try driver.synchronize()
        func send(seed: UInt64, runID: String) throws -> Int {
            var stream = FloodGenerator.Stream(FloodGenerator(checkouts: memoryMixCheckouts, seed: seed, runID: runID), producer: 0, of: 1)
            var sent = 0
            while true {
                var chunk: [FloodGenerator.Event] = []
                while chunk.count < 50_000, let e = stream.next() { chunk.append(e) }
                if chunk.isEmpty { return sent }
                let published = chunk.reduce(0) { $0 + ($1.expected == nil ? 0 : 1) }
                let r = try driver.run(&chunk, rate: nil, expected: { _ in published })
                guard r.received >= published else {
                    throw ToolError("memory run: \(published - r.received) of \(published) envelopes did not arrive")
                }
                sent += chunk.count
            }
        }
        _ = try send(seed: 1, runID: "mixwarm")
        DaemonMemory.settle()
        let before = try DaemonMemory.read(metrics)
        let events = try send(seed: 2, runID: "mix")
        DaemonMemory.settle()
        let growth = DaemonMemory.Growth(before: before, after: try DaemonMemory.read(metrics))
        let resident = growth.bytesPerCheckout.map { String(format2: $0) } ?? "-"
        let state = growth.stateBytesPerCheckout.map { String(format2: $0) } ?? "-"
        say("memory, realistic mix: \(growth.after.trackedCheckouts - growth.before.trackedCheckouts) more checkouts tracked "
            + "(\(events) events of flood's mix, after a warm-up of as many): \(resident) resident bytes per tracked checkout more; "
            + "state table \(state) bytes per tracked checkout")
    }

    /// CPU seconds, user and system, that process `pid` has used in all its threads
    /// (`/proc/PID/stat` fields 14 and 15, in clock ticks).
    package static func cpuSeconds(_ pid: Int32) -> Double {
        (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)).flatMap(procStat)?.cpuSeconds ?? 0
    }

    /// A `/proc/…/stat` line's command name (field 2) and CPU seconds, user and system (fields
    /// 14 and 15, in clock ticks).
    package static func procStat(_ text: String) -> (command: String, cpuSeconds: Double)? {
        guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")") else { return nil }
        // After the command's closing parenthesis: field 3 (state) onwards.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (String(text[text.index(after: open)..<close]), (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// Sends `events` fresh snapshots through `target` with a new driver and waits for all of them.
    /// - Returns: what the driver measured, and the CPU seconds the target and this process (the
    ///   load driver) used while it ran.
    private func drive(_ target: BusProcess, isDaemon: Bool, events: Int, run: String, rate: Double?) throws
        -> (result: LoadDriver.Result, targetCPU: Double, driverCPU: Double)
    {
        var batch = ThroughputBenchmark.snapshots(events, run: run)
        let driver = try LoadDriver(ingest: target.ingest, publish: target.publish,
                                    target: isDaemon ? .daemon : .rawForwarder, sendHighWaterMark: producerQueue)
        try driver.synchronize()
        let (target0, self0) = (ThroughputBenchmark.cpuSeconds(target.pid), ThroughputBenchmark.cpuSeconds(getpid()))
        let r = try driver.run(&batch, rate: rate, expected: { _ in events })
        return (r, ThroughputBenchmark.cpuSeconds(target.pid) - target0, ThroughputBenchmark.cpuSeconds(getpid()) - self0)
    }

    package static func median(_ xs: [Double]) -> Double {
        let s = xs.sorted()
        guard !s.isEmpty else { return 0 }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}

