import Testing

import CheckoutBusRuntime

/// The logger's key=value lines stay one line per record, whatever a value holds.
@Suite("logger")
struct BusLoggerTests {
    @Test("plain values are bare; spaces, quotes, = and newlines are quoted and escaped", arguments: [
        ("journal", "journal"),
        ("two words", "\"two words\""),
        ("a=b", "\"a=b\""),
        ("say \"hi\"", "\"say \\\"hi\\\"\""),
        ("line\nbreak", "\"line\\nbreak\""),
        ("", "\"\""),
    ])
    func quoting(value: String, expected: String) {
        #expect(BusLogger.quote(value) == expected)
        #expect(!BusLogger.quote(value).contains("\n"))
    }

    @Test("levels parse from their names and order by severity")
    func levels() {
        #expect(BusLogger.Level(name: "debug") == .debug)
        #expect(BusLogger.Level(name: "warning") == .warning)
        #expect(BusLogger.Level(name: "loud") == nil)
        #expect(BusLogger.Level.debug.rawValue < BusLogger.Level.error.rawValue)
    }
}
