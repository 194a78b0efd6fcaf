import CheckoutBusClient
import Foundation
import Testing

/// The Python client package (`clients/python`): its pytest suite, run against the daemon and the
/// `checkoutbus` built here (`CHECKOUTBUS_BIN_DIR`). The suite spawns its own daemons on ephemeral
/// ports: a stalled receive-HWM-1 subscriber under flood, kill -9 three times mid-flood, three
/// shards, CURVE, the asyncio form, `send_acked`, and the README example pip-installed in a venv.
@Suite("Python client", .serialized, .timeLimit(.minutes(4)))
struct PythonClientTests {
    static let python: String? = PyZMQSubscriberTests.python(importing: "zmq, pytest, venv")

    @Test("python3 -m pytest clients/python/tests passes against the real daemon",
          .enabled(if: python != nil, "python3 with pyzmq and pytest is not installed (scripts/install-deps)"))
    func pytestSuite() async throws {
        let python = try #require(Self.python)
        // Python's temporary files go under this process's scratch folder, removed even if pytest is killed.
        let scratch = TestScratch.url("pytest")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        let arguments = ["CHECKOUTBUS_BIN_DIR=" + Products.directory.path, "PYTHONDONTWRITEBYTECODE=1",
                         "TMPDIR=" + scratch.path, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
                         Products.repositoryRoot.appendingPathComponent("clients/python/tests").path]
        let (status, output) = try await Self.runOffPool(arguments, timeout: 170)
        #expect(status == 0, "pytest failed:\n\(output)")
        #expect(!output.contains("skipped"), "every test ran:\n\(output)")
    }

    /// Runs `/usr/bin/env ARGUMENTS` to its end on a thread of its own, so that the half-minute
    /// pytest run holds no thread of the cooperative pool the other suites run on.
    /// - Returns: its exit status (-9 when `timeout` passed and it was killed) and its output.
    static func runOffPool(_ arguments: [String], timeout: Double) async throws -> (Int32, String) {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Int32, String), any Error>) in
            let thread = Thread {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                p.arguments = arguments
                let out = Pipe()
                p.standardOutput = out
                p.standardError = out
                do {
                    try p.start()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                let lines = PipeLineReader(out.fileHandleForReading).readAll(timeout: timeout)
                let status = waitForExit(p, timeout: 10)
                continuation.resume(returning: (status, lines.joined(separator: "\n")))
            }
            thread.start()
        }
    }

    @Test("a cursor file the Swift FileCursor wrote is the Python FileCursor's, and the other way round",
          .enabled(if: PyZMQSubscriberTests.pythonWithZMQ != nil, "python3 with pyzmq is not installed"))
    func cursorFilesAreShared() throws {
        let python = try #require(PyZMQSubscriberTests.pythonWithZMQ)
        let directory = TestScratch.url("cursor-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cursor").path
        do {
            let cursor = try FileCursor(path: path)
            try cursor.commit(41)
            try cursor.commit(1_234_567_890_123)  // the second slot
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["PYTHONPATH=" + Products.repositoryRoot.appendingPathComponent("clients/python").path,
                       "PYTHONDONTWRITEBYTECODE=1", python, "-c", """
            import sys
            from checkoutbus import FileCursor
            c = FileCursor(sys.argv[1])
            assert c.load() == 1234567890123, c.load()
            c.commit(1234567890124)
            c.commit(1234567890125)
            c.close()
            """, path]
        try p.start()
        #expect(waitForExit(p, timeout: 30) == 0)
        #expect(try FileCursor.committed(at: path) == 1_234_567_890_125)
        #expect(try FileCursor(path: path).load() == 1_234_567_890_125)
    }
}
