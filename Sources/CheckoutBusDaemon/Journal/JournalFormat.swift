import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import ZeroMQ

/// The on-disk layout of journal segments and records (`docs/durability.md`). `Sendable`; pure.
///
/// A segment is a 64-byte header then records. A record is a 32-byte header, the topic, the
/// envelope, and an 8-byte checksum over everything before it. All integers are little-endian.
public enum JournalFormat {
    public static let segmentMagic: [UInt8] = Array("CBJSEG01".utf8)
    public static let recordMagic: UInt32 = 0x3152_4243  // "CBR1" read little-endian
    public static let segmentHeaderSize = 64
    public static let recordHeaderSize = 32
    public static let checksumSize = 8
    /// Kinds on the journal: the five lifecycle kinds, then dead letters.
    public static let kindCount = JournaledKind.allCases.count
    public static let deadLetterKind = UInt8(JournaledKind.deadletter.rawValue)
    /// The largest record body accepted on read (a corrupt length is not followed).
    public static let maxBodySize = 512 << 20

    /// The file name of the segment whose first record is `firstSeq`.
    public static func segmentName(_ firstSeq: UInt64) -> String {
        let digits = String(firstSeq)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".seg"
    }

    /// The first seq in a segment file name, or nil when the name is not a segment's.
    public static func firstSeq(fromName name: String) -> UInt64? {
        guard name.hasSuffix(".seg"), name.count == 24 else { return nil }
        return UInt64(name.prefix(20))
    }

    /// The record checksum: a 64-bit multiply-mix over `n` bytes, fixed forever (the journal's
    /// files depend on it), independent of any other hash in the code.
    public static func checksum(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        let k0: UInt64 = 0x9E37_79B9_7F4A_7C15
        let k1: UInt64 = 0xBF58_476D_1CE4_E5B9
        let k2: UInt64 = 0x94D0_49BB_1331_11EB
        @inline(__always) func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let r = a.multipliedFullWidth(by: b)
            return r.high ^ r.low
        }
        var h = mix(UInt64(truncatingIfNeeded: n) ^ k0, k1)
        var i = 0
        while i + 16 <= n {
            let a = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let b = p.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)
            h = mix(a ^ k1 ^ h, b ^ k2) &+ h &* k0
            i += 16
        }
        var tail: UInt64 = 0
        var tail2: UInt64 = 0
        var shift: UInt64 = 0
        while i < n {
            let byte = UInt64(p.load(fromByteOffset: i, as: UInt8.self))
            if shift < 64 { tail |= byte << shift } else { tail2 |= byte << (shift - 64) }
            shift += 8
            i += 1
        }
        h = mix(tail ^ k2 ^ h, tail2 ^ k1) &+ h
        return mix(h ^ k0, k2)
    }

    /// Stores each record's checksum in a run of `count` bytes of whole records at `p` (appended
    /// without one). Idempotent.
    package static func seal(_ p: UnsafeMutableRawPointer, _ count: Int) {
        var offset = 0
        while offset + recordHeaderSize <= count {
            let covered = recordHeaderSize + Int(load(p, offset + 4, as: UInt32.self))
            store(checksum(p + offset, covered), p + offset, covered)
            offset += covered + checksumSize
        }
    }

    @inline(__always)
    package static func store<T: FixedWidthInteger>(_ v: T, _ p: UnsafeMutableRawPointer, _ offset: Int) {
        p.storeBytes(of: v.littleEndian, toByteOffset: offset, as: T.self)
    }

    @inline(__always)
    package static func load<T: FixedWidthInteger>(_ p: UnsafeRawPointer, _ offset: Int, as: T.Type) -> T {
        T(littleEndian: p.loadUnaligned(fromByteOffset: offset, as: T.self))
    }

    /// One record's header fields, as read back.
    public struct RecordHeader: Sendable, Equatable {
        public var bodyLength: Int
        public var seq: UInt64
        public var kindSeq: UInt64
        public var kind: UInt8
        public var topicLength: Int
        /// Bytes of the whole record: header, body, checksum.
        public var recordSize: Int { JournalFormat.recordHeaderSize + bodyLength + JournalFormat.checksumSize }
    }

    /// Reads and validates a record at `p` with `available` bytes; nil when torn or corrupt.
    public static func readRecord(_ p: UnsafeRawPointer, available: Int) -> RecordHeader? {
        guard available >= recordHeaderSize + checksumSize else { return nil }
        guard load(p, 0, as: UInt32.self) == recordMagic else { return nil }
        let body = Int(load(p, 4, as: UInt32.self))
        let topic = Int(load(p, 28, as: UInt32.self))
        guard body <= maxBodySize, topic <= body else { return nil }
        let h = RecordHeader(bodyLength: body, seq: load(p, 8, as: UInt64.self), kindSeq: load(p, 16, as: UInt64.self),
                             kind: load(p, 24, as: UInt8.self), topicLength: topic)
        guard h.kind < kindCount, available >= h.recordSize else { return nil }
        let covered = recordHeaderSize + body
        guard load(p, covered, as: UInt64.self) == checksum(p, covered) else { return nil }
        return h
    }

    /// Writes a segment header: magic, first seq, and the last kind_seq of each kind before it.
    public static func segmentHeader(firstSeq: UInt64, kindSeqs: [UInt64]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: segmentHeaderSize)
        out.withUnsafeMutableBytes { p in
            for (i, b) in segmentMagic.enumerated() { p[i] = b }
            store(firstSeq, p.baseAddress!, 8)
            for k in 0..<kindCount { store(k < kindSeqs.count ? kindSeqs[k] : 0, p.baseAddress!, 16 + 8 * k) }
        }
        return out
    }

    /// Reads a segment header; nil when it is short or its magic is wrong.
    public static func readSegmentHeader(_ bytes: UnsafeRawBufferPointer) -> (firstSeq: UInt64, kindSeqs: [UInt64])? {
        guard bytes.count >= segmentHeaderSize, bytes.prefix(8).elementsEqual(segmentMagic) else { return nil }
        let p = bytes.baseAddress!
        return (load(p, 8, as: UInt64.self), (0..<kindCount).map { load(p, 16 + 8 * $0, as: UInt64.self) })
    }
}
