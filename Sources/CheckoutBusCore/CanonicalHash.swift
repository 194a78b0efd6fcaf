/// A 64-bit hash of a JSON value under JSON equality: object key order and whitespace do not
/// change it, array order does, escapes are decoded, and numbers compare by value (`1`, `1.0` and
/// `1e0` are equal).
///
/// Objects combine their members' hashes commutatively (a sum of mixed key/value pairs), so no
/// sorting and no re-serialisation happens: one pass over the tape. Two different snapshots share a
/// hash with probability about 2⁻⁶⁴; the suppressor accepts that risk for an `update` only (a
/// `complete` is never suppressed). `Sendable`; pure functions.
public enum CanonicalHash {
    @usableFromInline static let p0: UInt64 = 0xa076_1d64_78bd_642f
    @usableFromInline static let p1: UInt64 = 0xe703_7ed1_a0b4_28db
    @usableFromInline static let p2: UInt64 = 0x8ebc_6af0_9c88_c6e3
    @usableFromInline static let p3: UInt64 = 0x5899_65cc_7537_4cc3
    static let tagObject: UInt64 = 0x1d8e_4e27_c47d_124f
    static let tagArray: UInt64 = 0x2f3a_8c1b_6e5d_4a97
    static let tagString: UInt64 = 0x3c6e_f372_fe94_f82b
    static let tagNumber: UInt64 = 0x4a9f_1c3d_8e2b_7a65
    static let tagTrue: UInt64 = 0x5b0e_2d4f_6a8c_1e3b
    static let tagFalse: UInt64 = 0x6c1f_3e5a_7b9d_2f4c
    static let tagNull: UInt64 = 0x7d2a_4f6b_8cae_3a5d

    @inline(__always)
    @usableFromInline
    static func mum(_ a: UInt64, _ b: UInt64) -> UInt64 {
        let r = a.multipliedFullWidth(by: b)
        return r.high ^ r.low
    }

    /// Hashes raw bytes (wyhash-style multiply-mix, 8 bytes at a time).
    @inlinable
    public static func hashBytes(_ p: UnsafeRawPointer, _ n: Int, seed: UInt64) -> UInt64 {
        if n <= 16 {
            // Short strings (most keys and many values): two words that together cover every
            // byte, then two multiply-mixes.
            var a: UInt64 = 0
            var b: UInt64 = 0
            if n >= 8 {
                a = p.loadUnaligned(as: UInt64.self)
                b = p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
            } else if n >= 4 {
                a = UInt64(p.loadUnaligned(as: UInt32.self))
                b = UInt64(p.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self))
            } else if n > 0 {
                a = UInt64(p.load(as: UInt8.self)) << 16 | UInt64(p.load(fromByteOffset: n >> 1, as: UInt8.self)) << 8
                    | UInt64(p.load(fromByteOffset: n - 1, as: UInt8.self))
            }
            return mum(mum(a ^ p1, b ^ seed ^ UInt64(truncatingIfNeeded: n) &* p0) ^ p2, p3 ^ seed)
        }
        var h = seed ^ mum(UInt64(truncatingIfNeeded: n) ^ p0, p1)
        var i = 0
        while i + 8 <= n {
            let w = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            h = mum(w ^ p1, h ^ p2)
            i += 8
        }
        if i < n {
            var w: UInt64 = 0
            var shift: UInt64 = 0
            while i < n {
                w |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << shift
                shift += 8
                i += 1
            }
            h = mum(w ^ p3, h ^ p0)
        }
        return mum(h ^ p2, p3)
    }

    /// The canonical hash of value `t` of `doc`.
    public static func hash(_ doc: JSONDocument, _ t: Int) -> UInt64 {
        Walker(doc: doc).hash(t)
    }

    /// A string of at most 16 bytes: `a` holds bytes 0..<8 and `b` bytes 8..<16, zero-padded.
    @inline(__always)
    static func shortString(_ a: UInt64, _ b: UInt64, _ n: Int) -> UInt64 {
        mum(mum(a ^ p1, b ^ tagString ^ UInt64(truncatingIfNeeded: n) &* p0) ^ p2, p3 ^ tagString)
    }

    /// The hash of a string's decoded UTF-8 bytes.
    static func string(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        if n > 16 { return hashBytes(p, n, seed: tagString) }
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { $0.baseAddress!.copyMemory(from: p, byteCount: n) }
        return shortString(UInt64(littleEndian: words.0), UInt64(littleEndian: words.1), n)
    }

    /// Walks the tape through local pointers (no per-token class accesses).
    struct Walker {
        let doc: JSONDocument
        let tokens: UnsafeMutablePointer<JSONDocument.Token>
        let base: UnsafePointer<UInt8>
        let length: Int

        init(doc: JSONDocument) {
            self.doc = doc
            tokens = doc.tokens
            base = doc.base
            length = doc.length
        }

        func hash(_ t: Int) -> UInt64 {
            let tok = tokens[t]
            switch tok.kind {
            case .object: return object(t, tok)
            case .array: return array(t, tok)
            default: return value(t)
            }
        }

        /// Any value; scalars are hashed inline, containers recurse.
        @inline(__always)
        func value(_ t: Int) -> UInt64 {
            let tok = tokens[t]
            switch tok.kind {
            case .string: return string(t, tok)
            case .number: return number(t, tok)
            case .object: return object(t, tok)
            case .array: return array(t, tok)
            case .true: return tagTrue
            case .false: return tagFalse
            case .null: return tagNull
            }
        }

        func object(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 {
            var acc: UInt64 = 0
            var count: UInt64 = 0
            let end = Int(tok.next)
            var k = t + 1
            while k < end {
                let v = k + 1
                acc &+= mum(string(k, tokens[k]) ^ p1, value(v) ^ p2)
                count &+= 1
                k = Int(tokens[v].next)
            }
            return mum(acc ^ tagObject, count ^ p3)
        }

        func array(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 {
            var h = tagArray
            let end = Int(tok.next)
            var e = t + 1
            while e < end {
                h = mum(h ^ p1, value(e) ^ p2)
                e = Int(tokens[e].next)
            }
            return mum(h ^ p0, p3)
        }

        @inline(__always)
        func string(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 {
            let at = Int(tok.start) &+ 1
            let n = Int(tok.end &- tok.start) &- 2
            if tok.flag || UInt(bitPattern: n &- 1) >= 16 || at &+ 16 > length { return stringSlow(t, tok) }
            // Two words straight from the text (the document has 16 bytes from `at`), masked to
            // the string's 1…16 bytes by shifts and a sign mask: no branch on the length.
            let p = UnsafeRawPointer(base + at)
            let a = UInt64(littleEndian: p.loadUnaligned(as: UInt64.self))
            let b = UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            let maskA = UInt64.max &>> UInt64(truncatingIfNeeded: 64 &- 8 &* min(n, 8))
            let maskB = (UInt64.max &>> UInt64(truncatingIfNeeded: 128 &- 8 &* max(n, 9)))
                & UInt64(bitPattern: Int64(8 &- n) &>> 63)
            return shortString(a & maskA, b & maskB, n)
        }

        func stringSlow(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 {
            if !tok.flag {
                return CanonicalHash.string(base + Int(tok.start) + 1, Int(tok.end - tok.start) - 2)
            }
            let decoded = doc.unescapedBytes(t)
            return decoded.withUnsafeBytes {
                CanonicalHash.string($0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, $0.count)
            }
        }

        @inline(__always)
        func number(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 {
            // Plain integers (the usual case) are read here; anything else goes through hashNumber.
            var i = Int(tok.start)
            let end = Int(tok.end)
            if !tok.flag && end &- i <= 18 {
                let negative = base[i] == UInt8(ascii: "-")
                if negative { i &+= 1 }
                var v: Int64 = 0
                while i < end {
                    v = v &* 10 &+ Int64(base[i] &- UInt8(ascii: "0"))
                    i &+= 1
                }
                return mum(UInt64(bitPattern: negative ? 0 &- v : v) ^ tagNumber, p1)
            }
            return hashNumber(doc, t)
        }
    }

    static func hashNumber(_ doc: JSONDocument, _ t: Int) -> UInt64 {
        let tok = doc.tokens[t]
        if !tok.flag, tok.end - tok.start <= 18, let v = JSONDocument.parseInt(doc.raw(t)) {
            return mum(UInt64(bitPattern: v) ^ tagNumber, p1)
        }
        guard let d = doc.double(t) else {
            let r = doc.raw(t)
            return hashBytes(r.baseAddress!, r.count, seed: tagNumber)
        }
        if d.rounded() == d && abs(d) < 1.0e18 {
            return mum(UInt64(bitPattern: Int64(d)) ^ tagNumber, p1)
        }
        return mum((d == 0 ? 0 : d.bitPattern) ^ tagNumber, p2)
    }
}
