import Foundation
import Testing

/// The package's layers, read from the manifest (`swift package dump-package`) and the sources'
/// `import` lines: what an app gets when it depends on `CheckoutBusClient`, and that every target
/// imports only what it declares.
@Suite("package shape", .serialized)
struct PackageShapeTests {
    struct Target {
        let name: String
        let dependencies: [String]
        let hasUnsafeFlags: Bool
        let isTest: Bool
    }

    /// The manifest's targets, by name.
    static let targets: [String: Target] = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // Its own scratch path: `swift test` holds the package's build directory lock meanwhile.
        let scratch = TestScratch.url("cb-dump-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.arguments = ["swift", "package", "--scratch-path", scratch.path, "dump-package"]
        process.currentDirectoryURL = Products.repositoryRoot
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        guard (try? process.start()) != nil else { return [:] }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let list = root["targets"] as? [[String: Any]]
        else { return [:] }
        var result: [String: Target] = [:]
        for t in list {
            guard let name = t["name"] as? String else { continue }
            let deps = (t["dependencies"] as? [[String: Any]] ?? []).compactMap { dep -> String? in
                ((dep["byName"] ?? dep["target"] ?? dep["product"]) as? [Any])?.first as? String
            }
            let settings = t["settings"] as? [[String: Any]] ?? []
            let unsafe = settings.contains { ($0["kind"] as? [String: Any])?["unsafeFlags"] != nil }
            result[name] = Target(name: name, dependencies: deps, hasUnsafeFlags: unsafe, isTest: (t["type"] as? String) == "test")
        }
        return result
    }()

    static func closure(of name: String) -> Set<String> {
        var seen: Set<String> = []
        var stack = [name]
        while let next = stack.popLast() {
            for dep in targets[next]?.dependencies ?? [] where !seen.contains(dep) {
                seen.insert(dep)
                stack.append(dep)
            }
        }
        return seen
    }

    @Test("the client an app imports holds no daemon, core or tools code and no unsafe flags")
    func clientClosure() throws {
        try #require(!Self.targets.isEmpty, "swift package dump-package gave no targets")
        let closure = Self.closure(of: "CheckoutBusClient").union(["CheckoutBusClient"])
        #expect(closure.isDisjoint(with: ["CheckoutBusCore", "CheckoutBusDaemon", "CheckoutBusTools", "CheckoutBusLoad", "CFileIO"]))
        for name in closure {
            #expect(Self.targets[name]?.hasUnsafeFlags == false, "\(name) has unsafe flags: apps could not pin the client by version")
        }
    }

    @Test("only what an app imports is public: the client and the targets it stands on; the rest is package")
    func publicOnlyInTheClient() throws {
        try #require(!Self.targets.isEmpty)
        let appFacing = Self.closure(of: "CheckoutBusClient").union(["CheckoutBusClient"])
        var scanned = 0
        for (name, target) in Self.targets where !target.isTest && !appFacing.contains(name) {
            let dir = Products.repositoryRoot.appendingPathComponent("Sources/\(name)")
            guard let files = FileManager.default.enumerator(atPath: dir.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                scanned += 1
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let code = line.drop { $0 == " " }
                    if code.hasPrefix("//") { continue }
                    let modifiers = code.split(separator: " ").prefix { $0.hasPrefix("@") || $0 == "public" }
                    #expect(!modifiers.contains("public"), "\(name)/\(file): \(code)")
                }
            }
        }
        #expect(scanned > 100, "only \(scanned) files scanned")
    }

    @Test("workers and the bridge stand on the client, never on the daemon")
    func workersOnTheClient() throws {
        try #require(!Self.targets.isEmpty)
        for name in ["CheckoutBusWorkers", "CheckoutBusJetStream", "checkoutbus-fulfil", "checkoutbus-analytics", "checkoutbus-jetstream"] {
            let closure = Self.closure(of: name)
            #expect(closure.contains("CheckoutBusClient"), "\(name)")
            #expect(!closure.contains("CheckoutBusDaemon") && !closure.contains("CheckoutBusCore"), "\(name)")
        }
    }

    @Test("the tools and the load code import the daemon only where they run its own code")
    func toolsReachTheDaemonRarely() throws {
        // Each file, and the daemon's code it runs: everything else reaches a daemon over the wire,
        // through the protocol, the client and the runtime.
        let allowed: [String: String] = [
            "CheckoutBusTools/Commands/DecodeCommand.swift": "the daemon's processor and settings, offline",
            "CheckoutBusTools/Commands/TraceCommand.swift": "the suppressed-id log's reader",
            "CheckoutBusTools/Commands/RouteCommand.swift": "the shards' --max-message-bytes and the loopback check",
            "CheckoutBusLoad/JournalBenchmark.swift": "the journal, benchmarked",
        ]
        var importing: Set<String> = []
        for target in ["CheckoutBusTools", "CheckoutBusLoad"] {
            let dir = Products.repositoryRoot.appendingPathComponent("Sources/\(target)")
            guard let files = FileManager.default.enumerator(atPath: dir.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                if text.split(separator: "\n").contains("import CheckoutBusDaemon") { importing.insert(target + "/" + file) }
            }
        }
        #expect(!importing.isEmpty, "no file found: the scan is broken")
        #expect(importing.isSubset(of: Set(allowed.keys)),
                "files importing the daemon beyond the allowed: \(importing.subtracting(allowed.keys).sorted())")
    }

    @Test("every target imports only the package targets it declares")
    func importsAreDeclared() throws {
        try #require(!Self.targets.isEmpty)
        let packageModules = Set(Self.targets.keys)
        var checked = 0
        for (name, target) in Self.targets {
            let dir = Products.repositoryRoot.appendingPathComponent(target.isTest ? "Tests/\(name)" : "Sources/\(name)")
            guard let files = FileManager.default.enumerator(atPath: dir.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.hasPrefix("@testable import ") {
                    let module = String(line.split(separator: " ").last ?? "")
                    guard packageModules.contains(module) else { continue }
                    checked += 1
                    #expect(target.dependencies.contains(module), "\(name)/\(file) imports \(module) without declaring it")
                }
            }
        }
        #expect(checked > 100)
    }

    @Test("a source file that imports ZeroMQ names something of it (no import left behind)")
    func zeroMQImportsAreUsed() throws {
        var importing = 0
        for name in Self.targets.keys where !(Self.targets[name]!.isTest) && name != "ZeroMQ" {
            let dir = Products.repositoryRoot.appendingPathComponent("Sources/\(name)")
            guard let files = FileManager.default.enumerator(atPath: dir.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                let lines = text.split(separator: "\n")
                guard lines.contains(where: { $0 == "import ZeroMQ" }) else { continue }
                importing += 1
                // The ZeroMQ target's public names start with ZMQ or zmq (ZMQSocket, zmqProxy), but for
                // CurveKeyFileError, which only ZMQCurveKeyFile's callers (who name it) catch.
                let uses = lines.contains { !$0.hasPrefix("import ") && ($0.contains("ZMQ") || $0.contains("zmq")) }
                #expect(uses, "\(name)/\(file) imports ZeroMQ and names nothing of it")
            }
        }
        #expect(importing > 20)
    }
}
