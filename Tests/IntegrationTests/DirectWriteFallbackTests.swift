import Foundation
import Testing

/// Direct writes stop only when the file system refuses them, not after one refusal: a direct
/// write cut short by a file size limit fails with `EINVAL` like a refusing file system, and when
/// the limit was lifted between it and its retry through the page cache, one refusal turned direct
/// writes off for good (a CI run's full-disk test). Two refusals in a row now do (docs/durability.md,
/// "Direct writes"; the failpoint `journal.direct-write`).
@Suite("direct writes: off after two refusals in a row, not one", .serialized, .timeLimit(.minutes(4)))
struct DirectWriteFallbackTests {
    /// Sends `count` events over the acknowledged socket, 2,000 in flight (batches of 32 KiB and
    /// more, written directly); returns the daemon's `stats` → `journal.writes` and its log.
    private func flood(failpoints: String) throws -> (atStart: String, writes: String?, log: String, lastSeq: Int?) {
        let daemon = try DaemonProcess(failpoints: failpoints)
        // What the start's probe found (the journal directory's file system may refuse O_DIRECT): the
        // `started` log line says, on stderr, which may reach its file just after the ready line.
        #expect(waitUntil(10) { daemon.stderrText.contains("journal_writes=") })
        let atStart = daemon.stderrText.contains("journal_writes=direct") ? "direct" : "page_cache"
        let tmp = daemon.dataDirectory.deletingLastPathComponent()
        let input = tmp.appendingPathComponent("events.jsonl")
        try (distinctEvents(6000, run: "dw").joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let r = try runTool("checkoutbus", ["send", "--acked", "--to", daemon.ingestAcked, "--window", "2000", "--timeout", "60",
                                            input.path])
        #expect(r.status == 0, "\(r.output)")
        let stats = try ControlClient(daemon.control).stats()
        let writes = (stats["journal"] as? [String: Any])?["writes"] as? String
        let lastSeq = stats.int("last_seq")
        #expect(daemon.terminate() == 0)
        return (atStart, writes, daemon.stderrText, lastSeq)
    }

    @Test("one refused direct write is written through the page cache and direct writes go on; refusals every time turn them off, logged once")
    func fallback() throws {
        let once = try flood(failpoints: "journal.direct-write=einval@1x1")
        #expect(once.lastSeq == 6000, "every event journaled once")
        guard once.atStart == "direct" else {
            // A file system without O_DIRECT here: the journal writes through the page cache from the start.
            #expect(once.writes == "page_cache")
            return
        }
        #expect(once.writes == "direct", "one refusal turned direct writes off")
        #expect(!once.log.contains("direct writes refused"))

        let always = try flood(failpoints: "journal.direct-write=einval@1")
        #expect(always.lastSeq == 6000, "every event journaled once, through the page cache")
        #expect(always.writes == "page_cache", "direct writes refused every time were not turned off")
        #expect(always.log.components(separatedBy: "direct writes refused").count == 2, "logged once")
    }

    /// The start's test of direct writes took any failure for a refusal: a daemon started on a full
    /// disk (or a read-only directory) wrote through the page cache for the rest of its life.
    @Test("the start's test of direct writes: EINVAL is a refusal (page cache); ENOSPC or EROFS is not (direct, with a warning)",
          arguments: ["einval", "enospc", "erofs"])
    func startProbe(errno name: String) throws {
        let daemon = try DaemonProcess(failpoints: "journal.direct-probe=\(name)@1x1")
        #expect(waitUntil(10) { daemon.stderrText.contains("journal_writes=") })
        let stats = try ControlClient(daemon.control).stats()
        let writes = (stats["journal"] as? [String: Any])?["writes"] as? String
        if daemon.stderrText.contains("reason=\"open: Invalid argument\"") {
            // A file system without O_DIRECT here: refused before the write the failpoint fails.
            #expect(writes == "page_cache")
        } else if name == "einval" {
            #expect(writes == "page_cache")
            #expect(daemon.stderrText.contains("the file system refuses direct writes"))
        } else {
            #expect(writes == "direct", "\(daemon.stderrText)")
            #expect(daemon.stderrText.contains("the test of direct writes failed, not for want of them"))
        }
        #expect(daemon.terminate() == 0)
    }
}
