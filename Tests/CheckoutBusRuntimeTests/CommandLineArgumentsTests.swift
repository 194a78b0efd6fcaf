import Testing

import CheckoutBusRuntime

/// The flag parser every executable uses: values, switches, `--`, and the usage errors it names.
@Suite("command-line arguments")
struct CommandLineArgumentsTests {
    @Test("values as the next argument or after =, the last one wins, repeated ones are all kept")
    func values() throws {
        let args = try CommandLineArguments(
            ["--publish", "tcp://a", "--prefix=checkout.", "--prefix", "bus.", "--publish=tcp://b", "file.jsonl"],
            valued: ["publish", "prefix"], switches: [])
        #expect(args.value("publish") == "tcp://b")
        #expect(args.all("prefix") == ["checkout.", "bus."])
        #expect(args.positionals == ["file.jsonl"])
        #expect(args.value("absent") == nil)
    }

    @Test("switches, `-` as a positional, and everything after `--` taken literally")
    func switchesAndPositionals() throws {
        let args = try CommandLineArguments(["--json", "-", "--", "--json", "x"], valued: [], switches: ["json"])
        #expect(args.has("json"))
        #expect(!args.has("acked"))
        #expect(args.positionals == ["-", "--json", "x"])
    }

    @Test("usage errors name the flag", arguments: [
        (["--nope"], "unknown flag --nope"),
        (["--json=1"], "--json takes no value"),
        (["--publish"], "--publish needs a value"),
    ])
    func usageErrors(arguments: [String], message: String) {
        #expect(throws: CommandLineArguments.UsageError.self) {
            try CommandLineArguments(arguments, valued: ["publish"], switches: ["json"])
        }
        do {
            _ = try CommandLineArguments(arguments, valued: ["publish"], switches: ["json"])
        } catch {
            #expect(error.description == message)
        }
    }

    @Test("an integer flag is checked against its range; absent gives the default")
    func integers() throws {
        let args = try CommandLineArguments(["--window", "64", "--rate", "abc", "--shards", "0"],
                                            valued: ["window", "rate", "shards", "events"], switches: [])
        #expect(try args.int("window", default: 1, in: 1...1000) == 64)
        #expect(try args.int("events", default: 7, in: 1...10) == 7)
        #expect(throws: CommandLineArguments.UsageError.self) { try args.int("rate", default: 1, in: 1...10) }
        #expect(throws: CommandLineArguments.UsageError.self) { try args.int("shards", default: 1, in: 1...64) }
    }
}
