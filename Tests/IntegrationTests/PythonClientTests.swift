import CheckoutBusClient
import Foundation
import Testing

/// The Python client package (`clients/python`): its pytest suite, run against the daemon and the
/// `checkoutbus` built here (`CHECKOUTBUS_BIN_DIR`). The suite spawns its own daemons on ephemeral
/// ports: a stalled receive-HWM-1 subscriber under flood, kill -9 three times mid-flood, three
/// shards, CURVE, the asyncio form, `send_acked`, and the README example pip-installed in a venv.
@Suite("Python client", .serialized, .timeLimit(.minutes(3)))
struct PythonClientTests {
    static let python: String? = PyZMQSubscriberTests.python(importing: "zmq, pytest, venv")

    @Test("python3 -m pytest clients/python/tests passes against the real daemon",
          .enabled(if: python != nil, "python3 with pyzmq and pytest is not installed (scripts/install-deps)"))
    func pytestSuite() throws {
        let python = try #require(Self.python)
        let tests = Products.repositoryRoot.appendingPathComponent("clients/python/tests")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["CHECKOUTBUS_BIN_DIR=" + Products.directory.path, "PYTHONDONTWRITEBYTECODE=1",
                       python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", tests.path]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.start()
        let lines = PipeLineReader(out.fileHandleForReading).readAll(timeout: 150)
        let status = waitForExit(p, timeout: 10)
        let output = lines.joined(separator: "\n")
        #expect(status == 0, "pytest failed:\n\(output)")
        #expect(!output.contains("skipped"), "every test ran:\n\(output)")
    }

    @Test("a cursor file the Swift FileCursor wrote is the Python FileCursor's, and the other way round",
          .enabled(if: PyZMQSubscriberTests.pythonWithZMQ != nil, "python3 with pyzmq is not installed"))
    func cursorFilesAreShared() throws {
        let python = try #require(PyZMQSubscriberTests.pythonWithZMQ)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cb-cursor-\(UUID().uuidString)")
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
