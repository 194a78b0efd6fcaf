import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The README's Python example, `examples/analytics_worker.py` on the `clients/python` package, run
/// as its own process against the real daemon.
@Suite("python analytics worker example", .serialized, .timeLimit(.minutes(4)))
struct PyZMQSubscriberTests {
    /// The first python3 that has pyzmq (the Debian one, from `python3-zmq`, before one on PATH).
    static let pythonWithZMQ: String? = python(importing: "zmq")

    static func python(importing modules: String) -> String? {
        for python in ["/usr/bin/python3", "/usr/local/bin/python3", "python3"] {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = [python, "-c", "import \(modules)"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            guard (try? p.start()) != nil else { continue }
            reap(p)
            if p.terminationStatus == 0 { return python }
        }
        return nil
    }

    /// A running analytics worker and its output.
    struct Worker {
        let process: Process
        let stdout: PipeLineReader

        /// SIGKILL: the worker is built to survive it, and processes this test runner starts inherit
        /// a signal mask with SIGTERM blocked (seen in /proc/PID/status), which Python keeps.
        func kill9() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            reap(process)
        }
    }

    /// Starts `examples/analytics_worker.py PUBLISH CONTROL STATE` on the repository's package and
    /// waits until it says its subscriptions are live.
    static func startAnalyticsWorker(publish: String, control: String, state: URL) throws -> Worker {
        let python = try #require(pythonWithZMQ)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["PYTHONPATH=" + Products.repositoryRoot.appendingPathComponent("clients/python").path, python,
                       Products.repositoryRoot.appendingPathComponent("examples/analytics_worker.py").path,
                       publish, control, state.path]
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.start()
        guard PipeLineReader(err.fileHandleForReading).waitForLine(prefix: "subscribed", timeout: 20) else {
            if p.isRunning { p.terminate() }
            throw HarnessError("the analytics worker did not report its subscription")
        }
        return Worker(process: p, stdout: PipeLineReader(out.fileHandleForReading))
    }

    @Test("examples/analytics_worker.py counts each complete, whatever its raw family, once",
          .enabled(if: pythonWithZMQ != nil, "python3 with pyzmq is not installed"))
    func analyticsWorker() throws {
        let daemon = try DaemonProcess()
        let state = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("analytics-py")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let worker = try Self.startAnalyticsWorker(publish: daemon.publish, control: daemon.control, state: state)
        defer { worker.kill9() }
        try send([
            #"{"jsonrpc":"2.0","method":"ec.start","params":{"checkout":{"id":"py-1","currency":"USD"}}}"#,
            #"{"checkout_id":"py-2","payload":{"name":"error","body":"[{\"group\":\"expired\",\"code\":\"cart_expired\",\"reason\":\"x\"}]"}}"#,
            #"{"event":"onCheckoutCompleted","checkout":{"id":"py-3","order":{"id":"o-3"}}}"#,
            #"{"checkout_id":"py-4","sdk":"primer","payload":{"state":"failure","error":{"errorId":"bad-network"}}}"#,
            #"{"event":"onCheckoutCompleted","checkout":{"id":"py-3","order":{"id":"o-3"}}}"#,
            #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":{"id":"py-5","status":"completed","currency":"EUR","order":{"id":"o-5"}}}}"#,
        ], to: daemon.ingest)
        var printed: [[String: Any]] = []
        while printed.count < 2, let line = worker.stdout.readLine(timeout: 30) {
            printed.append(try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]))
        }
        // py-3's second complete is published as a repeat and not counted.
        #expect(printed.map { $0.string("checkout_id") } == ["py-3", "py-5"])
        #expect(printed.map { $0.string("currency") } == ["?", "EUR"])
        // The totals file is replaced after each line is printed: wait for the second count in it.
        let file = state.appendingPathComponent("totals.json")
        func completes() -> Int? {
            guard let data = try? Data(contentsOf: file) else { return nil }
            return (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?.int("completes")
        }
        #expect(waitUntil(timeout: 10) { completes() == 2 }, "totals.json counts \(completes() ?? -1)")
        worker.kill9()
    }

    @Test("Ctrl-C stops examples/analytics_worker.py quietly: one line, exit 130, no traceback",
          .enabled(if: pythonWithZMQ != nil, "python3 with pyzmq is not installed"))
    func interruptIsQuiet() throws {
        let python = try #require(Self.pythonWithZMQ)
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        let state = TestScratch.url("py-int-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // The runner's children inherit a signal mask that blocks SIGTERM and SIGINT: a terminal's
        // Ctrl-C reaches a process that has them unblocked, as this one now has.
        let script = Products.repositoryRoot.appendingPathComponent("examples/analytics_worker.py").path
        p.arguments = ["PYTHONPATH=" + Products.repositoryRoot.appendingPathComponent("clients/python").path, python, "-c",
                       "import runpy, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
                           + "signal.signal(signal.SIGINT, signal.default_int_handler); sys.argv = sys.argv[1:]; "
                           + "runpy.run_path(sys.argv[0], run_name='__main__')",
                       script, daemon.publish, daemon.control, state.path]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.start()
        let reader = PipeLineReader(err.fileHandleForReading)
        #expect(reader.waitForLine(prefix: "subscribed", timeout: 20))
        kill(p.processIdentifier, SIGINT)
        let status = waitForExit(p, timeout: 20)
        let rest = reader.readAll(timeout: 2)
        #expect(status == 130, "exit \(status): \(rest)")
        #expect(rest == ["analytics-py: interrupted"], "\(rest)")
    }
}
