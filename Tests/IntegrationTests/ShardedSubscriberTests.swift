import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import CheckoutBusCore
import Foundation
import SQLite
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Three `checkoutbusd --shard I/3` on loopback. The test routes every event to its owner itself
/// (`ShardMap.owner`), one `checkoutbus send --to` per shard, so these tests exercise only the
/// subscriber side.
private final class SubscribedShards {
    let daemons: [DaemonProcess]
    let directory: URL

    init(count: Int = 3, extra: [String] = ["--heartbeat-ms", "200"]) throws {
        daemons = try (0..<count).map { try DaemonProcess(["--shard", "\($0)/\(count)"] + extra) }
        directory = daemons[0].dataDirectory.deletingLastPathComponent()
    }

    var count: Int { daemons.count }
    var publishList: String { daemons.map(\.publish).joined(separator: ",") }
    var controlList: String { daemons.map(\.control).joined(separator: ",") }

    /// The events each shard owns, in generated order (which keeps each checkout's order).
    func partition(_ events: [FloodGenerator.Event]) -> [[FloodGenerator.Event]] {
        var out = [[FloodGenerator.Event]](repeating: [], count: count)
        for e in events { out[ShardMap.owner(of: e.checkoutID, count: count)].append(e) }
        return out
    }

    /// Starts one `checkoutbus send --to <shard's ingest> FILE` per shard, in the background.
    func startSending(_ events: [FloodGenerator.Event], name: String) throws -> [Process] {
        try partition(events).enumerated().map { shard, owned in
            let file = directory.appendingPathComponent("\(name)-\(shard).jsonl")
            var bytes: [UInt8] = []
            for e in owned {
                bytes += e.bytes
                bytes.append(0x0A)
            }
            try Data(bytes).write(to: file)
            let p = Process()
            p.executableURL = Products.url("checkoutbus")
            p.arguments = ["send", "--to", daemons[shard].ingest, "--timeout", "30", file.path]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.start()
            return p
        }
    }

    /// Per shard, the `seq` its journal reaches once it has taken `events` on top of `base`.
    func expectedSeqs(after events: [FloodGenerator.Event], base: [Int]) -> [Int] {
        partition(events).enumerated().map { shard, owned in base[shard] + owned.filter { $0.expected != nil }.count }
    }

    func lastSeqs() throws -> [Int] {
        try daemons.map { try #require(try ControlClient($0.control).stats().int("last_seq")) }
    }

    /// Sends and waits until every shard has journaled what it was sent.
    func sendAndWait(_ events: [FloodGenerator.Event], name: String) throws -> [Int] {
        let target = expectedSeqs(after: events, base: try lastSeqs())
        for p in try startSending(events, name: name) { #expect(waitForExit(p, timeout: 60) == 0) }
        #expect(waitUntil(timeout: 30) { (try? lastSeqs()) == target }, "journaled \((try? lastSeqs()) ?? []) of \(target)")
        return target
    }

    /// Every shard's whole journal (all topics), in seq order.
    func journals() throws -> [[(seq: Int, topic: String, bytes: [UInt8])]] {
        try daemons.map { try ControlClient($0.control).replayAll(prefixes: []) }
    }
}

/// `(shard, seq)` of a recorded line.
private func shardAndSeq(_ line: [UInt8]) throws -> (shard: Int, seq: Int) {
    let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
    return (try #require(object.int("shard")), try #require(object.int("seq")))
}

/// Per shard, the `seq` of the recording's last line of that shard.
private func recordedSeqs(_ file: URL, shards: Int) -> [Int] {
    var out = [Int](repeating: 0, count: shards)
    guard let lines = try? recordedLines(file) else { return out }
    for line in lines.reversed() {
        guard let (shard, seq) = try? shardAndSeq(line), shard < shards, out[shard] == 0 else { continue }
        out[shard] = seq
        if !out.contains(0) { break }
    }
    return out
}

/// The recording holds every shard's journal exactly once, in each shard's seq order, byte for byte.
private func expectRecording(_ file: URL, matches journals: [[(seq: Int, topic: String, bytes: [UInt8])]]) throws {
    var byShard = [[[UInt8]]](repeating: [], count: journals.count)
    for line in try recordedLines(file) {
        let (shard, _) = try shardAndSeq(line)
        try #require(shard < journals.count, "a line of shard \(shard)")
        byShard[shard].append(line)
    }
    for (shard, journal) in journals.enumerated() {
        let seqs = try byShard[shard].map { try seqOf($0) }
        #expect(seqs.count == journal.count, "shard \(shard): \(seqs.count) lines for \(journal.count) journaled")
        #expect(seqs == journal.map(\.seq), "shard \(shard): every envelope once, in seq order")
        #expect(byShard[shard] == journal.map(\.bytes), "shard \(shard): byte for byte as published")
    }
}

@Suite("subscriber across shards", .serialized, .timeLimit(.minutes(5)))
struct ShardedSubscriberTests {
    static let topics = ["checkout.", "bus.deadletter"]

    @Test("tail --record on three shards with a receive HWM of 1, stalled under a flood: every gap of every shard recovered, once, in order")
    func gapsOnEveryShardAreRecovered() throws {
        let shards = try SubscribedShards(extra: ["--heartbeat-ms", "200", "--publish-hwm", "500"])
        let file = shards.directory.appendingPathComponent("sharded-hwm.jsonl")
        // A small kernel buffer too, so that a few MB per shard overflow the queues.
        let recorder = try RecorderProcess(publish: shards.publishList, control: shards.controlList, file: file,
                                           name: "sharded-hwm", extraArguments: ["--receive-hwm", "1", "--receive-buffer", "65536"])
        // Live first: a small batch, recorded from every shard.
        let warmUp = try shards.sendAndWait(FloodGenerator(checkouts: 90, seed: 71, runID: "w").makeEvents(), name: "warm")
        #expect(waitUntil(timeout: 30) { recordedSeqs(file, shards: 3) == warmUp }, "live: \(recordedSeqs(file, shards: 3))")

        // Stalled (as a descheduled consumer would be) while every shard floods: each daemon's
        // queue to it fills, and ZeroMQ drops on all three connections.
        kill(recorder.pid, SIGSTOP)
        let flood = FloodGenerator(checkouts: 6000, seed: 72, runID: "f").makeEvents()
        let target = try shards.sendAndWait(flood, name: "flood")
        kill(recorder.pid, SIGCONT)
        #expect(target.allSatisfy { $0 > 4000 }, "\(target)")
        #expect(waitUntil(timeout: 60) { recordedSeqs(file, shards: 3) == target }, "recorded \(recordedSeqs(file, shards: 3)) of \(target)")
        let summary = try recorder.stop()

        #expect((summary["missed"] ?? 0) > 0, "the stalled recorder must have noticed drops: \(summary)")
        #expect(summary["recovered"] == summary["missed"], "\(summary)")
        try expectRecording(file, matches: try shards.journals())

        // Each shard's daemon got the recorder's counts for its own connection: every one dropped.
        for (shard, daemon) in shards.daemons.enumerated() {
            let report = try #require(try ControlClient(daemon.control).stats().object("subscribers")?.object("sharded-hwm"))
            #expect((report.int("missed") ?? 0) > 0, "shard \(shard): \(report)")
            #expect(report.int("recovered") == report.int("missed"), "shard \(shard): \(report)")
            #expect(report.int("last_seq") == target[shard], "shard \(shard): \(report)")
        }
    }

    @Test("a three-shard recorder killed with SIGKILL (once mid-line) and restarted resumes from each shard's cursor: nothing lost or repeated")
    func killedRecorderResumesPerShard() throws {
        let shards = try SubscribedShards()
        let file = shards.directory.appendingPathComponent("sharded-killed.jsonl")
        var recorder = try RecorderProcess(publish: shards.publishList, control: shards.controlList, file: file,
                                           name: "sharded-killed")
        // Killed while a flood runs.
        let a = FloodGenerator(checkouts: 3000, seed: 81, runID: "a").makeEvents()
        var target = shards.expectedSeqs(after: a, base: [0, 0, 0])
        let first = try shards.startSending(a, name: "a")
        #expect(waitUntil(timeout: 30) { !recordedSeqs(file, shards: 3).contains(0) && fileSize(file) > 300_000 })
        recorder.kill9()
        for p in first { #expect(waitForExit(p, timeout: 60) == 0) }
        #expect(waitUntil(timeout: 30) { (try? shards.lastSeqs()) == target })

        // Published while no recorder runs: only the journals have it.
        target = try shards.sendAndWait(FloodGenerator(checkouts: 600, seed: 82, runID: "b").makeEvents(), name: "b")
        // As if killed in the middle of a write: half a line, no newline.
        let last = try #require(try recordedLines(file).last)
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(last.prefix(last.count / 2)))
        try handle.close()

        recorder = try RecorderProcess(publish: shards.publishList, control: shards.controlList, file: file,
                                       name: "sharded-killed")
        #expect(recorder.stderrLines.contains { $0.hasPrefix("tail: cut a torn last line") }, "\(recorder.stderrLines)")
        #expect(recorder.stderrLines.contains { $0.hasPrefix("tail: resuming") && $0.contains("0:") && $0.contains("2:") },
                "\(recorder.stderrLines)")
        let c = FloodGenerator(checkouts: 3000, seed: 83, runID: "c").makeEvents()
        target = shards.expectedSeqs(after: c, base: target)
        let third = try shards.startSending(c, name: "c")
        let before = fileSize(file)
        #expect(waitUntil(timeout: 30) { fileSize(file) > before + 300_000 })
        recorder.kill9()
        recorder = try RecorderProcess(publish: shards.publishList, control: shards.controlList, file: file,
                                       name: "sharded-killed")
        for p in third { #expect(waitForExit(p, timeout: 60) == 0) }

        #expect(waitUntil(timeout: 30) { (try? shards.lastSeqs()) == target })
        #expect(waitUntil(timeout: 60) { recordedSeqs(file, shards: 3) == target }, "recorded \(recordedSeqs(file, shards: 3)) of \(target)")
        let summary = try recorder.stop()
        #expect(summary["recovered"] == summary["missed"], "\(summary)")
        try expectRecording(file, matches: try shards.journals())
    }

    @Test("endpoints listed in the wrong order, or not all of them, are refused with a clear message before anything is handled")
    func wrongListIsRefused() throws {
        let shards = try SubscribedShards()
        _ = try shards.sendAndWait(FloodGenerator(checkouts: 60, seed: 91, runID: "o").makeEvents(), name: "o")
        let d = shards.daemons
        let cases: [(name: String, publish: [DaemonProcess], control: [DaemonProcess], messages: [String])] = [
            ("swapped", [d[1], d[0], d[2]], [d[1], d[0], d[2]],
             ["answered as shard 1/3, not shard 0/3", "answered as shard 0/3, not shard 1/3"]),
            ("one missing", [d[0], d[1]], [d[0], d[1]],
             ["answered as shard 0/3, not shard 0/2", "answered as shard 1/3, not shard 1/2"]),
            ("control swapped", [d[0], d[1], d[2]], [d[0], d[2], d[1]],
             ["(\(d[2].control)) answered as shard 2/3, not shard 1/3", "(\(d[1].control)) answered as shard 1/3, not shard 2/3"]),
        ]
        for c in cases {
            let file = shards.directory.appendingPathComponent("wrong-\(c.name.replacingOccurrences(of: " ", with: "-")).jsonl")
            let (status, output) = try runTool("checkoutbus", [
                "tail", "--from", c.publish.map(\.publish).joined(separator: ","),
                "--control", c.control.map(\.control).joined(separator: ","),
                "--since", "1", "--record", file.path, "--timeout", "20",
            ])
            #expect(status == 1, "\(c.name): \(output)")
            #expect(c.messages.contains { output.contains($0) } && output.contains("in shard order"), "\(c.name): \(output)")
            #expect(!output.contains("tail: subscribed"), "\(c.name): \(output)")
            #expect(fileSize(file) == 0, "\(c.name): nothing recorded under a wrong list")
        }
        // The workers refuse the same way (here: the analytics worker with two shards swapped).
        let report = shards.directory.appendingPathComponent("wrong-analytics.json")
        let checkpoint = shards.directory.appendingPathComponent("wrong-analytics.state")
        let (status, output) = try runTool("checkoutbus-analytics", [
            "--from", [d[0], d[2], d[1]].map(\.publish).joined(separator: ","),
            "--control", [d[0], d[2], d[1]].map(\.control).joined(separator: ","), "--report", report.path,
            "--cursor", checkpoint.path,
        ])
        #expect(status == 1, "\(output)")
        #expect(output.contains("answered as shard 2/3, not shard 1/3") || output.contains("answered as shard 1/3, not shard 2/3"),
                "\(output)")
        // A refused list leaves no checkpoint behind, so the corrected command is not told it is
        // for another generation. With a list one short, the same.
        #expect(!FileManager.default.fileExists(atPath: checkpoint.path))
        let short = try runTool("checkoutbus-analytics", [
            "--from", [d[0], d[1]].map(\.publish).joined(separator: ","),
            "--control", [d[0], d[1]].map(\.control).joined(separator: ","), "--cursor", checkpoint.path,
        ])
        #expect(short.status == 1, "\(short.output)")
        #expect(!FileManager.default.fileExists(atPath: checkpoint.path))
    }


    @Test("a subset of the shards (ids 2,0 of 3) gets exactly those shards' journals, in seq order; ids that do not match the endpoints are refused before anything is handled")
    func chosenShards() throws {
        let shards = try SubscribedShards()
        let lasts = try shards.sendAndWait(FloodGenerator(checkouts: 80, seed: 92, runID: "s").makeEvents(), name: "s")
        #expect(lasts.allSatisfy { $0 > 0 }, "\(lasts)")
        let d = shards.daemons
        func options(_ daemon: DaemonProcess) -> BusSubscriber.Options {
            var o = BusSubscriber.Options(publish: daemon.publish, control: daemon.control)
            o.liveSubscription = .everything
            return o
        }
        let subset = ShardedSubscriber(shards: [options(d[2]), options(d[0])], cursors: [MemoryCursor(), MemoryCursor()],
                                       shardIDs: [2, 0], of: 3)
        #expect(subset.shardIDs == [2, 0] && subset.shardCount == 3)
        let stop = StopSignal()
        var seen: [Int: [Int]] = [:]
        var handled = 0
        try subset.run(stop: stop, deadline: BusClock.monotonicNanoseconds() + 20_000_000_000) { envelope in
            seen[envelope.shard, default: []].append(Int(envelope.seq))
            handled += 1
            if handled == lasts[2] + lasts[0] { stop.raise() }
        }
        #expect(seen.keys.sorted() == [0, 2])
        #expect(seen[2] == Array(1...lasts[2]), "shard 2")
        #expect(seen[0] == Array(1...lasts[0]), "shard 0")

        // Shard 0's endpoints said to be shard 1 of 3: refused, the handler never called, the cursor unmoved.
        let cursor = MemoryCursor()
        let wrong = ShardedSubscriber(shards: [options(d[0])], cursors: [cursor], shardIDs: [1], of: 3)
        var handledWrong = 0
        do {
            try wrong.run(stop: StopSignal(), deadline: BusClock.monotonicNanoseconds() + 20_000_000_000) { _ in handledWrong += 1 }
            Issue.record("shard 0 taken for shard 1 was not refused")
        } catch {
            let text = "\(error)"
            #expect(text.contains("the endpoint at position 0 of 1 (")
                        && text.contains("answered as shard 0/3, not shard 1/3, which the shard ids (1) put at position 0"), "\(text)")
        }
        #expect(handledWrong == 0 && cursor.seq == 0)
    }

    @Test("examples/analytics_worker.py on three shards: every complete counted once, each with its own shard",
          .enabled(if: PyZMQSubscriberTests.pythonWithZMQ != nil, "python3 with pyzmq is not installed"))
    func pythonAnalyticsOnThreeShards() throws {
        let shards = try SubscribedShards()
        let state = shards.directory.appendingPathComponent("analytics-py")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let worker = try PyZMQSubscriberTests.startAnalyticsWorker(publish: shards.publishList,
                                                                   control: shards.controlList, state: state)
        defer { worker.kill9() }
        _ = try shards.sendAndWait(FloodGenerator(checkouts: 60, seed: 121, runID: "p").makeEvents(), name: "python")
        // What the worker must count: each shard's completes that are not repeats.
        var expected: [(shard: Int, seq: Int)] = []
        for (shard, journal) in try shards.journals().enumerated() {
            for record in journal where record.topic == "checkout.complete" {
                let envelope = try #require(try JSONSerialization.jsonObject(with: Data(record.bytes)) as? [String: Any])
                if envelope.bool("repeat") == false { expected.append((shard, record.seq)) }
            }
        }
        var printed: [[String: Any]] = []
        while printed.count < expected.count, let line = worker.stdout.readLine(timeout: 30) {
            printed.append(try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]))
        }
        #expect(printed.count == expected.count, "every complete of every shard")
        for e in printed {
            let shard = try #require(e.int("shard"))
            let id = try #require(e.string("checkout_id"))
            #expect(ShardMap.owner(of: id, count: 3) == shard, "\(id) printed as shard \(shard)")
        }
        for shard in 0..<3 {
            let seqs = printed.filter { $0.int("shard") == shard }.compactMap { $0.int("seq") }
            #expect(seqs == expected.filter { $0.shard == shard }.map(\.seq), "shard \(shard) once each, in its seq order")
        }
    }
}

@Suite("workers across shards", .serialized, .timeLimit(.minutes(5)))
struct ShardedWorkerTests {
    @Test("the fulfilment worker on three shards, killed with SIGKILL three times mid-flood: one order row per completed checkout, one cursor row per shard")
    func fulfilmentAcrossShards() throws {
        let shards = try SubscribedShards()
        let database = shards.directory.appendingPathComponent("sharded-orders.sqlite")
        var worker: FulfilProcess? = try FulfilProcess(publish: shards.publishList, control: shards.controlList, database: database)
        let events = FloodGenerator(checkouts: 4500, seed: 101, runID: "o").makeEvents()
        let senders = try shards.startSending(events, name: "orders")
        let completed = Set(events.filter { $0.expected == .complete }.map(\.checkoutID)).count
        var killsMidFlood = 0
        for round in 1...3 {
            let before = orderCount(database)
            // Progress since the last kill — or, on a fast machine, every order already in.
            #expect(waitUntil(30) { orderCount(database) > before + 50 || orderCount(database) >= completed },
                    "round \(round): no progress")
            if orderCount(database) < completed { killsMidFlood += 1 }
            worker?.kill9()
            worker = try FulfilProcess(publish: shards.publishList, control: shards.controlList, database: database)
        }
        #expect(killsMidFlood >= 1, "no kill landed while orders were still being written")
        for p in senders { #expect(waitForExit(p, timeout: 60) == 0) }
        let target = shards.expectedSeqs(after: events, base: [0, 0, 0])
        #expect(waitUntil(timeout: 30) { (try? shards.lastSeqs()) == target })

        let expectedOrders = Set(events.filter { $0.expected == .complete }.map(\.checkoutID))
        #expect(expectedOrders.count > 900)
        // Each shard's last complete or fail: where its cursor row must end.
        var lastOrderSeq: [Int] = []
        var journaledKeys = Set<String>()
        for daemon in shards.daemons {
            let records = try ControlClient(daemon.control).replayAll(prefixes: ["checkout.complete", "checkout.fail"])
            lastOrderSeq.append(records.last?.seq ?? 0)
            for r in records where r.topic == "checkout.complete" {
                let envelope = try #require(try JSONSerialization.jsonObject(with: Data(r.bytes)) as? [String: Any])
                journaledKeys.insert(try #require(envelope.string("idempotency_key")))
            }
        }
        func cursors() -> [String: Int64] {
            guard let db = try? SQLiteDatabase(path: database.path),
                let q = try? db.prepare("SELECT name, seq FROM subscriber_cursor")
            else { return [:] }
            var out: [String: Int64] = [:]
            while (try? q.step()) == true { out[q.text(0) ?? ""] = q.int64(1) ?? 0 }
            return out
        }
        let expectedCursors: [String: Int64] = [
            "fulfil.0-of-3": Int64(lastOrderSeq[0]),
            "fulfil.1-of-3": Int64(lastOrderSeq[1]),
            "fulfil.2-of-3": Int64(lastOrderSeq[2]),
        ]
        #expect(waitUntil(60) { cursors() == expectedCursors }, "cursor rows \(cursors()), journals end at \(lastOrderSeq)")
        let rows = try readOrders(database)
        #expect(rows.count == expectedOrders.count, "one row per completed checkout, no more, no fewer")
        #expect(Set(rows.map(\.key)).count == rows.count)
        #expect(Set(rows.map(\.key)) == journaledKeys)
        #expect(Set(rows.map(\.checkoutID)) == expectedOrders)
        worker?.process.terminate()
        #expect(waitForExit(worker!.process, timeout: 20) == 0)
    }

    @Test("the analytics worker on three shards, killed with SIGKILL mid-flood: totals match the generator; the checkpoint keeps one seq per shard")
    func analyticsAcrossShards() throws {
        let shards = try SubscribedShards()
        let state = shards.directory.appendingPathComponent("sharded-analytics.state")
        let report = shards.directory.appendingPathComponent("sharded-analytics.json")
        let extra = ["--checkpoint-events", "500"]
        var worker = try AnalyticsProcess(publish: shards.publishList, control: shards.controlList, cursor: state,
                                          report: report, extraArguments: extra)
        let events = FloodGenerator(checkouts: 3000, seed: 111, runID: "n").makeEvents()
        let senders = try shards.startSending(events, name: "analytics")
        #expect(waitUntil(timeout: 30) { reportedSeq(report) >= 2_000 })
        worker.kill9()
        worker = try AnalyticsProcess(publish: shards.publishList, control: shards.controlList, cursor: state,
                                      report: report, extraArguments: extra)
        for p in senders { #expect(waitForExit(p, timeout: 60) == 0) }
        let target = shards.expectedSeqs(after: events, base: [0, 0, 0])
        #expect(waitUntil(timeout: 30) { (try? shards.lastSeqs()) == target })
        #expect(waitUntil(timeout: 40) { ((try? readReport(report))?["shard_seqs"] as? [Int]) == target })
        #expect(worker.stop() == 0)

        let final = try readReport(report)
        #expect(final["shard_seqs"] as? [Int] == target)
        #expect(final.int("last_seq") == target.reduce(0, +))
        let expected = try ExpectedFunnel(generated: events)
        let funnel = try #require(final.object("funnel"))
        for (name, value) in expected.counts.sorted(by: { $0.key < $1.key }) {
            #expect(funnel.int(name) == value, "funnel.\(name): reported \(funnel.int(name) ?? -1), expected \(value)")
        }
        #expect(funnel.int("events") == target.reduce(0, +), "each envelope of each shard counted once")
        #expect(final.object("failed_by_code")?.mapValues { ($0 as! NSNumber).intValue } == expected.failedByCode)
        var revenue: [String: [Int]] = [:]
        for (currency, value) in final.object("revenue") ?? [:] {
            let r = value as! [String: Any]
            revenue[currency] = [r.int("orders")!, r.int("total")!]
        }
        #expect(revenue == expected.revenue.mapValues { [$0.orders, $0.total] })

        // The checkpoint holds every shard's position.
        let checkpoint = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: state)) as? [String: Any])
        #expect(checkpoint["shard_seqs"] as? [Int] == target)
        #expect(checkpoint.int("seq") == target[0])
    }
}
