import Foundation
import Testing

// `checkoutbus tail --checkout/--code/--platform/--sdk/--source`: over the wire, live and with
// --since, each filter (and a combination with a topic prefix) prints exactly the matching envelopes.

/// A `checkoutbus tail ARGUMENTS --format json` process, started; live (`waitForSubscription`),
/// ready once it reports its subscriptions live. (With `--since` it may print its count from the
/// journal and exit before its live subscriptions are confirmed: nothing to wait for then.)
func startTail(_ arguments: [String], waitForSubscription: Bool = true) throws -> TailRun {
    let p = Process()
    p.executableURL = Products.url("checkoutbus")
    p.arguments = ["tail", "--format", "json", "--timeout", "30"] + arguments
    let out = Pipe()
    let err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.start()
    let run = TailRun(process: p, stdout: PipeLineReader(out.fileHandleForReading), stderr: PipeLineReader(err.fileHandleForReading))
    guard waitForSubscription else { return run }
    guard run.stderr.waitForLine(prefix: "tail: subscribed", timeout: 20) else {
        p.terminate()
        throw HarnessError("tail did not report its subscription")
    }
    return run
}

/// A running tail and both its pipes (kept open until it is done: a closed stderr would end it).
struct TailRun {
    let process: Process
    let stdout: PipeLineReader
    let stderr: PipeLineReader

    /// Reads the finished tail's envelopes; throws unless it exited 0.
    func envelopes() throws -> [[String: Any]] {
        let lines = stdout.readAll(timeout: 40)
        let status = waitForExit(process, timeout: 5)
        guard status == 0 else { throw HarnessError("tail exited \(status) after \(lines.count) lines") }
        return try lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }
}

@Suite("checkoutbus tail filters", .serialized, .timeLimit(.minutes(5)))
struct TailFilterTests {
    /// The shipped samples: four families, several platforms and codes, dead letters among them.
    static func sampleLines() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try ["tour.jsonl", "bridges.jsonl"].flatMap { name in
            try String(contentsOf: root.appendingPathComponent("samples/\(name)"), encoding: .utf8)
                .split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        }
    }

    /// The filters under test, each with the predicate it must match exactly.
    static var cases: [(arguments: [String], matches: ([String: Any]) -> Bool)] { [
        (["--checkout", "and-3"], { $0.string("checkout_id") == "and-3" }),
        (["--code", "network_error"], { $0.object("error")?.string("code") == "network_error" }),
        (["--platform", "android"], { $0.object("source")?.string("platform") == "android" }),
        (["--sdk", "primer"], { $0.object("source")?.string("sdk") == "primer" }),
        (["--source", "ecp"], { $0.object("source")?.string("format") == "ecp" }),
        (["--source", "sheet_bridge", "--source", "primer"],
         { ["sheet_bridge", "primer"].contains($0.object("source")?.string("format") ?? "") }),
        (["--topic", "checkout.fail", "--platform", "android"],
         { $0.string("kind") == "fail" && $0.object("source")?.string("platform") == "android" }),
    ] }

    /// Every envelope a daemon journaled, in seq order, read back with `tail --since 1`.
    static func journal(of daemon: DaemonProcess) throws -> [[String: Any]] {
        let stats = try runTool("checkoutbus", ["stats", "--control", daemon.control, "--json"])
        let lastSeq = try #require(
            (try JSONSerialization.jsonObject(with: Data(stats.output.utf8)) as? [String: Any])?.int("last_seq"))
        return try startTail(["--from", daemon.publish, "--control", daemon.control, "--since", "1",
                              "--count", String(lastSeq)], waitForSubscription: false).envelopes()
    }

    @Test("each filter, alone, repeated, with a topic prefix, live and with --since: exactly the matching envelopes")
    func filtersPrintExactlyTheMatches() throws {
        let lines = try TailFilterTests.sampleLines()
        // Dead letters among the samples make an acknowledged send exit 1; every line is answered.
        let first = try DaemonProcess()
        _ = try send(lines, to: first.ingestAcked, arguments: ["--acked"])
        let everything = try TailFilterTests.journal(of: first)
        #expect(everything.compactMap { $0.int("seq") } == Array(1...everything.count))

        // With --since: the journal, filtered. A filter that let one too many through shows in the
        // seqs; one that kept one too few never reaches its count and exits 1 at its timeout.
        for (arguments, matches) in TailFilterTests.cases {
            let expected = everything.filter(matches).compactMap { $0.int("seq") }
            #expect(!expected.isEmpty && expected.count < everything.count, "\(arguments) must select some, not all")
            let tail = try startTail(["--from", first.publish, "--control", first.control, "--since", "1",
                                      "--count", String(expected.count)] + arguments, waitForSubscription: false)
            #expect(try tail.envelopes().compactMap { $0.int("seq") } == expected, "\(arguments)")
        }

        // Live: a fresh daemon given the same lines publishes the same envelopes under the same seqs.
        let second = try DaemonProcess()
        let tails = try TailFilterTests.cases.map { arguments, matches in
            let expected = everything.filter(matches).compactMap { $0.int("seq") }
            return (arguments, expected, try startTail(["--from", second.publish, "--count", String(expected.count)] + arguments))
        }
        _ = try send(lines, to: second.ingestAcked, arguments: ["--acked"])
        for (arguments, expected, tail) in tails {
            #expect(try tail.envelopes().compactMap { $0.int("seq") } == expected, "live \(arguments)")
        }
    }
}
