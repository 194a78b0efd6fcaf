import CheckoutBusClient
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The async ``Subscriber`` over the wire, killed with SIGKILL while a flood runs: the
/// `async-seq-recorder` fixture appends and fsyncs each envelope's `seq` before committing it, so its
/// file shows what was finished and where each restart resumed.
@Suite("async subscriber: kill -9 mid-flood", .serialized, .timeLimit(.minutes(5)))
struct AsyncSubscriberKillTests {
    @Test("killed with SIGKILL three times during a flood: every seq delivered, duplicates only right after a kill, the cursor never past unfinished work")
    func killedThreeTimes() throws {
        let daemon = try DaemonProcess()
        let directory = daemon.dataDirectory.deletingLastPathComponent()
        let cursor = directory.appendingPathComponent("async.cursor")
        let seqs = directory.appendingPathComponent("seqs.txt")
        var recorder = try AsyncRecorderProcess(daemon: daemon, cursor: cursor, seqs: seqs)
        // Paced so that it is still running through all three kills (about 4.5 s).
        let flood = try startFlood(daemon, ["--checkouts", "3000", "--seed", "31", "--rate", "3000"])
        var floodRunningAtKill: [Bool] = []
        for round in 1...3 {
            let before = recordedSeqCount(seqs)
            let grew = waitUntil(timeout: 30) { recordedSeqCount(seqs) >= before + 500 }
            #expect(grew, "round \(round): the recorder made no progress")
            floodRunningAtKill.append(flood.isRunning)
            recorder.kill9()
            recorder = try AsyncRecorderProcess(daemon: daemon, cursor: cursor, seqs: seqs)
        }
        #expect(floodRunningAtKill == [true, true, true], "the kills should land during the flood")
        #expect(waitForExit(flood, timeout: 60) == 0)

        let lastSeq = try #require(try ControlClient(daemon.control).stats().int("last_seq"))
        let caughtUp = waitUntil(timeout: 60) { (try? AsyncRecording(seqs))?.runs.last?.seqs.last ?? 0 >= lastSeq }
        recorder.kill9()
        #expect(caughtUp, "the last run did not reach seq \(lastSeq)")

        let recording = try AsyncRecording(seqs)
        #expect(recording.runs.count == 4)
        #expect(recording.runs.first?.cursor == 0)
        var finished = 0
        for (i, run) in recording.runs.enumerated() {
            // Each run resumes at its cursor, which never passed what the run before had finished.
            #expect(run.cursor <= finished, "run \(i) started at cursor \(run.cursor), past the last finished seq \(finished)")
            // And delivers every seq after it, in order, once: duplicates only at the start of a run.
            if let first = run.seqs.first { #expect(first == run.cursor + 1, "run \(i) began at \(first) with cursor \(run.cursor)") }
            #expect(run.seqs == Array(run.seqs.indices.map { run.cursor + 1 + $0 }), "run \(i) skipped or repeated a seq")
            finished = max(finished, run.seqs.last ?? finished)
        }
        #expect(Set(recording.runs.flatMap(\.seqs)) == Set(1...lastSeq), "every published seq at least once")
    }
}

/// The fixture `async-seq-recorder`, ready once it reports its subscription live.
final class AsyncRecorderProcess {
    let process = Process()
    let stderr: PipeLineReader

    init(daemon: DaemonProcess, cursor: URL, seqs: URL) throws {
        process.executableURL = Products.url("async-seq-recorder")
        process.arguments = [daemon.publish, daemon.control, cursor.path, seqs.path]
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        try process.start()
        stderr = PipeLineReader(err.fileHandleForReading)
        guard stderr.waitForLine(prefix: "recorder: subscribed", timeout: 20) else {
            kill9()
            throw HarnessError("async-seq-recorder did not report its subscription")
        }
    }

    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        reap(process)
    }

    deinit { kill9() }
}

/// The fixture's file: runs, each a `start <cursor>` line and the seqs that run finished.
struct AsyncRecording {
    struct Run {
        var cursor: Int
        var seqs: [Int] = []
    }

    var runs: [Run] = []

    init(_ file: URL) throws {
        for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n") {
            if line.hasPrefix("start ") {
                runs.append(Run(cursor: Int(line.dropFirst(6)) ?? -1))
            } else if let seq = Int(line), !runs.isEmpty {
                runs[runs.count - 1].seqs.append(seq)
            } else {
                throw HarnessError("not a line of the recorder's: \(line)")
            }
        }
    }
}

/// Lines in the fixture's file (about one per seq), 0 while there is none.
func recordedSeqCount(_ file: URL) -> Int {
    guard let data = try? Data(contentsOf: file) else { return 0 }
    return data.reduce(0) { $1 == 0x0A ? $0 + 1 : $0 }
}
