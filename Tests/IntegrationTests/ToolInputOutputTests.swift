import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What the tools do with inputs and outputs that fail or are odd, run as a user runs them: each
/// was found crashing (a trap in Foundation's reads, a time before year 0) or exiting 0 with its
/// output lost.
@Suite("tools: odd inputs and failing outputs", .serialized, .timeLimit(.minutes(4)))
struct ToolInputOutputTests {
    /// Runs `checkoutbus` with `stdin` and `stdout` as given (nil: a pipe), stderr captured.
    static func run(_ arguments: [String], stdin: FileHandle? = nil, stdout: FileHandle? = nil,
                    feed: ((FileHandle) -> Void)? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        let p = Process()
        p.executableURL = Products.url("checkoutbus")
        p.arguments = arguments
        let err = Pipe()
        let out = Pipe()
        p.standardError = err
        p.standardOutput = stdout ?? out
        if let stdin { p.standardInput = stdin }
        try p.start()
        let errLines = PipeLineReader(err.fileHandleForReading)
        let outLines = stdout == nil ? PipeLineReader(out.fileHandleForReading) : nil
        let status = waitForExit(p, timeout: 30)
        return (status, outLines?.readAll(timeout: 5).joined(separator: "\n") ?? "",
                errLines.readAll(timeout: 5).joined(separator: "\n"))
    }

    static var tour: String { Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl").path }

    @Test("decode: a directory on standard input is exit 1 with the reason; a non-blocking one is waited on")
    func decodeStandardInput() throws {
        let directory = try #require(FileHandle(forReadingAtPath: NSTemporaryDirectory()))
        let bad = try Self.run(["decode"], stdin: directory)
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("cannot read standard input: Is a directory"), "\(bad.stderr)")
        // A pipe left non-blocking, written a moment after the tool started.
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        try #require(fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK) == 0)
        let reader = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        let text = try String(contentsOfFile: Self.tour, encoding: .utf8)
        let writeEnd = ends[1]
        let writer = Thread {
            usleep(300_000)
            _ = text.withCString { write(writeEnd, $0, strlen($0)) }
            close(writeEnd)
        }
        writer.start()
        let good = try Self.run(["decode"], stdin: reader)
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.split(separator: "\n").count == text.split(separator: "\n").count)
    }

    @Test("output that cannot be written is exit 1 with the reason, not 0 with the output lost")
    func standardOutputFull() throws {
        let full = try #require(FileHandle(forWritingAtPath: "/dev/full"))
        let r = try Self.run(["decode", "--format", "json", Self.tour], stdout: full)
        #expect(r.status == 1)
        #expect(r.stderr.contains("checkoutbus: cannot write to standard output: No space left on device"), "\(r.stderr)")
    }

    @Test("cursor refuses a directory for PATH (exit 1), where reading it trapped")
    func cursorDirectory() throws {
        for arguments in [["cursor", "show", NSTemporaryDirectory()],
                          ["cursor", "set", NSTemporaryDirectory(), "--to-seq", "5", "--dry-run"]] {
            let r = try Self.run(arguments)
            #expect(r.status == 1, "\(arguments) \(r.stderr)")
            #expect(r.stderr.contains("is a directory"), "\(r.stderr)")
        }
    }

    @Test("trace refuses a checkout id its request could not carry (exit 2 at once), not 10 s of no answer")
    func traceLongID() throws {
        let started = Date()
        let r = try Self.run(["trace", String(repeating: "L", count: 70_000), "--control", "tcp://127.0.0.1:9"])
        #expect(r.status == 2)
        #expect(r.stderr.contains("64 KiB limit"), "\(r.stderr)")
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test("a duration back from now that reaches before 1970 is from the oldest: tail starts, no trap")
    func durationBeforeTheEpoch() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        #expect(try send(["{\"checkout_id\":\"old-1\",\"payload\":{\"event\":\"onDismiss\"}}"], to: daemon.ingest).status == 0)
        let r = try Self.run(["tail", "--from", daemon.publish, "--control", daemon.control, "--since", "750000d",
                              "--count", "1", "--format", "json"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("\"checkout_id\":\"old-1\""), "\(r.stdout)")
        #expect(r.stderr.contains("1970-01-01T00:00:00.000Z is seq 1"), "\(r.stderr)")
    }
}
