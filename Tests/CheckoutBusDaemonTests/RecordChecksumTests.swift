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

    /// The CBR2 checksum as first written (one block a turn, the tail copied into four words):
    /// the definition the journal's files depend on, which the production function must match.
    static func referenceChecksum(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        let k0: UInt64 = 0x9E37_79B9_7F4A_7C15
        let k1: UInt64 = 0xBF58_476D_1CE4_E5B9
        let k2: UInt64 = 0x94D0_49BB_1331_11EB
        let k3: UInt64 = 0xD6E8_FEB8_6659_FD93
        func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let r = a.multipliedFullWidth(by: b)
            return r.high ^ r.low
        }
        var acc0 = UInt64(truncatingIfNeeded: n) ^ k0
        var acc1 = k3
        var i = 0
        while i + 32 <= n {
            let block = UInt64(truncatingIfNeeded: i) &* k0
            let a = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let b = p.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)
            let c = p.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self)
            let d = p.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self)
            acc0 &+= mix(a ^ k1 ^ block, b ^ k2)
            acc1 &+= mix(c ^ k2 ^ block, d ^ k3)
            i += 32
        }
        var tail: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &tail) { t in t.baseAddress!.copyMemory(from: p + i, byteCount: n - i) }
        let block = UInt64(truncatingIfNeeded: i) &* k0
        acc0 &+= mix(tail.0 ^ k1 ^ block, tail.1 ^ k2)
        acc1 &+= mix(tail.2 ^ k2 ^ block, tail.3 ^ k3)
        return mix(acc0 ^ k2, mix(acc1 ^ k0, k1))
    }

    @Test("the CBR2 checksum is the one records were first written with, at every length 0…600 and offset 0…7")
    func sameAsFirstWritten() {
        var state: UInt64 = 0x5EED
        let bytes = (0..<616).map { _ -> UInt8 in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        var mismatches = 0
        bytes.withUnsafeBytes { raw in
            for offset in 0..<8 {
                for n in 0...600 where JournalFormat.checksum(raw.baseAddress! + offset, n)
                    != Self.referenceChecksum(raw.baseAddress! + offset, n) {
                    mismatches += 1
                }
            }
        }
        #expect(mismatches == 0)
        // Pinned values: "0123456789" repeated, at lengths around the block and tail paths.
        let text = Array(String(repeating: "0123456789", count: 20).utf8)
        let pinned: [(Int, UInt64)] = [
            (0, 0x7BDB_9267_82F0_67D8),
            (5, 0x7E88_1B69_DA82_97C3),
            (8, 0x78E4_2DAC_5EA0_D879),
            (31, 0x8101_BD29_7491_09FB),
            (32, 0x09B5_2342_3958_86FD),
            (33, 0x8526_C953_D246_239E),
            (63, 0x18F1_B706_418F_29FD),
            (64, 0xCD97_A9C9_2206_00D2),
            (65, 0x1EC9_3DE9_D505_E803),
            (95, 0x652A_54E2_FF3D_B3FE),
            (100, 0x1D30_C0C2_04CA_82A4),
            (127, 0x8EED_9BE6_46C0_4D8F),
            (128, 0x6AE1_95A3_52E7_2A09),
            (199, 0xE437_114F_EC65_C63D),
        ]
        for (n, sum) in pinned {
            #expect(text.withUnsafeBytes { JournalFormat.checksum($0.baseAddress!, n) } == sum, "length \(n)")
        }
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
