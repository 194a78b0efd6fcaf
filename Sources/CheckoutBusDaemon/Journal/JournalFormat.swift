import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The on-disk layout of journal segments and records (`docs/durability.md`). `Sendable`; pure.
///
/// A segment is a 64-byte header then records. A record is a 32-byte header, the topic, the
/// envelope, and an 8-byte checksum over everything before it. All integers are little-endian.
package enum JournalFormat {
    package static let segmentMagic: [UInt8] = Array("CBJSEG01".utf8)
    /// The magic of the records this daemon writes, "CBR2": their checksum is ``checksum(_:_:)``.
    package static let recordMagic: UInt32 = 0x3252_4243  // "CBR2" read little-endian
    /// The magic of records written before it, "CBR1", still read: their checksum is
    /// ``checksumV1(_:_:)``. Segments may hold both (a journal written before an upgrade and
    /// appended to after it).
    package static let recordMagicV1: UInt32 = 0x3152_4243  // "CBR1" read little-endian

    /// Whether `magic` (a record's first four bytes) starts a record of either version.
    @inline(__always)
    package static func isRecordMagic(_ magic: UInt32) -> Bool { magic == recordMagic || magic == recordMagicV1 }

    /// The checksum a record with `magic` carries over its `n` bytes at `p`.
    @inline(__always)
    package static func recordChecksum(magic: UInt32, _ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        magic == recordMagicV1 ? checksumV1(p, n) : checksum(p, n)
    }
    package static let segmentHeaderSize = 64
    package static let recordHeaderSize = 32
    package static let checksumSize = 8
    /// Kinds on the journal: the five lifecycle kinds, then dead letters.
    package static let kindCount = JournaledKind.allCases.count
    package static let deadLetterKind = UInt8(JournaledKind.deadletter.rawValue)
    /// The largest record body accepted on read (a corrupt length is not followed).
    package static let maxBodySize = 512 << 20

    /// The file name of the segment whose first record is `firstSeq`.
    package static func segmentName(_ firstSeq: UInt64) -> String {
        let digits = String(firstSeq)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".seg"
    }

    /// The first seq in a segment file name, or nil when the name is not a segment's.
    package static func firstSeq(fromName name: String) -> UInt64? {
        guard name.hasSuffix(".seg"), name.count == 24 else { return nil }
        return UInt64(name.prefix(20))
    }

    /// The checksum of "CBR2" records: a 64-bit multiply-mix over `n` bytes, fixed forever (the
    /// journal's files depend on it), independent of any other hash in the code.
    ///
    /// Unlike ``checksumV1(_:_:)`` no block waits for the one before: each 32 bytes are two
    /// 128-bit multiplies of the data with fixed keys and the block's offset, added into two
    /// accumulators, so the processor overlaps the blocks' multiplies. The offset in every
    /// block's input makes moved or swapped blocks change the sum.
    package static func checksum(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        let k0: UInt64 = 0x9E37_79B9_7F4A_7C15
        let k1: UInt64 = 0xBF58_476D_1CE4_E5B9
        let k2: UInt64 = 0x94D0_49BB_1331_11EB
        let k3: UInt64 = 0xD6E8_FEB8_6659_FD93
        @inline(__always) func mix(_ a: UInt64, _ b: UInt64) -> UInt64 {
            let r = a.multipliedFullWidth(by: b)
            return r.high ^ r.low
        }
        @inline(__always) func word(_ offset: Int) -> UInt64 { p.loadUnaligned(fromByteOffset: offset, as: UInt64.self) }
        var acc0 = UInt64(truncatingIfNeeded: n) ^ k0
        var acc1 = k3
        var i = 0
        // `block` is i × k0, wrapping, kept as a running sum. Two blocks a turn: the same sums as
        // one at a time, with half the loop's own instructions.
        var block: UInt64 = 0
        let step = k0 &* 32
        while i &+ 64 <= n {
            acc0 &+= mix(word(i) ^ k1 ^ block, word(i &+ 8) ^ k2)
            acc1 &+= mix(word(i &+ 16) ^ k2 ^ block, word(i &+ 24) ^ k3)
            let next = block &+ step
            acc0 &+= mix(word(i &+ 32) ^ k1 ^ next, word(i &+ 40) ^ k2)
            acc1 &+= mix(word(i &+ 48) ^ k2 ^ next, word(i &+ 56) ^ k3)
            block = next &+ step
            i &+= 64
        }
        if i &+ 32 <= n {
            acc0 &+= mix(word(i) ^ k1 ^ block, word(i &+ 8) ^ k2)
            acc1 &+= mix(word(i &+ 16) ^ k2 ^ block, word(i &+ 24) ^ k3)
            block &+= step
            i &+= 32
        }
        // The last 0–31 bytes, zero-filled to four words: whole words as they are, a last partial
        // one from the word ending at the last byte, shifted down (the text is at least 8 bytes
        // long whenever a partial word follows a whole one or a block; shorter, byte by byte).
        var tail: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let rest = n &- i
        withUnsafeMutableBytes(of: &tail) { t in
            var k = 0
            while k &+ 8 <= rest {
                t.storeBytes(of: word(i &+ k), toByteOffset: k, as: UInt64.self)
                k &+= 8
            }
            if k < rest {
                #if _endian(little)
                let shifted = n >= 8
                #else
                let shifted = false
                #endif
                if shifted {
                    // Little-endian: the word's last bytes are its high ones.
                    let shift = UInt64(truncatingIfNeeded: 8 &* (8 &- (rest &- k)))
                    t.storeBytes(of: word(n &- 8) &>> shift, toByteOffset: k, as: UInt64.self)
                } else {
                    (t.baseAddress! + k).copyMemory(from: p + (i &+ k), byteCount: rest &- k)
                }
            }
        }
        acc0 &+= mix(tail.0 ^ k1 ^ block, tail.1 ^ k2)
        acc1 &+= mix(tail.2 ^ k2 ^ block, tail.3 ^ k3)
        return mix(acc0 ^ k2, mix(acc1 ^ k0, k1))
    }

    /// The checksum of "CBR1" records, and of the seq reservation's slots and the suppressed
    /// log's lines: a 64-bit multiply-mix over `n` bytes, fixed forever (files depend on it),
    /// independent of any other hash in the code. Each 16 bytes' multiply waits for the one
    /// before (a serial chain: about a quarter of the writer thread's time went to it).
    package static func checksumV1(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
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
            let magic = load(p, offset, as: UInt32.self)
            store(recordChecksum(magic: magic, p + offset, covered), p + offset, covered)
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
    package struct RecordHeader: Sendable, Equatable {
        package var bodyLength: Int
        package var seq: UInt64
        package var kindSeq: UInt64
        package var kind: UInt8
        package var topicLength: Int
        /// Bytes of the whole record: header, body, checksum.
        package var recordSize: Int { JournalFormat.recordHeaderSize + bodyLength + JournalFormat.checksumSize }
    }

    /// Reads and validates a record at `p` with `available` bytes; nil when torn or corrupt.
    package static func readRecord(_ p: UnsafeRawPointer, available: Int) -> RecordHeader? {
        guard available >= recordHeaderSize + checksumSize else { return nil }
        let magic = load(p, 0, as: UInt32.self)
        guard isRecordMagic(magic) else { return nil }
        let body = Int(load(p, 4, as: UInt32.self))
        let topic = Int(load(p, 28, as: UInt32.self))
        guard body <= maxBodySize, topic <= body else { return nil }
        let h = RecordHeader(bodyLength: body, seq: load(p, 8, as: UInt64.self), kindSeq: load(p, 16, as: UInt64.self),
                             kind: load(p, 24, as: UInt8.self), topicLength: topic)
        guard h.kind < kindCount, available >= h.recordSize else { return nil }
        let covered = recordHeaderSize + body
        guard load(p, covered, as: UInt64.self) == recordChecksum(magic: magic, p, covered) else { return nil }
        return h
    }

    /// Writes a segment header: magic, first seq, and the last kind_seq of each kind before it.
    package static func segmentHeader(firstSeq: UInt64, kindSeqs: [UInt64]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: segmentHeaderSize)
        out.withUnsafeMutableBytes { p in
            for (i, b) in segmentMagic.enumerated() { p[i] = b }
            store(firstSeq, p.baseAddress!, 8)
            for k in 0..<kindCount { store(k < kindSeqs.count ? kindSeqs[k] : 0, p.baseAddress!, 16 + 8 * k) }
        }
        return out
    }

    /// Reads a segment header; nil when it is short or its magic is wrong.
    package static func readSegmentHeader(_ bytes: UnsafeRawBufferPointer) -> (firstSeq: UInt64, kindSeqs: [UInt64])? {
        guard bytes.count >= segmentHeaderSize, bytes.prefix(8).elementsEqual(segmentMagic) else { return nil }
        let p = bytes.baseAddress!
        return (load(p, 8, as: UInt64.self), (0..<kindCount).map { load(p, 16 + 8 * $0, as: UInt64.self) })
    }
}
