import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Finds the built executables next to the test bundle, as a user finds them in `.build/<config>`.
enum Products {
    static let directory: URL = {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        // The test runner may live inside a bundle directory; walk up until the daemon is beside us.
        for _ in 0..<4 {
            if FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent("checkoutbusd").path) { return dir }
            dir = dir.deletingLastPathComponent()
        }
        return exe.deletingLastPathComponent()
    }()

    static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// The repository root, for shipped samples and examples.
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
}

/// Reads lines from a pipe with a deadline (poll + read), so no test can hang on a silent process.
final class PipeLineReader {
    let fd: Int32
    private var buffer: [UInt8] = []
    private(set) var closed = false

    init(_ handle: FileHandle) { fd = handle.fileDescriptor }

    /// The next line, or nil on EOF or when `timeout` passes.
    func readLine(timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<nl], as: UTF8.self)
                buffer.removeSubrange(...nl)
                return line
            }
            if closed { return nil }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&pfd, 1, Int32(min(remaining, 1) * 1000) + 1)
            if r <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 {
                closed = true
                if !buffer.isEmpty {
                    let line = String(decoding: buffer, as: UTF8.self)
                    buffer.removeAll()
                    return line
                }
                return nil
            }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Every remaining line until EOF or `timeout`.
    /// Reads lines until one starts with `prefix` (true), or `timeout` passes (false); a
    /// subscriber's warnings (a silence on a loaded host) may come before it.
    func waitForLine(prefix: String, timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while let line = readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
            if line.hasPrefix(prefix) { return true }
        }
        return false
    }

    func readAll(timeout: Double) -> [String] {
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while let line = readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) { lines.append(line) }
        return lines
    }
}

/// A running `checkoutbusd` on ephemeral ports, killed when the test ends.
final class DaemonProcess {
    let process = Process()
    let stdout: PipeLineReader
    let stderrURL: URL
    let ready: [String: Any]
    let dataDirectory: URL

    var ingest: String { ready["ingest"] as! String }
    var ingestAcked: String { ready["ingest_acked"] as! String }
    var publish: String { ready["publish"] as! String }
    var control: String { ready["control"] as! String }

    /// Starts a daemon on ephemeral ports; `dataDirectory` reuses a journal (a restart);
    /// `launcher` runs it through another program (`prlimit --fsize=…`) that execs it;
    /// `failpoints` sets `CHECKOUTBUS_FAILPOINTS` (docs/durability.md, "Failpoints").
    init(_ extraArguments: [String] = [], ingest: String = "tcp://127.0.0.1:*",
         publish: String = "tcp://127.0.0.1:*", dataDirectory reuse: URL? = nil, launcher: [String] = [],
         failpoints: String? = nil) throws {
        let tmp = TestScratch.url("cb-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: true)
        dataDirectory = reuse ?? tmp.appendingPathComponent("data")
        stderrURL = tmp.appendingPathComponent("daemon.stderr")
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process.executableURL = launcher.isEmpty ? Products.url("checkoutbusd") : URL(fileURLWithPath: launcher[0])
        process.arguments = (launcher.isEmpty ? [] : Array(launcher.dropFirst()) + [Products.url("checkoutbusd").path])
            + ["--ingest", ingest, "--publish", publish, "--ingest-acked", "tcp://127.0.0.1:*",
                             "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*", "--data-dir", dataDirectory.path]
            + extraArguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: stderrURL)
        if let failpoints {
            var environment = ProcessInfo.processInfo.environment
            environment["CHECKOUTBUS_FAILPOINTS"] = failpoints
            process.environment = environment
        }
        try process.start()
        stdout = PipeLineReader(out.fileHandleForReading)
        guard let line = stdout.readLine(timeout: 20),
            let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        else {
            process.terminate()
            throw HarnessError("daemon printed no ready line; stderr: \((try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "")")
        }
        ready = obj
    }

    var stderrText: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Endpoints for a daemon a test will restart in place: ports below the kernel's ephemeral
    /// range (/proc/sys/net/ipv4/ip_local_port_range starts at 32768), each checked free by
    /// binding it once. A port a daemon got from `:*` could be handed to another test's `:*` while
    /// the daemon was down, and the restart failed with "address already in use".
    static func restartableEndpoints() -> [String] {
        func isFree(_ port: Int) -> Bool {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let size = socklen_t(MemoryLayout<sockaddr_in>.size)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) }
            } == 0
        }
        var ports: [Int] = []
        while ports.count < 4 {
            let port = Int.random(in: 20_000..<32_000)
            if !ports.contains(port) && isFree(port) { ports.append(port) }
        }
        let flags = ["--ingest", "--ingest-acked", "--publish", "--control"]
        return zip(flags, ports).flatMap { [$0, "tcp://127.0.0.1:\($1)"] }
    }

    /// The flags that bind a new daemon to this one's endpoints (a restart in place).
    var sameEndpoints: [String] {
        ["--ingest", ingest, "--ingest-acked", ingestAcked, "--publish", publish, "--control", control]
    }

    /// Lifts the file size limit a `prlimit --fsize=…` launcher set (space comes back): only the
    /// soft limit was lowered, so no privilege is needed. Returns prlimit's exit status.
    func liftFileSizeLimit() throws -> Int32 {
        let raise = Process()
        raise.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        raise.arguments = ["--pid", String(process.processIdentifier), "--fsize=unlimited:unlimited"]
        try raise.start()
        return waitForExit(raise, timeout: 10)
    }

    /// SIGKILL, as a crash would: no drain, no final sync.
    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        reap(process)
    }

    /// Sends SIGTERM and waits; returns the exit status.
    @discardableResult
    ///
    /// A daemon still running at the deadline is killed; first its threads and the end of its log
    /// are printed, so a failed expectation on the status says where it stood.
    func terminate(timeout: Double = 20) -> Int32 {
        if process.isRunning { process.terminate() }
        let pid = process.processIdentifier
        return waitForExit(process, timeout: timeout) { [stderrURL] in
            let log = (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? ""
            print("checkoutbusd pid \(pid) still running \(timeout) s after SIGTERM; threads: \(threadStates(pid))")
            print("its log ends:\n" + log.split(separator: "\n").suffix(15).joined(separator: "\n"))
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            reap(process)
        }
    }
}

/// A `checkoutbus tail --format json` subscriber process, ready once its subscriptions are live.
final class TailProcess {
    let process = Process()
    let stdout: PipeLineReader
    let stderr: PipeLineReader

    init(from endpoint: String, topics: [String] = [], count: Int, timeout: Int = 30, arguments extra: [String] = []) throws {
        process.executableURL = Products.url("checkoutbus")
        process.arguments = ["tail", "--from", endpoint, "--format", "json", "--count", String(count),
                             "--timeout", String(timeout)] + topics.flatMap { ["--topic", $0] } + extra
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.start()
        stdout = PipeLineReader(out.fileHandleForReading)
        stderr = PipeLineReader(err.fileHandleForReading)
        // Synchronise on something real: tail reports its subscriptions live after the daemon's
        // heartbeat answers them. A loaded host may delay that past tail's own silence warning,
        // which comes first then.
        let deadline = Date().addingTimeInterval(20)
        var seen: [String] = []
        while true {
            guard let line = stderr.readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) else {
                process.terminate()
                throw HarnessError("tail did not report its subscription: \(seen)")
            }
            if line.hasPrefix("tail: subscribed") { break }
            seen.append(line)
        }
    }

    /// Waits for tail to print its envelopes and exit; returns them parsed.
    func envelopes(timeout: Double = 40) throws -> [[String: Any]] {
        let lines = stdout.readAll(timeout: timeout)
        let status = waitForExit(process, timeout: 5)
        guard status == 0 else { throw HarnessError("tail exited \(status) after \(lines.count) lines") }
        return try lines.map { line in
            guard let obj = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw HarnessError("not a JSON object: \(line)")
            }
            return obj
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            reap(process)
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Waits for a process with a deadline, killing it if it overstays. Returns its exit status.
///
/// A process that has ended is recognised by its state in `/proc` (a zombie), not only by
/// `Process.isRunning`: Foundation on Linux can miss a child's exit when many run at once, and a
/// process that exited in time must not be reported as killed. `beforeKill` runs only for a
/// process that is really still running at the deadline (to record why, before SIGKILL).
@discardableResult
func waitForExit(_ process: Process, timeout: Double, beforeKill: (() -> Void)? = nil) -> Int32 {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline {
        if hasEnded(process.processIdentifier) { return reap(process, timeout: 2) }
        usleep(10_000)
    }
    if !process.isRunning { return process.terminationStatus }
    if hasEnded(process.processIdentifier) { return reap(process, timeout: 2) }
    beforeKill?()
    kill(process.processIdentifier, SIGKILL)
    reap(process)
    return -9
}

/// Whether child `pid` has ended and waits to be reaped: its state in `/proc/PID/stat` is `Z`.
func hasEnded(_ pid: Int32) -> Bool {
    procState("/proc/\(pid)/stat") == "Z"
}

/// The state letter of a `/proc/…/stat` file (after the last `)`: the command name may hold any
/// byte), or nil when it cannot be read.
func procState(_ path: String) -> String? {
    guard let stat = try? String(contentsOfFile: path, encoding: .utf8), let close = stat.lastIndex(of: ")") else {
        return nil
    }
    return stat[stat.index(after: close)...].split(separator: " ").first.map(String.init)
}

/// Each thread of a running process with its state and kernel wait channel, from `/proc`: what a
/// process that overstayed its deadline was doing.
func threadStates(_ pid: Int32) -> String {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    return tasks.sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }.map { tid in
        let base = "/proc/\(pid)/task/\(tid)/"
        let name = (try? String(contentsOfFile: base + "comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? "?"
        let state = procState(base + "stat") ?? "?"
        let wchan = (try? String(contentsOfFile: base + "wchan", encoding: .utf8)) ?? "?"
        return "\(tid) \(name) \(state) \(wchan)"
    }.joined(separator: "; ")
}

/// Waits for a process that has ended or been sent SIGKILL, and returns its status (negative: the
/// signal that ended it) — never forever. Foundation on Linux can miss a child's exit when many
/// run at once (seen here: a zombie `checkoutbus` that `waitUntilExit` waited for until the run
/// was killed), so after `timeout` seconds of `isRunning` the child is reaped here with
/// `waitpid`; if even that finds nothing, -9 is returned rather than hanging the suite.
@discardableResult
func reap(_ process: Process, timeout: Double = 20) -> Int32 {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    if !process.isRunning { return process.terminationStatus }
    let last = Date().addingTimeInterval(10)
    while Date() < last {
        var status: Int32 = 0
        if waitpid(process.processIdentifier, &status, WNOHANG) == process.processIdentifier {
            return status & 0x7F == 0 ? (status >> 8) & 0xFF : -(status & 0x7F)
        }
        if !process.isRunning { return process.terminationStatus }
        usleep(10_000)
    }
    return -9
}

/// Runs `checkoutbus send --to ENDPOINT [ARGUMENTS]` with `lines` on stdin, one per line; returns
/// its exit status and stderr.
@discardableResult
func send(_ lines: [String], to endpoint: String, arguments: [String] = []) throws -> (status: Int32, stderr: String) {
    try sendBytes(Array((lines.joined(separator: "\n") + "\n").utf8), to: endpoint, arguments: arguments)
}

/// Runs `checkoutbus send` with raw bytes on stdin (for invalid UTF-8 and the like).
@discardableResult
func sendBytes(_ bytes: [UInt8], to endpoint: String, arguments: [String] = []) throws -> (status: Int32, stderr: String) {
    let p = Process()
    p.executableURL = Products.url("checkoutbus")
    p.arguments = ["send", "--to", endpoint] + arguments
    let input = Pipe()
    let err = Pipe()
    p.standardInput = input
    p.standardError = err
    try p.start()
    input.fileHandleForWriting.write(Data(bytes))
    try input.fileHandleForWriting.close()
    let errReader = PipeLineReader(err.fileHandleForReading)
    let errText = errReader.readAll(timeout: 30).joined(separator: "\n")
    return (waitForExit(p, timeout: 30), errText)
}

/// Runs an executable to completion and returns (status, stdout).
func runTool(_ name: String, _ arguments: [String], timeout: Double = 30,
             environment: [String: String] = [:]) throws -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = Products.url(name)
    p.arguments = arguments
    if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    try p.start()
    let text = PipeLineReader(out.fileHandleForReading).readAll(timeout: timeout).joined(separator: "\n")
    return (waitForExit(p, timeout: 30), text)
}

/// The fields (`key=value`) of the last `msg=stopped` line in a process's log; empty without one.
func stoppedFields(_ log: String) -> [String: String] {
    let line = log.split(separator: "\n").last { $0.contains("msg=stopped") } ?? ""
    var fields: [String: String] = [:]
    for pair in line.split(separator: " ") {
        let kv = pair.split(separator: "=", maxSplits: 1)
        if kv.count == 2 { fields[String(kv[0])] = String(kv[1]) }
    }
    return fields
}

/// Runs `checkoutbus flood ARGUMENTS --json` to completion, expects it to exit 0, and returns its
/// report (the last line of its output).
func floodReport(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    let result = try runTool("checkoutbus", ["flood"] + arguments + ["--json"])
    #expect(result.status == 0, "\(result.output)", sourceLocation: sourceLocation)
    let line = try #require(result.output.split(separator: "\n").last.map(String.init), sourceLocation: sourceLocation)
    return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                        sourceLocation: sourceLocation)
}

extension Dictionary where Key == String, Value == Any {
    func object(_ key: String) -> [String: Any]? { self[key] as? [String: Any] }
    func string(_ key: String) -> String? { self[key] as? String }
    func int(_ key: String) -> Int? { (self[key] as? NSNumber)?.intValue }
    func bool(_ key: String) -> Bool? { (self[key] as? NSNumber)?.boolValue }
}

extension Process {
    /// `run()`, tried again when it fails with `EBADF`: Foundation lists the test process's open
    /// descriptors to close them in the child, and a descriptor another test closes in between makes
    /// `posix_spawn` fail with "Bad file descriptor" — a race of the test process, not of the
    /// program under test. Any other error is thrown at once.
    func start() throws {
        var attempt = 0
        while true {
            do {
                try run()
                return
            } catch let error as NSError where error.domain == NSPOSIXErrorDomain && error.code == Int(EBADF) && attempt < 5 {
                attempt += 1
            }
        }
    }
}
