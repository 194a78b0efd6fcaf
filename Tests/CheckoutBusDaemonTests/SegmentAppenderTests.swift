import Foundation
import Testing

@testable import CheckoutBusDaemon

/// The journal's segment writer on a real file, with `O_DIRECT` where the test directory's file
/// system takes it (docs/durability.md, "Direct writes").
@Suite("segment appender: direct writes of whole blocks")
struct SegmentAppenderTests {
    struct ScratchError: Error { let path: String }

    /// A scratch directory and a segment file in it, opened as the journal opens one.
    final class Scratch {
        let directory: URL
        let path: String
        let fd: Int32

        init(_ prefix: String = "", name: String) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("cb-appender-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            path = directory.appendingPathComponent(name).path
            try Data(prefix.utf8).write(to: URL(fileURLWithPath: path))
            fd = open(path, O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { throw ScratchError(path: path) }
        }

        deinit {
            close(fd)
            try? FileManager.default.removeItem(at: directory)
        }

        var bytes: [UInt8] { (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? [] }
    }

    /// Runs of pseudo-random bytes and lengths: short, around a block, and across the 1 MiB staging buffer.
    static func runs(seed: UInt64) -> [[UInt8]] {
        var state = seed
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        let lengths = [1, 17, 4095, 4096, 4097, 300, 8192, 3 << 20, 5, (1 << 20) - 100, 1 << 20, 12_345, 40]
        return lengths.map { n in (0..<n).map { _ in UInt8(truncatingIfNeeded: next() | 1) } }
    }

    /// A segment of a 64-byte `header` and an appender open on it, direct where asked and the
    /// test directory's file system takes it.
    static func opened(direct: Bool, header: String) throws -> (Scratch, SegmentAppender) {
        let scratch = try Scratch(header, name: "00000000000000000001.seg")
        let probe = JournalFiles.probeDirectWrites(in: scratch.directory.path)
        let appender = SegmentAppender(direct: direct && probe == nil)
        #expect(appender.open(path: scratch.path, fd: scratch.fd, size: header.utf8.count) == nil)
        #expect(appender.isDirect == (direct && probe == nil))
        return (scratch, appender)
    }

    /// The file holds `expected`, then zeros to the end of its block: whole blocks, direct or not.
    static func expectBlocks(_ scratch: Scratch, _ expected: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let file = scratch.bytes
        #expect(Array(file.prefix(expected.count)) == expected, sourceLocation: sourceLocation)
        #expect(file.count % SegmentAppender.blockSize == 0, sourceLocation: sourceLocation)
        #expect(file.count - expected.count < SegmentAppender.blockSize, sourceLocation: sourceLocation)
        #expect(!file[min(expected.count, file.count)...].contains { $0 != 0 }, sourceLocation: sourceLocation)
    }

    @Test("every append, short (through the page cache) or long (direct), lands after the last; the file holds exactly them once finished", arguments: [true, false])
    func appends(direct: Bool) throws {
        let header = String(repeating: "H", count: 64)
        let (scratch, appender) = try Self.opened(direct: direct, header: header)
        var expected = Array(header.utf8)
        for run in SegmentAppenderTests.runs(seed: direct ? 1 : 2) {
            #expect(run.withUnsafeBytes { appender.append($0.baseAddress!, $0.count) } == 0)
            expected += run
            #expect(appender.size == expected.count)
            Self.expectBlocks(scratch, expected)
        }
        #expect(appender.finish() == nil)
        #expect(scratch.bytes == expected)
    }

    @Test("a run written where it lies, the last partial block copied in front of it, leaves the file a staged one would", arguments: [true, false])
    func inPlace(direct: Bool) throws {
        let header = String(repeating: "P", count: 64)
        let (scratch, appender) = try Self.opened(direct: direct, header: header)
        let block = SegmentAppender.blockSize
        var expected = Array(header.utf8)
        var inPlace = 0
        for (i, run) in SegmentAppenderTests.runs(seed: direct ? 4 : 5).enumerated() {
            // Memory as a journal batch lays it out: block-aligned, the run starting where the
            // segment's last partial block ends, a block free after it. Every fourth run is
            // misplaced by 8 bytes (a direct write then cannot be in place); every fifth has no
            // room after it (in place only when it needs no padding).
            let tail = expected.count % block
            let start = tail + (i % 4 == 3 ? 8 : 0)
            let after = i % 5 == 4 ? 0 : block
            let memory = UnsafeMutableRawPointer.allocate(byteCount: start + run.count + block, alignment: block)
            defer { memory.deallocate() }
            memory.initializeMemory(as: UInt8.self, repeating: 0xEE, count: start + run.count + block)
            run.withUnsafeBytes { (memory + start).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            let room = SegmentAppender.Room(before: start, after: after)
            let was = appender.runsInPlace
            #expect(appender.append(memory + start, run.count, room: room) == 0)
            let wentInPlace = appender.runsInPlace == was + 1
            if wentInPlace { inPlace += 1 }
            let aligned = i % 4 != 3
            let padding = (block - (tail + run.count) % block) % block
            // Nothing outside the room it was given is touched, the run least of all: in place,
            // the partial block before the run and the padding after it; staged, nothing.
            let total = start + run.count + block
            let touchedFrom = wentInPlace ? start - tail : start
            let touchedTo = wentInPlace ? start + run.count + padding : start + run.count
            let untouched = (0..<touchedFrom).allSatisfy { memory.load(fromByteOffset: $0, as: UInt8.self) == 0xEE }
                && (touchedTo..<total).allSatisfy { memory.load(fromByteOffset: $0, as: UInt8.self) == 0xEE }
            #expect(untouched, "run \(i)")
            #expect(run.withUnsafeBytes { memcmp(memory + start, $0.baseAddress!, run.count) == 0 }, "run \(i)")
            let isDirect = appender.isDirect && run.count >= SegmentAppender.directMinimum
            #expect(wentInPlace == ((aligned || !isDirect) && (after > 0 || padding == 0)))
            expected += run
            #expect(appender.size == expected.count)
            Self.expectBlocks(scratch, expected)
        }
        #expect(inPlace > 0)
        #expect(appender.finish() == nil)
        #expect(scratch.bytes == expected)
    }

    @Test("a segment reopened after a restart goes on after its last byte, whatever block it ends in")
    func reopen() throws {
        let scratch = try Scratch(String(repeating: "h", count: 64), name: "00000000000000000001.seg")
        let direct = JournalFiles.probeDirectWrites(in: scratch.directory.path) == nil
        var expected = Array(String(repeating: "h", count: 64).utf8)
        for (i, run) in SegmentAppenderTests.runs(seed: 3).prefix(8).enumerated() {
            // A new appender for every run, as after each restart: it reads the partial block back.
            let appender = SegmentAppender(direct: direct)
            #expect(appender.open(path: scratch.path, fd: scratch.fd, size: expected.count) == nil)
            #expect(run.withUnsafeBytes { appender.append($0.baseAddress!, $0.count) } == 0)
            expected += run
            if i % 2 == 0 { #expect(appender.finish() == nil) } else {
                // A stop without finish (kill -9): the padding stays, and recovery cuts it.
                #expect(ftruncate(scratch.fd, off_t(expected.count)) == 0)
            }
            #expect(scratch.bytes == expected)
        }
    }

    @Test("zeros after the last record are padding only when shorter than a block and ending on one")
    func padding() {
        #expect(JournalRecovery.isPadding([UInt8](repeating: 0, count: 100), end: 8192))
        #expect(JournalRecovery.isPadding([UInt8](repeating: 0, count: 4095), end: 4096))
        #expect(!JournalRecovery.isPadding([], end: 4096))
        // Not on a block's end: no direct write wrote it.
        #expect(!JournalRecovery.isPadding([UInt8](repeating: 0, count: 100), end: 8000))
        // A block or more of zeros: lost blocks, not padding.
        #expect(!JournalRecovery.isPadding([UInt8](repeating: 0, count: 4096), end: 8192))
        // Anything but zeros is a torn or damaged record.
        #expect(!JournalRecovery.isPadding([UInt8](repeating: 0, count: 99) + [7], end: 8192))
    }
}
