import CheckoutBusRuntime
import Foundation
import Testing

@testable import CheckoutBusDaemon

/// Journal records carry "CBR2" and the lane checksum; "CBR1" records (the format before) are
/// still read, alone or mixed with new ones in one segment.
@Suite("journal record checksums: CBR2 written, CBR1 still read")
struct RecordChecksumTests {
    static func record(seq: UInt64, magic: UInt32, envelope: String) -> [UInt8] {
        let topic = Array("checkout.update".utf8)
        let body = topic + Array(envelope.utf8)
        var r: [UInt8] = []
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { r.append(contentsOf: $0) } }
        put(magic)
        put(UInt32(body.count))
        put(seq)
        put(seq)
        put(UInt8(1))
        put(UInt8(0))
        put(UInt16(0))
        put(UInt32(topic.count))
        r += body
        let sum = r.withUnsafeBytes { JournalFormat.recordChecksum(magic: magic, $0.baseAddress!, $0.count) }
        put(sum)
        return r
    }

    static func read(_ r: [UInt8]) -> JournalFormat.RecordHeader? {
        r.withUnsafeBytes { JournalFormat.readRecord($0.baseAddress!, available: $0.count) }
    }

    @Test("records of both versions read back; each checksum is its own")
    func bothVersionsRead() throws {
        let envelope = String(repeating: "{\"seq\":7,\"pad\":\"abcdefgh\"}", count: 7)
        let v2 = Self.record(seq: 7, magic: JournalFormat.recordMagic, envelope: envelope)
        let v1 = Self.record(seq: 7, magic: JournalFormat.recordMagicV1, envelope: envelope)
        #expect(Self.read(v2)?.seq == 7)
        #expect(Self.read(v1)?.seq == 7)
        #expect(v1.suffix(8) != v2.suffix(8))
        // A CBR1 record relabelled CBR2 (or the reverse) fails: the magic picks the checksum.
        var relabelled = v1
        relabelled.replaceSubrange(0..<4, with: v2[0..<4])
        #expect(Self.read(relabelled) == nil)
    }

    @Test("every single-bit flip, and two 32-byte blocks swapped, fail the CBR2 checksum")
    func detectsDamage() {
        let envelope = String((0..<190).map { Character(UnicodeScalar(UInt8(65 + $0 % 26))) })
        let good = Self.record(seq: 42, magic: JournalFormat.recordMagic, envelope: envelope)
        #expect(Self.read(good) != nil)
        var undetected = 0
        for i in 0..<good.count {
            for bit in 0..<8 {
                var bad = good
                bad[i] ^= UInt8(1 << bit)
                if Self.read(bad) != nil { undetected += 1 }
            }
        }
        #expect(undetected == 0)
        var swapped = good
        let a = Array(good[64..<96])
        let b = Array(good[128..<160])
        #expect(a != b)
        swapped.replaceSubrange(64..<96, with: b)
        swapped.replaceSubrange(128..<160, with: a)
        #expect(Self.read(swapped) == nil)
        // Every length from 0 to 100 bytes gives a distinct checksum of the same prefix (the tail path).
        let bytes = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        let sums = (0...100).map { n in bytes.withUnsafeBytes { JournalFormat.checksum($0.baseAddress!, n) } }
        #expect(Set(sums).count == sums.count)
    }

    @Test("a journal of CBR1 records opens, reads, and takes CBR2 records after them in the same segment")
    func upgradeInPlace() throws {
        let root = JournalRecoveryTests.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let logger = BusLogger(label: "test", level: .error)
        try JournalRecoveryTests.write(10, to: root, logger: logger)
        // Rewrite the segment's records as the format before wrote them.
        let segment = root + "/" + JournalFormat.segmentName(1)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        var offset = JournalFormat.segmentHeaderSize
        var rewritten = 0
        bytes.withUnsafeMutableBytes { raw in
            let p = raw.baseAddress!
            while offset + JournalFormat.recordHeaderSize <= raw.count,
                JournalFormat.load(p, offset, as: UInt32.self) == JournalFormat.recordMagic
            {
                let covered = JournalFormat.recordHeaderSize + Int(JournalFormat.load(p, offset + 4, as: UInt32.self))
                JournalFormat.store(JournalFormat.recordMagicV1, p + offset, 0)
                JournalFormat.store(JournalFormat.checksumV1(p + offset, covered), p + offset, covered)
                offset += covered + JournalFormat.checksumSize
                rewritten += 1
            }
        }
        #expect(rewritten == 10)
        try Data(bytes).write(to: URL(fileURLWithPath: segment))

        let journal = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger)
        #expect(journal.lastSeq == 10)
        #expect(try JournalRecoveryTests.seqs(in: journal) == Array(1...10))
        let batch = JournalBatch(journal: journal, measuresLatency: false, logger: logger)
        let first = journal.lastSeq + 1
        for seq in first..<(first + 5) {
            JournalRecoveryTests.topic.withUnsafeBytes { t in
                JournalRecoveryTests.envelope(seq).withUnsafeBytes { e in
                    batch.append(seq: seq, kindSeq: seq, kind: 1, topic: t, envelope: e, arrival: 0)
                }
            }
        }
        try batch.flush()
        #expect(try JournalRecoveryTests.seqs(in: journal) == Array(1...10) + Array(first..<(first + 5)))
        batch.close()

        // Reopened: both versions in one segment, every record intact, none cut.
        let again = try Journal(directory: root, options: JournalRecoveryTests.options(), logger: logger)
        defer { again.close() }
        #expect(try JournalRecoveryTests.seqs(in: again) == Array(1...10) + Array(first..<(first + 5)))
        let after = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        let magics = after.withUnsafeBytes { raw -> [UInt32] in
            var out: [UInt32] = []
            var at = JournalFormat.segmentHeaderSize
            while at + JournalFormat.recordHeaderSize <= raw.count,
                case let m = JournalFormat.load(raw.baseAddress!, at, as: UInt32.self), JournalFormat.isRecordMagic(m)
            {
                out.append(m)
                at += JournalFormat.recordHeaderSize + Int(JournalFormat.load(raw.baseAddress!, at + 4, as: UInt32.self))
                    + JournalFormat.checksumSize
            }
            return out
        }
        #expect(magics == Array(repeating: JournalFormat.recordMagicV1, count: 10)
            + Array(repeating: JournalFormat.recordMagic, count: 5))
    }
}
