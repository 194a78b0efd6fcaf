#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// `checkoutbus flood`: synthetic lifecycles against a running daemon, checked against what the
/// generator knows the daemon must publish. Not `Sendable`; runs on the calling thread.
package struct FloodCommand {
    static let to = BusOptions.to.defaulting(
        to: nil, note: "\(DefaultEndpoints.ingest); with --acked \(DefaultEndpoints.ingestAcked)").described(
        "the daemon's --ingest endpoint (with --acked its --ingest-acked endpoint), or a `checkoutbus route` front's "
            + "--listen endpoint")
    static let shards = CommandOption(
        "shards", "E0,E1,…",
        help: "route each event to the shard owning its checkout (docs/sharding.md): the shards' --ingest "
            + "(--ingest-acked) endpoints, in shard order (instead of --to)")
    static let from = BusOptions.from.described(
        "the daemon's --publish endpoint; with shards, every shard's, comma-separated (any order): the subscriber "
            + "waits for a heartbeat from each, and counts what all of them publish")
    static let checkouts = CommandOption(
        "checkouts", "N",
        help: "checkouts to generate; each is a whole lifecycle drawn from every raw family and platform spelling: "
            + "starts, updates with identical repeats (to be suppressed), completes and repeated completes, failures, "
            + "failures before start, dismissals, Primer retries. Generated as sent: any number costs the same memory",
        default: "10000")
    static let seed = CommandOption("seed", "S", help: "generator seed: the same seed, the same lifecycles", default: "1")
    static let rate = CommandOption("rate", "R", help: "events per second over all producers", defaultNote: "flat out")
    static let count = CommandOption("count", "N", help: "send at most N events")
    static let duration = CommandOption("duration", "SECONDS", help: "stop sending after this long")
    static let producers = CommandOption(
        "producers", "N",
        help: "connections sending at once, each its own thread and share of the checkouts (a checkout's events always "
            + "use one connection)", default: "1")
    static let acked = CommandOption(
        "acked", help: "send on the acknowledged ingest (DEALER) and report acknowledgement latency")
    static let window = CommandOption("window", "N", help: "events in flight per acknowledged producer (1 to 10000)",
                                      default: "1000")
    static let subscribers = CommandOption(
        "subscribers", "N", help: "subscribers, each receiving everything; every one must receive what the generator expects",
        default: "1")
    static let metrics = CommandOption(
        "metrics", "HOST:PORT",
        help: "the daemon's --metrics address: its own arrival-to-publication histogram over the run is reported beside "
            + "flood's figures")
    static let memory = CommandOption(
        "memory",
        help: "with --metrics: the daemon's resident memory and tracked checkouts before the run and after it (once "
            + "the daemon has returned its queues' memory, 2.5 s after the last event), and the growth per tracked checkout")
    static let timeline = CommandOption("timeline", "FILE", help: "one JSON object per second of the run (docs/commands.md)")
    static let report = CommandOption("report", "FILE.html", help: "the timeline as a self-contained page of SVG charts")
    static let json = CommandOption(
        "json", help: "print the report as one JSON object (with its run: command, build, host, start; and its seconds, for --compare)")
    static let compare = CommandOption(
        "compare", "OLD.json",
        help: "a run to compare with (what an earlier `flood --json` printed): its figures beside this run's, with "
            + "ratios, and its published rate and p99 drawn dashed in --report")
    static let sweepOption = CommandOption(
        "sweep", "FROM:TO[:STEP]",
        help: "find the highest rate the bus sustains within --slo: fixed-rate runs of --step-seconds each at FROM, "
            + "FROM+STEP, … TO events/s (STEP default (TO-FROM)/5), each a run of its own; climbs to the first step "
            + "that misses the SLO or loses anything twice, runs the step below again (and below that, until one holds "
            + "twice), and prints the table and the answer (exit 0 with an answer, 1 with none)")
    static let sloOption = CommandOption(
        "slo", "PERCENTILE=TIME",
        help: "with --sweep: the latency a step must hold, p50, p90, p99 or p99.9 of what the subscribers measured, in "
            + "us, ms or s (p99=5ms)")
    static let stepSecondsOption = CommandOption(
        "step-seconds", "N",
        help: "with --sweep: how long each step runs; a sweep takes none of --rate, --duration, --count, --report, "
            + "--timeline, --metrics, --compare", default: "20")

    package static let spec = CommandSpec(
        "checkoutbus flood", summary: "drive a running daemon with synthetic checkout lifecycles and check the result.",
        groups: [
            .init(nil, [to, shards, from, checkouts, seed, rate, count, duration, producers, acked, window, subscribers]),
            .init(nil, [metrics, memory, timeline, report, json, compare]),
            .init("Finding the sustainable rate:", [sweepOption, sloOption, stepSecondsOption]),
            .init("CURVE (flood's one key is used by its producers and its subscribers: list it in both directories):",
                  CurveClientKeys.options),
        ],
        notes: """
            The report gives sent, published by kind and suppressed — each against what the generator
            expects — dead letters, throughput, end-to-end latency percentiles measured by the subscribers
            (and acknowledgement latency with --acked), flood's own CPU per event, how far its producers
            fell behind their schedule and how busy its subscribers were, and who limited the run: the
            bus, the requested rate, or flood itself (then its figures describe the tool, not the bus).
            With shards the counts are the sum over every shard; a dead letter (a wrong_shard among them:
            an event that reached a shard not owning its checkout) makes the run fail.
            A live progress line goes to stderr on a terminal. SIGINT or SIGTERM stops sending, waits up
            to 2 s for what is in flight and prints the report so far, marked interrupted (exit 130).
            Exits 1 on any unexpected loss or extra.
            """)
    package static var help: String { spec.help }

    /// The run the flags describe.
    package var configuration: FloodRun.Configuration
    package var metrics: String?
    /// `--memory`: report the daemon's memory growth per tracked checkout (from `metrics`).
    package var memory = false
    package var timeline: String?
    package var htmlReport: String?
    package var json = false
    /// `--compare`: the run to set this one beside.
    package var comparePath: String?
    /// `--sweep FROM:TO[:STEP]` and `--slo`.
    package var sweep: (from: Int, to: Int, step: Int)?
    package var slo: (quantile: Double, name: String, micros: Double)?
    package var stepSeconds: Int

    /// Exit status of a run stopped by SIGINT or SIGTERM.
    package static let interruptedStatus = ToolExit.interrupted

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        let acked = args.has(Self.acked)
        var ingest = [args.value(Self.to) ?? (acked ? DefaultEndpoints.ingestAcked : DefaultEndpoints.ingest)]
        if let list = args.value(Self.shards) {
            guard !args.given(Self.to) else { throw .init("give --to (one daemon or a route) or --shards (every shard), not both") }
            ingest = try BusOptions.endpoints(list, flag: "shards")
        }
        let publish = try BusOptions.endpoints(args.string(Self.from), flag: "from", ordered: false)
        let checkouts = try args.int(Self.checkouts, in: 1...50_000_000)
        let seed = UInt64(try args.int(Self.seed, in: 0...Int.max))
        let rate = try args.optionalInt(Self.rate, in: 1...10_000_000).map(Double.init)
        let duration = try args.optionalInt(Self.duration, in: 1...86_400).map(Double.init)
        // The process id keeps two runs' event ids apart; written in seven digits so that every
        // run's ids are as long as each other's (what the daemon does per event — hashing ids,
        // state-table keys — then does not vary with the pid: `scripts/instructions-per-event`).
        let pid = String(getpid())
        let runID = "flood\(seed)-" + String(repeating: "0", count: max(0, 7 - pid.count)) + pid
        var generator = FloodGenerator(checkouts: checkouts, seed: seed, runID: runID)
        if let rate, let duration { generator.checkouts = max(checkouts, Int(rate * duration / 5) + 1) }
        configuration = FloodRun.Configuration(ingest: ingest, publish: publish, generator: generator)
        configuration.curve = try CurveClientKeys.parse(args)
        configuration.acked = acked
        configuration.rate = rate
        configuration.duration = duration
        configuration.count = try args.optionalInt(Self.count, in: 1...Int.max)
        configuration.producers = try args.int(Self.producers, in: 1...256)
        configuration.subscribers = try args.int(Self.subscribers, in: 1...64)
        configuration.window = try args.int(Self.window, in: 1...AcknowledgedProducer.Options.maxWindow)
        metrics = args.value(Self.metrics)
        memory = args.has(Self.memory)
        if memory && metrics == nil { throw .init("--memory reads the daemon's /metrics: give its address with --metrics") }
        timeline = args.value(Self.timeline)
        htmlReport = args.value(Self.report)
        json = args.has(Self.json)
        comparePath = args.value(Self.compare)
        stepSeconds = try args.int(Self.stepSecondsOption, in: 2...3600)
        if let v = args.value(Self.sweepOption) {
            let parts = v.split(separator: ":").map { Int($0) }
            guard parts.count == 2 || parts.count == 3, parts.allSatisfy({ $0 != nil && $0! > 0 && $0! <= 10_000_000 }),
                parts[0]! < parts[1]!
            else {
                throw .init("--sweep takes FROM:TO[:STEP] in events per second (1 to 10000000), FROM below TO (5000:40000:5000), got \(v)")
            }
            let step = parts.count == 3 ? parts[2]! : max(1, (parts[1]! - parts[0]!) / 5)
            sweep = (parts[0]!, parts[1]!, step)
            guard let text = args.value(Self.sloOption) else { throw .init("--sweep needs --slo, such as --slo p99=5ms") }
            slo = try FloodCommand.parseSLO(text)
            if rate != nil || duration != nil || args.given(Self.count) {
                throw .init("--sweep sets each step's rate and length: leave out --rate, --duration and --count")
            }
            if let flag = ["report", "timeline", "metrics", "compare"].first(where: { args.value($0) != nil }) ?? (memory ? "memory" : nil) {
                throw .init("--\(flag) describes one run; a sweep is several: run the answer's rate alone with --\(flag)")
            }
        } else if args.given(Self.sloOption) || args.given(Self.stepSecondsOption) {
            throw .init("--slo and --step-seconds go with --sweep")
        }
    }

    /// `--sweep`: fixed-rate steps, each a run of its own, until one misses the SLO; prints a line
    /// per step and the answer (docs/commands.md, "Finding the sustainable rate").
    private func runSweep(_ sweep: (from: Int, to: Int, step: Int), slo: (quantile: Double, name: String, micros: Double),
                          stop: StopSignal) -> Int32 {
        var steps: [(rate: Int, report: FloodReport, held: Bool, why: String, again: Bool)] = []
        let sloText = "\(slo.name) ≤ \(String(format2: slo.micros / 1000)) ms"
        if !json {
            FileHandleWriter.standardOutput("sweep       \(sweep.from)…\(sweep.to) events/s by \(sweep.step), \(stepSeconds) s a step, SLO \(sloText)\n")
        }
        /// One fixed-rate run; nil when flood itself failed.
        func step(_ rate: Int, again: Bool) -> SweepPlan.Outcome? {
            var c = configuration
            c.rate = Double(rate)
            c.duration = Double(stepSeconds)
            c.generator.checkouts = max(c.generator.checkouts, rate * stepSeconds / 3 + 1)
            c.generator.runID += "-r\(rate)" + (again ? "b" : "")
            let report: FloodReport
            do {
                let startedAt = BusClock.wallMilliseconds()
                let cpu0 = FloodCommand.cpuSeconds()
                let outcome = try FloodRun(c).run(stop: stop, progress: nil)
                var r = FloodReport(outcome: outcome, cpuSeconds: FloodCommand.cpuSeconds() - cpu0)
                r.info = FloodRunInfo(startedAt: startedAt)
                report = r
            } catch {
                FileHandleWriter.standardError("checkoutbus flood: step \(rate)/s: \(error)\n")
                return nil
            }
            let achieved = report.latency.micros(slo.quantile)
            // The outcome and its words from one decision: a loss is the bus's, whatever else.
            let why: String
            let outcome: SweepPlan.Outcome
            if report.outcome.interrupted {
                (why, outcome) = ("interrupted", .interrupted)
            } else if !report.ok {
                (why, outcome) = ("lost or extra envelopes", .missedByBus)
            } else if report.limitedBy.isTool {
                (why, outcome) = ("flood itself could not keep \(rate)/s (its limit, not the bus's: more --producers, or another host)",
                                  .missedByTool)
            } else if report.limitedBy == .bus {
                (why, outcome) = ("the bus held the producers back", .missedByBus)
            } else if achieved > slo.micros {
                (why, outcome) = ("\(slo.name) \(String(format2: achieved / 1000)) ms over the SLO", .missedByBus)
            } else {
                (why, outcome) = ("", .held)
            }
            let held = outcome == .held
            steps.append((rate, report, held, why, again))
            if !json {
                let ms: (Double) -> String = { String(format2: report.latency.micros($0) / 1000) }
                let rateText: String = (again ? "again " : "") + String(rate).leftPadding(8)
                let publishedText: String = String(Int(report.throughput)).leftPadding(8)
                let head = "  \(rateText)/s  published \(publishedText)/s  "
                let figures = "p50 \(ms(0.5)) ms  p99 \(ms(0.99)) ms  p99.9 \(ms(0.999)) ms  "
                FileHandleWriter.standardOutput(head + figures + (held ? "held" : "MISSED: " + why) + "\n")
            }
            return outcome
        }
        var plan = SweepPlan(from: sweep.from, to: sweep.to, step: sweep.step)
        while let (rate, again) = plan.next() {
            // A signal between two steps ends the plan as one during a step does.
            guard !stop.isRaised else {
                plan.record(.interrupted)
                break
            }
            guard let outcome = step(rate, again: again) else { return 1 }
            plan.record(outcome)
        }
        let answer = plan.answer
        if json {
            var w = JSONWriter(capacity: 512)
            w.append("{\"slo\":{\"percentile\":")
            w.appendString(slo.name)
            w.append(",\"us\":")
            w.appendRaw(String(format2: slo.micros))
            w.append("},\"step_seconds\":")
            w.append(int: stepSeconds)
            w.append(",\"steps\":[")
            for (i, st) in steps.enumerated() {
                if i > 0 { w.append(",") }
                w.append("{\"rate\":")
                w.append(int: st.rate)
                w.append(",\"throughput\":")
                w.append(int: Int(st.report.throughput))
                for (name, q) in [("p50_us", 0.5), ("p99_us", 0.99), ("p99_9_us", 0.999)] {
                    w.append(",")
                    w.appendString(name)
                    w.append(":")
                    w.appendRaw(String(format2: st.report.latency.micros(q)))
                }
                w.append(",\"held\":")
                w.append(bool: st.held)
                if st.again { w.append(",\"again\":true") }
                if !st.held {
                    w.append(",\"why\":")
                    w.appendString(st.why)
                }
                w.append(",\"run_id\":")
                w.appendString(st.report.outcome.configuration.generator.runID)
                w.append("}")
            }
            w.append("],\"answer\":")
            if let answer { w.append(int: answer) } else { w.append("null") }
            // True when flood's own limit ended the sweep: the answer is a floor, not the bus's boundary.
            w.append(",\"tool_limited\":")
            w.append(bool: plan.toolLimited)
            // Every step held: the answer is the top of the sweep, not a boundary found.
            w.append(",\"topped\":")
            w.append(bool: plan.topped)
            w.append(",\"confirmed\":")
            w.append(bool: plan.confirmed)
            w.append(",\"interrupted\":")
            w.append(bool: plan.interrupted)
            let info = FloodRunInfo()
            w.append(",\"run\":{\"command\":")
            w.appendString(info.command)
            w.append(",\"build\":")
            w.appendString(info.build)
            w.append("}}")
            FileHandleWriter.standardOutput(String(decoding: w.bytes, as: UTF8.self) + "\n")
        } else if let answer {
            let topped = plan.topped
            // Stopped by flood's own limit: the bus's boundary was not reached, only a floor is known.
            let toolStop = plan.toolLimited
            let floor = toolStop ? "at least " : ""
            let why = toolStop ? " (flood itself could not drive \(steps.last!.rate)/s from this host: the bus's boundary is above; "
                + "sweep from more --producers or another host to find it)" : topped ? " (the top of the sweep: it may hold more)" : ""
            let twice = plan.confirmed ? " (held twice)" : ""
            let cut = plan.interrupted ? " (interrupted: the highest step that held before the signal, not a boundary)" : ""
            FileHandleWriter.standardOutput("sustainable \(floor)\(answer) events/s with \(sloText) over \(stepSeconds) s\(twice)\(why)\(cut)\n")
        } else {
            let text: String
            if plan.interrupted {
                text = "interrupted before an answer"
            } else if plan.toolLimited {
                text = "flood itself could not drive the first step, \(sweep.from) events/s, from this host (its limit, not the bus's)"
            } else if plan.highestHeld == nil {
                text = "the first step, \(sweep.from) events/s, missed (\(steps.first?.why ?? "stopped"))"
            } else {
                text = "no step held a second time, down to \(sweep.from) events/s"
            }
            FileHandleWriter.standardOutput("sustainable none: \(text)\n")
        }
        if stop.isRaised { return FloodCommand.interruptedStatus }
        return answer == nil ? 1 : 0
    }

    /// `p99=5ms` → (0.99, "p99", 5000 µs).
    static func parseSLO(_ text: String) throws(CommandLineArguments.UsageError) -> (quantile: Double, name: String, micros: Double) {
        let sides = text.split(separator: "=", maxSplits: 1).map(String.init)
        let quantiles: [String: Double] = ["p50": 0.5, "p90": 0.9, "p99": 0.99, "p99.9": 0.999]
        guard sides.count == 2, let q = quantiles[sides[0]] else {
            throw .init("--slo takes PERCENTILE=TIME, PERCENTILE one of p50, p90, p99, p99.9 (p99=5ms), got \(text)")
        }
        let units: [(String, Double)] = [("ms", 1000), ("us", 1), ("µs", 1), ("s", 1_000_000)]
        for (unit, factor) in units where sides[1].hasSuffix(unit) {
            if let v = Double(sides[1].dropLast(unit.count)), v > 0 { return (q, sides[0], v * factor) }
        }
        throw .init("--slo: the time takes a unit, us, ms or s (p99=5ms), got \(sides[1])")
    }

    /// How long an ingest endpoint may take to answer before the flood says nobody is there.
    static let answerSeconds = 10

    package func run() -> Int32 {
        let stop = StopSignal()
        stop.trapTerminationSignals()
        // Nobody taking events at an ingest endpoint is said as `send` says it, before anything
        // is generated, not measured as a bus that publishes nothing.
        for endpoint in configuration.ingest {
            let probe = PingCommand.handshake(endpoint, type: configuration.acked ? ZMQSocketType.dealer : .push, curve: configuration.curve,
                                              timeoutSeconds: FloodCommand.answerSeconds)
            if !probe.ok {
                FileHandleWriter.standardError("checkoutbus flood: no daemon took events at \(endpoint) within \(FloodCommand.answerSeconds)s"
                    + " (\(probe.detail))" + (configuration.curve == nil ? "" : CurveClientKeys.refusalHint) + "; sent=0\n")
                return 1
            }
        }
        var baseline: FloodBaseline?
        if let comparePath {
            do { baseline = try FloodBaseline(path: comparePath) } catch {
                FileHandleWriter.standardError("checkoutbus flood: \(error)\n")
                return 1
            }
        }
        if let sweep, let slo { return runSweep(sweep, slo: slo, stop: stop) }
        do {
            let startedAt = BusClock.wallMilliseconds()
            let flood = try FloodRun(configuration)
            let before = try metrics.map { try FloodCommand.daemonHistogram($0) }
            let memoryBefore = try memory ? metrics.map { try DaemonMemory.read($0) } : nil
            let cpu0 = FloodCommand.cpuSeconds()
            let showProgress = isatty(2) == 1 && !json
            let outcome = try flood.run(stop: stop, progress: showProgress ? { sent, received in
                FileHandleWriter.standardError("\rflood: sent \(sent)  published \(received)   ")
            } : nil)
            let cpu = FloodCommand.cpuSeconds() - cpu0
            if showProgress { FileHandleWriter.standardError("\r\u{1B}[K") }
            var daemon: DaemonHistogram?
            if let metrics, let before {
                daemon = (try? FloodCommand.daemonHistogram(metrics)).map { $0.since(before) }
            }
            var report = FloodReport(outcome: outcome, cpuSeconds: cpu, daemonPipeline: daemon)
            if let metrics, let memoryBefore {
                DaemonMemory.settle()
                report.daemonMemory = DaemonMemory.Growth(before: memoryBefore, after: try DaemonMemory.read(metrics))
            }
            report.info = FloodRunInfo(startedAt: startedAt)
            if let timeline { try FloodTimeline(outcome).writeJSONLines(to: timeline) }
            if let htmlReport { try FloodTimeline(outcome).writeHTML(to: htmlReport, report: report, baseline: baseline) }
            var text = json ? report.json + "\n" : report.text
            if let baseline, !json {
                func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? "×" + String(format2: a / b) : "-" }
                text += "compared    with \(baseline.file) (\(baseline.build), \(baseline.startedAt)): throughput "
                    + ratio(report.throughput, baseline.throughput) + ", p50 " + ratio(report.latency.micros(0.5), baseline.p50Micros)
                    + ", p99 " + ratio(report.latency.micros(0.99), baseline.p99Micros) + ", p99.9 "
                    + ratio(report.latency.micros(0.999), baseline.p999Micros) + ", flood CPU/event "
                    + ratio(report.cpuMicrosPerEvent, baseline.cpuMicrosPerEvent) + "\n"
            }
            FileHandleWriter.standardOutput(text)
            if outcome.interrupted { return FloodCommand.interruptedStatus }
            return report.ok ? 0 : 1
        } catch {
            FileHandleWriter.standardError("checkoutbus flood: \(error)\n")
            return stop.isRaised ? FloodCommand.interruptedStatus : 1
        }
    }

    /// The daemon's pipeline histogram from its `/metrics`.
    static func daemonHistogram(_ address: String) throws -> DaemonHistogram {
        let (status, body) = try HTTPProbe.get(address, "/metrics")
        guard status == 200, let h = DaemonHistogram(metrics: body) else {
            throw ToolError("no checkoutbus_pipeline_latency_seconds histogram at http://\(address)/metrics (status \(status))")
        }
        return h
    }

    /// This process's CPU seconds so far, user and system, every thread.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}

extension FloodReport {
    /// `{"start":n,"update":n,…}` from counts indexed by ``LifecycleKind/rawValue``.
    package static func appendByKind(_ counts: [Int], to w: inout JSONWriter) {
        w.append("{")
        for k in LifecycleKind.allCases {
            if k.rawValue > 0 { w.append(",") }
            w.append("\"")
            w.append(k.name)
            w.append("\":")
            w.append(int: counts[Int(k.rawValue)])
        }
        w.append("}")
    }
}

