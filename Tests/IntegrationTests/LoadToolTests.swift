import Foundation
import Testing

import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The load tools against the real daemon: flood's generator knows what must be published, and
/// the daemon must publish exactly that; bench runs end to end (its figures are never asserted).
@Suite("flood and bench", .serialized, .timeLimit(.minutes(5)))
struct LoadToolTests {
    @Test("flood's order ids belong to their run: two runs (another seed, or the same seed again) never share one")
    func floodOrderIDsPerRun() {
        func orderIDs(_ runID: String, seed: UInt64) -> Set<String> {
            let text = FloodGenerator(checkouts: 300, seed: seed, runID: runID).makeEvents()
                .map { String(decoding: $0.bytes, as: UTF8.self) }.joined(separator: "\n")
            let pattern = try! NSRegularExpression(pattern: #"(Order/|ord-)[A-Za-z0-9-]+"#)
            let range = NSRange(text.startIndex..., in: text)
            return Set(pattern.matches(in: text, range: range).map { String(text[Range($0.range, in: text)!]) })
        }
        let first = orderIDs("flood3-100", seed: 3)
        #expect(first.count > 100)
        #expect(first.isDisjoint(with: orderIDs("flood4-101", seed: 4)))
        #expect(first.isDisjoint(with: orderIDs("flood3-102", seed: 3)))
    }

    @Test("flood: every family's lifecycles, published exactly as the generator expects")
    func floodMatchesGenerator() throws {
        let daemon = try DaemonProcess()
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish,
                                       "--checkouts", "2000", "--seed", "7"])
        #expect(report.bool("ok") == true)
        #expect(report.int("published") == report.int("expected_published"))
        #expect(report.int("suppressed") == report.int("expected_suppressed"))
        #expect((report.int("expected_suppressed") ?? 0) > 0, "the generator repeats snapshots")
        #expect(report.object("published_by_kind")?.int("complete") == report.object("expected_by_kind")?.int("complete"))
        #expect(report.int("deadletters") == 0)
        #expect((report.int("sent") ?? 0) > 8000)
    }

    @Test("a backlog's batches are published lent where they lie: counted on the stopped line, never more than were published")
    func publishedInPlace() throws {
        // Three failed writes pause ingest for 300 ms while the flood goes on sending: the backlog
        // is then read in batches of well over 32 records, the size from which envelopes are lent
        // rather than copied (JournalBatchTests "lent envelopes…" checks the rules themselves).
        let daemon = try DaemonProcess(failpoints: "journal.write=enospc@2x3")
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish,
                                       "--checkouts", "2000", "--seed", "9"])
        #expect(report.bool("ok") == true)
        #expect(report.int("published") == report.int("expected_published"))
        #expect(daemon.terminate() == 0)
        let stopped = stoppedFields(daemon.stderrText)
        let inPlace = stopped["published_in_place"].flatMap { Int($0) } ?? 0
        #expect(inPlace > 0 && inPlace <= (stopped["published"].flatMap { Int($0) } ?? 0), "\(stopped)")
    }

    @Test("flood --memory: the daemon's resident growth and its state table's bytes per tracked checkout")
    func floodMemory() throws {
        let daemon = try DaemonProcess()
        let metrics = try #require(daemon.ready["metrics"] as? String)
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "3000", "--seed", "5",
                                       "--metrics", metrics, "--memory"])
        #expect(report.bool("ok") == true)
        let memory = try #require(report.object("daemon_memory"))
        #expect((memory.int("tracked_after") ?? 0) - (memory.int("tracked_before") ?? 0) == 3000)
        #expect((memory.int("resident_bytes_after") ?? 0) > 0)
        // 41 bytes of columns per checkout and the index; a few keys and failures on top.
        let state = try #require(memory["state_bytes_per_checkout"] as? Double)
        #expect(state >= 41 && state < 120, "\(state)")
        #expect(memory["bytes_per_checkout"] is Double)
        // --memory reads /metrics: without its address it is refused before anything is sent.
        let refused = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--memory"])
        #expect(refused.status == 2)
        #expect(refused.output.contains("--memory reads the daemon's /metrics"))
    }

    @Test("--ingest-hwm 10: producers faster than the daemon are held back, never dropped")
    func smallIngestQueueHoldsProducersBack() throws {
        let daemon = try DaemonProcess(["--ingest-hwm", "10"])
        // Fire and forget, flat out: the flood's queue fills while the daemon reads ten at a time.
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish,
                                       "--checkouts", "3000", "--seed", "11"])
        #expect(report.bool("ok") == true)
        #expect(report.int("published") == report.int("expected_published"))
        let sent = try #require(report.int("sent"))
        #expect(sent > 12000)
        // Acknowledged, many in flight on one connection: every one answered.
        let lines = (0..<3000).map { #"{"checkout_id":"hwm-\#($0)","payload":{"event":"onCheckoutStarted"}}"# }
        let acked = try send(lines, to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(acked.status == 0, "\(acked.stderr)")
        #expect(acked.stderr.contains("sent=3000 acked=3000 rejected=0"))
        let counters = try #require(try ControlClient(daemon.control).stats()["counters"] as? [String: Any])
        #expect(counters.int("received") == sent + 3000)
    }

    @Test("flood at a fixed rate with a count limit stops where told and still matches")
    func floodPacedAndLimited() throws {
        let daemon = try DaemonProcess()
        let report = try floodReport(["--to", daemon.ingest, "--from", daemon.publish,
                                       "--rate", "5000", "--count", "3000"])
        #expect(report.int("sent") == 3000)
        #expect(report.bool("ok") == true)
        #expect((report.object("latency_us")?["p99"] as? Double ?? 0) > 0)
    }

    @Test("bench runs the daemon beside the raw forwarder and reports a ratio")
    func benchSmoke() throws {
        let result = try runTool("checkoutbus", ["bench", "--rounds", "1", "--events", "2000",
                                                 "--latency-events", "200", "--latency-rate", "2000",
                                                 "--memory-checkouts", "2000", "--memory-mix-checkouts", "300", "--warmup", "1",
                                                 "--daemon-args", "--fsync-ms 5 --journal-cache-bytes kernel",
                                                 "--producer-queue", "50"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("checkoutbusd --fsync-ms 5 --journal-cache-bytes kernel"))
        // A producer that blocks every fifty messages still delivers every one, to either target.
        #expect(result.output.contains("PUSH, a queue of 50"))
        #expect(result.output.contains("round 1 raw: "))
        #expect(result.output.contains("warm-up 1 bus:"))
        #expect(result.output.contains("ratio bus/raw"))
        #expect(result.output.contains("(2000/2000 received)"))
        #expect(result.output.contains("CPU per message median: bus "))
        // The daemon's CPU by thread and by stage of its pipeline.
        #expect(result.output.contains("stages, CPU per event"))
        #expect(result.output.contains("pipeline thread "))
        #expect(result.output.contains("decode "))
        #expect(result.output.contains("ZeroMQ I/O "))
        #expect(result.output.contains("bytes per tracked checkout"))
        // The realistic mix's round: 300 more checkouts after a warm-up of 300, with the state table's own figure.
        #expect(result.output.contains("memory, realistic mix: 300 more checkouts tracked"))
        #expect(result.output.contains("state table "))
    }
}

@Suite("replay", .serialized, .timeLimit(.minutes(4)))
struct ReplayTests {
    @Test("a tail --format json recording replays into another daemon as the same lifecycle")
    func replayRecordedEnvelopes() throws {
        let first = try DaemonProcess()
        let recorder = try TailProcess(from: first.publish, count: 12)
        let sample = Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl")
        try send(try String(contentsOf: sample, encoding: .utf8).split(separator: "\n").map(String.init), to: first.ingest)
        let recorded = try recorder.envelopes()
        let file = first.dataDirectory.deletingLastPathComponent().appendingPathComponent("recording.jsonl")
        let text = try recorded.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }
        try (text.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)

        let second = try DaemonProcess()
        let replayed = try TailProcess(from: second.publish, count: 11)
        let result = try runTool("checkoutbus", ["replay", file.path, "--to", second.ingest, "--flat-out"])
        #expect(result.status == 0)
        #expect(result.output.contains("sent=11 skipped=1"))
        let got = try replayed.envelopes()
        #expect(got.map { $0.string("kind") } == recorded.prefix(11).map { $0.string("kind") })
        #expect(got.map { $0.string("checkout_id") } == recorded.prefix(11).map { $0.string("checkout_id") })
        #expect(got.compactMap { $0.object("error")?.string("code") }
            == recorded.prefix(11).compactMap { $0.object("error")?.string("code") })
        #expect(got.compactMap { $0.object("error")?.bool("terminal") }
            == recorded.prefix(11).compactMap { $0.object("error")?.bool("terminal") })
        #expect(got.map { $0.object("source")?.string("sdk") } == recorded.prefix(11).map { $0.object("source")?.string("sdk") })
    }

    @Test("replay keeps the recorded pacing, divided by --speed")
    func replayPacing() throws {
        let daemon = try DaemonProcess()
        let dir = daemon.dataDirectory.deletingLastPathComponent()
        let file = dir.appendingPathComponent("paced.jsonl")
        try """
            {"checkout_id":"p-1","occurred_at":"2026-12-02T10:00:00.000Z","payload":{"event":"checkoutDidStart","checkout":{"id":"p-1"}}}
            {"checkout_id":"p-1","occurred_at":"2026-12-02T10:00:00.800Z","payload":{"event":"checkoutDidDismiss"}}

            """.write(to: file, atomically: true, encoding: .utf8)
        let tail = try TailProcess(from: daemon.publish, count: 2)
        let started = Date()
        let result = try runTool("checkoutbus", ["replay", file.path, "--to", daemon.ingest, "--speed", "2"])
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0)
        #expect(elapsed >= 0.35, "0.8 s recorded at ×2 must take at least 0.4 s, took \(elapsed)")
        #expect(try tail.envelopes().map { $0.string("kind") } == ["start", "dismiss"])
    }

    @Test("two floods at once against one daemon, with other traffic: each counts only its own run's envelopes and passes")
    func floodsSideBySide() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let floods = try [1, 2].map { seed in try startFlood(daemon, checkouts: 2000, seed: seed, rate: 5000) }
        // Someone else's events on the same bus meanwhile.
        #expect(try send((1...20).map { ErrorMapTests.fail("other-\($0)", "network_error") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        var reports: [[String: Any]] = []
        for (process, out) in floods {
            let lines = out.readAll(timeout: 120)
            #expect(waitForExit(process, timeout: 30) == 0, "\(lines)")
            if let line = lines.last, let o = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { reports.append(o) }
        }
        try #require(reports.count == 2)
        for r in reports {
            #expect(r["ok"] as? Bool == true, "\(r)")
            #expect(r["published"] as? Int == r["expected_published"] as? Int, "\(r)")
            #expect((r["run_id"] as? String)?.hasPrefix("flood") == true)
        }
        #expect(reports[0]["run_id"] as? String != reports[1]["run_id"] as? String)
        // Each saw the other's envelopes and the outside ones, and left them out.
        #expect(reports.allSatisfy { ($0["other_traffic"] as? Int ?? 0) > 0 }, "\(reports.map { $0["other_traffic"] ?? "-" })")
    }

    @Test("flood --to a port nobody listens on says so as send does, before sending, and exits 1")
    func floodToNobody() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let nobody = "tcp://127.0.0.1:\(try freeLoopbackPort())"
        let r = try runTool("checkoutbus", ["flood", "--to", nobody, "--from", daemon.publish, "--checkouts", "10"], timeout: 40)
        #expect(r.status == 1, "\(r.output)")
        #expect(r.output.contains("checkoutbus flood: no daemon took events at \(nobody) within 10s") && r.output.contains("sent=0"), "\(r.output)")
        let sent = try send([ErrorMapTests.fail("nobody-1", "network_error")], to: nobody)
        #expect(sent.status == 1 && sent.stderr.contains("no daemon took events at \(nobody) within 10s"), "\(sent.stderr)")
    }

    /// Every envelope of `daemon`'s journal, as `tail --since 1 --format json` records them.
    static func recording(_ daemon: DaemonProcess) throws -> [[String: Any]] {
        let stats = try ControlClient(daemon.control).request(#"{"op":"stats"}"#).status
        let last = try #require(stats["last_seq"] as? Int)
        let r = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control, "--since", "1",
                                            "--count", String(last), "--format", "json", "--timeout", "60"], timeout: 90)
        return r.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// What must survive a replay of each lifecycle envelope: its checkout, kind, raw family,
    /// platform, stable and raw code, terminal-ness, HTTP status, continue URL, order id and total.
    static func shape(_ e: [String: Any]) -> String {
        let source = e["source"] as? [String: Any] ?? [:], summary = e["summary"] as? [String: Any] ?? [:]
        let error = e["error"] as? [String: Any]
        return [e["checkout_id"] as? String, e["kind"] as? String, source["format"] as? String, source["platform"] as? String,
                error?["code"] as? String, error?["raw_code"] as? String, (error?["terminal"] as? Bool).map { "\($0)" },
                (error?["http_status"] as? NSNumber)?.stringValue, error?["continue_url"] as? String,
                summary["order_id"] as? String, (summary["total"] as? NSNumber)?.stringValue,
                error?["message"] as? String, e["idempotency_key"] as? String, (e["repeat"] as? Bool).map { "\($0)" },
                (e["after_complete"] as? Bool).map { "\($0)" }, canonical(e["checkout"]), canonical(e["payment"]),
        ].map { $0 ?? "-" }.joined(separator: " ")
    }

    /// A JSON value as text with sorted keys (`null` for null or absent): the snapshot and payment
    /// compared whole.
    static func canonical(_ value: Any?) -> String {
        guard let value, !(value is NSNull) else { return "null" }
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) else {
            return "unserialisable"
        }
        return String(decoding: data, as: UTF8.self)
    }

    @Test("replay of a recording sends each event in its original raw family with its platform's names: the tour, a flood and the SDK corpus come out the same")
    func replayKeepsRawShapes() throws {
        for source in ["tour", "flood", "corpus"] {
            let original = try DaemonProcess()
            defer { _ = original.terminate() }
            if source == "corpus" {
                _ = try send(try SDKCorpusTests.corpus().map(\.wrapped), to: original.ingestAcked, arguments: ["--acked"])
            } else if source == "tour" {
                let tour = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl"), encoding: .utf8)
                _ = try sendBytes(Array(tour.utf8), to: original.ingestAcked, arguments: ["--acked"])
            } else {
                let flood = try runTool("checkoutbus", ["flood", "--to", original.ingest, "--from", original.publish, "--checkouts", "300",
                                                        "--seed", "5", "--json"], timeout: 120)
                #expect(flood.status == 0, "\(flood.output)")
            }
            let recorded = try Self.recording(original).filter { $0["kind"] as? String != "deadletter" }
            let file = TestScratch.url("replay-shapes-\(UUID().uuidString).jsonl")
            try (recorded.map { String(decoding: try JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }.joined(separator: "\n") + "\n")
                .write(to: file, atomically: true, encoding: .utf8)
            let replayed = try DaemonProcess()
            defer { _ = replayed.terminate() }
            let r = try runTool("checkoutbus", ["replay", file.path, "--to", replayed.ingest, "--flat-out"], timeout: 120)
            #expect(r.status == 0, "\(r.output)")
            let control = try ControlClient(replayed.control)
            #expect(waitUntil(30) { ((try? control.request(#"{"op":"stats"}"#).status["last_seq"]) as? Int) == recorded.count })
            let again = try Self.recording(replayed)
            let (before, after) = (recorded.map(Self.shape), again.map(Self.shape))
            #expect(before.count == after.count, "\(source): \(before.count) recorded, \(after.count) after the replay")
            let differing = zip(before, after).filter { $0 != $1 }
            #expect(differing.isEmpty, "\(source): \(differing.prefix(5))")
            let families = Set(again.compactMap { ($0["source"] as? [String: Any])?["format"] as? String })
            #expect(source == "tour" || families == ["ecp", "sheet_bridge", "callback", "primer"], "\(families)")
        }
    }
}
