#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

import CheckoutBusTools

/// `send` and `replay` read their input through `LineReader`: an input descriptor that is
/// non-blocking (a standard input a shell or parent process left so) is waited on, not taken for
/// a read error.
@Suite("line reader")
struct LineReaderTests {
    @Test("a non-blocking pipe with nothing in it yet is waited on: every line arrives, then the end")
    func nonBlockingInputIsWaitedOn() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let (readEnd, writeEnd) = (ends[0], ends[1])
        defer { close(readEnd) }
        let flags = fcntl(readEnd, F_GETFL)
        try #require(flags >= 0 && fcntl(readEnd, F_SETFL, flags | O_NONBLOCK) == 0)
        // The writer starts only once the reader has found the pipe empty (EAGAIN) at least once:
        // it waits 200 ms, writes the first line, waits again, writes the rest and closes.
        let writer = Thread {
            usleep(200_000)
            _ = "first\n".withCString { write(writeEnd, $0, 6) }
            usleep(100_000)
            _ = "second\nthird".withCString { write(writeEnd, $0, 12) }
            close(writeEnd)
        }
        writer.start()
        let reader = LineReader(fd: readEnd, name: "the pipe")
        var lines: [String] = []
        while let line = try reader.nextLine() { lines.append(String(decoding: line, as: UTF8.self)) }
        #expect(lines == ["first", "second", "third"])
        #expect(reader.isExhausted)
    }

    @Test("a descriptor that cannot be read is an error naming the input, never the end")
    func unreadableInputIsAnError() throws {
        let directory = open("/", O_RDONLY | O_DIRECTORY)
        try #require(directory >= 0)
        defer { close(directory) }
        let reader = LineReader(fd: directory, name: "the root directory")
        #expect {
            _ = try reader.nextLine()
        } throws: { error in
            "\(error)".contains("cannot read the root directory: Is a directory")
        }
    }
}
