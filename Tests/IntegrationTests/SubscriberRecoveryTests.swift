import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `checkoutbus tail --record` (a ``BusSubscriber``) against the real daemon: drops at a high-water
/// mark and `kill -9` restarts must leave the recording holding every journaled envelope exactly
/// once, in `seq` order, byte for byte as published.
@Suite("subscriber recovery: tail --record", .serialized, .timeLimit(.minutes(4)))
struct SubscriberRecoveryTests {
    static let topics = ["checkout.", "bus.deadletter"]

    @Test("a recorder with a receive HWM of 1, stalled under a flat-out flood, misses envelopes and recovers them all")
    func highWaterMarkDropsAreRecovered() throws {
        // A small publish HWM (the flood's own subscriber keeps up with it) so the stalled recorder's
        // queue overflows after a few MB instead of 100,000 envelopes.
        let daemon = try DaemonProcess(["--publish-hwm", "2000"])
        let control = daemon.control
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

        let probe = try ControlClient(control)
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
        let daemon = try DaemonProcess()
        let control = daemon.control
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

        let probe = try ControlClient(control)
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

/// The library itself, in process: prefixes of one kind, several kinds, and narrower than a kind
/// (whose `kind_seq` jumps naturally), caught up from the journal and then live through a receive
/// HWM of 1; then a ``FileCursor`` resumes a new subscriber exactly after the last handled `seq`.
@Suite("BusSubscriber: prefixes and cursor", .serialized, .timeLimit(.minutes(5)))
struct BusSubscriberLibraryTests {
    @Test("each matching envelope once, in seq order, for any prefixes; a FileCursor resumes after the last",
          arguments: [
              ["checkout.complete"],
              ["checkout.complete", "checkout.fail", "bus.deadletter"],
              ["checkout.fail.network_error"],
              ["checkout.complete", "checkout.fail.network_error"],
          ])
    func prefixesAndCursor(_ prefixes: [String]) throws {
        let daemon = try DaemonProcess(["--heartbeat-ms", "100"])
        let probe = try ControlClient(daemon.control)
        // Published before the subscriber starts: it must catch up from the journal.
        let before = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                 "--checkouts", "500", "--seed", "21"])
        #expect(before.status == 0, "\(before.output)")
        let cursorPath = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("cursor").path
        var options = BusSubscriber.Options(publish: daemon.publish, control: daemon.control)
        options.prefixes = prefixes
        options.receiveHighWaterMark = 1
        options.name = "library-test"

        // While it runs: live, paced, through a receive HWM of 1.
        let flood = try startFlood(daemon, ["--checkouts", "1000", "--seed", "22", "--rate", "4000"])
        let first = try collect(options, cursor: try FileCursor(path: cursorPath), probe: probe, until: { !flood.isRunning })
        let expected = try probe.replayAll(prefixes: prefixes)
        #expect(first.outcome == .stopped)
        #expect(first.envelopes.map(\.seq) == expected.map { Int64($0.seq) }, "every match once, in seq order")
        #expect(first.envelopes.map(\.bytes) == expected.map(\.bytes))
        #expect(first.envelopes.allSatisfy { e in prefixes.contains { e.topicString.hasPrefix($0) } })
        #expect(first.envelopes.contains { $0.origin == .journal } && first.envelopes.contains { $0.origin == .live })
        let lastHandled = first.envelopes.last?.seq ?? 0
        #expect(try FileCursor(path: cursorPath).load() == lastHandled)

        // More while nobody listens; a new subscriber on the same cursor file takes exactly those.
        let after = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                "--checkouts", "300", "--seed", "23"])
        #expect(after.status == 0, "\(after.output)")
        let second = try collect(options, cursor: try FileCursor(path: cursorPath), probe: probe, until: { true })
        let expectedAfter = try probe.replayAll(prefixes: prefixes).filter { Int64($0.seq) > lastHandled }
        #expect(second.envelopes.map(\.seq) == expectedAfter.map { Int64($0.seq) })
        #expect(second.envelopes.allSatisfy { $0.origin == .journal })
    }

    @Test("a subscriber stalled by its handler while the bus floods misses envelopes and recovers each, in order",
          arguments: [
              ["checkout.complete"],
              ["checkout.complete", "checkout.fail", "bus.deadletter"],
              ["checkout.fail.network_error"],
          ])
    func stalledHandlerRecovers(_ prefixes: [String]) throws {
        try stalledHandler(prefixes, live: .prefixes)
    }

    @Test("the same with the live subscription widened to every topic and filtered in the subscriber",
          arguments: [
              ["checkout.complete", "checkout.fail", "bus.deadletter"],
              ["checkout.fail.network_error"],
          ])
    func stalledHandlerRecoversWidened(_ prefixes: [String]) throws {
        try stalledHandler(prefixes, live: .everything)
    }

    private func stalledHandler(_ prefixes: [String], live liveSubscription: BusSubscriber.LiveSubscription) throws {
        // No flood subscriber here to keep up: a tiny publish HWM; ~3 KB envelopes and a small
        // receive buffer so the kernel's socket buffers (the sender's can grow to 4 MB) hold only a
        // part of the ~9 MB each subscription gets while its handler is stalled.
        let daemon = try DaemonProcess(["--publish-hwm", "10", "--heartbeat-ms", "100"])
        let probe = try ControlClient(daemon.control)
        let events = mixedEvents(8000, padding: 3000)
        let input = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("events.jsonl")
        try (events.joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let sender = Process()
        sender.executableURL = Products.url("checkoutbus")
        sender.arguments = ["send", "--to", daemon.ingest, "--timeout", "30", input.path]
        let senderErr = Pipe()
        sender.standardError = senderErr

        var options = BusSubscriber.Options(publish: daemon.publish, control: daemon.control)
        options.prefixes = prefixes
        options.receiveHighWaterMark = 1
        options.receiveBufferBytes = 16_384
        options.liveSubscription = liveSubscription
        let stop = StopSignal()
        var envelopes: [BusEnvelope] = []
        var sent: Int?
        var target: Int64?
        /// Once the sender is done: whether the daemon has taken in everything it sent.
        func allPublished() -> Bool {
            guard let sent else { return false }
            return ((try? probe.stats())?.object("counters")?.int("received") ?? 0) >= sent
        }
        // Start sending once the subscriptions are live, and stop once everything matching is handled.
        let hooks = BusSubscriber.Hooks(onSubscribed: { try? sender.start() }, onHeartbeat: { subscriber, _, heartbeat in
            guard sent != nil, allPublished() else { return }
            if target == nil { target = Int64((try? probe.replayAll(prefixes: prefixes))?.last?.seq ?? 0) }
            // Also wait for a heartbeat sent after the last match: an envelope fetched from the
            // journal counts as missed once the live stream has passed it without bringing it.
            let live = (try? JSONSerialization.jsonObject(with: Data(heartbeat)) as? [String: Any])?.int("seq") ?? 0
            if subscriber.statistics.lastSeq >= target!, live >= target! { stop.raise() }
        })
        let subscriber = BusSubscriber(options: options, cursor: MemoryCursor(), hooks: hooks)
        let outcome = try subscriber.run(stop: stop, deadline: BusClock.monotonicNanoseconds() + 90_000_000_000) { e in
            if envelopes.isEmpty {
                // The slow consumer: busy with the first envelope until the daemon has taken in all.
                let status = waitForExit(sender, timeout: 40)
                let report = PipeLineReader(senderErr.fileHandleForReading).readAll(timeout: 5).joined(separator: "\n")
                if status == 0, let n = report.split(separator: "=").last.flatMap({ Int($0) }) { sent = n }
                #expect(sent == events.count, "send exited \(status): \(report)")
                waitUntil(timeout: 40) { allPublished() }
            }
            envelopes.append(e)
        }
        #expect(outcome == .stopped)
        let expected = try probe.replayAll(prefixes: prefixes)
        #expect(envelopes.map(\.seq) == expected.map { Int64($0.seq) }, "every match once, in seq order")
        #expect(envelopes.map(\.bytes) == expected.map(\.bytes))
        let s = subscriber.statistics
        #expect(s.missed > 0, "\(s)")
        #expect(s.recovered == s.missed, "\(s)")
        #expect(s.gaps >= 1 && s.gaps <= s.missed, "\(s)")
        #expect(s.missed <= s.fromJournal, "\(s)")
    }

    /// Lifecycle events of several kinds with distinct checkouts (nothing suppressed), each padded
    /// to about `padding` bytes: of every eight, three network_error failures, three completes, a
    /// cart_expired failure and a start; a dead letter every 50th.
    private func mixedEvents(_ n: Int, padding: Int) -> [String] {
        let pad = String(repeating: "x", count: padding)
        return (0..<n).map { i in
            if i % 50 == 49 { return #"{"name":"webPixels","body":"{\"name\":\"page_viewed\"}"}"# }
            switch i % 8 {
            case 0, 1, 2: return #"{"event":"onCheckoutFailed","checkout_id":"m-\#(i)","error":{"code":"NETWORK_ERROR","message":"\#(pad)"}}"#
            case 3, 4, 5: return #"{"event":"checkoutDidComplete","checkout":{"id":"m-\#(i)","status":"completed","note":"\#(pad)"}}"#
            case 6: return #"{"event":"onCheckoutFailed","checkout_id":"m-\#(i)","error":{"code":"cart_expired","message":"\#(pad)"}}"#
            default: return #"{"event":"onCheckoutStarted","checkout":{"id":"m-\#(i)","note":"\#(pad)"}}"#
            }
        }
    }

    /// Runs a subscriber on this thread until `ready()` holds and everything the journal holds for
    /// its prefixes was handled (checked at each heartbeat).
    private func collect(_ options: BusSubscriber.Options, cursor: FileCursor, probe: ControlClient,
                         until ready: @escaping () -> Bool) throws -> (outcome: BusSubscriber.Outcome, envelopes: [BusEnvelope]) {
        let stop = StopSignal()
        var envelopes: [BusEnvelope] = []
        var target: Int64?
        let subscriber = BusSubscriber(options: options, cursor: cursor, hooks: BusSubscriber.Hooks(onHeartbeat: { subscriber, _, _ in
            guard ready() else { return }
            if target == nil {
                target = Int64((try? probe.replayAll(prefixes: options.prefixes))?.last?.seq ?? 0)
            }
            if subscriber.statistics.lastSeq >= target! { stop.raise() }
        }))
        let deadline = BusClock.monotonicNanoseconds() + 60_000_000_000
        let outcome = try subscriber.run(stop: stop, deadline: deadline) { envelopes.append($0) }
        return (outcome, envelopes)
    }
}

/// The cursor files and the command line, without a daemon.
@Suite("subscriber cursors and tail flags")
struct SubscriberCursorTests {
    private func temporaryPath(_ name: String) throws -> String {
        let dir = TestScratch.url("cb-cursor-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent(name).path
    }

    @Test("a subscriber whose cursor is past the daemon's last seq is warned (a reset journal); one behind it is not")
    func cursorAheadOfDaemon() throws {
        let daemon = try DaemonProcess()
        #expect(try send(distinctEvents(5, run: "ahead"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let common = ["tail", "--from", daemon.publish, "--control", daemon.control, "--count", "1", "--timeout", "3"]
        // Resuming after seq 99 of a journal that ends at 5: the first heartbeat says so.
        let ahead = try runTool("checkoutbus", common + ["--since", "100"])
        #expect(ahead.output.contains("the daemon's last seq is behind this subscriber's cursor"), "\(ahead.output)")
        #expect(ahead.output.contains("daemon_seq=5 cursor=99"), "\(ahead.output)")
        // Resuming inside the journal: the replay hands over 3, the warning stays quiet.
        let inside = try runTool("checkoutbus", common + ["--since", "3"])
        #expect(inside.status == 0)
        #expect(!inside.output.contains("behind this subscriber's cursor"), "\(inside.output)")
        #expect(daemon.terminate() == 0)
    }

    /// Both slots unreadable was read as 0: a subscriber started over from the oldest retained
    /// envelope without a word (a bridge would publish everything again).
    @Test("FileCursor: both slots damaged is refused; a first commit cut short is nothing committed")
    func fileCursorDamaged() throws {
        let path = try temporaryPath("cursor")
        try Data(repeating: UInt8(ascii: "x"), count: 2 * FileCursor.slotSize).write(to: URL(fileURLWithPath: path))
        #expect(throws: SubscriberError.self) { try FileCursor(path: path) }
        #expect(throws: SubscriberError.self) { try FileCursor.committed(at: path) }
        try Data(Array("cursor v1 seq=0000".utf8)).write(to: URL(fileURLWithPath: path))
        #expect(try FileCursor.committed(at: path) == 0)
        #expect(try FileCursor(path: path).load() == 0)
    }

    @Test("FileCursor: commits survive reopening; a torn slot falls back to the previous commit")
    func fileCursor() throws {
        let path = try temporaryPath("cursor")
        #expect(try FileCursor(path: path).load() == 0)
        do {
            let cursor = try FileCursor(path: path)
            for seq in [5, 6, 7] as [Int64] { try cursor.commit(seq) }
            #expect(try FileCursor.committed(at: path) == 7)
            // One subscriber per cursor file: a second one on it is refused while the first holds it.
            #expect(throws: SubscriberError.self) { try FileCursor(path: path) }
            withExtendedLifetime(cursor) {}
        }
        #expect(try FileCursor.committed(at: temporaryPath("no-such-cursor")) == 0)
        // Tear the slot holding 7 (the one written last) as a crash in the middle of a write would.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let slot = bytes.count / 2
        let seven = String(decoding: bytes[0..<slot], as: UTF8.self).contains("00000000000000000007") ? 0 : slot
        bytes[seven + 30] = UInt8(ascii: "9")
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let reopened = try FileCursor(path: path)
        #expect(reopened.load() == 6)
        try reopened.commit(8)
        #expect(try FileCursor.committed(at: path) == 8)
    }

    @Test("EnvelopeRecording: a torn last line is cut off and the last complete line is the cursor")
    func recordingRecovery() throws {
        let path = try temporaryPath("record.jsonl")
        let empty = try EnvelopeRecording(path: path)
        #expect(empty.wasEmpty && empty.load() == 0)
        let envelope = { (seq: Int64) in
            BusEnvelope(seq: seq, kindSeq: seq, kind: .complete, topic: Array("checkout.complete".utf8),
                        bytes: Array(#"{"v":1,"seq":\#(seq),"kind_seq":\#(seq),"kind":"complete"}"#.utf8), origin: .live)
        }
        try empty.append(envelope(3))
        try empty.append(envelope(9))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"v":1,"seq":10,"kin"#.utf8))
        try handle.close()

        let reopened = try EnvelopeRecording(path: path)
        #expect(reopened.load() == 9)
        #expect(reopened.truncatedBytes == 20)
        #expect(!reopened.wasEmpty)
        try reopened.append(envelope(10))
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines.last == #"{"v":1,"seq":10,"kind_seq":10,"kind":"complete"}"#)
    }

    @Test("a torn first line leaves an empty recording")
    func recordingTornFirstLine() throws {
        let path = try temporaryPath("record.jsonl")
        try Data(#"{"v":1,"se"#.utf8).write(to: URL(fileURLWithPath: path))
        let recording = try EnvelopeRecording(path: path)
        #expect(recording.wasEmpty && recording.load() == 0 && recording.truncatedBytes == 10)
    }

    @Test("tail --count stops midway through a replayed page: its summary counts what it recorded, not the page")
    func countedSummary() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        #expect(try send(distinctEvents(50, run: "count"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let file = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("record.jsonl")
        func record(_ count: Int) throws -> (lines: Int, summary: String) {
            let run = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control,
                                                  "--since", "1", "--record", file.path, "--count", String(count)])
            #expect(run.status == 0, "\(run.output)")
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n").count
            let summary = run.output.split(separator: "\n").last { $0.hasPrefix("tail: summary") }
            return (lines, summary.map(String.init) ?? run.output)
        }
        // One replay page holds all 50; before, the summary counted the whole page (handled=50 last_seq=50).
        let first = try record(7)
        #expect(first.lines == 7)
        #expect(first.summary.contains(" handled=7 ") && first.summary.contains(" from_journal=7 ")
                    && first.summary.hasSuffix(" last_seq=7"), "\(first.summary)")
        let second = try record(3)
        #expect(second.lines == 10)
        #expect(second.summary.contains(" handled=3 ") && second.summary.hasSuffix(" last_seq=10"), "\(second.summary)")
    }

    @Test("tail --help documents the recovering flags")
    func tailHelp() throws {
        let help = try runTool("checkoutbus", ["tail", "--help"])
        #expect(help.status == 0)
        for flag in ["--since", "--control", "--record", "--receive-hwm", "--name", "--count", "--timeout"] {
            #expect(help.output.contains(flag), "\(flag) missing from tail --help")
        }
        let bad = try runTool("checkoutbus", ["tail", "--since", "x"])
        #expect(bad.status == 2)
    }
}
