#if canImport(Glibc)
import Glibc
#endif
import Testing

import CheckoutBusRuntime

/// One declaration per flag (`CommandOption`, `CommandSpec`): the parser accepts what is declared,
/// a default comes from the declaration (after the flag and its environment variable), and
/// `--help` is written from the same list.
@Suite("command options declared once")
struct CommandSpecTests {
    static let port = CommandOption("port", "N", help: "the port", default: "7700")
    static let host = CommandOption("host", "NAME", help: "the host", environment: "COMMAND_SPEC_TEST_HOST")
    static let mode = CommandOption("mode", "fast|safe", help: "how", default: "safe")
    static let tag = CommandOption("tag", "T", help: "a tag", repeatable: true)
    static let dry = CommandOption("dry-run", help: "change nothing")
    static let spec = CommandSpec(
        "tool demo", summary: "a demonstration.", operands: "FILE",
        operandHelp: [.init("FILE", "what to read")],
        groups: [.init(nil, [port, host, mode]), .init("Extras:", [tag, dry])],
        notes: "Exits 0.")

    @Test("exactly the declared flags are accepted; a typo names the closest")
    func acceptsDeclared() throws {
        let args = try Self.spec.parse(["--port", "80", "--tag", "a", "--tag=b", "--dry-run", "in.txt"])
        #expect(args.value(Self.port) == "80")
        #expect(args.all(Self.tag) == ["a", "b"])
        #expect(args.has(Self.dry))
        #expect(args.positionals == ["in.txt"])
        do {
            _ = try Self.spec.parse(["--prot", "1"])
            Issue.record("--prot was accepted")
        } catch {
            #expect(error.code == .unknownFlag)
            #expect(error.description == "unknown flag --prot; did you mean --port?")
        }
        #expect(throws: CommandLineArguments.UsageError.self) { try Self.spec.parse(["--dry-run=yes"]) }
    }

    @Test("a value comes from the flag, else the environment variable, else the declared default")
    func defaults() throws {
        unsetenv("COMMAND_SPEC_TEST_HOST")
        let none = try Self.spec.parse([])
        #expect(try none.int(Self.port, in: 1...65535) == 7700)
        #expect(none.value(Self.host) == nil)
        #expect(try none.optionalInt(Self.host, in: 0...1) == nil)
        #expect(try none.choice(Self.mode, ["fast": 1, "safe": 2]) == 2)
        #expect(none.all(Self.tag).isEmpty)
        setenv("COMMAND_SPEC_TEST_HOST", "from-env", 1)
        defer { unsetenv("COMMAND_SPEC_TEST_HOST") }
        #expect(try Self.spec.parse([]).value(Self.host) == "from-env")
        #expect(try Self.spec.parse(["--host", "given"]).value(Self.host) == "given")
    }

    @Test("a value out of range or not among the choices is an invalid_value naming the flag")
    func invalid() throws {
        do {
            _ = try Self.spec.parse(["--port", "0"]).int(Self.port, in: 1...65535)
            Issue.record("--port 0 was accepted")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.description == "--port must be an integer in 1...65535, got 0")
        }
        do {
            _ = try Self.spec.parse(["--mode", "slow"]).choice(Self.mode, ["fast": 1, "safe": 2])
            Issue.record("--mode slow was accepted")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.description == "--mode must be fast or safe, got slow")
        }
    }

    @Test("--help is written from the declarations: usage, operands, each flag with its default, groups, notes")
    func help() {
        let help = Self.spec.help
        #expect(help.hasPrefix("tool demo — a demonstration.\n\nUSAGE: tool demo FILE [--port N] [--host NAME] [--mode fast|safe]\n"))
        #expect(help.contains("[--tag T …] [--dry-run]"))
        #expect(help.contains("  FILE                       what to read\n"))
        #expect(help.contains("  --port N                   the port (default 7700)\n"))
        #expect(help.contains("  --host NAME                the host; also $COMMAND_SPEC_TEST_HOST\n"))
        #expect(help.contains("\nExtras:\n  --tag T"))
        #expect(help.hasSuffix("\nExits 0.\n"))
        #expect(help.split(separator: "\n").allSatisfy { $0.count <= HelpText.width })
    }

    @Test("a long text wraps under its column; a long flag puts its text on the next line")
    func wrapping() {
        let long = CommandOption("a-rather-long-flag-name", "VALUE", help: String(repeating: "word ", count: 40))
        let lines = long.helpEntry.split(separator: "\n")
        #expect(lines[0] == "  --a-rather-long-flag-name VALUE")
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix(String(repeating: " ", count: HelpText.indent)) && $0.count <= 100 })
    }
}
