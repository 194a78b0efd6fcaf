import Foundation
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// The `seq` of one envelope line.
func seqOf(_ line: [UInt8]) throws -> Int {
    guard let obj = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], let seq = obj.int("seq") else {
        throw HarnessError("not an envelope with a seq: \(String(decoding: line.prefix(200), as: UTF8.self))")
    }
    return seq
}

/// A `checkoutbus tail --record FILE --since 1` recorder, started and waited for until its
/// subscriptions are live (`tail: subscribed` on stderr).
final class RecorderProcess {
    let process = Process()
    let stderr: PipeLineReader
    /// Every stderr line read so far.
    private(set) var stderrLines: [String] = []

    init(publish: String, control: String, file: URL, name: String, extraArguments: [String] = []) throws {
        process.executableURL = Products.url("checkoutbus")
        process.arguments = ["tail", "--from", publish, "--control", control, "--since", "1", "--record", file.path,
                             "--name", name] + extraArguments
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        try process.start()
        stderr = PipeLineReader(err.fileHandleForReading)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            guard let line = stderr.readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { break }
            stderrLines.append(line)
            if line.hasPrefix("tail: subscribed") { return }
        }
        kill(process.processIdentifier, SIGKILL)
        reap(process)
        throw HarnessError("the recorder did not report its subscription; stderr: \(stderrLines)")
    }

    var pid: Int32 { process.processIdentifier }

    func kill9() {
        kill(pid, SIGKILL)
        reap(process)
    }

    /// SIGTERM, wait, and return the summary's counts (`tail: summary key=value …`).
    func stop() throws -> [String: Int] {
        kill(pid, SIGTERM)
        stderrLines += stderr.readAll(timeout: 20)
        let status = waitForExit(process, timeout: 5)
        guard status == 0 else { throw HarnessError("the recorder exited \(status); stderr: \(stderrLines)") }
        guard let summary = stderrLines.last(where: { $0.hasPrefix("tail: summary ") }) else {
            throw HarnessError("no summary on stderr: \(stderrLines)")
        }
        var counts: [String: Int] = [:]
        for pair in summary.dropFirst("tail: summary ".count).split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let v = Int(kv[1]) { counts[String(kv[0])] = v }
        }
        return counts
    }

    deinit {
        if process.isRunning {
            kill(pid, SIGKILL)
            reap(process)
        }
    }
}

/// `checkoutbus flood` against a daemon, in the background; its report goes to `output`.
func startFlood(_ daemon: DaemonProcess, _ arguments: [String]) throws -> Process {
    let p = Process()
    p.executableURL = Products.url("checkoutbus")
    p.arguments = ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--json"] + arguments
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.start()
    return p
}

/// A recording's complete lines.
func recordedLines(_ file: URL) throws -> [[UInt8]] {
    let bytes = [UInt8](try Data(contentsOf: file))
    return bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast().map(Array.init)
}

func fileSize(_ file: URL) -> Int {
    var st = stat()
    return stat(file.path, &st) == 0 ? Int(st.st_size) : 0
}

/// The `seq` of a recording's last complete line (0 when it has none), reading only its tail.
func lastRecordedSeq(_ file: URL) -> Int {
    guard let handle = try? FileHandle(forReadingFrom: file) else { return 0 }
    defer { try? handle.close() }
    let size = fileSize(file)
    let start = max(0, size - 256 * 1024)
    try? handle.seek(toOffset: UInt64(start))
    guard let data = try? handle.readToEnd() else { return 0 }
    let lines = [UInt8](data).split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
    guard let last = lines.last, let seq = try? seqOf(Array(last)) else { return 0 }
    return seq
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held. For conditions
/// on files and other processes' progress, which offer nothing to block on.
@discardableResult
func waitUntil(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}
