import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// flood as a load test at scale, against the real daemon: many connections, acknowledged
/// producers, several subscribers, interrupted runs, and the run's timeline as JSON lines and as
/// an HTML page that a real browser draws. No figure is asserted, only what must hold at any speed.
@Suite("flood at scale", .serialized, .timeLimit(.minutes(5)))
struct FloodScaleTests {
    @Test("--producers 4 --subscribers 3: every subscriber receives exactly what the generator expects")
    func producersAndSubscribers() throws {
        let daemon = try DaemonProcess()
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "3000",
                                       "--seed", "5", "--producers", "4", "--subscribers", "3"])
        #expect(report.bool("ok") == true)
        #expect(report.int("producers") == 4)
        let expected = try #require(report.int("expected_published"))
        let perSubscriber = try #require(report["received_by_subscriber"] as? [NSNumber]).map(\.intValue)
        #expect(perSubscriber == [expected, expected, expected])
        #expect(report.int("suppressed") == report.int("expected_suppressed"))
        // The daemon saw every event once: four connections, no duplicate event ids.
        let counters = try #require(try ControlClient(daemon.control).stats()["counters"] as? [String: Any])
        #expect(counters.int("received") == report.int("sent"))
    }

    @Test("--acked: every event acknowledged, with acknowledgement latency percentiles")
    func acknowledgedProducers() throws {
        let daemon = try DaemonProcess()
        let report = try floodReport(["--acked", "--to", daemon.ingestAcked, "--from", daemon.publish,
                                       "--checkouts", "1500", "--producers", "2", "--window", "200"])
        #expect(report.bool("ok") == true)
        #expect(report.bool("acked") == true)
        let acks = try #require(report.object("acks"))
        #expect(acks.int("acked") == report.int("sent"))
        #expect(acks.int("rejected") == 0)
        #expect(acks.int("unanswered") == 0)
        let ackLatency = try #require(report.object("ack_latency_us"))
        #expect((ackLatency["p50"] as? Double ?? 0) > 0)
        #expect((ackLatency["p99"] as? Double ?? 0) >= (ackLatency["p50"] as? Double ?? 0))
    }

    @Test("shards as today: several producers, each with a connection per shard, fire-and-forget and acknowledged")
    func shardedProducers() throws {
        let shards = try (0..<2).map { try DaemonProcess(["--shard", "\($0)/2"]) }
        let from = shards.map(\.publish).joined(separator: ",")
        let plain = try floodReport(["--shards", shards.map(\.ingest).joined(separator: ","), "--from", from,
                                      "--checkouts", "1500", "--producers", "3", "--subscribers", "2"])
        #expect(plain.bool("ok") == true)
        #expect(plain.int("deadletters") == 0, "no event reached a shard not owning its checkout")
        let acked = try floodReport(["--acked", "--shards", shards.map(\.ingestAcked).joined(separator: ","), "--from", from,
                                      "--checkouts", "800", "--producers", "2", "--seed", "4"])
        #expect(acked.bool("ok") == true)
        #expect(acked.object("acks")?.int("acked") == acked.int("sent"))
        let received = try shards.map { try #require(try ControlClient($0.control).stats()["counters"] as? [String: Any]).int("received") ?? 0 }
        #expect(received.allSatisfy { $0 > 0 })
        #expect(received.reduce(0, +) == (plain.int("sent") ?? 0) + (acked.int("sent") ?? 0))
    }

    @Test("flood reports its own share: CPU per event, schedule lag, who limited the run; and the daemon's histogram")
    func reportsItsOwnLimits() throws {
        let daemon = try DaemonProcess()
        let metrics = try #require(daemon.ready["metrics"] as? String)
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish, "--rate", "4000",
                                       "--count", "4000", "--metrics", metrics])
        #expect(report.bool("ok") == true)
        let tool = try #require(report.object("tool"))
        #expect((tool["cpu_us_per_event"] as? Double ?? 0) > 0)
        #expect(tool.object("send_lag_us") != nil)
        let limit = try #require(report.string("limited_by"))
        #expect(["bus", "rate", "producers", "subscriber"].contains(limit))
        #expect(report.bool("tool_limited") == (limit == "producers" || limit == "subscriber"))
        // The latency split at the daemon's received_at: both halves present.
        let split = try #require(report.object("split_ms"))
        #expect(split.object("to_daemon")?.int("p99") != nil && split.object("daemon_to_subscriber")?.int("p99") != nil)
        // The daemon's own arrival-to-publication histogram, over exactly this run's events.
        #expect(report.object("daemon_pipeline_us")?.int("count") == report.int("published"))
    }

    @Test("SIGINT and SIGTERM stop sending, wait for what is in flight and print the report so far", arguments: [SIGINT, SIGTERM])
    func interruptedRunReports(signal: Int32) throws {
        let daemon = try DaemonProcess()
        let control = try ControlClient(daemon.control)
        let flood = Process()
        flood.executableURL = Products.url("checkoutbus")
        flood.arguments = ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--rate", "3000",
                           "--duration", "120", "--json"]
        let out = Pipe()
        flood.standardOutput = out
        flood.standardError = FileHandle.nullDevice
        try flood.start()
        defer { if flood.isRunning { kill(flood.processIdentifier, SIGKILL); reap(flood) } }
        // Interrupt once the daemon has really received part of the run.
        let started = try waitUntil(timeout: 30) {
            ((try control.stats()["counters"] as? [String: Any])?.int("received") ?? 0) > 1000
        }
        #expect(started)
        kill(flood.processIdentifier, signal)
        let lines = PipeLineReader(out.fileHandleForReading).readAll(timeout: 30)
        let status = waitForExit(flood, timeout: 10)
        #expect(status == 130)
        let line = try #require(lines.last)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(report.bool("interrupted") == true)
        #expect(report.bool("ok") == false, "an interrupted run is never reported as a whole one")
        let sent = try #require(report.int("sent"))
        #expect(sent > 1000)
        #expect(sent < 3000 * 120)
        // What was in flight had its chance: everything sent is accounted for.
        #expect(report.int("published") == report.int("expected_published"))
        #expect(report.int("suppressed") == report.int("expected_suppressed"))
    }

    @Test("--timeline and --report: one line per second that adds up, and a page of charts headless Chromium draws")
    func timelineAndHTMLReport() throws {
        let daemon = try DaemonProcess()
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let timeline = dir.appendingPathComponent("timeline.jsonl")
        let html = dir.appendingPathComponent("report.html")
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish, "--rate", "3000",
                                       "--count", "7000", "--timeline", timeline.path, "--report", html.path])
        #expect(report.bool("ok") == true)
        let rows = try String(contentsOf: timeline, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(rows.count >= 2)
        #expect(rows.map { $0.int("t") } == rows.indices.map { $0 })
        #expect(rows.reduce(0) { $0 + ($1.int("sent") ?? 0) } == report.int("sent"))
        #expect(rows.reduce(0) { $0 + ($1.int("published") ?? 0) } == report.int("published"))
        #expect(rows.reduce(0) { $0 + ($1.int("suppressed") ?? 0) } == report.int("expected_suppressed"))
        #expect(rows.contains { $0["p99_us"] is Double })

        let page = try String(contentsOf: html, encoding: .utf8)
        #expect(!page.contains("<script"), "self-contained and script-free")
        #expect(!page.contains("src=\"http"))
        let drawn = try drawnCharts(page, in: dir)
        for chart in ["chart-rate", "chart-latency", "chart-tool", "chart-busy"] {
            let (paths, nonEmpty) = try #require(drawn[chart], "\(chart) missing from \(drawn)")
            #expect(paths > 0 && nonEmpty > 0, "\(chart): \(nonEmpty) of \(paths) lines drawn")
        }
        #expect(drawn["chart-rate"]?.drawn ?? 0 >= 2, "sent and published drawn")
    }

    @Test("--compare and the report: the run's command, build, host and start; p50/p99/p99.9/max; a baseline drawn dashed with ratios; round axis ticks; wrapped text")
    func compareAndReport() throws {
        let daemon = try DaemonProcess()
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let baselineRun = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--rate", "3000",
                                                      "--count", "5000", "--json"], timeout: 60)
        #expect(baselineRun.status == 0, "\(baselineRun.output)")
        let baseline = dir.appendingPathComponent("baseline.json")
        try baselineRun.output.write(to: baseline, atomically: true, encoding: .utf8)
        let old = try lastJSONObject(baselineRun.output)
        let run = try #require(old.object("run"))
        #expect(run.string("command")?.contains("flood --to") == true && run.string("build")?.hasPrefix("checkoutbus ") == true
                && run.string("host")?.contains("cores") == true && run.string("started_at")?.hasSuffix("Z") == true, "\(run)")
        #expect((old["timeline"] as? [[String: Any]])?.isEmpty == false)

        let html = dir.appendingPathComponent("compare.html")
        let compared = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--rate", "3000",
                                                   "--count", "5000", "--compare", baseline.path, "--report", html.path], timeout: 60)
        #expect(compared.status == 0 && compared.output.contains("compared    with \(baseline.path)"), "\(compared.output)")
        let page = try String(contentsOf: html, encoding: .utf8)
        for text in ["this ÷ baseline", "baseline published", "baseline p99", "p99.9", ">max<", "white-space: pre-wrap", "<th>command</th>",
                     "<th>build</th>", "<th>host</th>", "<th>started</th>"] {
            #expect(page.contains(text), "the report lacks \(text)")
        }
        #expect(page.contains("stroke-dasharray"), "the baseline is drawn dashed")
        // The rate chart's y labels are round: each a whole multiple of one step of 1, 2 or 5 × 10ⁿ.
        let chartStart = try #require(page.range(of: "id=\"chart-rate\""))
        let chartEnd = try #require(page[chartStart.upperBound...].range(of: "</svg>"))
        let rateChart = String(page[chartStart.lowerBound..<chartEnd.lowerBound])
        let labels = rateChart.components(separatedBy: "text-anchor=\"end\" fill=\"#666\">").dropFirst().compactMap { Double($0.prefix { $0 != "<" }) }
        #expect(labels.count >= 3, "\(labels)")
        if labels.count >= 2 {
            let step = labels[1] - labels[0]
            let magnitude = pow(10, floor(log10(step)))
            #expect([1.0, 2.0, 5.0].contains((step / magnitude).rounded()), "y ticks \(labels)")
            #expect(labels.allSatisfy { ($0 / step).rounded() * step == $0 }, "y ticks \(labels)")
        }
        let drawn = try drawnCharts(page, in: dir)
        #expect((drawn["chart-rate"]?.drawn ?? 0) >= 3, "sent, published and the baseline's drawn: \(drawn)")
        #expect((drawn["chart-latency"]?.drawn ?? 0) >= 4, "p50, p99, p99.9 and max (and the baseline's p99): \(drawn)")
    }

    @Test("flood --sweep: steps at fixed rates until the SLO is missed; the answer and the table; usage errors in one line")
    func sweep() throws {
        let daemon = try DaemonProcess()
        // A generous SLO: the steps go up until one misses (on a loaded host flood itself may not keep
        // a rate: that step misses, said so); the answer is the last that held, each step its own run.
        let all = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--sweep", "500:1500:500",
                                              "--slo", "p99=10s", "--step-seconds", "2", "--json"], timeout: 120)
        let sweep = try lastJSONObject(all.output)
        let run = sweep["steps"] as? [[String: Any]] ?? []
        // The climb; after a miss of the bus's the step below runs again (`again`).
        let steps = run.filter { $0.bool("again") != true }
        let again = run.filter { $0.bool("again") == true }
        try #require(!steps.isEmpty, "\(all.output)")
        #expect(steps.map { $0.int("rate") ?? 0 } == Array([500, 1000, 1500].prefix(steps.count)), "\(steps)")
        // A climb step that missed says why; before the last, only one whose second run held (noise).
        for (i, step) in steps.enumerated() where step.bool("held") == false {
            #expect(step.string("why")?.isEmpty == false, "\(step)")
            if i < steps.count - 1 {
                #expect(again.contains { $0.int("rate") == step.int("rate") && $0.bool("held") == true }, "\(run)")
            }
        }
        #expect(all.status == (sweep["answer"] is NSNull || sweep["answer"] == nil ? 1 : 0), "\(all.output)")
        if run.allSatisfy({ $0.bool("held") == true }) {
            #expect(steps.count == 3 && sweep.bool("topped") == true, "\(all.output)")
        }
        if again.isEmpty {
            #expect(sweep.int("answer") == steps.last(where: { $0.bool("held") == true })?.int("rate"))
        } else if let answer = sweep.int("answer") {
            // A miss runs again before it counts, then steps below the boundary run again: the
            // answer is a rate that held on a second run (SweepPlanTests has every path).
            #expect(again.contains { $0.int("rate") == answer && $0.bool("held") == true } || sweep.bool("topped") == true, "\(run)")
        }
        #expect(Set(run.compactMap { $0.string("run_id") }).count == run.count, "each step a run of its own")
        // One no step can hold: the first misses, the sweep stops there, exit 1. It misses on p99,
        // or — on a host loaded enough that flood cannot send 500/s itself — on flood's own limit,
        // which the sweep names as such (a CI run's did); either way there is no answer.
        let none = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--sweep", "500:1500:500",
                                               "--slo", "p99=1us", "--step-seconds", "2"], timeout: 120)
        #expect(none.status == 1 && none.output.contains("sustainable none"), "\(none.output)")
        #expect(none.output.contains("MISSED: p99") || none.output.contains("MISSED: flood itself could not keep"), "\(none.output)")
        let bad = try runTool("checkoutbus", ["flood", "--sweep", "500:1500"])
        #expect(bad.status == 2 && bad.output.contains("--sweep needs --slo"), "\(bad.output)")
    }

    @Test("a daemon killed -9 and restarted mid-run: the timeline shows the gap and the recovery")
    func timelineShowsRestart() throws {
        let first = try DaemonProcess()
        let (ingest, publish, data) = (first.ingest, first.publish, first.dataDirectory)
        let dir = data.deletingLastPathComponent()
        let timeline = dir.appendingPathComponent("restart.jsonl")
        let flood = Process()
        flood.executableURL = Products.url("checkoutbus")
        flood.arguments = ["flood", "--to", ingest, "--from", publish, "--rate", "2000", "--duration", "8",
                           "--timeline", timeline.path, "--json"]
        let out = Pipe()
        flood.standardOutput = out
        flood.standardError = FileHandle.nullDevice
        try flood.start()
        defer { if flood.isRunning { kill(flood.processIdentifier, SIGKILL); reap(flood) } }
        let control = try ControlClient(first.control)
        let running = try waitUntil(timeout: 30) {
            ((try control.stats()["counters"] as? [String: Any])?.int("received") ?? 0) > 2000
        }
        #expect(running)
        first.kill9()
        // The bus stays down for two seconds: the gap the timeline must show (not a synchronisation).
        usleep(2_000_000)
        let second = try DaemonProcess(ingest: ingest, publish: publish, dataDirectory: data)
        let lines = PipeLineReader(out.fileHandleForReading).readAll(timeout: 60)
        _ = waitForExit(flood, timeout: 10)
        _ = second
        let line = try #require(lines.last)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(report.bool("interrupted") == false)
        let rows = try String(contentsOf: timeline, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        let published = rows.map { $0.int("published") ?? 0 }
        let gap = try #require(published.indices.first { $0 > 0 && published[$0] == 0 && published[..<$0].contains { $0 > 0 } },
                               "a second with nothing published after seconds with some: \(published)")
        #expect(published[(gap + 1)...].contains { $0 > 0 }, "publishing resumed after the restart: \(published)")
        #expect((rows[gap].int("sent") ?? 0) > 0, "the producer kept sending through the gap")
    }
}

/// The last line of `output` that is a JSON object.
func lastJSONObject(_ output: String) throws -> [String: Any] {
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
        let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("no JSON object in: \(output.suffix(300))") }
    return o
}

/// Renders `page` in headless Chromium with a check appended (a copy: the page itself has no
/// script) that measures every chart's lines as laid out; returns, per chart id, how many lines
/// it has and how many have a length and a width on screen.
func drawnCharts(_ page: String, in dir: URL) throws -> [String: (paths: Int, drawn: Int)] {
    let chromium = "/usr/bin/chromium"
    try #require(FileManager.default.isExecutableFile(atPath: chromium), "Debian's chromium (scripts/install-deps)")
    let check = """
        <script>
        document.body.setAttribute('data-drawn', Array.from(document.querySelectorAll('svg.chart')).map(function (svg) {
          var paths = Array.from(svg.querySelectorAll('path.series'));
          var drawn = paths.filter(function (p) { return p.getTotalLength() > 0 && p.getBoundingClientRect().width > 0; });
          return svg.id + ':' + paths.length + ':' + drawn.length;
        }).join(' '));
        </script>
        """
    let copy = dir.appendingPathComponent("report-check.html")
    try page.replacingOccurrences(of: "</body>", with: check + "</body>").write(to: copy, atomically: true, encoding: .utf8)
    let p = Process()
    p.executableURL = URL(fileURLWithPath: chromium)
    p.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                   "--user-data-dir=\(dir.appendingPathComponent("chromium").path)", "--dump-dom", copy.absoluteString]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.start()
    let dom = PipeLineReader(out.fileHandleForReading).readAll(timeout: 60).joined(separator: "\n")
    _ = waitForExit(p, timeout: 10)
    guard let start = dom.range(of: "data-drawn=\""), let end = dom[start.upperBound...].firstIndex(of: "\"") else {
        throw HarnessError("Chromium's DOM has no data-drawn attribute: \(dom.prefix(300))")
    }
    var result: [String: (paths: Int, drawn: Int)] = [:]
    for item in dom[start.upperBound..<end].split(separator: " ") {
        let parts = item.split(separator: ":")
        guard parts.count == 3, let paths = Int(parts[1]), let drawn = Int(parts[2]) else { continue }
        result[String(parts[0])] = (paths, drawn)
    }
    return result
}

@Suite("replay at scale", .serialized, .timeLimit(.minutes(4)))
struct ReplayAtScaleTests {
    static let tour = Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl")

    @Test("--rewrite-ids 3 over two connections: three distinct, self-consistent copies of every lifecycle")
    func rewriteIDs() throws {
        let reference = try DaemonProcess()
        let once = try TailProcess(from: reference.publish, topics: ["checkout."], count: 11)
        #expect(try runTool("checkoutbus", ["replay", Self.tour.path, "--to", reference.ingest, "--flat-out"]).status == 0)
        let original = try once.envelopes()

        let daemon = try DaemonProcess()
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout."], count: 3 * original.count)
        let result = try runTool("checkoutbus", ["replay", Self.tour.path, "--to", daemon.ingest, "--flat-out",
                                                 "--rewrite-ids", "3", "--connections", "2"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("sent=39 skipped=0"))
        let got = try tail.envelopes()
        for copy in 0..<3 {
            let suffix = "~r\(copy)"
            let mine = got.filter { $0.string("checkout_id")?.hasSuffix(suffix) == true }
            // The same lifecycle, kind by kind, for every checkout: each copy is the original again.
            let kinds: [String] = mine.compactMap { $0.string("kind") }.sorted()
            let originalKinds: [String] = original.compactMap { $0.string("kind") }.sorted()
            #expect(kinds == originalKinds)
            for checkout in Set(original.compactMap { $0.string("checkout_id") }) {
                let copied: [String] = mine.filter { $0.string("checkout_id") == checkout + suffix }.compactMap { $0.string("kind") }
                let recorded: [String] = original.filter { $0.string("checkout_id") == checkout }.compactMap { $0.string("kind") }
                #expect(copied == recorded, "\(checkout)")
            }
            // Order ids rewritten with their checkout's copy, also inside the bridge's body string.
            for e in mine where e.string("kind") == "complete" {
                let key = try #require(e.string("idempotency_key"))
                #expect(key.hasSuffix(suffix), "\(key)")
                if let order = e.object("summary")?.string("order_id") { #expect(order.hasSuffix(suffix), "\(order)") }
            }
        }
        #expect(got.count == 3 * original.count)
        let eventIDs = got.compactMap { $0.string("event_id") }
        #expect(eventIDs.count >= 3)
        #expect(Set(eventIDs).count == eventIDs.count, "no event id shared by two copies")
    }

    @Test("--loop: passes with ids of their own until SIGINT, then exit 130 with the count")
    func loopUntilInterrupted() throws {
        let daemon = try DaemonProcess()
        let perPass = 2 * 11
        let tail = try TailProcess(from: daemon.publish, topics: ["checkout."], count: 3 * perPass)
        let replay = Process()
        replay.executableURL = Products.url("checkoutbus")
        replay.arguments = ["replay", Self.tour.path, "--to", daemon.ingest, "--speed", "50", "--rewrite-ids", "2", "--loop"]
        let err = Pipe()
        replay.standardError = err
        replay.standardOutput = FileHandle.nullDevice
        try replay.start()
        defer { if replay.isRunning { kill(replay.processIdentifier, SIGKILL); reap(replay) } }
        let got = try tail.envelopes()
        kill(replay.processIdentifier, SIGINT)
        let stderr = PipeLineReader(err.fileHandleForReading).readAll(timeout: 20).joined(separator: "\n")
        #expect(waitForExit(replay, timeout: 10) == 130)
        #expect(stderr.contains("sent="))
        let copies = Set(got.compactMap { $0.string("checkout_id")?.split(separator: "~").last.map(String.init) })
        #expect(copies.isSuperset(of: ["r0", "r1", "r2", "r3", "r4", "r5"]), "\(copies.sorted())")
        let eventIDs = got.compactMap { $0.string("event_id") }
        #expect(Set(eventIDs).count == eventIDs.count, "no event id sent twice")
    }
}
