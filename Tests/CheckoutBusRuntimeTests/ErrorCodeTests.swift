import Foundation
import Testing

import CheckoutBusRuntime

/// The runtime's errors carry a code for programs and the same message for people as before.
@Suite("error codes: usage errors and atomic files")
struct RuntimeErrorCodeTests {
    @Test("each kind of bad argument has its code, and its message is unchanged", arguments: [
        (["--nope"], "unknown_flag", "unknown flag --nope"),
        (["--count"], "missing_value", "--count needs a value"),
        (["--verbose=yes"], "unexpected_value", "--verbose takes no value"),
    ])
    func usageCodes(arguments: [String], code: String, message: String) {
        #expect {
            _ = try CommandLineArguments(arguments, valued: ["count"], switches: ["verbose"])
        } throws: { error in
            guard let usage = error as? CommandLineArguments.UsageError else { return false }
            return usage.code.name == code && usage.description == message
        }
    }

    @Test("an integer out of range is invalid_value; a usage error without a code is invalid_usage")
    func invalidValue() throws {
        let args = try CommandLineArguments(["--count", "0"], valued: ["count"], switches: [])
        #expect(throws: CommandLineArguments.UsageError.self) { _ = try args.int("count", default: 1, in: 1...9) }
        do {
            _ = try args.int("count", default: 1, in: 1...9)
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.description == "--count must be an integer in 1...9, got 0")
        }
        #expect(CommandLineArguments.UsageError("keygen needs one NAME").code == .invalidUsage)
    }

    @Test("a file that cannot be read is unreadable; one that cannot be replaced is unwritable")
    func atomicFileCodes() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cb-codes-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            _ = try AtomicFile.read(dir)
            Issue.record("reading a directory succeeded")
        } catch {
            #expect(error.code == .unreadable)
            #expect(error.description.hasPrefix("cannot read \(dir): "))
        }
        do {
            try AtomicFile.write([1], to: dir + "/missing/file", durable: false)
            Issue.record("writing into a missing directory succeeded")
        } catch {
            #expect(error.code == .unwritable)
            #expect(error.description.hasPrefix("cannot create \(dir)/missing/file.tmp: "))
        }
    }
}
