import CheckoutBusClient
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `checkoutbus cursor show|set` on every place a position is kept, and docs/runbook.md's
/// "Re-process from a time" and "Skip one envelope" played as written (paths and endpoints aside).
@Suite("cursors you can inspect and move", .serialized, .timeLimit(.minutes(5)))
struct CursorCommandTests {
    static func cursor(_ arguments: [String]) throws -> (status: Int32, output: String) {
        try runTool("checkoutbus", ["cursor"] + arguments)
    }

    /// What a Python FileCursor reads from `path`.
    static func pythonCommitted(_ path: String) throws -> Int64? {
        guard let python = PyZMQSubscriberTests.pythonWithZMQ else { return nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["PYTHONPATH=" + Products.repositoryRoot.appendingPathComponent("clients/python").path,
                       "PYTHONDONTWRITEBYTECODE=1", python, "-c",
                       "import sys\nfrom checkoutbus import FileCursor\nprint(FileCursor.committed(sys.argv[1]))", path]
        let out = Pipe()
        p.standardOutput = out
        try p.start()
        guard waitForExit(p, timeout: 30) == 0 else { return nil }
        return Int64(String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("cursor files: show, set back with --to-seq (Swift and Python read it), --shift-by, --dry-run writes nothing, per shard, refused while held")
    func cursorFiles() throws {
        let dir = TestScratch.url("cursorcmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("orders.cursor").path
        do {
            let c = try FileCursor(path: path)
            try c.commit(99)
            try c.commit(100)
        }
        let shown = try Self.cursor(["show", path])
        #expect(shown.status == 0 && shown.output.contains("cursor file") && shown.output.contains("seq 100 (resumes at 101)"), "\(shown.output)")
        let dry = try Self.cursor(["set", path, "--to-seq", "51", "--dry-run"])
        #expect(dry.status == 0 && dry.output.contains("seq 100 → 50") && dry.output.contains("handles 50 envelopes again")
                && dry.output.contains("dry run: nothing written"), "\(dry.output)")
        #expect(try FileCursor.committed(at: path) == 100)
        // Back: both slots rewritten, so the larger-slot rule reads the new position.
        #expect(try Self.cursor(["set", path, "--to-seq", "51"]).status == 0)
        #expect(try FileCursor.committed(at: path) == 50)
        if let python = try Self.pythonCommitted(path) { #expect(python == 50) }
        #expect(try Self.cursor(["set", path, "--shift-by", "1"]).output.contains("skips 1 envelope"))
        #expect(try FileCursor(path: path).load() == 51)

        // Held by a running subscriber (this process): refused, nothing written.
        do {
            let held = try FileCursor(path: path)
            let refused = try Self.cursor(["set", path, "--to-seq", "5"])
            #expect(refused.status == 1 && refused.output.contains("in use"), "\(refused.output)")
            #expect(held.load() == 51)
        }

        // Shards: PATH.I-of-N found by themselves; --shard moves one.
        let sharded = dir.appendingPathComponent("bridge.cursor").path
        for (i, seq) in [(0, Int64(10)), (1, 20)] { try FileCursor(path: "\(sharded).\(i)-of-2").commit(seq) }
        let both = try Self.cursor(["show", sharded, "--format", "json"])
        let o = try #require(try JSONSerialization.jsonObject(with: Data(both.output.utf8)) as? [String: Any])
        #expect((o["positions"] as? [[String: Any]])?.compactMap { $0["seq"] as? Int } == [10, 20], "\(both.output)")
        #expect(try Self.cursor(["set", sharded, "--shard", "1", "--shift-by", "-5"]).status == 0)
        #expect(try FileCursor.committed(at: "\(sharded).0-of-2") == 10 && FileCursor.committed(at: "\(sharded).1-of-2") == 15)
        #expect(try Self.cursor(["show", dir.appendingPathComponent("nothing").path]).status == 1)
        // Positioning a subscriber that never ran: a dry run creates nothing; --shards 1 is PATH itself.
        let fresh = dir.appendingPathComponent("fresh.cursor").path
        #expect(try Self.cursor(["set", fresh, "--shards", "2", "--to-seq", "7", "--dry-run"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: fresh + ".0-of-2") && !FileManager.default.fileExists(atPath: fresh))
        #expect(try Self.cursor(["set", fresh, "--shards", "1", "--to-seq", "7"]).status == 0)
        #expect(try FileCursor.committed(at: fresh) == 6)
        #expect(try Self.cursor(["set", path]).status == 2)
    }

    @Test("runbook: the fulfilment store re-processed from a time (orders stay exactly once), one envelope skipped; refused while the worker runs")
    func fulfilmentRunbook() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let database = TestScratch.url("cursorcmd-\(UUID().uuidString).sqlite")
        var worker: FulfilProcess? = try FulfilProcess(daemon: daemon, database: database)
        #expect(try send((1...5).map { FulfilmentRejectedTests.complete("cc-a\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        usleep(1_200_000)
        let between = Int64(Date().timeIntervalSince1970 * 1000)
        usleep(200_000)
        #expect(try send((1...5).map { FulfilmentRejectedTests.complete("cc-b\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 10 })
        // The runbook's order: a running worker refuses the move.
        let refused = try Self.cursor(["set", database.path, "--to-seq", "1"])
        #expect(refused.status == 1 && refused.output.contains("in use by a running process"), "\(refused.output)")
        // A second worker on the same store waits for the lock (10 s), then refuses to start.
        let second = try FulfilProcess(publish: daemon.publish, control: daemon.control, database: database, waitForSubscription: false)
        #expect(waitForExit(second.process, timeout: 30) != 0)
        let said = second.stderr.readAll(timeout: 2).joined(separator: "\n")
        #expect(said.contains("in use by a running process"), "\(said)")
        worker?.process.terminate()
        #expect(waitForExit(worker!.process, timeout: 20) == 0)
        worker = nil

        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let time = iso.string(from: Date(timeIntervalSince1970: Double(between) / 1000))
        let shown = try Self.cursor(["show", database.path])
        #expect(shown.output.contains("fulfilment store") && shown.output.contains("fulfil  seq 10"), "\(shown.output)")
        let dry = try Self.cursor(["set", database.path, "--to-time", time, "--control", daemon.control, "--dry-run"])
        #expect(dry.status == 0 && dry.output.contains("is seq 6") && dry.output.contains("seq 10 → 5"), "\(dry.output)")
        #expect(try Self.cursor(["set", database.path, "--to-time", time, "--control", daemon.control]).status == 0)
        #expect(try Self.cursor(["show", database.path]).output.contains("fulfil  seq 5"))

        // Started again, it handles 6…10 once more: the same ten orders, their last_seen moved.
        worker = try FulfilProcess(daemon: daemon, database: database)
        #expect(waitUntil(20) { (try? Self.cursor(["show", database.path]).output.contains("fulfil  seq 10")) == true })
        #expect(orderCount(database) == 10)
        worker?.process.terminate()
        #expect(waitForExit(worker!.process, timeout: 20) == 0)
        worker = nil

        // Skip one envelope.
        let skip = try Self.cursor(["set", database.path, "--shift-by", "1", "--dry-run"])
        #expect(skip.output.contains("seq 10 → 11") && skip.output.contains("skips 1 envelope"), "\(skip.output)")
        #expect(try Self.cursor(["set", database.path, "--shift-by", "1"]).status == 0)
        #expect(try Self.cursor(["show", database.path]).output.contains("fulfil  seq 11"))
    }

    @Test("the analytics checkpoint: shown, moved while the worker is stopped, refused while it runs")
    func analyticsCheckpoint() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let dir = TestScratch.url("cursorcmd-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let checkpoint = dir.appendingPathComponent("analytics.state"), report = dir.appendingPathComponent("report.json")
        let worker = try AnalyticsProcess(daemon, cursor: checkpoint, report: report)
        #expect(try send((1...6).map { FulfilmentRejectedTests.complete("an-\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { reportedSeq(report) == 6 })
        let refused = try Self.cursor(["set", checkpoint.path, "--shift-by", "-2"])
        #expect(refused.status == 1 && refused.output.contains("in use"), "\(refused.output)")
        #expect(worker.stop() == 0)
        #expect(try Self.cursor(["show", checkpoint.path]).output.contains("analytics checkpoint"))
        #expect(try Self.cursor(["show", checkpoint.path]).output.contains("seq 6"))
        #expect(try Self.cursor(["set", checkpoint.path, "--shift-by", "-2"]).status == 0)
        #expect(try Self.cursor(["show", checkpoint.path]).output.contains("seq 4 (resumes at 5)"))
    }
}
