import CheckoutBusClient
import CheckoutBusRuntime
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Silence is reported (docs/workers.md, "When the daemon goes quiet"): every subscriber says within
/// five seconds (five heartbeats at the default interval) that no heartbeat arrives, names the
/// endpoint, keeps waiting, and says so again when heartbeats are back.
@Suite("silence is reported", .serialized, .timeLimit(.minutes(5)))
struct SilenceTests {
    /// A TCP endpoint on 127.0.0.1 that nothing listens on.
    static func unusedEndpoint() throws -> String { "tcp://127.0.0.1:\(try freeLoopbackPort())" }

    /// Reads `reader` until a line contains every one of `needles`; the lines read go to `seen`.
    static func waitForLine(_ reader: PipeLineReader, _ needles: [String], timeout: Double, seen: inout [String]) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let line = reader.readLine(timeout: max(0.05, deadline.timeIntervalSinceNow)) else { continue }
            seen.append(line)
            if needles.allSatisfy({ line.contains($0) }) { return true }
        }
        return false
    }

    @Test("tail, the fulfilment worker and the Python example say when a stopped daemon's heartbeats stop, name it, and say when they are back")
    func daemonStopped() throws {
        let python = try #require(PyZMQSubscriberTests.pythonWithZMQ, "python3 with pyzmq (scripts/install-deps)")
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let tail = try TailProcess(from: daemon.publish, count: 1000, timeout: 170,
                                   arguments: ["--control", daemon.control, "--name", "quiet-tail"])
        defer { kill(tail.process.processIdentifier, SIGKILL) }
        let database = TestScratch.url("silence-\(UUID().uuidString).sqlite")
        let fulfil = try FulfilProcess(daemon: daemon, database: database)
        let state = TestScratch.url("silence-py-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let py = Process()
        py.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        py.arguments = ["PYTHONPATH=" + Products.repositoryRoot.appendingPathComponent("clients/python").path, python,
                        Products.repositoryRoot.appendingPathComponent("examples/analytics_worker.py").path,
                        daemon.publish, daemon.control, state.path]
        let pyErr = Pipe()
        py.standardError = pyErr
        py.standardOutput = FileHandle.nullDevice
        try py.start()
        defer { if py.isRunning { kill(py.processIdentifier, SIGKILL) }; reap(py) }
        let pyLines = PipeLineReader(pyErr.fileHandleForReading)
        var seen: [String] = []
        #expect(Self.waitForLine(pyLines, ["subscribed"], timeout: 20, seen: &seen))

        let readers: [(String, PipeLineReader)] = [("tail", tail.stderr), ("fulfil", fulfil.stderr), ("python", pyLines)]
        let stopped = Date()
        kill(daemon.process.processIdentifier, SIGSTOP)
        for (who, reader) in readers {
            var lines: [String] = []
            #expect(Self.waitForLine(reader, ["no heartbeat from the daemon", daemon.publish], timeout: 15, seen: &lines),
                    "\(who) said nothing of the silence: \(lines)")
        }
        // Within the documented five seconds (and the time the readers above took to be read).
        #expect(Date().timeIntervalSince(stopped) < 12)
        #expect(tail.process.isRunning && fulfil.process.isRunning && py.isRunning, "they keep waiting")
        kill(daemon.process.processIdentifier, SIGCONT)
        for (who, reader) in readers {
            var lines: [String] = []
            #expect(Self.waitForLine(reader, ["heartbeats from the daemon", "again after", daemon.publish], timeout: 15, seen: &lines),
                    "\(who) did not say the daemon is back: \(lines)")
        }
    }

    @Test("tail and the async Swift subscriber pointed at a port nobody listens on say so, naming it; the subscriber lists the shard as silent")
    func wrongPort() throws {
        let publish = try Self.unusedEndpoint(), control = try Self.unusedEndpoint()
        let tail = Process()
        tail.executableURL = Products.url("checkoutbus")
        tail.arguments = ["tail", "--from", publish, "--control", control]
        let err = Pipe()
        tail.standardError = err
        tail.standardOutput = FileHandle.nullDevice
        try tail.start()
        defer { if tail.isRunning { kill(tail.processIdentifier, SIGKILL) }; reap(tail) }
        var lines: [String] = []
        #expect(Self.waitForLine(PipeLineReader(err.fileHandleForReading), ["no heartbeat from the daemon", "since connecting", publish],
                                 timeout: 10, seen: &lines), "\(lines)")

        var options = BusSubscriber.Options(publish: publish, control: control)
        options.silenceMilliseconds = 300
        let subscriber = Subscriber(options: options, cursor: MemoryCursor(), logger: BusLogger(label: "test", level: .error))
        #expect(subscriber.silentShards.isEmpty)
        // Making the iterator starts the subscriber's own poll thread (no task of the cooperative
        // pool involved, which a loaded test run may keep waiting); dropping it stops the thread.
        var iterator: Subscriber.Envelopes.Iterator? = subscriber.envelopes.makeAsyncIterator()
        let deadline = Date().addingTimeInterval(10)
        while subscriber.silentShards.isEmpty && Date() < deadline { usleep(50_000) }
        #expect(subscriber.silentShards == [0])
        #expect(iterator != nil)
        iterator = nil
    }
}
