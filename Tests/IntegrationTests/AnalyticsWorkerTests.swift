import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import CheckoutBusCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `checkoutbus-analytics` against the real daemon and `checkoutbus flood`: its report must match
/// what the flood generator is known to produce — every funnel count, failure code and currency
/// total — exactly, across `kill -9` and restarts.
@Suite("analytics worker", .serialized, .timeLimit(.minutes(5)))
struct AnalyticsWorkerTests {
    @Test("killed with SIGKILL twice mid-flood and restarted, the report still matches the generator's totals exactly")
    func reportExactAcrossKills() throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "200"])
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let state = dir.appendingPathComponent("analytics.state")
        let report = dir.appendingPathComponent("analytics.json")
        // Small checkpoints, so each kill lands with counted-but-not-checkpointed envelopes to replay.
        let extra = ["--checkpoint-events", "700"]
        var worker = try AnalyticsProcess(daemon, cursor: state, report: report, extraArguments: extra)
        // Paced so the flood is still running through both kills (about 19,000 events, 6 s).
        let flood = try startFlood(daemon, ["--checkouts", "4000", "--seed", "31", "--rate", "3000"])
        var floodRunningAtKill: [Bool] = []
        var seqAtKill: [Int] = []
        for round in 1...2 {
            let target = round * 4_500
            let progressed = waitUntil(timeout: 40) { reportedSeq(report) >= target }
            #expect(progressed, "round \(round): the worker reported up to \(reportedSeq(report))")
            floodRunningAtKill.append(flood.isRunning)
            seqAtKill.append(reportedSeq(report))
            worker.kill9()
            worker = try AnalyticsProcess(daemon, cursor: state, report: report, extraArguments: extra)
            #expect(worker.stderrText.contains("resuming from checkpoint"), "\(worker.stderrText)")
        }
        #expect(floodRunningAtKill == [true, true], "the kills should land during the flood (at seq \(seqAtKill))")
        #expect(waitForExit(flood, timeout: 60) == 0, "the flood saw what it expected")

        let probe = try ControlClient(daemon.control)
        let lastSeq = try #require(try probe.stats().int("last_seq"))
        let caughtUp = waitUntil(timeout: 40) { reportedSeq(report) >= lastSeq }
        #expect(caughtUp, "reported up to \(reportedSeq(report)) of \(lastSeq)")
        #expect(worker.stop() == 0, "\(worker.stderrText)")
        #expect(worker.stderrText.contains("analytics: seq=\(lastSeq) "), "a summary on exit")

        let final = try readReport(report)
        #expect(final.int("last_seq") == lastSeq)
        let generated = FloodGenerator(checkouts: 4000, seed: 31, runID: "analytics").makeEvents()
        let expected = try ExpectedFunnel(generated: generated)
        let journal = try ExpectedFunnel(journal: try probe.replayAll(prefixes: ["checkout."]))
        // The daemon published what the generator says (so a mismatch below is the worker's).
        #expect(journal.counts == expected.counts)
        try expectReport(final, matches: expected, durationsFrom: journal, events: lastSeq)

        // The checkpoint on disk agrees: restarted on it, with nothing new, the worker reports the same.
        let again = try AnalyticsProcess(daemon, cursor: state, report: report)
        #expect(waitUntil(timeout: 10) { (try? readReport(report))?.int("last_seq") == lastSeq })
        #expect(again.stop() == 0)
        let idle = try readReport(report)
        #expect(idle.object("funnel") as NSDictionary? == final.object("funnel") as NSDictionary?)
        #expect(idle.object("revenue") as NSDictionary? == final.object("revenue") as NSDictionary?)
    }

    @Test("a link to a checkpoint is that checkpoint: a second worker on the link waits for the first's lock and refuses; the link stays a link")
    func checkpointThroughALink() throws {
        let daemon = try DaemonProcess()
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let state = dir.appendingPathComponent("analytics.state")
        let link = dir.appendingPathComponent("analytics-link.state")
        #expect(try send((0..<20).map { #"{"event_id":"lk-\#($0)","checkout_id":"lk-\#($0)","payload":{"event":"onCheckoutStarted"}}"# },
                         to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        // The first worker writes the checkpoint; then the link is made to it.
        let first = try AnalyticsProcess(daemon, cursor: state, report: dir.appendingPathComponent("first.json"))
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: state.path) })
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: state.path)
        // Before, the lock was named from the path as given: both ran on one checkpoint.
        let second = try runTool("checkoutbus-analytics", ["--cursor", link.path, "--from", daemon.publish, "--control", daemon.control,
                                                           "--report", dir.appendingPathComponent("second.json").path], timeout: 40)
        #expect(second.status != 0 && second.output.contains("in use by a running process"), "\(second.output)")
        #expect(first.stop() == 0)
        // Started on the link, it resumes the checkpoint, and its rewrites keep the link a link.
        let third = try AnalyticsProcess(daemon, cursor: link, report: dir.appendingPathComponent("third.json"))
        #expect(third.stop() == 0)
        let kind = try FileManager.default.attributesOfItem(atPath: link.path)[.type] as? FileAttributeType
        #expect(kind == .typeSymbolicLink)
    }

    @Test("a worker started after a flood catches up from the journal; stopped, it resumes after the next flood exactly")
    func catchUpAndResume() throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "200"])
        let probe = try ControlClient(daemon.control)
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let state = dir.appendingPathComponent("analytics.state")
        let report = dir.appendingPathComponent("analytics.json")

        let first = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                "--checkouts", "600", "--seed", "32"])
        #expect(first.status == 0, "\(first.output)")
        let worker = try AnalyticsProcess(daemon, cursor: state, report: report)
        let firstSeq = try #require(try probe.stats().int("last_seq"))
        #expect(waitUntil(timeout: 30) { reportedSeq(report) >= firstSeq })
        #expect(worker.stop() == 0)

        // Published while no worker runs: the restarted one takes exactly these from the journal.
        let second = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                 "--checkouts", "400", "--seed", "33"])
        #expect(second.status == 0, "\(second.output)")
        let resumed = try AnalyticsProcess(daemon, cursor: state, report: report)
        let lastSeq = try #require(try probe.stats().int("last_seq"))
        #expect(waitUntil(timeout: 30) { reportedSeq(report) >= lastSeq })
        #expect(resumed.stop() == 0)

        let generated = FloodGenerator(checkouts: 600, seed: 32, runID: "a").makeEvents()
            + FloodGenerator(checkouts: 400, seed: 33, runID: "b").makeEvents()
        let expected = try ExpectedFunnel(generated: generated)
        let journal = try ExpectedFunnel(journal: try probe.replayAll(prefixes: ["checkout."]))
        #expect(journal.counts == expected.counts)
        try expectReport(try readReport(report), matches: expected, durationsFrom: journal, events: lastSeq)
    }

    @Test("remembering only 40 checkouts (evicting under a flood), a worker killed mid-flood ends exactly where one that never stopped does")
    func evictionIsCheckpointedToo() throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "200"])
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let state = dir.appendingPathComponent("analytics.state")
        let report = dir.appendingPathComponent("killed.json")
        let extra = ["--max-checkouts", "40", "--checkpoint-events", "300"]
        var worker = try AnalyticsProcess(daemon, cursor: state, report: report, extraArguments: extra)
        let flood = try startFlood(daemon, ["--checkouts", "1500", "--seed", "34", "--rate", "1500"])
        #expect(waitUntil(timeout: 40) { reportedSeq(report) >= 4_000 })
        // Mid-flood: the flood still runs, or at least the worker is behind the journal.
        let journaled = try #require(try ControlClient(daemon.control).stats().int("last_seq"))
        #expect(flood.isRunning || reportedSeq(report) < journaled, "the kill should land during the flood")
        worker.kill9()
        worker = try AnalyticsProcess(daemon, cursor: state, report: report, extraArguments: extra)
        #expect(waitForExit(flood, timeout: 60) == 0)
        let lastSeq = try #require(try ControlClient(daemon.control).stats().int("last_seq"))
        #expect(waitUntil(timeout: 40) { reportedSeq(report) >= lastSeq })
        #expect(worker.stop() == 0)

        // The reference: no cursor, the whole journal in one go, the same memory bound.
        let reference = dir.appendingPathComponent("reference.json")
        let whole = try AnalyticsProcess(daemon, cursor: nil, report: reference, extraArguments: extra)
        #expect(waitUntil(timeout: 40) { reportedSeq(reference) >= lastSeq })
        #expect(whole.stop() == 0)

        var killed = try readReport(report)
        var straight = try readReport(reference)
        killed["generated_at"] = nil
        straight["generated_at"] = nil
        #expect((killed.object("checkouts")?.int("evicted") ?? 0) > 0, "the bound must have been reached")
        #expect(killed as NSDictionary == straight as NSDictionary, "killed: \(killed)\nstraight: \(straight)")
    }

    @Test("flags: --help documents them; a bad value or an unreadable checkpoint stops it with a clear error")
    func flags() throws {
        let help = try runTool("checkoutbus-analytics", ["--help"])
        #expect(help.status == 0)
        for flag in ["--cursor", "--report", "--interval", "--from", "--control", "--name", "--max-checkouts"] {
            #expect(help.output.contains(flag), "\(flag) missing from --help")
        }
        #expect(try runTool("checkoutbus-analytics", ["--interval", "0"]).status == 2)
        #expect(try runTool("checkoutbus-analytics", ["--bogus"]).status == 2)

        let dir = TestScratch.url("cb-analytics-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let state = dir.appendingPathComponent("state")
        try Data("{\"v\":1,\"seq\":".utf8).write(to: state)
        let refused = try runTool("checkoutbus-analytics", ["--cursor", state.path, "--control", "tcp://127.0.0.1:1",
                                                            "--from", "tcp://127.0.0.1:1"])
        #expect(refused.status == 1)
        #expect(refused.output.contains("not an analytics checkpoint"), "\(refused.output)")
    }

    @Test("a checkpoint of one daemon is refused with three shards: its seq is not shard 0's of the new generation")
    func checkpointOfAnotherShardCount() throws {
        let daemon = try DaemonProcess()
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let cursor = dir.appendingPathComponent("analytics.state")
        let report = dir.appendingPathComponent("report.json")
        let lines = shardLifecycles(checkouts: 4, run: "ac")
        #expect(try runSend(["--to", daemon.ingest], lines: lines).status == 0)
        let worker = try AnalyticsProcess(daemon, cursor: cursor, report: report)
        #expect(waitUntil(timeout: 30) { reportedSeq(report) == lines.count })
        #expect(worker.stop() == 0)
        #expect(FileManager.default.fileExists(atPath: cursor.path))

        let shards = try ShardSet(count: 3)
        let refused = try runTool("checkoutbus-analytics", [
            "--cursor", cursor.path, "--from", shards.publish,
            "--control", shards.daemons.map(\.control).joined(separator: ","),
        ])
        #expect(refused.status == 1)
        #expect(refused.output.contains("this checkpoint is for 1 shard"), "\(refused.output)")
        #expect(refused.output.contains("start a new cursor"), "\(refused.output)")
    }

    // MARK: Comparing

    private func expectReport(_ report: [String: Any], matches expected: ExpectedFunnel, durationsFrom journal: ExpectedFunnel,
                              events: Int) throws {
        let funnel = try #require(report.object("funnel"))
        for (name, value) in expected.counts.sorted(by: { $0.key < $1.key }) {
            #expect(funnel.int(name) == value, "funnel.\(name): reported \(funnel.int(name) ?? -1), expected \(value)")
        }
        #expect(funnel.int("events") == events)
        #expect(funnel.int("unreadable") == 0)
        #expect(report.object("failed_by_code")?.mapValues { ($0 as! NSNumber).intValue } == expected.failedByCode)
        #expect(report.object("failed_after_complete_by_code")?.isEmpty == true)
        var revenue: [String: [Int]] = [:]
        for (currency, value) in report.object("revenue") ?? [:] {
            let r = value as! [String: Any]
            revenue[currency] = [r.int("orders")!, r.int("total")!, r.int("orders_without_total")!]
        }
        #expect(revenue == expected.revenue.mapValues { [$0.orders, $0.total, 0] })
        let started = expected.counts["started_checkouts"]!
        let converted = expected.counts["completed_after_start"]!
        let rate = try #require(report["conversion_rate"] as? Double)
        #expect(abs(rate - Double(converted) / Double(started)) < 0.000_001)

        let ttc = try #require(report.object("time_to_complete_ms"))
        #expect(ttc.int("count") == converted)
        #expect(journal.durations.count == converted)
        #expect(ttc.int("p50") == journal.percentile(50), "p50 of \(journal.durations.count) durations")
        #expect(ttc.int("p90") == journal.percentile(90), "p90 of \(journal.durations.count) durations")
        #expect(ttc.int("max") == journal.durations.max())
    }
}

/// What the analytics report must say, computed independently of the worker (Foundation JSON,
/// plain dictionaries): from the flood generator's events, or from the daemon's journal.
struct ExpectedFunnel {
    var counts: [String: Int] = [
        "started": 0, "started_checkouts": 0, "updated": 0, "completed": 0, "repeat_completes": 0,
        "completed_after_start": 0, "completed_without_start": 0, "failed": 0, "repeat_failures": 0, "failed_after_complete": 0,
        "dismissed": 0, "abandoned": 0,
    ]
    var failedByCode: [String: Int] = [:]
    var revenue: [String: (orders: Int, total: Int)] = [:]
    /// Start-to-complete durations in ms (journal only: the daemon stamps `received_at`).
    var durations: [Int] = []

    private var started: [String: Int?] = [:]
    private var completed: Set<String> = []
    private var abandoned: Set<String> = []

    /// The stable codes of the raw spellings the flood generator sends (docs/error-codes.md);
    /// `httpError` with HTTP 410 is an expired cart.
    static let stableCodes = [
        "cart_expired": "cart_expired", "NETWORK_ERROR": "network_error", "invalid_cart": "invalid_cart",
        "web_content_process_terminated": "web_content_process_terminated", "httpError": "http_error",
        "web_view_not_supported": "web_view_not_supported", "payment-failed": "payment_failed",
        "bad-network": "network_error", "payment-cancelled": "payment_cancelled",
    ]

    /// From the generator: each event's wrapper and raw payload, for what it is expected to become.
    init(generated events: [FloodGenerator.Event]) throws {
        for event in events {
            guard let kind = event.expected else { continue }  // suppressed
            let wrapper = try #require(try JSONSerialization.jsonObject(with: Data(event.bytes)) as? [String: Any])
            let id = try #require(wrapper.string("checkout_id"))
            let payload = try #require(wrapper.object("payload"))
            switch kind {
            case .start: start(id, at: nil)
            case .update: counts["updated"]! += 1
            case .complete:
                let (currency, total) = try ExpectedFunnel.amount(payload)
                complete(id, repeat: completed.contains(id), currency: currency, total: total, at: nil)
            case .fail:
                var raw: String?
                var status: Int?
                if let error = payload.object("error") {
                    raw = error.string("code") ?? error.string("errorId")
                    status = error.int("statusCode")
                } else if let body = payload.string("body"),
                    let list = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]]
                {
                    raw = list.first?.string("code")
                }
                let rawCode = try #require(raw)
                var code = try #require(ExpectedFunnel.stableCodes[rawCode], "unknown raw code \(rawCode)")
                if code == "http_error" && status == 410 { code = "cart_expired" }
                fail(id, code: code, afterComplete: completed.contains(id))
            case .dismiss: dismiss(id)
            }
        }
    }

    /// From the daemon's journal (`checkout.` records), trusting its `repeat`/`after_complete` flags.
    init(journal records: [(seq: Int, topic: String, bytes: [UInt8])]) throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for record in records {
            let e = try #require(try JSONSerialization.jsonObject(with: Data(record.bytes)) as? [String: Any])
            let id = try #require(e.string("checkout_id"))
            let stamp = try #require(e.string("received_at"))
            let received = try #require(formatter.date(from: stamp))
            let ms = Int((received.timeIntervalSince1970 * 1000).rounded())
            switch e.string("kind") {
            case "start": start(id, at: ms)
            case "update": counts["updated"]! += 1
            case "complete":
                let summary = e.object("summary")
                complete(id, repeat: e.bool("repeat") == true, currency: summary?.string("currency") ?? "XXX",
                         total: summary?.int("total") ?? 0, at: ms)
            case "fail" where e.bool("repeat") == true:
                counts["repeat_failures"]! += 1
            case "fail":
                let code = try #require(e.object("error")?.string("code"))
                fail(id, code: code, afterComplete: e.bool("after_complete") == true)
            case "dismiss": dismiss(id)
            default: Issue.record("unexpected kind in \(record.topic)")
            }
        }
    }

    private mutating func start(_ id: String, at ms: Int?) {
        counts["started"]! += 1
        if started[id] == nil {
            started[id] = .some(ms)
            counts["started_checkouts"]! += 1
        }
    }

    private mutating func complete(_ id: String, repeat isRepeat: Bool, currency: String, total: Int, at ms: Int?) {
        if isRepeat {
            counts["repeat_completes"]! += 1
            return
        }
        counts["completed"]! += 1
        if let start = started[id], !completed.contains(id) {
            counts["completed_after_start"]! += 1
            if let start, let ms { durations.append(ms - start) }
        } else {
            counts["completed_without_start"]! += 1
        }
        completed.insert(id)
        var r = revenue[currency] ?? (0, 0)
        r.orders += 1
        r.total += total
        revenue[currency] = r
    }

    private mutating func fail(_ id: String, code: String, afterComplete: Bool) {
        counts["failed"]! += 1
        failedByCode[code, default: 0] += 1
        if afterComplete { counts["failed_after_complete"]! += 1 }
    }

    private mutating func dismiss(_ id: String) {
        counts["dismissed"]! += 1
        if !completed.contains(id) && !abandoned.contains(id) {
            abandoned.insert(id)
            counts["abandoned"]! += 1
        }
    }

    /// The currency and total (minor units) of a generated complete, from its raw payload.
    static func amount(_ payload: [String: Any]) throws -> (String, Int) {
        if let result = payload.object("paymentResult") {  // Primer: minor units
            return (try #require(result.string("currencyCode")), try #require(result.int("amount")))
        }
        if let body = payload.string("body") {  // Checkout Sheet Kit: a MoneyV2 decimal string
            let details = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let total = try #require(details.object("orderDetails")?.object("cart")?.object("price")?.object("total"))
            let amount = try #require(total.string("amount"))
            let parts = amount.split(separator: ".")
            let minor = Int(parts[0])! * 100 + (parts.count > 1 ? Int(parts[1].prefix(2))! : 0)
            return (try #require(total.string("currencyCode")), minor)
        }
        let snapshot = try #require(payload.object("params")?.object("checkout") ?? payload.object("checkout"))
        let totals = try #require(snapshot["totals"] as? [[String: Any]])
        let total = try #require(totals.first { $0.string("type") == "total" }?.int("amount"))
        return (try #require(snapshot.string("currency")), total)
    }

    /// Nearest-rank percentile of the durations, in the worker's buckets (exact below 1024 ms, else
    /// the top 10 significant bits).
    func percentile(_ per: Int) -> Int? {
        guard !durations.isEmpty else { return nil }
        let sorted = durations.map { v -> Int in
            guard v >= 1024 else { return max(0, v) }
            let shift = (63 - v.leadingZeroBitCount) - 9
            return (v >> shift) << shift
        }.sorted()
        let rank = (per * sorted.count + 99) / 100
        return sorted[max(rank, 1) - 1]
    }
}

/// A `checkoutbus-analytics` process with its stderr in a file, started and waited for until its
/// subscriptions are live (`analytics: subscribed`).
final class AnalyticsProcess {
    let process = Process()
    let stderrURL: URL

    convenience init(_ daemon: DaemonProcess, cursor: URL?, report: URL, extraArguments: [String] = []) throws {
        try self.init(publish: daemon.publish, control: daemon.control, cursor: cursor, report: report,
                      extraArguments: extraArguments)
    }

    /// `publish` and `control` may list several shards' endpoints, comma-separated.
    init(publish: String, control: String, cursor: URL?, report: URL, extraArguments: [String] = []) throws {
        stderrURL = report.deletingLastPathComponent().appendingPathComponent("analytics-\(UUID().uuidString).stderr")
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.executableURL = Products.url("checkoutbus-analytics")
        process.arguments = ["--from", publish, "--control", control, "--report", report.path,
                             "--interval", "1", "--name", "analytics-test"]
            + (cursor.map { ["--cursor", $0.path] } ?? []) + extraArguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        try process.start()
        let live = waitUntil(timeout: 30) { stderrText.contains("analytics: subscribed") || !process.isRunning }
        guard live, process.isRunning else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            reap(process)
            throw HarnessError("the analytics worker did not report its subscription; stderr: \(stderrText)")
        }
    }

    var stderrText: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        reap(process)
    }

    /// SIGTERM and wait: the worker checkpoints, writes its report and summary, and exits.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        return waitForExit(process, timeout: 20)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            reap(process)
        }
    }
}

/// The report file, parsed.
func readReport(_ url: URL) throws -> [String: Any] {
    guard let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] else {
        throw HarnessError("the report is not a JSON object")
    }
    return object
}

/// The report's `last_seq`, 0 while there is none.
func reportedSeq(_ url: URL) -> Int { (try? readReport(url))?.int("last_seq") ?? 0 }
