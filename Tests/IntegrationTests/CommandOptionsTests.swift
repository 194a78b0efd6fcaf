import CheckoutBusDaemon
import CheckoutBusJetStream
import CheckoutBusRuntime
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusWorkers
import Foundation
import Testing

/// Every command's flags are declared once (`CommandSpec`), and what is written about them elsewhere
/// agrees: each `--help` lists every flag with its default within 100 columns, each declared
/// default is a value the command's own parser accepts, and every command line quoted in the docs
/// uses only flags its command declares.
@Suite("every command's flags, declared once, agree with help, parser and docs")
struct CommandOptionsTests {
    /// A command, its spec, and how it parses (with the operands and companion flags it needs).
    struct Command: Sendable {
        let name: String
        let spec: CommandSpec
        let parse: @Sendable ([String]) throws -> Void
        /// Arguments every parse is given (operands a command requires).
        var base: [String] = []
        /// Flags an option needs beside it (`--step-seconds` goes with `--sweep`).
        var companions: [String: [String]] = [:]
    }

    static let commands: [Command] = [
        .init(name: "checkoutbus send", spec: SendCommand.spec, parse: { _ = try SendCommand(arguments: $0) }),
        .init(name: "checkoutbus tail", spec: TailCommand.spec, parse: { _ = try TailCommand(arguments: $0) }),
        .init(name: "checkoutbus route", spec: RouteCommand.spec, parse: { _ = try RouteCommand(arguments: $0) },
              base: ["--shards", "tcp://127.0.0.1:1", "--shards-acked", "tcp://127.0.0.1:2"]),
        .init(name: "checkoutbus replay", spec: ReplayCommand.spec, parse: { _ = try ReplayCommand(arguments: $0) }, base: ["x.jsonl"]),
        .init(name: "checkoutbus flood", spec: FloodCommand.spec, parse: { _ = try FloodCommand(arguments: $0) },
              companions: ["step-seconds": ["--sweep", "1000:2000", "--slo", "p99=5ms"]]),
        .init(name: "checkoutbus forwarder", spec: ForwarderCommand.spec, parse: { _ = try ForwarderCommand(arguments: $0) }),
        .init(name: "checkoutbus keygen", spec: KeygenCommand.spec, parse: { _ = try KeygenCommand(arguments: $0) }, base: ["k"]),
        .init(name: "checkoutbus trace", spec: TraceCommand.spec, parse: { _ = try TraceCommand(arguments: $0) }, base: ["c1"]),
        .init(name: "checkoutbus stats", spec: StatsCommand.spec, parse: { _ = try StatsCommand(arguments: $0) }),
        .init(name: "checkoutbus cursor", spec: CursorCommand.spec, parse: { _ = try CursorCommand(arguments: $0) },
              base: ["show", "/nonexistent/cursor"]),
        .init(name: "checkoutbus subscribers", spec: SubscribersCommand.spec, parse: { _ = try SubscribersCommand(arguments: $0) }),
        .init(name: "checkoutbus top", spec: TopCommand.spec, parse: { _ = try TopCommand(arguments: $0) }),
        .init(name: "checkoutbus decode", spec: DecodeCommand.spec, parse: { _ = try DecodeCommand(arguments: $0) }),
        .init(name: "checkoutbus bench", spec: BenchCommand.spec, parse: { _ = try BenchCommand(arguments: $0) }),
        .init(name: "checkoutbus ping", spec: PingCommand.spec, parse: { _ = try PingCommand(arguments: $0) }),
        .init(name: "checkoutbus-fulfil", spec: FulfilmentWorker.spec, parse: { _ = try FulfilmentWorker.parse($0) }),
        .init(name: "checkoutbus-analytics", spec: AnalyticsOptions.spec, parse: { _ = try AnalyticsOptions.parse($0) }),
        .init(name: "checkoutbus-jetstream", spec: BridgeOptions.spec, parse: { _ = try BridgeOptions.parse($0) }),
        .init(name: "checkoutbus-jetstream verify", spec: StreamInspection.spec, parse: { _ = try StreamInspection(arguments: $0) }),
    ]

    @Test("each --help lists every declared flag with its default and environment variable, within 100 columns",
          arguments: commands.map(\.name))
    func helpListsEveryFlag(name: String) throws {
        let command = try #require(Self.commands.first { $0.name == name })
        let help = command.spec.help
        for option in command.spec.options {
            #expect(help.contains("  " + option.label + " ") || help.contains("  " + option.label + "\n"),
                    "\(name): \(option.label) missing from --help")
            let entry = option.helpEntry.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
            if let d = option.defaultNote ?? option.defaultValue {
                #expect(entry.contains("(default \(d.isEmpty ? "\"\"" : d))"), "\(name) \(option.label): default not in --help")
            }
            if let variable = option.environment { #expect(entry.contains("$" + variable)) }
        }
        for line in help.split(separator: "\n") {
            #expect(line.count <= HelpText.width, "\(name): a --help line is wider than \(HelpText.width) columns: \(line)")
        }
    }

    @Test("every declared default is a value the command's parser accepts", arguments: commands.map(\.name))
    func defaultsParse(name: String) throws {
        let command = try #require(Self.commands.first { $0.name == name })
        try command.parse(command.base)
        for option in command.spec.options {
            guard let value = option.defaultValue else { continue }
            let arguments = command.base + (command.companions[option.name] ?? []) + ["--" + option.name, value]
            #expect(throws: Never.self, "\(name) --\(option.name) \(value), its own default, is refused") {
                try command.parse(arguments)
            }
        }
    }

    @Test("the bridge's and the analytics worker's flags, all absent, give their options' initial values")
    func noFlagsGiveInitialValues() throws {
        let parsed = try BridgeOptions.parse([])
        let initial = BridgeOptions()
        #expect(parsed.publish == initial.publish && parsed.control == initial.control)
        #expect(parsed.subjectPrefix == initial.subjectPrefix && parsed.name == initial.name)
        #expect(parsed.cursorPath == initial.cursorPath && parsed.receiveHighWaterMark == initial.receiveHighWaterMark)
        #expect(parsed.logLevel == initial.logLevel && parsed.servers == initial.servers && parsed.stream == initial.stream)
        #expect(parsed.createStream == initial.createStream && parsed.replicas == initial.replicas)
        #expect(parsed.maxAgeNanoseconds == initial.maxAgeNanoseconds && parsed.maxBytes == initial.maxBytes)
        #expect(parsed.duplicateWindowNanoseconds == initial.duplicateWindowNanoseconds)
        #expect(parsed.window == initial.window && parsed.ackWaitMilliseconds == initial.ackWaitMilliseconds)
        let analytics = try AnalyticsOptions.parse([])
        let analyticsInitial = AnalyticsOptions()
        #expect(analytics.intervalSeconds == analyticsInitial.intervalSeconds)
        #expect(analytics.checkpointEvents == analyticsInitial.checkpointEvents)
        #expect(analytics.maxCheckouts == analyticsInitial.maxCheckouts)
        #expect(analytics.worker.publishEndpoints == analyticsInitial.worker.publishEndpoints)
        #expect(analytics.worker.receiveHighWaterMark == analyticsInitial.worker.receiveHighWaterMark)
        let fulfil = try FulfilmentWorker.parse([])
        #expect(fulfil.databasePath == FulfilmentWorker.Options(worker: fulfil.worker).databasePath && !fulfil.fullSync)
    }

    /// Every command line quoted in the docs and the README: inline code spans and lines of code
    /// blocks that start with one of the executables.
    static func quotedCommandLines() throws -> [(file: String, line: String)] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let docs = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 } + ["README.md"]
        var out: [(String, String)] = []
        for file in docs {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            var inBlock = false
            var pending = ""
            for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
                let line = String(raw)
                if line.trimmingCharacters(in: .whitespaces).hasPrefix("```") {
                    inBlock.toggle()
                    continue
                }
                if inBlock {
                    // A shell line continued with a backslash is one command.
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    pending += (pending.isEmpty ? "" : " ") + (trimmed.hasSuffix("\\") ? String(trimmed.dropLast()) : trimmed)
                    if !trimmed.hasSuffix("\\") {
                        out.append((file, pending))
                        pending = ""
                    }
                    continue
                }
                let spans = line.split(separator: "`", omittingEmptySubsequences: false)
                for (i, span) in spans.enumerated() where i % 2 == 1 { out.append((file, String(span))) }
            }
        }
        return out
    }

    /// The command a quoted line runs, and the flags it gives, or nil when it runs none of ours.
    static func invocation(_ line: String) -> (command: String, flags: [String])? {
        var words = line.split(separator: " ").map(String.init)
        // Environment assignments, `sudo`, paths to the executables.
        while let first = words.first, first.contains("=") || first == "sudo" { words.removeFirst() }
        guard let first = words.first else { return nil }
        let program = first.split(separator: "/").last.map(String.init) ?? first
        let name: String
        switch program {
        case "checkoutbus":
            guard words.count > 1 else { return nil }
            name = "checkoutbus " + words[1]
        case "checkoutbus-jetstream" where words.count > 1 && ["verify", "dump"].contains(words[1]):
            name = "checkoutbus-jetstream verify"
        case "checkoutbusd", "checkoutbus-fulfil", "checkoutbus-analytics", "checkoutbus-jetstream":
            name = program
        default:
            return nil
        }
        // A synopsis brackets its flags: `[--to ENDPOINT]`, `(--to-seq SEQ | …)`.
        let flags = words.dropFirst().map { $0.drop { "[(|".contains($0) } }.filter { $0.hasPrefix("--") && $0.count > 2 }
            .map { word -> String in String(word.dropFirst(2).prefix { $0.isLetter || $0.isNumber || $0 == "-" }) }
        return (name, flags)
    }

    @Test("every command line quoted in docs/ and the README uses only flags its command declares")
    func docsUseDeclaredFlags() throws {
        let daemonFlags = Set(DaemonConfiguration.options.map(\.name)).union(["help", "version", "check-config"])
        var checked = 0
        for (file, line) in try Self.quotedCommandLines() {
            guard let (name, flags) = Self.invocation(line) else { continue }
            let declared: Set<String>
            if name == "checkoutbusd" {
                declared = daemonFlags
            } else if let command = Self.commands.first(where: { $0.name == name }) {
                declared = Set(command.spec.options.map(\.name)).union(["help"])
            } else {
                // `checkoutbus <word>` where the word is not a command: prose, or a typo the docs show on purpose.
                continue
            }
            checked += 1
            for flag in flags where !flag.isEmpty {
                #expect(declared.contains(flag), "\(file): `\(line)` — \(name) has no --\(flag)")
            }
        }
        #expect(checked > 50, "only \(checked) quoted command lines found: the scan is broken")
    }
}
