/// A 64-bit hash of a JSON value under JSON equality: object key order and whitespace do not
/// change it, array order does, escapes are decoded, and numbers compare by value (`1`, `1.0` and
/// `1e0` are equal).
///
/// Objects combine their members' hashes commutatively (a sum of mixed key/value pairs), so no
/// sorting and no re-serialisation happens: one pass over the tape. Two different snapshots share a
/// hash with probability about 2⁻⁶⁴; the suppressor accepts that risk for an `update` only (a
/// `complete` is never suppressed). `Sendable`; pure functions.
///
/// Every step is one 64×64→128-bit multiply folded to 64 bits (``mum(_:_:)``). A value's hash is
/// always mixed once more by its container (an array's chain, an object's key/value pair), so a
/// scalar needs no finalising multiply of its own: a string of up to 16 bytes costs one multiply,
/// an object key of up to 8 bytes none (its bytes go straight into the pair's multiply).
package enum CanonicalHash {
    @inlinable package static var p0: UInt64 { 0xa076_1d64_78bd_642f }
    @inlinable package static var p1: UInt64 { 0xe703_7ed1_a0b4_28db }
    @inlinable package static var p2: UInt64 { 0x8ebc_6af0_9c88_c6e3 }
    @inlinable package static var p3: UInt64 { 0x5899_65cc_7537_4cc3 }
    @inlinable package static var tagObject: UInt64 { 0x1d8e_4e27_c47d_124f }
    @inlinable package static var tagArray: UInt64 { 0x2f3a_8c1b_6e5d_4a97 }
    @inlinable package static var tagString: UInt64 { 0x3c6e_f372_fe94_f82b }
    @inlinable package static var tagNumber: UInt64 { 0x4a9f_1c3d_8e2b_7a65 }
    @inlinable package static var tagTrue: UInt64 { 0x5b0e_2d4f_6a8c_1e3b }
    @inlinable package static var tagFalse: UInt64 { 0x6c1f_3e5a_7b9d_2f4c }
    @inlinable package static var tagNull: UInt64 { 0x7d2a_4f6b_8cae_3a5d }

    @inline(__always)
    @inlinable package static func mum(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let r = a.multipliedFullWidth(by: b)
        return r.high ^ r.low
    }

    /// Hashes raw bytes (wyhash-style multiply-mix).
    @inlinable
    package static func hashBytes(_ p: UnsafeRawPointer, _ n: Int, seed: UInt64) -> UInt64 {
        if n <= 16 {
            // Short strings (most keys and many values): two words that together cover every
            // byte, then two multiply-mixes.
            let (a, b) = shortWords(p, n)
            return mum(mum(a ^ p1, b ^ seed ^ UInt64(truncatingIfNeeded: n) &* p0) ^ p2, p3 ^ seed)
        }
        // Longer: eight bytes per multiply, each against the running hash. The byte-dependent
        // operand is `w ^ p1`, which is zero only for w == p1 — not valid UTF-8, so no decoded id
        // or string can wipe out what came before it (a form mixing `h` into the operand the
        // input controls could be zeroed by a chosen printable block, and ids made to collide).
        var h = seed ^ mum(UInt64(truncatingIfNeeded: n) ^ p0, p1)
        var i = 0
        while i &+ 8 <= n {
            h = mum(p.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ p1, h ^ p2)
            i &+= 8
        }
        if i < n { h = mum(tailWord(p, n, i) ^ p3, h ^ p0) }
        return mum(h ^ p2, p3)
    }

    /// The 0…16 bytes at `p` as two words that together cover every byte, reading none outside
    /// them (the short path of both `hashBytes`).
    @inline(__always)
    @inlinable package static func shortWords(_ p: UnsafeRawPointer, _ n: Int) -> (UInt64, UInt64) {
        if n >= 8 {
            return (p.loadUnaligned(as: UInt64.self), p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self))
        } else if n >= 4 {
            return (UInt64(p.loadUnaligned(as: UInt32.self)), UInt64(p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)))
        } else if n > 0 {
            return (UInt64(p.load(as: UInt8.self)) << 16 | UInt64(p.load(fromByteOffset: n >> 1, as: UInt8.self)) << 8
                | UInt64(p.load(fromByteOffset: n - 1, as: UInt8.self)), 0)
        }
        return (0, 0)
    }

    /// The last 1…7 bytes of `p[i..<n]` (`n >= 8`): the word ending at the last byte, shifted
    /// down to them.
    @inline(__always)
    @inlinable package static func tailWord(_ p: UnsafeRawPointer, _ n: Int, _ i: Int) -> UInt64 {
        p.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self) &>> UInt64(truncatingIfNeeded: 8 &* (8 &- (n &- i)))
    }

    // MARK: Strings
    //
    // A string's hash depends only on its decoded bytes. The walker reads unescaped strings
    // straight from the text; ``string(_:_:)`` hashes a decoded copy the same way.

    /// A string of 0…8 bytes, zero-padded into `w` (little-endian): one multiply.
    @inline(__always)
    @inlinable package static func string8(_ w: UInt64, _ n: Int) -> UInt64 {
        mum(w ^ p1, UInt64(truncatingIfNeeded: n) &* p0 ^ tagString)
    }

    /// A string of 9…16 bytes: `a` its first eight, `b` its last eight (they overlap below 16, and
    /// with the length known the pair still determines the string). One multiply.
    @inline(__always)
    @inlinable package static func string16(_ a: UInt64, _ b: UInt64, _ n: Int) -> UInt64 {
        mum(a ^ p2, b ^ UInt64(truncatingIfNeeded: n) &* p0 ^ tagString)
    }

    /// Longer strings: ``hashBytes(_:_:seed:)``.
    @inline(never)
    @usableFromInline package static func longString(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        hashBytes(p, n, seed: tagString)
    }

    /// The hash of a string's decoded UTF-8 bytes (`n` of them at `p`).
    @inlinable package static func string(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        if n > 16 { return longString(p, n) }
        if n > 8 {
            return string16(UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)),
                            UInt64(littleEndian: p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)), n)
        }
        return string8(word(p, n), n)
    }

    /// Bytes `0..<n` (n ≤ 8) at `p`, zero-padded into a little-endian word, reading only those.
    @inlinable package static func word(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        var w: UInt64 = 0
        for i in 0..<n { w |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (8 * UInt64(i)) }
        return w
    }

    /// An object key as the two operands of its member's multiply (see ``Walker/object(_:)``):
    /// a key of 0…8 bytes is its zero-padded word and its length, with no multiply of its own;
    /// a longer key is its string hash (which has the length in it) and a constant.
    @inline(__always)
    @inlinable package static func shortKey(_ w: UInt64, _ n: Int) -> (UInt64, UInt64) {
        (w, UInt64(truncatingIfNeeded: n) &* p0 ^ p2)
    }

    @inline(__always)
    @inlinable package static func longKey(_ h: UInt64) -> (UInt64, UInt64) { (h, p3) }

    @inlinable package static func key(_ p: UnsafeRawPointer, _ n: Int) -> (UInt64, UInt64) {
        n <= 8 ? shortKey(word(p, n), n) : longKey(string(p, n))
    }

    /// The value of the `digits` (1…8) ASCII digits just before `end`, which must be at least 8
    /// bytes into the text: the word ending at the last digit, shifted so the digits fill its top
    /// bytes (the bytes below, before the number, are cleared and count as leading zeros), then
    /// summed in SWAR steps of 2, 4 and 8 digits. No loop, no check of the digits (the scanner
    /// checked them).
    @inline(__always)
    @inlinable package static func digitsValue(endingAt end: UnsafePointer<UInt8>, _ digits: Int) -> UInt64 {
        let shift = UInt64(truncatingIfNeeded: 64 &- 8 &* digits)
        let w = UInt64(littleEndian: UnsafeRawPointer(end - 8).loadUnaligned(as: UInt64.self))
        // Byte i holds digit i (most significant first): clear the bytes before the number,
        // then subtract "0" from the digits only.
        var d = (w & (UInt64.max &<< shift)) &- (0x3030_3030_3030_3030 &<< shift)
        d = d &* 10 &+ (d &>> 8)  // bytes 0, 2, 4, 6: two-digit values
        return ((d & 0x0000_00FF_0000_00FF) &* (100 &+ (1_000_000 &<< 32))
            &+ ((d &>> 16) & 0x0000_00FF_0000_00FF) &* (1 &+ (10_000 &<< 32))) &>> 32
    }

    /// An integer's hash, however it was spelled.
    @inline(__always)
    @inlinable package static func integer(_ v: Int64) -> UInt64 {
        mum(UInt64(bitPattern: v) ^ tagNumber, p1)
    }

    /// Number token `t`'s hash (``hashNumber(_:fractional:)``).
    @inlinable package static func hashNumber(_ doc: JSONDocument, _ t: Int) -> UInt64 {
        hashNumber(doc.raw(t), fractional: doc.tokens[t].flag)
    }

    /// A number's hash from its text, `fractional` when it has a fraction or an exponent (the
    /// token's flag): an integer's by value, however spelled; else its double's; else (beyond a
    /// double's reach) its text's.
    @inline(never)
    @usableFromInline package static func hashNumber(_ r: UnsafeRawBufferPointer, fractional: Bool) -> UInt64 {
        if !fractional, r.count <= 18, let v = JSONDocument.parseInt(r) {
            return integer(v)
        }
        guard r.count < 64, let d = JSONDocument.parseDouble(r) else {
            return hashBytes(r.baseAddress!, r.count, seed: tagNumber)
        }
        if d.rounded() == d && abs(d) < 1.0e18 {
            return integer(Int64(d))
        }
        return mum((d == 0 ? 0 : d.bitPattern) ^ tagNumber, p2)
    }
}
