import CheckoutBusProtocol
import CheckoutBusJSON

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

    /// ``hashBytes(_:_:seed:)`` under two seeds, `(hashBytes(p, n, seed: a), hashBytes(p, n, seed: b))`,
    /// in one pass over the bytes: the 128-bit keys of a checkout id and an event id read each
    /// word once.
    @inline(__always)
    static func hashBytes(_ p: UnsafeRawPointer, _ n: Int, seeds a: UInt64, _ b: UInt64) -> (UInt64, UInt64) {
        if n <= 16 {
            let (x, y) = shortWords(p, n)
            let u = x ^ p1
            let v = y ^ UInt64(truncatingIfNeeded: n) &* p0
            return (mum(mum(u, v ^ a) ^ p2, p3 ^ a), mum(mum(u, v ^ b) ^ p2, p3 ^ b))
        }
        let start = mum(UInt64(truncatingIfNeeded: n) ^ p0, p1)
        var ha = a ^ start
        var hb = b ^ start
        var i = 0
        while i &+ 8 <= n {
            let w = p.loadUnaligned(fromByteOffset: i, as: UInt64.self) ^ p1
            ha = mum(w, ha ^ p2)
            hb = mum(w, hb ^ p2)
            i &+= 8
        }
        if i < n {
            let w = tailWord(p, n, i) ^ p3
            ha = mum(w, ha ^ p0)
            hb = mum(w, hb ^ p0)
        }
        return (mum(ha ^ p2, p3), mum(hb ^ p2, p3))
    }

    /// The 0…16 bytes at `p` as two words that together cover every byte, reading none outside
    /// them (the short path of both `hashBytes`).
    @inline(__always)
    @usableFromInline
    static func shortWords(_ p: UnsafeRawPointer, _ n: Int) -> (UInt64, UInt64) {
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
    @usableFromInline
    static func tailWord(_ p: UnsafeRawPointer, _ n: Int, _ i: Int) -> UInt64 {
        p.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self) &>> UInt64(truncatingIfNeeded: 8 &* (8 &- (n &- i)))
    }

    /// The canonical hash of value `t` of `doc`.
    package static func hash(_ doc: JSONDocument, _ t: Int) -> UInt64 {
        let walker = Walker(doc: doc)
        return walker.value(t, walker.tokens[t])
    }

    // MARK: Strings
    //
    // A string's hash depends only on its decoded bytes. The walker reads unescaped strings
    // straight from the text; ``string(_:_:)`` hashes a decoded copy the same way.

    /// A string of 0…8 bytes, zero-padded into `w` (little-endian): one multiply.
    @inline(__always)
    static func string8(_ w: UInt64, _ n: Int) -> UInt64 {
        mum(w ^ p1, UInt64(truncatingIfNeeded: n) &* p0 ^ tagString)
    }

    /// A string of 9…16 bytes: `a` its first eight, `b` its last eight (they overlap below 16, and
    /// with the length known the pair still determines the string). One multiply.
    @inline(__always)
    static func string16(_ a: UInt64, _ b: UInt64, _ n: Int) -> UInt64 {
        mum(a ^ p2, b ^ UInt64(truncatingIfNeeded: n) &* p0 ^ tagString)
    }

    /// Longer strings: ``hashBytes(_:_:seed:)``.
    @inline(never)
    static func longString(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        hashBytes(p, n, seed: tagString)
    }

    /// The hash of a string's decoded UTF-8 bytes (`n` of them at `p`).
    static func string(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        if n > 16 { return longString(p, n) }
        if n > 8 {
            return string16(UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)),
                            UInt64(littleEndian: p.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)), n)
        }
        return string8(word(p, n), n)
    }

    /// Bytes `0..<n` (n ≤ 8) at `p`, zero-padded into a little-endian word, reading only those.
    static func word(_ p: UnsafeRawPointer, _ n: Int) -> UInt64 {
        var w: UInt64 = 0
        for i in 0..<n { w |= UInt64(p.load(fromByteOffset: i, as: UInt8.self)) << (8 * UInt64(i)) }
        return w
    }

    /// An object key as the two operands of its member's multiply (see ``Walker/object(_:)``):
    /// a key of 0…8 bytes is its zero-padded word and its length, with no multiply of its own;
    /// a longer key is its string hash (which has the length in it) and a constant.
    @inline(__always)
    static func shortKey(_ w: UInt64, _ n: Int) -> (UInt64, UInt64) {
        (w, UInt64(truncatingIfNeeded: n) &* p0 ^ p2)
    }

    @inline(__always)
    static func longKey(_ h: UInt64) -> (UInt64, UInt64) { (h, p3) }

    static func key(_ p: UnsafeRawPointer, _ n: Int) -> (UInt64, UInt64) {
        n <= 8 ? shortKey(word(p, n), n) : longKey(string(p, n))
    }

    /// Walks the tape through local pointers (no per-token class accesses). The document is held
    /// `unowned(unsafe)`: the walker never outlives ``CanonicalHash/hash(_:_:)``, whose caller
    /// keeps the document alive, so copying the walker into each call costs no retain/release.
    struct Walker {
        unowned(unsafe) let doc: JSONDocument
        let tokens: UnsafeMutablePointer<JSONDocument.Token>
        let base: UnsafePointer<UInt8>

        init(doc: JSONDocument) {
            self.doc = doc
            tokens = doc.tokens
            base = doc.base
        }

        @inline(__always)
        init(doc: JSONDocument, tokens: UnsafeMutablePointer<JSONDocument.Token>, base: UnsafePointer<UInt8>) {
            self.doc = doc
            self.tokens = tokens
            self.base = base
        }

        /// Value `t`, whose token the caller has already loaded. Scalars are hashed inline,
        /// containers call out (and recurse).
        @inline(__always)
        func value(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 {
            if tok.kind == .string { return string(t, tok) }  // the usual case, before a jump table
            switch tok.kind {
            case .string: return string(t, tok)
            case .number: return number(t, tok)
            case .object: return object(t)
            case .array: return array(t)
            case .true: return tagTrue
            case .false: return tagFalse
            case .null: return tagNull
            }
        }

        /// The sum of one multiply per member, of the key's two operands (``key(_:_:)``) against
        /// the value's hash, then one finalising multiply. No member count: each member's term is
        /// already a full multiply-mix, so different member sets sum apart with probability
        /// 1 − 2⁻⁶⁴ without it (and the count cost a register across the recursive calls).
        func object(_ t: Int) -> UInt64 {
            var acc: UInt64 = 0
            let end = Int(tokens[t].next)
            var k = t &+ 1
            while k < end {
                let (kw, kn) = key(k, tokens[k])
                let v = k &+ 1
                acc &+= mum(kw ^ p1, value(v, tokens[v]) ^ kn)
                k = Int(tokens[v].next)
            }
            return mum(acc ^ tagObject, p3)
        }

        /// A chain: each element's hash mixed into the running hash, so order counts.
        func array(_ t: Int) -> UInt64 {
            var h = tagArray
            let end = Int(tokens[t].next)
            var e = t &+ 1
            while e < end {
                let tok = tokens[e]
                h = mum(h ^ p1, value(e, tok) ^ p2)
                e = Int(tok.next)
            }
            return mum(h ^ p0, p3)
        }

        /// The 8 bytes just before offset `end` of the text: for a string token, the last eight
        /// bytes before its closing quote. A string of fewer than eight bytes gets bytes from
        /// before its opening quote, which the caller shifts out; the load stays inside the
        /// text as long as `end` ≥ 9 (checked by the callers).
        @inline(__always)
        func last8(_ end: Int) -> UInt64 {
            UInt64(littleEndian: UnsafeRawPointer(base + (end &- 9)).loadUnaligned(as: UInt64.self))
        }

        /// A string value. Unescaped strings of 1…16 bytes are read from the text with at most
        /// two loads that stay inside the string or before it (never past the closing quote, so
        /// no check against the text's length): the word ending at the closing quote, shifted
        /// down for a short string, plus the first word for 9…16 bytes.
        @inline(__always)
        func string(_ t: Int, _ tok: JSONDocument.Token, far: Bool = false) -> UInt64 {
            let start = Int(tok.start)
            let end = Int(tok.end)
            let n = end &- start &- 2
            if !tok.flag {
                if UInt(bitPattern: n &- 1) < 16 && (far || end >= 9) {
                    let b = last8(end)
                    if n <= 8 { return string8(b &>> UInt64(truncatingIfNeeded: 64 &- 8 &* n), n) }
                    return string16(first8(start), b, n)
                }
                if n > 16 { return longString(base + (start &+ 1), n) }
            }
            return stringSlow(t, tok)
        }

        /// The 8 bytes after the opening quote at `start` (a string of at least 8 bytes).
        @inline(__always)
        func first8(_ start: Int) -> UInt64 {
            UInt64(littleEndian: UnsafeRawPointer(base + (start &+ 1)).loadUnaligned(as: UInt64.self))
        }

        /// Escaped, empty, or too near the start of the text for ``last8(_:)``.
        @inline(never)
        func stringSlow(_ t: Int, _ tok: JSONDocument.Token) -> UInt64 { decodedBytes(t, tok, CanonicalHash.string) }

        /// Calls `body` with string token `t`'s decoded bytes: in the text when it has no escape.
        func decodedBytes<R>(_ t: Int, _ tok: JSONDocument.Token, _ body: (UnsafeRawPointer, Int) -> R) -> R {
            if !tok.flag { return body(base + Int(tok.start) + 1, Int(tok.end - tok.start) - 2) }
            return doc.unescapedBytes(t).withUnsafeBytes { body($0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!, $0.count) }
        }

        /// An object key's two operands (see ``CanonicalHash/key(_:_:)``), read like
        /// ``string(_:_:)`` reads a value.
        @inline(__always)
        func key(_ t: Int, _ tok: JSONDocument.Token) -> (UInt64, UInt64) {
            let start = Int(tok.start)
            let end = Int(tok.end)
            let n = end &- start &- 2
            if !tok.flag && UInt(bitPattern: n &- 1) < 16 && end >= 9 {
                let b = last8(end)
                if n <= 8 { return shortKey(b &>> UInt64(truncatingIfNeeded: 64 &- 8 &* n), n) }
                return longKey(string16(first8(start), b, n))
            }
            return keySlow(t, tok)
        }

        @inline(never)
        func keySlow(_ t: Int, _ tok: JSONDocument.Token) -> (UInt64, UInt64) { decodedBytes(t, tok, CanonicalHash.key) }

        /// A number. Plain integers of 1…8 digits (the usual case) are read inline with no loop:
        /// the word ending at the last digit, shifted so the digits fill its top bytes (the
        /// zero bytes below count as leading zeros), then summed in SWAR steps of 2, 4 and 8
        /// digits. Anything else goes through ``hashNumber(_:_:)``, which hashes the same value
        /// the same way.
        @inline(__always)
        func number(_ t: Int, _ tok: JSONDocument.Token, far: Bool = false) -> UInt64 {
            let start = Int(tok.start)
            let end = Int(tok.end)
            let negative = base[start] == UInt8(ascii: "-")
            let digits = end &- start &- (negative ? 1 : 0)
            if tok.flag || UInt(bitPattern: digits &- 1) >= 8 || (!far && end < 8) { return numberSlow(t) }
            let v = CanonicalHash.digitsValue(endingAt: base + end, digits)
            return integer(Int64(bitPattern: negative ? 0 &- v : v))
        }

        @inline(never)
        func numberSlow(_ t: Int) -> UInt64 { hashNumber(doc, t) }
    }

    /// The canonical hash of value `t` of `doc` (as ``hash(_:_:)``), noting on the way which
    /// members ``BuyerDataRedactor`` redacts: the text offsets of each such member's value, in
    /// pairs (`start`, `end`) and in document order, replace the contents of `redactions`. One walk
    /// of the tape serves both the comparison and, when the snapshot is published, its redacted copy
    /// (``BuyerDataRedactor/write(_:_:redactions:to:)``, a few copies and no walk). The hash is of the
    /// value as sent, redacted members included. `doc` must be compact (``JSONDocument/isCompact``).
    package static func hashNotingRedactions(_ doc: JSONDocument, _ t: Int, into redactions: inout [Int]) -> UInt64 {
        // The caller's array keeps its capacity; the walker appends through a pointer to it, out
        // of line, so the walk itself holds no array and mutates nothing.
        redactions.removeAll(keepingCapacity: true)
        return withUnsafeMutablePointer(to: &redactions) { notes in
            var rare = RedactingWalker.Rare(doc: doc, notes: notes)
            return withUnsafePointer(to: &rare) { rare in
                let walker = RedactingWalker(
                    tokens: doc.tokens, base: doc.base, screen: BuyerDataRedactor.screen, rare: rare)
                return walker.value(t, parent: -1)
            }
        }
    }

    /// ``Walker``'s object and array steps with ``BuyerDataRedactor``'s member check beside each
    /// key: scalars, and the values of redacted members, are hashed by the plain walker.
    ///
    /// A key of 1…16 unescaped bytes is read once: the one or two words its hash operands come
    /// from, and its first, second-to-last and last bytes for the redaction prefilter
    /// (``BuyerDataRedactor/mayBeRedacted(first:penultimate:last:screen:)``, three table words).
    /// The full check, and noting a redaction, are out of line (rare). A container's parent (the
    /// key its member's name is checked against) travels as that key's token index, -1 for none,
    /// so the walk carries no buffer and no optional; the rare full check reads (or decodes) it.
    ///
    /// The walker is four words (the tape, the text, the prefilter's tables, and one pointer to what
    /// only the rare paths need), so a member's loop keeps its state in registers across the
    /// recursive calls.
    struct RedactingWalker {
        let tokens: UnsafeMutablePointer<JSONDocument.Token>
        let base: UnsafePointer<UInt8>
        /// ``BuyerDataRedactor/screen``, loaded once.
        let screen: UnsafePointer<UInt64>
        let rare: UnsafePointer<Rare>

        /// What the rare paths need: the document (escapes, unusual numbers) and where
        /// redactions are appended (``CanonicalHash/hashNotingRedactions(_:_:into:)``'s
        /// argument, for the walk's duration).
        struct Rare {
            unowned(unsafe) let doc: JSONDocument
            let notes: UnsafeMutablePointer<[Int]>
        }

        /// The plain walker over the same tape, for scalars and redacted values.
        @inline(__always)
        var plain: Walker { Walker(doc: rare.pointee.doc, tokens: tokens, base: base) }

        @inline(__always)
        func value(_ t: Int, parent: Int) -> UInt64 {
            let tok = tokens[t]
            switch tok.kind {
            case .object: return object(t, parent: parent)
            case .array: return array(t, parent: parent)
            default: return plain.value(t, tok)
            }
        }

        /// An object. One that starts at offset 5 or later (every one but a root near the text's
        /// start) has all its keys start at 6 or later, so a key of at least one byte ends at 9 or
        /// later: its members need no check that ``Walker/last8(_:)`` stays inside the text.
        func object(_ t: Int, parent: Int) -> UInt64 {
            if tokens[t].start >= 5 { return members(t, parent: parent, far: true) }
            return objectNearStart(t, parent: parent)
        }

        @inline(never)
        func objectNearStart(_ t: Int, parent: Int) -> UInt64 { members(t, parent: parent, far: false) }

        /// The members of object `t`; `far`: it starts at offset 5 or later (see ``object(_:parent:)``).
        @inline(__always)
        func members(_ t: Int, parent: Int, far: Bool) -> UInt64 {
            var acc: UInt64 = 0
            let end = Int(tokens[t].next)
            var k = t &+ 1
            while k < end {
                let keyToken = tokens[k]
                let v = k &+ 1
                let start = Int(keyToken.start)
                let keyEnd = Int(keyToken.end)
                let n = keyEnd &- start &- 2
                let kw: UInt64
                let kn: UInt64
                let screened: Bool
                let h: UInt64
                if !keyToken.flag && UInt(bitPattern: n &- 1) < 16 && (far || keyEnd >= 9) {
                    // As ``Walker/key(_:_:)``. A one-byte key's `penultimate` is its opening quote.
                    let b = plain.last8(keyEnd)
                    screened = BuyerDataRedactor.mayBeRedacted(
                        first: base[start &+ 1], penultimate: base[keyEnd &- 3], last: base[keyEnd &- 2],
                        screen: screen)
                    if n <= 8 {
                        (kw, kn) = shortKey(b &>> UInt64(truncatingIfNeeded: 64 &- 8 &* n), n)
                    } else {
                        (kw, kn) = longKey(string16(plain.first8(start), b, n))
                    }
                    // The key ends at offset 9 or later, so its value ends at 11 or later: the
                    // plain walker's string and number need not check that their loads stay
                    // inside the text. Unescaped strings and numbers, the usual values, first.
                    if screened && redacted(k, parent: parent) {
                        h = plain.value(v, tokens[v])
                    } else {
                        let valueToken = tokens[v]
                        switch valueToken.kind {
                        case .string: h = plain.string(v, valueToken, far: true)
                        case .number: h = plain.number(v, valueToken, far: true)
                        default: h = value(v, parent: k)
                        }
                    }
                } else {
                    (kw, kn, screened) = keySlow(k)
                    h = memberSlow(k, screened: screened, parent: parent)
                }
                acc &+= mum(kw ^ p1, h ^ kn)
                k = Int(tokens[v].next)
            }
            return mum(acc ^ tagObject, p3)
        }

        /// The hash of the value of key `k`'s member after ``keySlow(_:)``: noted as redacted or
        /// walked further.
        @inline(never)
        func memberSlow(_ k: Int, screened: Bool, parent: Int) -> UInt64 {
            let v = k &+ 1
            if screened && redacted(k, parent: parent) { return plain.value(v, tokens[v]) }
            return value(v, parent: k)
        }

        /// A key that is escaped, empty or over 16 bytes, or too near the start of the text:
        /// its hash operands and the prefilter, from its decoded bytes.
        @inline(never)
        func keySlow(_ k: Int) -> (UInt64, UInt64, Bool) {
            plain.decodedBytes(k, tokens[k]) { p, n in
                let (kw, kn) = CanonicalHash.key(p, n)
                return (kw, kn, BuyerDataRedactor.mayBeRedacted(UnsafeRawBufferPointer(start: p, count: n)))
            }
        }

        /// Whether the member of key `k` under parent key `parent` (-1: none) is redacted, by
        /// ``BuyerDataRedactor/isRedacted(_:parent:)`` on their decoded names; if so, notes its
        /// value's offsets. Out of line: few keys pass the prefilter.
        @inline(never)
        func redacted(_ k: Int, parent: Int) -> Bool {
            let isRedacted = name(k) { key in
                parent < 0
                    ? BuyerDataRedactor.isRedacted(key, parent: nil)
                    : name(parent) { BuyerDataRedactor.isRedacted(key, parent: $0) }
            }
            if isRedacted {
                let value = tokens[k &+ 1]
                rare.pointee.notes.pointee.append(Int(value.start))
                rare.pointee.notes.pointee.append(Int(value.end))
            }
            return isRedacted
        }

        /// Calls `body` with key `k`'s decoded bytes.
        func name<R>(_ k: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
            plain.decodedBytes(k, tokens[k]) { body(UnsafeRawBufferPointer(start: $0, count: $1)) }
        }

        func array(_ t: Int, parent: Int) -> UInt64 {
            var h = tagArray
            let end = Int(tokens[t].next)
            var e = t &+ 1
            while e < end {
                h = mum(h ^ p1, value(e, parent: parent) ^ p2)
                e = Int(tokens[e].next)
            }
            return mum(h ^ p0, p3)
        }
    }

    /// The value of the `digits` (1…8) ASCII digits just before `end`, which must be at least 8
    /// bytes into the text: the word ending at the last digit, shifted so the digits fill its top
    /// bytes (the bytes below, before the number, are cleared and count as leading zeros), then
    /// summed in SWAR steps of 2, 4 and 8 digits. No loop, no check of the digits (the scanner
    /// checked them).
    @inline(__always)
    static func digitsValue(endingAt end: UnsafePointer<UInt8>, _ digits: Int) -> UInt64 {
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
    static func integer(_ v: Int64) -> UInt64 {
        mum(UInt64(bitPattern: v) ^ tagNumber, p1)
    }

    static func hashNumber(_ doc: JSONDocument, _ t: Int) -> UInt64 {
        let tok = doc.tokens[t]
        if !tok.flag, tok.end - tok.start <= 18, let v = JSONDocument.parseInt(doc.raw(t)) {
            return integer(v)
        }
        guard let d = doc.double(t) else {
            let r = doc.raw(t)
            return hashBytes(r.baseAddress!, r.count, seed: tagNumber)
        }
        if d.rounded() == d && abs(d) < 1.0e18 {
            return integer(Int64(d))
        }
        return mum((d == 0 ? 0 : d.bitPattern) ^ tagNumber, p2)
    }
}
