import CheckoutBusProtocol
import CheckoutBusJSON

/// The canonical hash's walks over a parsed tape (its primitives, and the hash the scanner
/// computes as it goes, are in CheckoutBusJSON's `CanonicalHash`).
extension CanonicalHash {
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

    /// The canonical hash of value `t` of `doc`.
    package static func hash(_ doc: JSONDocument, _ t: Int) -> UInt64 {
        let walker = Walker(doc: doc)
        return walker.value(t, walker.tokens[t])
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
    ///
    /// A document the pipeline parsed (``pipelineDocument()``) needs no walk: its scanner computed
    /// every container's hash and listed the keys that may be redacted, so only those few are
    /// checked here (``notedRedactions(_:_:into:)``). Any other document is walked.
    package static func hashNotingRedactions(_ doc: JSONDocument, _ t: Int, into redactions: inout [Int]) -> UInt64 {
        if doc.keyScreen == BuyerDataRedactor.screen, let hash = doc.canonicalHash(t) {
            notedRedactions(doc, t, into: &redactions)
            return hash
        }
        return walkNotingRedactions(doc, t, into: &redactions)
    }

    /// A document for the pipeline's messages: its scanner hashes every container and lists the
    /// keys ``BuyerDataRedactor``'s prefilter passes (``JSONDocument/keyScreen``).
    package static func pipelineDocument() -> JSONDocument {
        JSONDocument(hashesContainers: true, keyScreen: BuyerDataRedactor.screen)
    }

    /// The redactions inside container `t` of a document scanned with ``BuyerDataRedactor/screen``:
    /// each listed key inside `t` (in document order) is checked in full against the key it is
    /// inside (none for `t`'s own members, as the walk has it), and a redacted member's value is
    /// noted and not looked into.
    static func notedRedactions(_ doc: JSONDocument, _ t: Int, into redactions: inout [Int]) {
        redactions.removeAll(keepingCapacity: true)
        let end = Int(doc.tokens[t].next)
        // Keys that start before this offset are inside a redacted value.
        var redactedUntil = -1
        for i in 0..<doc.screenedCount {
            let listed = doc.screened[i]
            let k = Int(listed.key)
            guard k > t else { continue }
            guard k < end else { break }
            let keyToken = doc.tokens[k]
            guard Int(keyToken.start) >= redactedUntil else { continue }
            let parent = Int(listed.parent)
            if BuyerDataRedactor.isRedacted(doc, k, parent: parent > t ? parent : -1) {
                let value = doc.tokens[k &+ 1]
                redactions.append(Int(value.start))
                redactions.append(Int(value.end))
                redactedUntil = Int(value.end)
            }
        }
    }

    /// ``hashNotingRedactions(_:_:into:)`` by a walk of the tape.
    package static func walkNotingRedactions(_ doc: JSONDocument, _ t: Int, into redactions: inout [Int]) -> UInt64 {
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
            let isRedacted = BuyerDataRedactor.isRedacted(rare.pointee.doc, k, parent: parent)
            if isRedacted {
                let value = tokens[k &+ 1]
                rare.pointee.notes.pointee.append(Int(value.start))
                rare.pointee.notes.pointee.append(Int(value.end))
            }
            return isRedacted
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

}
