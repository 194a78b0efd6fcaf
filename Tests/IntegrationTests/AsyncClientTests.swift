import CheckoutBusClient
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The README's async snippet, as a package of its own that imports only `CheckoutBusClient`,
/// built and run against a real daemon.
@Suite("Async client: the README's snippet", .serialized, .timeLimit(.minutes(10)))
struct AsyncClientTests {
    static let example = Products.repositoryRoot.appendingPathComponent("examples/async-subscriber")

    /// The first ```swift block of the README's subscriber section.
    static func readmeSnippet() throws -> String {
        let readme = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.range(of: "### Subscribing in Swift without losing an envelope"))
        let rest = readme[section.upperBound...]
        let open = try #require(rest.range(of: "```swift\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```\n"))
        return String(rest[open.upperBound..<close.lowerBound])
    }

    @Test("the README's snippet is the example's main.swift, byte for byte")
    func snippetIsTheExample() throws {
        let main = try String(contentsOf: Self.example.appendingPathComponent("Sources/async-subscriber/main.swift"),
                              encoding: .utf8)
        #expect(try Self.readmeSnippet() == main)
    }

    @Test("the example builds on CheckoutBusClient alone, receives the tour, and resumes after its cursor")
    func exampleReceivesTheTour() throws {
        // A copy whose dependency points at this repository, built in a scratch path of its own.
        let work = TestScratch.url("cb-async-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let package = work.appendingPathComponent("async-subscriber")
        try FileManager.default.copyItem(at: Self.example, to: package)
        try? FileManager.default.removeItem(at: package.appendingPathComponent(".build"))
        let manifest = package.appendingPathComponent("Package.swift")
        let original = try String(contentsOf: manifest, encoding: .utf8)
        #expect(original.contains(#"path: "../..""#))
        try original.replacingOccurrences(of: #"path: "../..""#, with: "path: \"\(Products.repositoryRoot.path)\"")
            .write(to: manifest, atomically: true, encoding: .utf8)
        let scratch = work.appendingPathComponent("scratch")
        let build = try run(["swift", "build", "--package-path", package.path, "--scratch-path", scratch.path], timeout: 540)
        #expect(build.status == 0, "\(build.output)")
        guard build.status == 0 else { return }
        // Only the client's modules were compiled: no daemon, no core.
        let built = try FileManager.default.subpathsOfDirectory(atPath: scratch.path)
        // (SwiftPM plans every target of the dependency, so their directories exist; nothing is compiled in them.)
        let compiled = built.filter { $0.hasSuffix(".o") || $0.hasSuffix(".swiftmodule") }
        #expect(compiled.contains { $0.contains("CheckoutBusClient") })
        for module in ["CheckoutBusDaemon", "CheckoutBusCore"] {
            #expect(!compiled.contains { $0.contains(module) }, "the example's build compiled \(module)")
            #expect(!build.output.contains("Compiling \(module)"), "the example's build compiled \(module)")
        }
        let binary = try #require(built.first { $0.hasSuffix("/async-subscriber") && !$0.contains(".build/") && !$0.contains(".dSYM") }
            .map { scratch.appendingPathComponent($0) }
            .flatMap { FileManager.default.isExecutableFile(atPath: $0.path) ? $0 : nil })

        let daemon = try DaemonProcess()
        let tour = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl"), encoding: .utf8)
            .split(separator: "\n").map(String.init)
        #expect(try send(tour, to: daemon.ingest).status == 0)
        let cursor = work.appendingPathComponent("async.cursor").path

        // First run: the twelve envelopes of the tour, in order, from the journal.
        let first = try ExampleProcess(binary, [daemon.publish, daemon.control, cursor])
        let lines = first.lines(12, timeout: 60)
        let seqs: [String] = lines.map { line in String(line.prefix { $0 != " " }) }
        #expect(seqs == (1...12).map { String($0) })
        #expect(lines.first?.contains("checkout.start") == true)
        #expect(lines.contains { $0.contains("checkout.complete gid://shopify/Checkout/tour-1") })
        #expect(lines.last?.contains("bus.deadletter") == true)
        first.kill9()
        // The twelfth was printed before it was committed: the cursor is 11 or 12, never beyond.
        let committed = try FileCursor.committed(at: cursor)
        #expect((11...12).contains(committed))

        // Second run on the same cursor, after one more event: what was not committed, then the new one.
        #expect(try send([#"{"event":"checkoutDidDismiss","checkout_id":"async-1"}"#], to: daemon.ingestAcked,
                         arguments: ["--acked"]).status == 0)
        let second = try ExampleProcess(binary, [daemon.publish, daemon.control, cursor])
        let expected: [String] = ((committed + 1)...13).map { String($0) }
        let again = second.lines(expected.count, timeout: 60)
        let againSeqs: [String] = again.map { line in String(line.prefix { $0 != " " }) }
        #expect(againSeqs == expected)
        second.kill9()
    }

    private func run(_ arguments: [String], timeout: Double) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let log = TestScratch.url("cb-build-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: log) }
        process.standardOutput = try FileHandle(forWritingTo: log)
        process.standardError = process.standardOutput
        try process.start()
        let status = waitForExit(process, timeout: timeout)
        return (status, (try? String(contentsOf: log, encoding: .utf8)) ?? "")
    }
}

/// The example running with its output line-buffered (`stdbuf -oL`), read line by line.
final class ExampleProcess {
    let process = Process()
    let stdout: PipeLineReader

    init(_ binary: URL, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")
        process.arguments = ["-oL", binary.path] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.start()
        stdout = PipeLineReader(out.fileHandleForReading)
    }

    func lines(_ count: Int, timeout: Double) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        var lines: [String] = []
        while lines.count < count, let line = stdout.readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
            lines.append(line)
        }
        return lines
    }

    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        reap(process)
    }

    deinit { kill9() }
}
