import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `checkoutbus tail --record` (a ``BusSubscriber``) against the real daemon: drops at a high-water
/// mark and `kill -9` restarts must leave the recording holding every journaled envelope exactly
/// once, in `seq` order, byte for byte as published.
@Suite("subscriber recovery: tail --record", .serialized, .timeLimit(.minutes(2)))
struct SubscriberRecoveryTests {
    static let topics = ["checkout.", "bus.deadletter"]

    @Test("a recorder with a receive HWM of 1, stalled under a flat-out flood, misses envelopes and recovers them all")
    func highWaterMarkDropsAreRecovered() throws {
        // A small publish HWM (the flood's own subscriber keeps up with it) so the stalled recorder's
        // queue overflows after a few MB instead of 100,000 envelopes.
        let daemon = try DaemonProcess(durableDaemonArguments + ["--publish-hwm", "2000"])
        let control = try controlEndpoint(of: daemon)
        let file = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("hwm.jsonl")
        let recorder = try RecorderProcess(publish: daemon.publish, control: control, file: file, name: "hwm-recorder",
                                           extraArguments: ["--receive-hwm", "1"])
        let flood = try startFlood(daemon, ["--checkouts", "3000", "--seed", "11"])
        // Let it record live for a moment, then stall it (as a descheduled or paused consumer would
        // be) while the flood goes on: the daemon's queue to it fills and ZeroMQ drops.
        let recordedLive = waitUntil(timeout: 30) { fileSize(file) > 50_000 || !flood.isRunning }
        #expect(recordedLive)
        kill(recorder.pid, SIGSTOP)
        let floodStatus = waitForExit(flood, timeout: 60)
        kill(recorder.pid, SIGCONT)

        let probe = try JournalProbe(control)
        let lastSeq = try #require(try probe.stats().int("last_seq"))
        #expect(lastSeq > 10_000, "flood exited \(floodStatus)")
        let caughtUp = waitUntil(timeout: 40) { lastRecordedSeq(file) >= lastSeq }
        #expect(caughtUp, "recorded up to \(lastRecordedSeq(file)) of \(lastSeq)")
        let summary = try recorder.stop()

        #expect((summary["missed"] ?? 0) > 0, "the stalled recorder must have noticed drops: \(summary)")
        #expect(summary["recovered"] == summary["missed"], "\(summary)")
        #expect((summary["gaps"] ?? 0) >= 1, "\(summary)")
        #expect(summary["last_seq"] == lastSeq)

        let journal = try probe.replayAll(prefixes: SubscriberRecoveryTests.topics)
        let lines = try recordedLines(file)
        #expect(lines.count == journal.count)
        let seqs = try lines.map { try seqOf($0) }
        #expect(seqs == journal.map(\.seq), "every journaled envelope once, in seq order")
        #expect(lines == journal.map(\.bytes), "byte for byte as published")

        // The recorder reported its counts to the daemon under its name.
        let report = try #require(try probe.stats().object("subscribers")?.object("hwm-recorder"))
        #expect(report.int("missed") == summary["missed"])
        #expect(report.int("last_seq") == lastSeq)
    }

    @Test("a recorder killed with SIGKILL three times during a flood and restarted holds every envelope exactly once")
    func killedRecorderResumes() throws {
        let daemon = try DaemonProcess(durableDaemonArguments)
        let control = try controlEndpoint(of: daemon)
        let file = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("killed.jsonl")
        var recorder = try RecorderProcess(publish: daemon.publish, control: control, file: file, name: "kill-recorder")
        // Paced so that it is still running through all three kills (about 4.5 s).
        let flood = try startFlood(daemon, ["--checkouts", "3000", "--seed", "12", "--rate", "3000"])
        var floodRunningAtKill: [Bool] = []
        for round in 1...3 {
            let before = fileSize(file)
            let grew = waitUntil(timeout: 30) { fileSize(file) >= before + 200_000 }
            #expect(grew, "round \(round): the recorder made no progress")
            floodRunningAtKill.append(flood.isRunning)
            recorder.kill9()
            if round == 2 {
                // As if killed in the middle of a write: half a line, no newline.
                let last = try #require(try recordedLines(file).last)
                let handle = try FileHandle(forWritingTo: file)
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(last.prefix(last.count / 2)))
                try handle.close()
            }
            recorder = try RecorderProcess(publish: daemon.publish, control: control, file: file, name: "kill-recorder")
            #expect(recorder.stderrLines.contains { $0.hasPrefix("tail: resuming") }, "\(recorder.stderrLines)")
            if round == 2 {
                #expect(recorder.stderrLines.contains { $0.hasPrefix("tail: cut a torn last line") }, "\(recorder.stderrLines)")
            }
        }
        #expect(floodRunningAtKill == [true, true, true], "the kills should land during the flood")
        let floodStatus = waitForExit(flood, timeout: 60)
        #expect(floodStatus == 0)

        let probe = try JournalProbe(control)
        let lastSeq = try #require(try probe.stats().int("last_seq"))
        let caughtUp = waitUntil(timeout: 40) { lastRecordedSeq(file) >= lastSeq }
        #expect(caughtUp, "recorded up to \(lastRecordedSeq(file)) of \(lastSeq)")
        let summary = try recorder.stop()
        #expect(summary["last_seq"] == lastSeq)

        let journal = try probe.replayAll(prefixes: SubscriberRecoveryTests.topics)
        let lines = try recordedLines(file)
        let seqs = try lines.map { try seqOf($0) }
        #expect(Set(seqs).count == seqs.count, "no envelope recorded twice")
        #expect(seqs == journal.map(\.seq), "every journaled envelope once, in seq order")
        #expect(lines == journal.map(\.bytes), "byte for byte as published")
    }
}
