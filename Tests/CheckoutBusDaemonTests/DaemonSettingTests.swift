import Foundation
import Testing

import CheckoutBusCore
@testable import CheckoutBusDaemon
import CheckoutBusRuntime

/// The daemon's settings are declared once (``DaemonSetting/all``): an unconfigured daemon and one
/// parsed from no flags are the same, `--help` lists every setting, and docs/configuration.md and
/// deploy/checkoutbusd.conf list exactly these settings with these defaults.
@Suite("daemon settings: one table for flags, help, the configuration file and the docs")
struct DaemonSettingTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// Every setting's value in a configuration, by flag name.
    static func values(_ c: DaemonConfiguration) -> [String: String] {
        var out: [String: String] = [:]
        for s in DaemonSetting.all { out[s.name] = s.read(c) ?? "(not set)" }
        return out
    }

    static func text(_ path: String) throws -> String {
        try String(contentsOf: repositoryRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test("DaemonConfiguration() and parse([]) are the same daemon")
    func defaultsAgree() throws {
        let parsed = try DaemonConfiguration.parse([])
        #expect(Self.values(parsed) == Self.values(DaemonConfiguration()))
        // The disagreement that started this: the dedupe window was 0 in the options, 200,000 in the flag.
        #expect(DaemonConfiguration().processor.dedupeWindow == 200_000)
        #expect(parsed.processor.dedupeWindow == 200_000)
        #expect(DaemonConfiguration().maxWireBytes == 2 * DaemonConfiguration().processor.maxMessageBytes)
    }

    @Test("each setting's default, given as its flag, parses to the default configuration")
    func defaultsRoundTrip() throws {
        let defaults = Self.values(DaemonConfiguration())
        for s in DaemonSetting.all where !s.isSwitch {
            guard let d = s.defaultValue else { continue }
            let parsed = try DaemonConfiguration.parse(["--" + s.name, d])
            #expect(Self.values(parsed) == defaults, "--\(s.name) \(d)")
        }
    }

    @Test("a flag changes its own setting and no other")
    func flagsApply() throws {
        let defaults = Self.values(DaemonConfiguration())
        let examples = [
            "ingest": "tcp://127.0.0.1:9700", "metrics": "off", "fsync-ms": "7", "journal-cache-bytes": "kernel",
            "retain-hours": "3", "buyer-data": "full", "dedupe-window": "0", "shard": "1/3", "log-level": "debug",
            "max-wire-bytes": "3000000", "checkout-ttl": "60",
        ]
        for (flag, value) in examples {
            let values = Self.values(try DaemonConfiguration.parse(["--" + flag, value]))
            #expect(values[flag] == value, "--\(flag)")
            #expect(values.filter { $0.key != flag } == defaults.filter { $0.key != flag }, "--\(flag) changed another")
        }
        let insecure = try DaemonConfiguration.parse(["--allow-insecure-remote"])
        #expect(insecure.allowInsecureRemote)
        // max-message-bytes also moves the default of max-wire-bytes.
        let message = try DaemonConfiguration.parse(["--max-message-bytes", "4096"])
        #expect(message.maxWireBytes == 8192)
        #expect(throws: CommandLineArguments.UsageError.self) {
            try DaemonConfiguration.parse(["--max-message-bytes", "4096", "--max-wire-bytes", "4095"])
        }
    }

    @Test("--help lists every setting with its argument and default")
    func helpListsEverySetting() {
        let help = DaemonConfiguration.help
        for s in DaemonSetting.all {
            let flag = "--" + s.name + (s.argument.map { " " + $0 } ?? "")
            // A flag too long for its column has its text on the next line.
            #expect(help.contains("  " + flag + " ") || help.contains("  " + flag + "\n"), "\(flag) missing from --help")
            if !s.isSwitch, let d = s.defaultNote ?? s.defaultValue {
                // The wrapped text joins again into one line per entry.
                let entry = s.helpEntry.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                    .joined(separator: " ")
                #expect(entry.contains("(default \(d))"), "\(flag): its default is not in --help")
            }
        }
        #expect(help.contains("--help") && help.contains("--version"))
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= 100 }, "a line of --help is wider than 100 columns")
    }

    /// The flag table of docs/configuration.md: flag name → the default column's first code span,
    /// or nil where it says none.
    static func documentedSettings() throws -> [String: String?] {
        var rows: [String: String?] = [:]
        for line in try text("docs/configuration.md").split(separator: "\n") where line.hasPrefix("| `--") {
            let columns = line.replacingOccurrences(of: "\\|", with: "\u{1}").split(separator: "|")
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard columns.count >= 2 else { continue }
            let flag = columns[0].dropFirst(3).prefix { $0 != " " && $0 != "`" }
            let spans = columns[1].split(separator: "`", omittingEmptySubsequences: false)
            let value: String? = spans.count >= 3 ? String(spans[1]) : nil
            #expect(rows[String(flag)] == nil, "--\(flag) has two rows in docs/configuration.md")
            rows[String(flag)] = value
        }
        return rows
    }

    @Test("docs/configuration.md's table lists exactly the settings, with their defaults")
    func docsTable() throws {
        let documented = try Self.documentedSettings()
        #expect(Set(documented.keys) == Set(DaemonSetting.all.map(\.name)),
                "docs/configuration.md and DaemonSetting.all list different settings")
        for s in DaemonSetting.all {
            guard let row = documented[s.name] else { continue }
            #expect(row == s.defaultValue, "--\(s.name): docs say \(row ?? "none"), the daemon \(s.defaultValue ?? "none")")
        }
    }

    /// Settings deploy/checkoutbusd.conf deliberately sets to another value than the default.
    static let deploymentChoices = [
        // The systemd unit's state directory (StateDirectory=checkoutbus), and the Containerfile's volume.
        "data-dir": "/var/lib/checkoutbus"
    ]

    @Test("deploy/checkoutbusd.conf lists every setting of the file once, at its default")
    func shippedConfigurationFile() throws {
        var seen: [String: (value: String, active: Bool)] = [:]
        for raw in try Self.text("deploy/checkoutbusd.conf").split(separator: "\n") {
            var line = raw.trimmingCharacters(in: .whitespaces)
            let active = !line.hasPrefix("#")
            if !active { line = line.dropFirst().trimmingCharacters(in: .whitespaces) }
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty, key.allSatisfy({ $0.isLowercase || $0 == "-" }) else { continue }
            var value = line[line.index(after: eq)...].split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
                .first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            #expect(seen[key] == nil, "\(key) is in deploy/checkoutbusd.conf twice")
            seen[key] = (value, active)
        }
        let fileSettings = DaemonSetting.all.filter(\.inConfigFile)
        #expect(Set(seen.keys) == Set(fileSettings.map(\.name)),
                "deploy/checkoutbusd.conf and DaemonSetting.all list different settings")
        for s in fileSettings {
            guard let line = seen[s.name] else { continue }
            if let choice = Self.deploymentChoices[s.name] {
                #expect(line.active && line.value == choice, "\(s.name)")
            } else if let d = s.defaultValue {
                #expect(line.value == d, "\(s.name): the file says \(line.value), the default is \(d)")
            } else {
                #expect(!line.active, "\(s.name) has no default: the file shows it commented out")
            }
        }
    }

    @Test("the configuration file takes every setting the file may hold, and refuses --config in it")
    func configurationFileKeys() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("cb-settings-\(UUID().uuidString).conf")
        defer { try? FileManager.default.removeItem(at: url) }
        try "dedupe-window = 5\nallow-insecure-remote = yes\nlog-level = \"error\"\n"
            .write(to: url, atomically: true, encoding: .utf8)
        let c = try DaemonConfiguration.parse(["--config", url.path, "--log-level", "warning"])
        #expect(c.processor.dedupeWindow == 5)
        #expect(c.allowInsecureRemote)
        #expect(c.logLevel == .warning, "the command line wins")
        #expect(c.configPath == url.path)
        #expect(try DaemonConfiguration.reloadableLogLevel(path: url.path) == .error)
        try "config = /etc/other.conf\n".write(to: url, atomically: true, encoding: .utf8)
        #expect(throws: CommandLineArguments.UsageError.self) { try DaemonConfiguration.configArguments(path: url.path) }
    }
}
