import Foundation
import Testing

/// A system call that fails is an error said where it happens, never a value that reads as
/// "nothing there": a journal listing or read that fails is not an empty journal (which would start
/// numbering again from 1 over the old segment), a retired segment that stays on the disk stays
/// counted, and a tool whose input or log cannot be read or written does not exit 0.
/// The journal's failures are made by failpoints (docs/durability.md, "Failpoints"): as root, file
/// permissions refuse nothing.
@Suite("system calls that fail are said, never taken for nothing")
struct SystemCallFailureTests {
    /// The journal directory's files and their bytes.
    static func journalFiles(_ data: URL) throws -> [String: Data] {
        let journal = data.appendingPathComponent("journal")
        var files: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: journal.path) where name != "LOCK" {
            files[name] = try Data(contentsOf: journal.appendingPathComponent(name))
        }
        return files
    }

    /// Runs `checkoutbusd` on `data` with `failpoints` set, to its exit (a start expected to fail:
    /// a daemon that starts is stopped by the tool's timeout, and the status says so).
    static func start(on data: URL, failpoints: String) throws -> (status: Int32, output: String) {
        try runTool("checkoutbusd", [
            "--data-dir", data.path, "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*",
            "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*", "--metrics", "off",
        ], environment: ["CHECKOUTBUS_FAILPOINTS": failpoints])
    }

    @Test("a journal that cannot be listed or read at start stops the start, named, with nothing on the disk changed",
          arguments: [("journal.list", "cannot list"), ("journal.read-range", "cannot read"),
                      ("journal.seq-read", "cannot read")])
    func startReadFails(point: String, said: String) throws {
        let first = try DaemonProcess()
        #expect(try send(distinctEvents(20, run: "scf"), to: first.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(first.terminate() == 0)
        let before = try Self.journalFiles(first.dataDirectory)
        #expect(before.keys.contains { $0.hasSuffix(".seg") })

        let failed = try Self.start(on: first.dataDirectory, failpoints: "\(point)=eio")
        #expect(failed.status == 1, "\(failed.output)")
        let eio = String(cString: strerror(EIO))
        #expect(failed.output.contains(said) && failed.output.contains(eio), "\(failed.output)")
        #expect(!failed.output.contains("\"ingest\""), "a ready line was printed: \(failed.output)")
        // Before, a listing that failed read as no segments: segment 1 was created again, empty.
        #expect(try Self.journalFiles(first.dataDirectory) == before)

        let again = try DaemonProcess(dataDirectory: first.dataDirectory)
        #expect(again.ready["last_seq"] as? Int == 20)
        #expect(again.terminate() == 0)
    }

    @Test("a segment retention cannot delete stays on the disk and in the journal: counted, replayed, logged")
    func retirementFails() throws {
        let flags = ["--segment-bytes", "8192", "--retain-bytes", "32768"]
        let daemon = try DaemonProcess(flags, failpoints: "journal.retire=eio")
        #expect(try send(distinctEvents(400, run: "keep"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let segments = try journalSegments(daemon)
        let onDisk = try segments.reduce(0) {
            $0 + (try FileManager.default.attributesOfItem(atPath: $1.path)[.size] as? Int ?? 0)
        }
        #expect(onDisk > 32768 + 8192 * 2, "retention deleted segments although every unlink failed")
        let control = try ControlClient(daemon.control)
        let stats = try control.request(#"{"op":"stats"}"#).status
        #expect(stats["first_seq"] as? Int == 1)
        let journal = try #require(stats["journal"] as? [String: Any])
        #expect(journal["segments"] as? Int == segments.count)
        #expect(try control.replayAll(from: 1).map(\.0) == Array(1...400))
        #expect(daemon.terminate() == 0)
        #expect(daemon.stderrText.contains("could not be deleted; retention waits"), "\(daemon.stderrText)")
        #expect(!daemon.stderrText.contains("segment retired"))

        // Without the failure, the next start retires them.
        let restarted = try DaemonProcess(flags, dataDirectory: daemon.dataDirectory)
        #expect(try journalSegments(restarted).count < segments.count)
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("segment retired"))
    }

    @Test("a LOCK file the pid cannot be written into is logged, and the daemon starts, acknowledges and publishes")
    func lockPidUnwritten() throws {
        let daemon = try DaemonProcess(failpoints: "lock.pid=enospc")
        #expect(try send(distinctEvents(5, run: "lockpid"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let control = try ControlClient(daemon.control)
        #expect(try control.replayAll(from: 1).map(\.0) == Array(1...5))
        #expect(daemon.terminate() == 0)
        let enospc = String(cString: strerror(ENOSPC))
        #expect(daemon.stderrText.contains("cannot write this daemon's pid in the LOCK file")
                    && daemon.stderrText.contains(enospc), "\(daemon.stderrText)")
    }

    @Test("a LOCK file that cannot be cut short gets this daemon's pid written over the last one's: a daemon refused names this one")
    func lockTruncateFails() throws {
        let data = TestScratch.url("cb-lock-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        // The last holder's pid, longer than any this host hands out now.
        try FileManager.default.createDirectory(at: data.appendingPathComponent("journal"), withIntermediateDirectories: true)
        try Data("99999999\n".utf8).write(to: data.appendingPathComponent("journal/LOCK"))
        let daemon = try DaemonProcess(dataDirectory: data, failpoints: "lock.truncate=eio")
        let second = try Self.start(on: data, failpoints: "")
        #expect(second.status != 0)
        let pid = daemon.process.processIdentifier
        #expect(second.output.contains("in use by another checkoutbusd (pid \(pid))"), "\(second.output)")
        #expect(daemon.terminate() == 0)
        #expect(daemon.stderrText.contains("cannot cut the LOCK file short"), "\(daemon.stderrText)")
    }

    @Test("a state file whose close fails is not taken as written: its start stops, named; the next writes it")
    func atomicFileCloseFails() throws {
        let data = TestScratch.url("cb-close-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: data) }
        // The first durable state file a new data directory gets is its shard.
        let failed = try Self.start(on: data, failpoints: "file.close=eio@1x1")
        #expect(failed.status == 1, "\(failed.output)")
        let eio = String(cString: strerror(EIO))
        #expect(failed.output.contains("cannot close") && failed.output.contains(eio), "\(failed.output)")
        #expect(!failed.output.contains("\"ingest\""), "a ready line was printed: \(failed.output)")
        #expect(!FileManager.default.fileExists(atPath: data.appendingPathComponent("shard").path))

        let again = try DaemonProcess(dataDirectory: data)
        #expect(again.terminate() == 0)
        #expect(try String(contentsOf: data.appendingPathComponent("shard"), encoding: .utf8) == "0/1\n")
    }

    @Test("a suppressed-id log that cannot be read at start stops the start; it is not taken for empty and cut to nothing")
    func suppressedLogReadFails() throws {
        let daemon = try DaemonProcess()
        let update = #"{"event_id":"EID","checkout_id":"ck-r","sdk":"shopify","payload":{"event":"checkoutDidUpdate","#
            + #""checkout":{"id":"ck-r","line_items":[{"id":"l1","quantity":1}]}}}"#
        let events = (0..<3).map { update.replacingOccurrences(of: "EID", with: "r\($0)") }
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(daemon.terminate() == 0)
        let log = daemon.dataDirectory.appendingPathComponent("suppressed.log")
        let before = try Data(contentsOf: log)
        #expect(!before.isEmpty)  // two suppressed updates, r1 and r2

        // Before, a read that failed was an empty log, and the file was then cut to what was read.
        let failed = try Self.start(on: daemon.dataDirectory, failpoints: "suppressed.read=eio")
        #expect(failed.status == 1 && failed.output.contains("cannot read \(log.path)"), "\(failed.output)")
        #expect(try Data(contentsOf: log) == before)

        // Read, the ids still count: a retry of a suppressed update is a duplicate.
        let again = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(try send([events[2]], to: again.ingestAcked, arguments: ["--acked"]).status == 0)
        let counters = try ControlClient(again.control).stats()["counters"] as? [String: Any]
        #expect(counters?["duplicates"] as? Int == 1)
        #expect(again.terminate() == 0)
    }

    @Test("send exits 1 naming the failure when its input cannot be read, or its ack log cannot be written")
    func sendReadAndLogFailures() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        // A directory opens for reading, and every read of it fails (EISDIR): before, that read as
        // the end of an empty input, and send exited 0 having sent nothing.
        let directory = TestScratch.url("send-input-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for acked in [false, true] {
            let r = try runTool("checkoutbus", ["send", "--to", acked ? daemon.ingestAcked : daemon.ingest]
                                + (acked ? ["--acked"] : []) + [directory.path])
            let reason = String(cString: strerror(EISDIR))
            #expect(r.status == 1 && r.output.contains("cannot read \(directory.path): \(reason)"), "\(r.output)")
        }
        // /dev/full takes no byte (ENOSPC): the acknowledgements are all there, the log is not.
        let file = TestScratch.url("send-\(UUID().uuidString).jsonl")
        try (distinctEvents(5, run: "log").joined(separator: "\n") + "\n")
            .write(to: file, atomically: true, encoding: .utf8)
        let acked = ["send", "--to", daemon.ingestAcked, "--acked", "--ack-log"]
        let full = try runTool("checkoutbus", acked + ["/dev/full", file.path])
        let noSpace = String(cString: strerror(ENOSPC))
        #expect(full.status == 1 && full.output.contains("cannot write the ack log: \(noSpace)"), "\(full.output)")
        let log = TestScratch.url("acks-\(UUID().uuidString).log")
        let ok = try runTool("checkoutbus", acked + [log.path, file.path])
        #expect(ok.status == 0, "\(ok.output)")
        #expect(try String(contentsOf: log, encoding: .utf8).split(separator: "\n").count == 5)
    }

    @Test("keygen --force over a readable secret key leaves it 0600 (its fchmod, now checked, does that)")
    func keygenForceMode() throws {
        let directory = TestScratch.url("keygen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let name = directory.appendingPathComponent("k").path
        #expect(try runTool("checkoutbus", ["keygen", name]).status == 0)
        #expect(chmod(name + ".key", 0o644) == 0)
        let again = try runTool("checkoutbus", ["keygen", "--force", name])
        #expect(again.status == 0, "\(again.output)")
        // `open`'s mode is not applied to a file that exists: only fchmod makes it private again.
        let mode = try FileManager.default.attributesOfItem(atPath: name + ".key")[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}
