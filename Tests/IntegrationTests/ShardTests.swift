import CheckoutBusCore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

// Shards behind `checkoutbus route` and behind the clients' own routing (`send --shards`,
// `flood --shards`), with real processes on loopback: every checkout on its owner only, in the
// order sent, nothing lost; a shard killed with -9 and restarted in the middle of an acknowledged
// flood; input that does not decode dead-lettered on exactly one shard with its real reason.

/// N daemons, `--shard 0/N` … `--shard N-1/N`, on ephemeral ports.
final class ShardSet {
    private(set) var daemons: [DaemonProcess]

    init(count: Int) throws {
        daemons = try (0..<count).map { try DaemonProcess(["--shard", "\($0)/\(count)"]) }
    }

    var count: Int { daemons.count }
    var ingest: String { daemons.map(\.ingest).joined(separator: ",") }
    var ingestAcked: String { daemons.map(\.ingestAcked).joined(separator: ",") }
    var publish: String { daemons.map(\.publish).joined(separator: ",") }

    /// Kills shard `i` with SIGKILL and starts it again on the same data directory and endpoints,
    /// so connected producers and subscribers reconnect to it by themselves.
    func killAndRestart(_ i: Int) throws {
        daemons[i].kill9()
        try restart(i, from: daemons[i])
    }

    /// Starts shard `i` again where `old` (stopped) left off: its data directory and endpoints.
    func restart(_ i: Int, from old: DaemonProcess) throws {
        daemons[i] = try DaemonProcess(
            ["--shard", "\(i)/\(count)", "--ingest-acked", old.ingestAcked, "--control", old.control],
            ingest: old.ingest, publish: old.publish, dataDirectory: old.dataDirectory)
    }

    /// Every journaled record of shard `i`, parsed: (seq, topic, envelope).
    func journal(_ i: Int) throws -> [(Int, String, [String: Any])] {
        try ControlClient(daemons[i].control).replayAll(prefix: nil, page: 5000)
    }

    /// The sum of every shard's last seq (stats over the control socket).
    func totalLastSeq() throws -> Int {
        try daemons.reduce(0) { $0 + (try ControlClient($1.control).stats()["last_seq"] as? Int ?? 0) }
    }

    /// Waits until the shards journaled `records` in all (fire-and-forget has nothing else to wait on).
    func waitForRecords(_ records: Int, timeout: Double = 30) throws -> Bool {
        try waitUntil(timeout: timeout) { try totalLastSeq() >= records }
    }
}

/// A running `checkoutbus route` on ephemeral ports, killed when the test ends.
final class RouteProcess {
    let process = Process()
    let ready: [String: Any]
    let stderrURL: URL

    var listen: String { ready["listen"] as! String }
    var listenAcked: String { ready["listen_acked"] as! String }

    init(_ shards: ShardSet, acked: Bool = false, extraArguments: [String] = []) throws {
        stderrURL = TestScratch.url("route-\(UUID().uuidString).stderr")
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.executableURL = Products.url("checkoutbus")
        process.arguments = ["route", "--shards", shards.ingest, "--listen", "tcp://127.0.0.1:*"]
            + (acked ? ["--shards-acked", shards.ingestAcked, "--listen-acked", "tcp://127.0.0.1:*"] : [])
            + extraArguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        try process.start()
        guard let line = PipeLineReader(out.fileHandleForReading).readLine(timeout: 20),
            let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], obj.bool("ready") == true
        else {
            process.terminate()
            let text = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            throw HarnessError("route printed no ready line; stderr: \(text)")
        }
        ready = obj
    }

    var stderrText: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// SIGTERM, wait, and return the exit status with the final `msg=stopped` log line's fields.
    func stop() -> (status: Int32, counts: [String: String]) {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let status = waitForExit(process, timeout: 20)
        return (status, stoppedFields(stderrText))
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            reap(process)
        }
    }
}

/// Realistic wrapped lifecycles for `checkouts` checkouts — start, two updates with different
/// snapshots, complete with an order, dismiss — interleaved across checkouts the way concurrent
/// buyers' events are; `event_id` is `<run>-<checkout>-<step>`, so a journal shows each checkout's
/// order. Nothing in it is suppressed or dead-lettered.
func shardLifecycles(checkouts: Int, run: String) -> [String] {
    let platforms = ["ios", "android", "react_native"]
    func event(_ c: Int, _ step: Int) -> String {
        let id = "\(run)-c\(c)"
        let platform = platforms[c % 3]
        let payload: String
        switch step {
        case 0: payload = #"{"event":"onStart","checkout":{"id":"\#(id)","currency":"EUR","line_items":[{"id":"l1","quantity":1}]}}"#
        case 1, 2:
            payload = #"{"event":"onUpdate","checkout":{"id":"\#(id)","currency":"EUR","line_items":[{"id":"l1","quantity":\#(step + 1)}]}}"#
        case 3:
            payload = #"{"event":"onComplete","checkout":{"id":"\#(id)","currency":"EUR","order":{"id":"gid://shopify/Order/\#(run)-\#(c)"},"line_items":[{"id":"l1","quantity":3}]}}"#
        default: payload = #"{"event":"onDismiss"}"#
        }
        return #"{"event_id":"\#(run)-\#(c)-\#(step)","checkout_id":"\#(id)","platform":"\#(platform)","sdk":"shopify","payload":\#(payload)}"#
    }
    var lines: [String] = []
    lines.reserveCapacity(checkouts * 5)
    // Windows of 50 checkouts, their steps round-robin: each checkout's events stay in order.
    for base in stride(from: 0, to: checkouts, by: 50) {
        for step in 0..<5 {
            for c in base..<min(base + 50, checkouts) { lines.append(event(c, step)) }
        }
    }
    return lines
}

/// Checks one shard's journal: every record is a lifecycle envelope of a checkout this shard owns,
/// stamped with its shard, and each checkout's events appear in the order sent (`step` reads an
/// event's position in the sent order from its `event_id`). Violations are counted and the first
/// few shown, rather than one issue per record.
/// - Returns: the checkouts seen, with how many records each has.
func checkShardJournal(_ records: [(Int, String, [String: Any])], shard: Int, of count: Int,
                       step: (String) -> Int?) -> [String: Int] {
    var lastStep: [String: Int] = [:]
    var perCheckout: [String: Int] = [:]
    var violations: [String] = []
    for (seq, topic, envelope) in records {
        let checkout = envelope.string("checkout_id") ?? ""
        if topic == "bus.deadletter" {
            violations.append("seq \(seq) dead-lettered: \(envelope.string("reason") ?? "?") \(envelope.string("detail") ?? "")")
            continue
        }
        if envelope.int("shard") != shard { violations.append("seq \(seq) stamped shard \(envelope.int("shard") ?? -1)") }
        if ShardMap.owner(of: checkout, count: count) != shard {
            violations.append("seq \(seq): checkout \(checkout) belongs to shard \(ShardMap.owner(of: checkout, count: count))")
        }
        perCheckout[checkout, default: 0] += 1
        guard let n = envelope.string("event_id").flatMap(step) else {
            violations.append("seq \(seq): unexpected event_id \(envelope.string("event_id") ?? "nil")")
            continue
        }
        if let last = lastStep[checkout], n <= last { violations.append("\(checkout): event \(n) journaled after \(last)") }
        lastStep[checkout] = n
    }
    #expect(violations.isEmpty, "shard \(shard): \(violations.count) violation(s), first: \(violations.prefix(3))")
    return perCheckout
}

@Suite("shards behind route and the clients' routing", .serialized, .timeLimit(.minutes(4)))
struct ShardTests {
    @Test("three shards behind route under a flood: each checkout on its owner only, in order, nothing lost, a subscriber sees all")
    func routedFlood() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards)
        // flood sends through route and subscribes to every shard's publish endpoint (it waits for
        // each one's heartbeat); it checks what all of them publish against what it generated.
        let report = try floodReport(["--to", route.listen, "--from", shards.publish,
                                       "--checkouts", "2500", "--seed", "11"])
        #expect(report.bool("ok") == true)
        #expect(report.int("deadletters") == 0, "no wrong_shard: route sent every event to its owner")
        let sent = try #require(report.int("sent"))
        let published = try #require(report.int("published"))
        #expect(sent > 10_000)
        #expect(published == report.int("expected_published"))

        // The journals: every record on its checkout's owner, each checkout on one shard only, its
        // events in the order generated, and together exactly what flood counted as published.
        var owners: [String: Int] = [:]
        var journaled = 0
        for i in 0..<3 {
            let records = try shards.journal(i)
            #expect(records.count > published / 6, "shard \(i) took its share: \(records.count) of \(published)")
            journaled += records.count
            // flood's event_id is `<run>:<n>:<send time>`, n rising through each lifecycle.
            let seen = checkShardJournal(records, shard: i, of: 3) { id in
                let parts = id.split(separator: ":")
                return parts.count == 3 ? Int(parts[1]) : nil
            }
            for checkout in seen.keys {
                #expect(owners[checkout] == nil, "\(checkout) on shards \(owners[checkout] ?? -1) and \(i)")
                owners[checkout] = i
            }
        }
        #expect(journaled == published, "the journals hold exactly what was published")
        #expect(owners.count == 2500, "every generated checkout is on some shard")
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        let byShard = try #require(stopped.counts["forwarded_by_shard"]).split(separator: ",").compactMap { Int($0) }
        #expect(byShard.count == 3 && byShard.reduce(0, +) == sent, "route forwarded every event: \(stopped.counts)")
        #expect(stopped.counts["unowned"] == "0")
        #expect(stopped.counts["undelivered"] == "0")
    }

    @Test("send --shards and route: input that does not decode is dead-lettered on exactly one shard with its real reason")
    func undecodableInput() throws {
        let shards = try ShardSet(count: 3)
        let good = shardLifecycles(checkouts: 40, run: "ud")
        let bad = [#"{"event":"checkoutDidStart", broken"#, #"{"event":"onCheckoutStarted","checkout":{"currency":"EUR"}}"#]
        let reasons = ["invalid_json", "missing_checkout_id"]

        // The client routes by itself…
        let sent = try runSend(["--shards", shards.ingest], lines: good + bad)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(sent.stderr.contains("sent=\(good.count + bad.count) by_shard="), "\(sent.stderr)")
        #expect(try shards.waitForRecords(good.count + bad.count))

        // …and through route, with the same bad lines made distinct.
        let route = try RouteProcess(shards)
        let good2 = shardLifecycles(checkouts: 40, run: "ur")
        let bad2 = bad.map { $0.replacingOccurrences(of: "{\"event\"", with: "{\"n\":2,\"event\"") }
        let viaRoute = try runSend(["--to", route.listen], lines: good2 + bad2)
        #expect(viaRoute.status == 0, "\(viaRoute.stderr)")
        #expect(try shards.waitForRecords(2 * (good.count + bad.count)))
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        #expect(stopped.counts["unowned"] == "2", "\(stopped.counts)")

        var deadLetters: [(shard: Int, reason: String, raw: String)] = []
        var published = 0
        for i in 0..<3 {
            for (_, topic, envelope) in try shards.journal(i) {
                if topic == "bus.deadletter" {
                    deadLetters.append((i, envelope.string("reason") ?? "", envelope.string("raw") ?? ""))
                } else {
                    published += 1
                    #expect(ShardMap.owner(of: envelope.string("checkout_id") ?? "", count: 3) == i)
                }
            }
        }
        #expect(published == good.count + good2.count)
        #expect(!deadLetters.contains { $0.reason == "wrong_shard" })
        #expect(deadLetters.count == 4, "\(deadLetters)")
        for (line, reason) in zip(bad + bad2, reasons + reasons) {
            let matches = deadLetters.filter { $0.raw == line }
            #expect(matches.count == 1, "\(line) dead-lettered once: \(matches)")
            #expect(matches.first?.reason == reason)
            // The shard is the jump hash of the bytes' FNV-1a: the same line always lands there.
            let expected = Array(line.utf8).withUnsafeBytes { ShardMap.jump(ShardMap.fnv1a64($0), buckets: 3) }
            #expect(matches.first?.shard == expected)
        }
    }

    @Test("route's acknowledged front: each event acknowledged by its owner once on disk, the reason of a rejection relayed")
    func routedAcknowledged() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards, acked: true)
        let lines = shardLifecycles(checkouts: 300, run: "ra") + [#"{"event":"checkoutDidStart", broken"#]
        let ackLog = shards.daemons[0].dataDirectory.deletingLastPathComponent().appendingPathComponent("route.acks")
        let sent = try runSend(["--acked", "--to", route.listenAcked, "--ack-log", ackLog.path], lines: lines)
        #expect(sent.status == 1, "the broken line is rejected")
        #expect(sent.stderr.contains("sent=\(lines.count) acked=\(lines.count - 1) rejected=1"), "\(sent.stderr)")
        #expect(sent.stderr.contains("first rejection: invalid_json"), "\(sent.stderr)")

        // Each acknowledgement names a seq of the shard owning the event's checkout, holding that event.
        let journals = try (0..<3).map { i in
            Dictionary(uniqueKeysWithValues: try shards.journal(i).map { ($0.0, $0.2.string("event_id")) })
        }
        let acks = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        #expect(acks.count == lines.count - 1)
        for ack in acks {
            let parts = ack.split(separator: " ")
            let seq = try #require(Int(parts[0]))
            let eventID = String(parts[1])
            let checkout = "ra-c" + eventID.split(separator: "-")[1]
            let owner = ShardMap.owner(of: checkout, count: 3)
            #expect(journals[owner][seq] == eventID, "ack \(ack) is in shard \(owner)'s journal")
        }
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        #expect(stopped.counts["unanswered_by_shard"] == "0,0,0", "\(stopped.counts)")
    }

    @Test("flood --shards routes by itself and counts what every shard publishes")
    func floodWithShards() throws {
        let shards = try ShardSet(count: 2)
        let report = try floodReport(["--shards", shards.ingest, "--from", shards.publish,
                                       "--checkouts", "1500", "--seed", "5"])
        #expect(report.bool("ok") == true)
        #expect(report.int("deadletters") == 0)
        let counts = try (0..<2).map { try shards.journal($0).count }
        #expect(counts.allSatisfy { $0 > 0 })
        #expect(counts.reduce(0, +) == report.int("published"))
    }

    @Test("a shard down behind route: its events wait in route and reach it once it is back, nothing lost")
    func shardDownBehindRoute() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards)
        let down = shards.daemons[2]
        down.kill9()
        let lines = shardLifecycles(checkouts: 300, run: "dn")
        let sent = try runSend(["--to", route.listen], lines: lines)
        #expect(sent.status == 0, "route takes the events while a shard is down: \(sent.stderr)")
        try shards.restart(2, from: down)
        #expect(try shards.waitForRecords(lines.count), "every event journaled once shard 2 is back")
        var total = 0
        for i in 0..<3 {
            let records = try shards.journal(i)
            #expect(!records.isEmpty)
            total += records.count
            _ = checkShardJournal(records, shard: i, of: 3) { id in
                let parts = id.split(separator: "-")
                return parts.count == 3 ? Int(parts[2]) : nil
            }
        }
        #expect(total == lines.count)
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        #expect(stopped.counts["unowned"] == "0")
    }

    @Test("route stopped while a shard is down: exits 1 within one --linger, naming that shard's possibly undelivered events")
    func stopWithShardDown() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards, extraArguments: ["--linger", "2"])
        shards.daemons[2].kill9()
        let lines = shardLifecycles(checkouts: 200, run: "sd")
        var share = [0, 0, 0]
        for c in 0..<200 { share[ShardMap.owner(of: "sd-c\(c)", count: 3)] += 5 }
        let sent = try runSend(["--to", route.listen], lines: lines)
        #expect(sent.status == 0, "\(sent.stderr)")
        // Route read everything for the live shards, so it holds shard 2's share in its queue.
        #expect(try waitUntil(timeout: 30) { try (0..<2).allSatisfy { try shards.journal($0).count == share[$0] } })
        let started = Date()
        let stopped = route.stop()
        let took = Date().timeIntervalSince(started)
        #expect(stopped.status == 1, "the linger ran out with shard 2's events queued: \(route.stderrText)")
        #expect(stopped.counts["forwarded_by_shard"] == share.map(String.init).joined(separator: ","))
        let errors = route.stderrText.split(separator: "\n").filter { $0.contains("possibly_undelivered") }
        #expect(errors.contains { $0.contains("shard=2 ") && $0.contains("up to \(share[2])") }, "\(errors)")
        // One linger (2 s) in all, not the stop's linger followed by a second one for the queues.
        #expect(took < 3.9, "route took \(took) s to stop")
    }

    @Test("route stopped in the middle of an acknowledged flood: every acknowledgement it counts reached the producer")
    func stopMidAckedFlood() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards, acked: true, extraArguments: ["--linger", "5"])
        let tmp = shards.daemons[0].dataDirectory.deletingLastPathComponent()
        let input = tmp.appendingPathComponent("stop.jsonl")
        let ackLog = tmp.appendingPathComponent("stop.acks")
        let lines = shardLifecycles(checkouts: 6000, run: "st")
        try (lines.joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let sender = Process()
        sender.executableURL = Products.url("checkoutbus")
        sender.arguments = ["send", "--acked", "--to", route.listenAcked, "--ack-log", ackLog.path, "--timeout", "3",
                            "--window", "2000", input.path]
        let senderErr = Pipe()
        sender.standardError = senderErr
        try sender.start()
        #expect(try shards.waitForRecords(2_000), "the flood is under way")
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        waitForExit(sender, timeout: 60)
        let acks = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        #expect(acks.count < lines.count, "the stop came before the end of the flood")
        func sum(_ key: String) -> Int {
            (stopped.counts[key] ?? "").split(separator: ",").compactMap { Int($0) }.reduce(0, +)
        }
        // Nothing read after the stop was forwarded without its reply reaching the producer.
        #expect(sum("acknowledged_by_shard") == acks.count, "\(stopped.counts), producer got \(acks.count)")
        #expect(sum("forwarded_acked_by_shard") == acks.count, "\(stopped.counts)")
        #expect(sum("unanswered_by_shard") == 0, "\(stopped.counts)")
    }

    @Test("a tail --record file of one daemon is refused with three shards, with or without its recorded shard count")
    func recordingOfAnotherShardCount() throws {
        let daemon = try DaemonProcess()
        let file = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("one.jsonl")
        let lines = shardLifecycles(checkouts: 2, run: "tr")
        #expect(try runSend(["--to", daemon.ingest], lines: lines).status == 0)
        let recorded = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control,
                                                   "--since", "1", "--count", "\(lines.count)", "--record", file.path,
                                                   "--timeout", "20"])
        #expect(recorded.status == 0, "\(recorded.output)")
        let countFile = URL(fileURLWithPath: file.path + ".shards")
        #expect(try String(contentsOf: countFile, encoding: .utf8) == "1\n")

        let shards = try ShardSet(count: 3)
        let arguments = ["tail", "--from", shards.publish, "--control", shards.daemons.map(\.control).joined(separator: ","),
                         "--record", file.path, "--timeout", "20", "--count", "1"]
        let refused = try runTool("checkoutbus", arguments)
        #expect(refused.status == 1)
        #expect(refused.output.contains("is a recording of 1 shard"), "\(refused.output)")
        // Made before the shard count was recorded: shard 0's lines alone are not taken as shard 0's of 3.
        try FileManager.default.removeItem(at: countFile)
        let legacy = try runTool("checkoutbus", arguments)
        #expect(legacy.status == 1)
        #expect(legacy.output.contains("holds envelopes of shard 0 only"), "\(legacy.output)")
    }

    @Test("route stopped right after fire-and-forget events with every shard up: exits 0, every event journaled")
    func stopWithShardsUp() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards, extraArguments: ["--linger", "5"])
        let lines = shardLifecycles(checkouts: 300, run: "su")
        let sent = try runSend(["--to", route.listen], lines: lines)
        #expect(sent.status == 0, "\(sent.stderr)")
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        #expect(!route.stderrText.contains("possibly_undelivered"), "\(route.stderrText)")
        #expect(try shards.waitForRecords(lines.count), "every event journaled")
        #expect(try shards.totalLastSeq() == lines.count)
    }
}

@Suite("a shard killed with -9 and restarted in the middle of an acknowledged flood", .serialized, .timeLimit(.minutes(4)))
struct ShardRestartTests {
    @Test("kill -9 one of three shards mid-flood through send --acked --shards: every acknowledged event is in its shard's journal, its subscriber recovers by replay")
    func killOneShard() throws {
        let shards = try ShardSet(count: 3)
        let tmp = shards.daemons[1].dataDirectory.deletingLastPathComponent()
        let input = tmp.appendingPathComponent("flood.jsonl")
        let ackLog = tmp.appendingPathComponent("acks.log")
        let recording = tmp.appendingPathComponent("shard1.jsonl")
        let lines = shardLifecycles(checkouts: 4000, run: "k9")
        try (lines.joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)

        // A recording subscriber of shard 1, live before the flood starts.
        let recorder = try RecorderProcess(publish: shards.daemons[1].publish, control: shards.daemons[1].control,
                                           file: recording, name: "shard1-recorder")
        // --timeout: long enough to wait through the shard's restart, which the test does not time.
        let sender = Process()
        sender.executableURL = Products.url("checkoutbus")
        sender.arguments = ["send", "--acked", "--shards", shards.ingestAcked, "--ack-log", ackLog.path,
                            "--timeout", "8", "--window", "2000", input.path]
        let senderErr = Pipe()
        sender.standardError = senderErr
        try sender.start()

        // Kill shard 1 once it journaled a good part of its share (about 6,700 events), not all.
        let control = try ControlClient(shards.daemons[1].control)
        var seen = 0
        _ = try waitUntil(timeout: 60) {
            seen = try control.stats()["last_seq"] as? Int ?? 0
            return seen >= 1_500
        }
        #expect(seen >= 1_500)
        try shards.killAndRestart(1)
        let restartedAt = try #require(shards.daemons[1].ready["last_seq"] as? Int)
        #expect(restartedAt >= seen)

        let senderStatus = waitForExit(sender, timeout: 60)
        let summary = PipeLineReader(senderErr.fileHandleForReading).readAll(timeout: 5)
        let counts = try #require(summary.first { $0.hasPrefix("sent=") }, "\(summary)")
        #expect(counts.contains("sent=\(lines.count) "), "\(summary)")
        #expect(counts.contains("rejected=0"), "no event reached a shard that does not own it: \(summary)")
        #expect(senderStatus == (counts.contains("acked=\(lines.count) ") ? 0 : 1), "\(summary)")

        // Every acknowledgement, `<shard>:<seq> <event_id>`, is in that shard's journal now.
        let journals = try (0..<3).map { try shards.journal($0) }
        let acks = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        #expect(acks.count > lines.count / 2)
        var ackedOnShard1AfterRestart = 0
        for ack in acks {
            let parts = ack.split(separator: " ")
            let position = parts[0].split(separator: ":")
            let shard = try #require(Int(position[0]))
            let seq = try #require(Int(position[1]))
            let records = journals[shard]
            #expect(seq >= 1 && seq <= records.count && records[seq - 1].0 == seq, "ack \(ack) names a journaled seq")
            guard seq >= 1 && seq <= records.count else { continue }
            #expect(records[seq - 1].2.string("event_id") == String(parts[1]), "ack \(ack)")
            if shard == 1 && seq > restartedAt { ackedOnShard1AfterRestart += 1 }
        }
        #expect(ackedOnShard1AfterRestart > 0, "the restarted shard took the rest of its share")
        for (i, records) in journals.enumerated() {
            _ = checkShardJournal(records, shard: i, of: 3) { id in
                let parts = id.split(separator: "-")
                return parts.count == 3 ? Int(parts[2]) : nil
            }
        }

        // The subscriber of shard 1 lost its connection with the shard and fetched what it missed
        // from the restarted shard's journal: its recording is that journal, seq for seq.
        let last = journals[1].count
        #expect(waitUntil(timeout: 30) { lastRecordedSeq(recording) >= last }, "the recorder caught up to \(last)")
        let summaryCounts = try recorder.stop()
        let recorded = try recordedLines(recording).map { line -> (Int, String?) in
            let obj = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            return (obj.int("seq") ?? 0, obj.string("event_id"))
        }
        #expect(recorded.map(\.0) == Array(1...last), "each envelope once, in seq order; summary \(summaryCounts)")
        #expect(recorded.map(\.1) == journals[1].map { $0.2.string("event_id") })
    }

    @Test("kill -9 a shard behind route's acknowledged front mid-flood of two producers: no acknowledgement is paired with the wrong event or producer, the lost ones get none")
    func killBehindAckedRoute() throws {
        let shards = try ShardSet(count: 3)
        let route = try RouteProcess(shards, acked: true)
        let tmp = shards.daemons[0].dataDirectory.deletingLastPathComponent()
        // Two producers with their own event_ids, each sending to every shard, shard 1 included:
        // a reply relayed to the wrong producer names an event_id that is not that producer's.
        var senders: [(run: String, lines: Int, process: Process, stderr: Pipe, ackLog: URL)] = []
        for run in ["ra", "rb"] {
            let input = tmp.appendingPathComponent("\(run).jsonl")
            let ackLog = tmp.appendingPathComponent("\(run).acks")
            let lines = shardLifecycles(checkouts: 1250, run: run)
            try (lines.joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
            let sender = Process()
            sender.executableURL = Products.url("checkoutbus")
            sender.arguments = ["send", "--acked", "--to", route.listenAcked, "--ack-log", ackLog.path, "--timeout", "8",
                                "--window", "1000", input.path]
            let senderErr = Pipe()
            sender.standardError = senderErr
            try sender.start()
            senders.append((run, lines.count, sender, senderErr, ackLog))
        }
        let control = try ControlClient(shards.daemons[1].control)
        var seen = 0
        _ = try waitUntil(timeout: 60) {
            seen = try control.stats()["last_seq"] as? Int ?? 0
            return seen >= 1_000
        }
        #expect(seen >= 1_000)
        try shards.killAndRestart(1)
        for sender in senders { waitForExit(sender.process, timeout: 60) }
        let journals = try (0..<3).map { i in
            Dictionary(uniqueKeysWithValues: try shards.journal(i).map { ($0.0, $0.2.string("event_id")) })
        }
        var notAcked = 0
        for sender in senders {
            let summary = PipeLineReader(sender.stderr.fileHandleForReading).readAll(timeout: 5)
            let counts = try #require(summary.first { $0.hasPrefix("sent=") }, "\(summary)")
            let fields = Dictionary(uniqueKeysWithValues: counts.split(separator: " ").compactMap { pair -> (String, Int)? in
                let kv = pair.split(separator: "=")
                return kv.count == 2 ? (String(kv[0]), Int(kv[1]) ?? -1) : nil
            })
            #expect(fields["sent"] == sender.lines && fields["rejected"] == 0, "\(sender.run): \(summary)")
            notAcked += (fields["sent"] ?? 0) - (fields["acked"] ?? 0)

            // Each acknowledgement (`<seq> <event_id>`, seq of the owner) names one of this
            // producer's own events, and is that event in its owner's journal.
            let acks = try String(contentsOf: sender.ackLog, encoding: .utf8).split(separator: "\n")
            #expect(acks.count == fields["acked"])
            var wrong: [String] = []
            for ack in acks {
                let parts = ack.split(separator: " ")
                let id = parts.count == 2 ? parts[1].split(separator: "-") : []
                guard id.count == 3, id[0] == sender.run else {
                    wrong.append("not ours: \(ack)")
                    continue
                }
                let owner = ShardMap.owner(of: "\(sender.run)-c\(id[1])", count: 3)
                if journals[owner][Int(parts[0]) ?? 0] != String(parts[1]) { wrong.append(String(ack)) }
            }
            #expect(wrong.isEmpty, "\(sender.run): \(wrong.count) acknowledgement(s) wrong: \(wrong.prefix(3))")
        }
        let stopped = route.stop()
        #expect(stopped.status == 0, "\(route.stderrText)")
        let unanswered = (stopped.counts["unanswered_by_shard"] ?? "").split(separator: ",").compactMap { Int($0) }
        #expect(unanswered.count == 3 && unanswered[0] == 0 && unanswered[2] == 0, "\(stopped.counts)")
        #expect(unanswered.reduce(0, +) == notAcked,
                "route gave up on exactly the events the producers got no reply for: \(stopped.counts)")
    }
}

/// Runs `checkoutbus send ARGUMENTS` with `lines` on stdin: (status, stderr).
func runSend(_ arguments: [String], lines: [String]) throws -> (status: Int32, stderr: String) {
    let p = Process()
    p.executableURL = Products.url("checkoutbus")
    p.arguments = ["send"] + arguments
    let input = Pipe()
    let err = Pipe()
    p.standardInput = input
    p.standardError = err
    try p.start()
    input.fileHandleForWriting.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    try input.fileHandleForWriting.close()
    let text = PipeLineReader(err.fileHandleForReading).readAll(timeout: 60).joined(separator: "\n")
    return (waitForExit(p, timeout: 60), text)
}
