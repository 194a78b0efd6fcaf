import Foundation
import Testing
import ZeroMQ

/// A journal that cannot be written (a file size limit stands in for a full disk): the daemon
/// pauses ingest, publishes nothing unjournaled, keeps answering control and health, and resumes by
/// itself once writes succeed — every acknowledged event in the journal, none lost.
@Suite("full disk", .serialized, .timeLimit(.minutes(4)))
struct FullDiskTests {
    /// With 20 events in flight the daemon's batches are small and written by the pipeline; with
    /// 2,000 they go to the journal's writer thread, whose failed write is requeued and retried.
    @Test("writes fail: ingest pauses, /healthz 503, control answers; space returns: everything is journaled once",
          arguments: [20, 2000])
    func fullDiskRecovers(window: Int) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            Issue.record("prlimit (util-linux) is missing")
            return
        }
        // Room for the segment header and a few hundred small records.
        let daemon = try DaemonProcess(launcher: ["/usr/bin/prlimit", "--fsize=150000:unlimited"])
        let address = try #require(daemon.ready["metrics"] as? String)
        let tmp = daemon.dataDirectory.deletingLastPathComponent()
        let input = tmp.appendingPathComponent("events.jsonl")
        try (distinctEvents(2000, run: "disk").joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let ackLog = tmp.appendingPathComponent("acks.log")
        let sender = Process()
        sender.executableURL = Products.url("checkoutbus")
        sender.arguments = ["send", "--acked", "--to", daemon.ingestAcked, "--ack-log", ackLog.path, "--timeout", "60",
                            "--window", String(window), input.path]
        sender.standardError = FileHandle.nullDevice
        try sender.start()

        #expect(waitUntil(30) { daemon.stderrText.contains("journal write failed") })
        #expect(try httpGet(address, "/healthz").status == 503)
        let control = try ControlClient(daemon.control)
        let stalled = try #require(try control.request(#"{"op":"stats"}"#).status["last_seq"] as? Int)
        // Small batches fill the file up to the limit; a large one that does not fit is not written at all.
        #expect(stalled < 2000)
        if window == 20 { #expect(stalled > 0) }
        #expect(sender.isRunning, "the producer waits for its answers")

        // A subscriber joining now gets no heartbeat announcing seqs that are not published: its
        // answer is owed until the journal takes them (else it would skip them as already seen).
        let context = try ZMQContext()
        let sub = try ZMQSocket(context: context, type: .sub)
        try sub.setLinger(milliseconds: 0)
        try sub.setOption(.receiveTimeout, 100)
        try sub.connect(daemon.publish)
        try sub.subscribe("bus.heartbeat")
        var heartbeatSeqs: [Int] = []
        let outage = Date().addingTimeInterval(1.5)
        while Date() < outage {
            if let frames = try sub.receiveMultipart(), frames.count == 2,
                let hb = try JSONSerialization.jsonObject(with: Data(frames[1])) as? [String: Any], let seq = hb.int("seq") {
                heartbeatSeqs.append(seq)
            }
        }
        #expect(heartbeatSeqs.allSatisfy { $0 <= stalled }, "heartbeats during the outage: \(heartbeatSeqs), journal at \(stalled)")

        // Space comes back.
        #expect(try daemon.liftFileSizeLimit() == 0)
        #expect(waitForExit(sender, timeout: 60) == 0, "every event acknowledged")
        // The owed answer, or a regular heartbeat after it, reaches the subscriber with every seq.
        var caughtUp = false
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && !caughtUp {
            if let frames = try sub.receiveMultipart(), frames.count == 2,
                let hb = try JSONSerialization.jsonObject(with: Data(frames[1])) as? [String: Any] {
                caughtUp = hb.int("seq") == 2000
            }
        }
        #expect(caughtUp)
        #expect(daemon.stderrText.contains("journal writable again"))
        #expect(try httpGet(address, "/healthz").status == 200)
        let records = try control.replayAll()
        #expect(records.map(\.0) == Array(1...2000))
        #expect(Set(records.compactMap { $0.2["event_id"] as? String }).count == 2000)
        let acked = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        #expect(acked.count == 2000)
        // A direct write the size limit cut short fails with EINVAL: that is the limit's
        // `File too large`, not a file system refusing direct writes, which stay on.
        #expect(!daemon.stderrText.contains("direct writes refused"))
        let writes = (try control.stats()["journal"] as? [String: Any])?["writes"] as? String
        #expect(writes == (daemon.stderrText.contains("journal_writes=direct") ? "direct" : "page_cache"))
        #expect(daemon.terminate() == 0)
    }
}
