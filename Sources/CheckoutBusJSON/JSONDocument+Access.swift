#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading values off the tape. Token indices come from ``JSONDocument/root`` and these accessors.
extension JSONDocument {
    @inline(__always)
    @inlinable public func kind(_ t: Int) -> Kind { tokens[t].kind }

    /// The raw bytes of a value as written, quotes and brackets included.
    @inline(__always)
    @inlinable public func raw(_ t: Int) -> UnsafeRawBufferPointer {
        let tok = tokens[t]
        return UnsafeRawBufferPointer(start: base + Int(tok.start), count: Int(tok.end - tok.start))
    }

    /// Whether string token `t` contains a backslash escape (its raw bytes are not its value).
    @inline(__always)
    @inlinable package func isEscaped(_ t: Int) -> Bool { tokens[t].kind == .string && tokens[t].flag }

    /// Index of the token after `t`'s subtree.
    @inline(__always)
    @inlinable package func next(_ t: Int) -> Int { Int(tokens[t].next) }

    /// Calls `body(key, value)` for each member of an object, in document order.
    @inline(__always)
    @inlinable public func forEachMember(_ object: Int, _ body: (Int, Int) throws -> Void) rethrows {
        guard tokens[object].kind == .object else { return }
        let end = Int(tokens[object].next)
        var k = object + 1
        while k < end {
            let v = k + 1
            try body(k, v)
            k = Int(tokens[v].next)
        }
    }

    /// Calls `body(element)` for each element of an array, in order.
    @inline(__always)
    @inlinable public func forEachElement(_ array: Int, _ body: (Int) throws -> Void) rethrows {
        guard tokens[array].kind == .array else { return }
        let end = Int(tokens[array].next)
        var e = array + 1
        while e < end {
            try body(e)
            e = Int(tokens[e].next)
        }
    }

    /// Number of elements in an array (or members in an object); 0 for scalars.
    @inlinable public func count(_ t: Int) -> Int {
        var n = 0
        switch tokens[t].kind {
        case .array: forEachElement(t) { _ in n += 1 }
        case .object: forEachMember(t) { _, _ in n += 1 }
        default: break
        }
        return n
    }

    /// The first element of an array, if any.
    @inlinable public func firstElement(_ array: Int) -> Int? {
        guard tokens[array].kind == .array, array + 1 < Int(tokens[array].next) else { return nil }
        return array + 1
    }

    /// Whether string token `t` holds exactly `text` (escapes decoded when present).
    /// (Inlined: most calls end at the length, and the rest compare a word or two.)
    @inline(__always)
    @inlinable public func stringEquals(_ t: Int, _ text: StaticString) -> Bool {
        let tok = tokens[t]
        guard tok.kind == .string else { return false }
        if _slowPath(tok.flag) { return escapedStringEquals(t, text) }
        let n = Int(tok.end &- tok.start) &- 2
        guard n == text.utf8CodeUnitCount else { return false }
        return JSONDocument.bytesEqual(base + (Int(tok.start) &+ 1), text.utf8Start, n)
    }

    /// ``stringEquals(_:_:)`` of an escaped string: its decoded text.
    @inline(never)
    @usableFromInline package func escapedStringEquals(_ t: Int, _ text: StaticString) -> Bool {
        string(t) == text.description
    }

    /// Whether string token `t` holds `text` (ASCII lower-case) up to ASCII case: `TOTAL`, `Total`.
    /// (Inlined: most calls end at the length.)
    @inline(__always)
    @inlinable public func stringEqualsIgnoringCase(_ t: Int, _ text: StaticString) -> Bool {
        let tok = tokens[t]
        guard Int(tok.end - tok.start) - 2 == text.utf8CodeUnitCount || tok.flag, tok.kind == .string else { return false }
        if tok.flag { return string(t)?.lowercased() == text.description }
        let n = text.utf8CodeUnitCount
        let p = base + Int(tok.start) + 1
        for i in 0..<n where (p[i] &- UInt8(ascii: "A") < 26 ? p[i] | 0x20 : p[i]) != text.utf8Start[i] { return false }
        return true
    }

    /// Whether string token `t` holds exactly the bytes `text`.
    @inlinable public func stringEquals(_ t: Int, bytes text: UnsafeRawBufferPointer) -> Bool {
        let tok = tokens[t]
        guard tok.kind == .string else { return false }
        if tok.flag { return unescapedBytes(t).elementsEqual(text) }
        let n = Int(tok.end - tok.start) - 2
        guard n == text.count else { return false }
        return n == 0 || memcmp(base + Int(tok.start) + 1, text.baseAddress!, n) == 0
    }

    /// Whether key token `tok` (a string) holds exactly the `n` bytes at `p` (like ``stringEquals(_:_:)``):
    /// lengths first, then the first byte, then the rest, so most keys are ruled out without a call.
    @inline(__always)
    @inlinable package func keyEquals(_ k: Int, _ tok: Token, _ p: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        if tok.flag {
            // An escaped key (rare): compared as `String`s, as `stringEquals` does.
            return string(k) == String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
        }
        guard Int(tok.end &- tok.start) &- 2 == n else { return false }
        if n == 0 { return true }
        let q = base + (Int(tok.start) &+ 1)
        return q[0] == p[0] && JSONDocument.bytesEqual(q, p, n)
    }

    /// Whether the `n` bytes at `a` and `b` are equal: a key's length (up to 16 bytes) in two
    /// loads from each side (overlapping), no call; longer ones by `memcmp`. Reads no byte outside
    /// either range.
    @inline(__always)
    @inlinable package static func bytesEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        let ra = UnsafeRawPointer(a)
        let rb = UnsafeRawPointer(b)
        if n >= 8 {
            if n > 16 { return memcmp(a, b, n) == 0 }
            return ra.loadUnaligned(as: UInt64.self) == rb.loadUnaligned(as: UInt64.self)
                && ra.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
                    == rb.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
        }
        if n >= 4 {
            return ra.loadUnaligned(as: UInt32.self) == rb.loadUnaligned(as: UInt32.self)
                && ra.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)
                    == rb.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)
        }
        // 0 to 3 bytes: the first, middle and last cover them all.
        if n <= 0 { return true }
        return a[0] == b[0] && a[n >> 1] == b[n >> 1] && a[n &- 1] == b[n &- 1]
    }

    /// The value of member `key` of object `object`, if present (the first, if repeated).
    /// Inlined: the name's length and words (``MemberNames/words(_:_:)``) are constants at the call,
    /// so a member is ruled out by its length, and a key of the name's length costs two compares.
    @inline(__always)
    @inlinable public func member(_ object: Int, _ key: StaticString) -> Int? {
        guard tokens[object].kind == .object else { return nil }
        let p = key.utf8Start
        let n = key.utf8CodeUnitCount
        let (a, b) = MemberNames.words(p, n)
        let end = Int(tokens[object].next)
        var k = object &+ 1
        while k < end {
            let tok = tokens[k]
            if _slowPath(tok.flag) {
                if escapedKeyEquals(k, p, n) { return k &+ 1 }
            } else if Int(tok.end &- tok.start) &- 2 == n {
                let q = base + (Int(tok.start) &+ 1)
                let (x, y) = MemberNames.words(q, n)
                if x == a && y == b && (n <= 16 || JSONDocument.bytesEqual(q, p, n)) { return k &+ 1 }
            }
            k = Int(tokens[k &+ 1].next)
        }
        return nil
    }

    /// Whether escaped key `k`, decoded, is the `n` bytes at `p` (as ``keyEquals(_:_:_:_:)``), out of line.
    @inline(never)
    @usableFromInline package func escapedKeyEquals(_ k: Int, _ p: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        string(k) == String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    /// The first of several spellings of a member that is present: one pass over the members,
    /// keeping the best-ranked spelling seen so far.
    @inlinable package func member(_ object: Int, among keys: UnsafeBufferPointer<StaticString>) -> Int? {
        guard tokens[object].kind == .object else { return nil }
        var found: Int?
        var rank = keys.count
        let end = Int(tokens[object].next)
        var k = object &+ 1
        while k < end && rank > 0 {
            let tok = tokens[k]
            for r in 0..<rank where keyEquals(k, tok, keys[r].utf8Start, keys[r].utf8CodeUnitCount) {
                found = k &+ 1
                rank = r
                break
            }
            k = Int(tokens[k &+ 1].next)
        }
        return found
    }

    /// The values of several members of `object` in one pass over its members, instead of one
    /// pass per name: what is found by name `i` of `names` is the value of the first member named
    /// so (``FoundMembers/at(_:)``), else nothing. The names are indexed by length (a bit per name of
    /// each length below 64, ``MemberNames``), so a member whose length no name has costs one
    /// load, and the others are compared only with the names of their length still unfound; the
    /// pass ends once every name is found. No allocation, no closure: the result is a value.
    @inline(__always)
    @inlinable package func members(_ object: Int, _ names: MemberNames) -> FoundMembers {
        var found = FoundMembers(doc: self)
        guard tokens[object].kind == .object else { return found }
        let byLength = names.byLength
        let starts = names.starts
        // The names not found yet.
        var pending = names.all
        let end = Int(tokens[object].next)
        var k = object &+ 1
        while k < end {
            let tok = tokens[k]
            if _slowPath(tok.flag) {
                // An escaped key (rare): its decoded length is not its raw one (out of line: the
                // loop keeps its registers).
                pending = escapedKeyMembers(k, names, pending, &found)
            } else {
                let n = Int(tok.end &- tok.start) &- 2
                var candidates = n < 64 ? byLength[n] & pending : 0
                if candidates != 0 {
                    // The key's bytes as two words (``MemberNames/words(_:_:)``), read once and
                    // compared with each name of its length: equal words are equal keys up to 16
                    // bytes; a longer key compares its bytes too.
                    let q = base + (Int(tok.start) &+ 1)
                    let (a, b) = MemberNames.words(q, n)
                    repeat {
                        let i = candidates.trailingZeroBitCount
                        candidates &= candidates &- 1
                        if names.first[i] == a && names.last[i] == b && (n <= 16 || JSONDocument.middleEqual(q, starts[i], n)) {
                            found.set(i, k &+ 1)
                            pending &= ~(1 &<< UInt16(i))
                        }
                    } while candidates != 0
                    if pending == 0 { break }
                }
            }
            k = Int(tokens[k &+ 1].next)
        }
        return found
    }

    /// ``members(_:_:)`` of escaped key `k`: the names still `pending` it equals (decoded) are found.
    /// - Returns: the names still pending.
    @inline(never)
    @usableFromInline package func escapedKeyMembers(_ k: Int, _ names: MemberNames, _ pending: UInt16,
                                                     _ found: inout FoundMembers) -> UInt16 {
        var pending = pending
        var candidates = pending
        let tok = tokens[k]
        while candidates != 0 {
            let i = candidates.trailingZeroBitCount
            candidates &= candidates &- 1
            if keyEquals(k, tok, names.starts[i], names.lengths[i]) {
                found.set(i, k &+ 1)
                pending &= ~(1 &<< UInt16(i))
            }
        }
        return pending
    }

    /// Whether the `n` bytes (17 to 63) at `a` and `b` are equal between their first and last 8
    /// (which the caller compared): 8 at a time, no call.
    @inline(__always)
    @inlinable package static func middleEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        let ra = UnsafeRawPointer(a)
        let rb = UnsafeRawPointer(b)
        var i = 8
        while i < n &- 8 {
            if ra.loadUnaligned(fromByteOffset: i, as: UInt64.self) != rb.loadUnaligned(fromByteOffset: i, as: UInt64.self) {
                return false
            }
            i &+= 8
        }
        return true
    }

    /// What ``members(_:_:)`` found, by each name's index in its list: at most 16 token indices,
    /// held in the value (no allocation).
    @usableFromInline package struct FoundMembers {
        @usableFromInline unowned(unsafe) let doc: JSONDocument
        /// Token index + 1 of each name's value (16 `Int32`s); 0 when the object has no such
        /// member. A tuple of words rather than an `InlineArray`: zeroing it is a few stores
        /// inline, where `InlineArray(repeating:)` is a call.
        @usableFromInline var slots: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64)

        @inlinable init(doc: JSONDocument) {
            self.doc = doc
            slots = (0, 0, 0, 0, 0, 0, 0, 0)
        }

        @inline(__always)
        @inlinable mutating func set(_ i: Int, _ value: Int) {
            withUnsafeMutableBytes(of: &slots) {
                $0.storeBytes(of: Int32(truncatingIfNeeded: value &+ 1), toByteOffset: (i & 15) &* 4, as: Int32.self)
            }
        }

        /// The value of name `i`, if the object has it.
        @inline(__always)
        @inlinable package func at(_ i: Int) -> Int? {
            let v = Int(withUnsafeBytes(of: slots) { $0.load(fromByteOffset: (i & 15) &* 4, as: Int32.self) })
            return v != 0 ? v &- 1 : nil
        }

        /// The value of name `i`, if the object has it and it is an object.
        @inline(__always)
        @inlinable package func object(_ i: Int) -> Int? { at(i).flatMap { doc.kind($0) == .object ? $0 : nil } }
    }

    /// The first of several spellings of a member that is present.
    @inlinable public func member(_ object: Int, anyOf keys: StaticString...) -> Int? {
        keys.withUnsafeBufferPointer { member(object, among: $0) }
    }

    // Fixed-arity spellings of `member(_:anyOf:)`: no array is built per call.

    /// `count` keys in a homogeneous tuple's bytes (its size is not a multiple of the stride, so
    /// the count is given rather than derived).
    @inline(__always)
    @inlinable package func member(_ object: Int, among tuple: UnsafeRawBufferPointer, _ count: Int) -> Int? {
        member(object, among: JSONDocument.names(tuple, count))
    }

    /// The `count` `StaticString`s of a homogeneous tuple, from its bytes (`withUnsafeBytes(of:)`).
    @inline(__always)
    @inlinable package static func names(_ tuple: UnsafeRawBufferPointer, _ count: Int) -> UnsafeBufferPointer<StaticString> {
        UnsafeBufferPointer(start: tuple.baseAddress!.assumingMemoryBound(to: StaticString.self), count: count)
    }

    @inlinable public func member(_ object: Int, anyOf k0: StaticString, _ k1: StaticString) -> Int? {
        var keys = (k0, k1)
        return withUnsafeBytes(of: &keys) { member(object, among: $0, 2) }
    }

    @inlinable public func member(_ object: Int, anyOf k0: StaticString, _ k1: StaticString, _ k2: StaticString) -> Int? {
        var keys = (k0, k1, k2)
        return withUnsafeBytes(of: &keys) { member(object, among: $0, 3) }
    }

    @inlinable public func member(_ object: Int, anyOf k0: StaticString, _ k1: StaticString, _ k2: StaticString,
                       _ k3: StaticString) -> Int? {
        var keys = (k0, k1, k2, k3)
        return withUnsafeBytes(of: &keys) { member(object, among: $0, 4) }
    }

    @inlinable public func member(_ object: Int, anyOf k0: StaticString, _ k1: StaticString, _ k2: StaticString,
                       _ k3: StaticString, _ k4: StaticString) -> Int? {
        var keys = (k0, k1, k2, k3, k4)
        return withUnsafeBytes(of: &keys) { member(object, among: $0, 5) }
    }

    /// Follows a path of member names through nested objects.
    @inlinable public func path(_ t: Int, _ keys: StaticString...) -> Int? {
        var cur = t
        for key in keys {
            guard let v = member(cur, key) else { return nil }
            cur = v
        }
        return cur
    }

    /// The member `key` if it is an object.
    @inlinable public func object(_ t: Int, _ key: StaticString) -> Int? {
        guard let v = member(t, key), tokens[v].kind == .object else { return nil }
        return v
    }

    /// A string value's decoded bytes (without quotes).
    @inlinable public func unescapedBytes(_ t: Int) -> [UInt8] {
        var out: [UInt8] = []
        appendUnescaped(t, to: &out)
        return out
    }

    /// Appends a string token's decoded UTF-8 to `out`.
    @inlinable public func appendUnescaped(_ t: Int, to out: inout [UInt8]) {
        let tok = tokens[t]
        var i = Int(tok.start) + 1
        let end = Int(tok.end) - 1
        if !tok.flag {
            out.append(contentsOf: UnsafeBufferPointer(start: base + i, count: end - i))
            return
        }
        // The decoded text is never longer than the raw one: at most one reservation (growing
        // geometrically, for a caller that appends string after string), and the runs between
        // escapes appended whole (JSON nested in a string is mostly such runs), not byte by byte.
        if out.capacity - out.count < end - i { out.reserveCapacity(max(out.count + (end - i), 2 * out.capacity)) }
        while i < end {
            if base[i] != UInt8(ascii: "\\") {
                var j = i &+ 1
                while j < end && base[j] != UInt8(ascii: "\\") { j &+= 1 }
                out.append(contentsOf: UnsafeBufferPointer(start: base + i, count: j - i))
                i = j
                continue
            }
            let e = base[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(i)
                i += 4
                if scalar >= 0xD800 && scalar < 0xDC00, i + 6 <= end, base[i] == UInt8(ascii: "\\"),
                    base[i + 1] == UInt8(ascii: "u")
                {
                    let low = hex4(i + 2)
                    if low >= 0xDC00 && low < 0xE000 {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                    }
                }
                if scalar >= 0xD800 && scalar < 0xE000 { scalar = 0xFFFD }  // lone surrogate
                appendUTF8(scalar, to: &out)
            default: out.append(e)
            }
        }
    }

    @inlinable package func hex4(_ i: Int) -> UInt32 {
        var v: UInt32 = 0
        for k in 0..<4 { v = v << 4 | (JSONDocument.hexValue(base[i + k]) ?? 0) }
        return v
    }

    @inlinable package func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
        switch scalar {
        case 0..<0x80: out.append(UInt8(scalar))
        case 0x80..<0x800:
            out.append(UInt8(0xC0 | scalar >> 6))
            out.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            out.append(UInt8(0xE0 | scalar >> 12))
            out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            out.append(UInt8(0x80 | scalar & 0x3F))
        default:
            out.append(UInt8(0xF0 | scalar >> 18))
            out.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            out.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// A string value, decoded; `nil` if `t` is not a string.
    @inlinable public func string(_ t: Int) -> String? {
        let tok = tokens[t]
        guard tok.kind == .string else { return nil }
        if !tok.flag {
            // Typed UTF-8 units: `String(decoding:)` takes its contiguous fast path.
            let n = Int(tok.end &- tok.start) &- 2
            return String(decoding: UnsafeBufferPointer(start: base + (Int(tok.start) &+ 1), count: n), as: UTF8.self)
        }
        return String(decoding: unescapedBytes(t), as: UTF8.self)
    }

    /// A string, or a number's text: identifiers arrive as either (`"id": 123` or `"id": "123"`).
    @inlinable public func identifier(_ t: Int) -> String? {
        switch tokens[t].kind {
        case .string:
            // An escaped id (rare) is checked as its decoded text.
            guard tokens[t].flag else { return JSONDocument.isPlaceholder(raw(t)) ? nil : string(t) }
            guard var s = string(t) else { return nil }
            return s.withUTF8 { JSONDocument.isPlaceholderText(UnsafeRawBufferPointer($0)) } ? nil : s
        case .number: return String(decoding: raw(t), as: UTF8.self)
        default: return nil
        }
    }

    /// Whether a quoted string's raw bytes hold no id: empty, blank, or a JavaScript bridge's
    /// stringified nothing (`undefined`, `null`, `NaN`; `nil`, `None` from Swift and Python). Such
    /// an id would merge every checkout that sent it into one.
    @inlinable package static func isPlaceholder(_ quoted: UnsafeRawBufferPointer) -> Bool {
        guard quoted.count >= 2, let base = quoted.baseAddress else { return true }
        return isPlaceholderText(UnsafeRawBufferPointer(start: base + 1, count: quoted.count - 2))
    }

    /// ``isPlaceholder(_:)`` of an id's text: blank, or one of the words, any case, spaces around.
    @inlinable package static func isPlaceholderText(_ text: UnsafeRawBufferPointer) -> Bool {
        guard let base = text.baseAddress else { return true }
        let p = base.assumingMemoryBound(to: UInt8.self)
        let length = text.count
        // The usual id: longer than any placeholder word, no space at either end.
        if length > 15 && p[0] > 0x20 && p[length - 1] > 0x20 { return false }
        @inline(__always) func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
        var start = 0
        var end = length
        while start < end && isSpace(p[start]) { start += 1 }
        while end > start && isSpace(p[end - 1]) { end -= 1 }
        let count = end - start
        if count == 0 { return true }
        // Only the words' lengths can match (3: nan nil, 4: null none, 6: (null) <null>, 9: undefined,
        // 15: [object object]); any other id is ruled out without a comparison.
        switch count {
        case 3, 4, 6, 9, 15: break
        default: return false
        }
        let q = UnsafePointer(p + start)
        return isWord(q, count, "undefined") || isWord(q, count, "null") || isWord(q, count, "nan")
            || isWord(q, count, "nil") || isWord(q, count, "none") || isWord(q, count, "(null)")
            || isWord(q, count, "<null>") || isWord(q, count, "[object object]")
    }

    /// Whether the `count` bytes at `q` are `word` (ASCII lower-case) up to ASCII case.
    @inline(__always)
    @inlinable package static func isWord(_ q: UnsafePointer<UInt8>, _ count: Int, _ word: StaticString) -> Bool {
        guard word.utf8CodeUnitCount == count else { return false }
        let w = word.utf8Start
        for i in 0..<count where (q[i] &- 0x41 < 26 ? q[i] | 0x20 : q[i]) != w[i] { return false }
        return true
    }

    /// An integer value: an integral number, or a string holding one.
    @inlinable public func int64(_ t: Int) -> Int64? {
        let tok = tokens[t]
        switch tok.kind {
        case .number:
            if tok.flag {
                guard let d = double(t), d.rounded() == d, abs(d) < 9.0e15 else { return nil }
                return Int64(d)
            }
            return JSONDocument.parseInt(raw(t))
        case .string:
            guard !tok.flag else { return nil }
            let r = raw(t)
            return JSONDocument.parseInt(UnsafeRawBufferPointer(rebasing: r[1..<(r.count - 1)]))
        default: return nil
        }
    }

    @inlinable package static func parseInt(_ r: UnsafeRawBufferPointer) -> Int64? {
        guard !r.isEmpty, r.count <= 19 else { return nil }
        var i = 0
        var negative = false
        if r[0] == UInt8(ascii: "-") {
            negative = true
            i = 1
        }
        guard i < r.count else { return nil }
        var v: Int64 = 0
        // Up to 18 digits cannot overflow (10^18 < 2^63): no overflow checks (the usual case).
        if r.count <= 18 {
            while i < r.count {
                let d = r[i] &- UInt8(ascii: "0")
                guard d < 10 else { return nil }
                v = v &* 10 &+ Int64(d)
                i &+= 1
            }
            return negative ? -v : v
        }
        while i < r.count {
            let d = r[i] &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            let (times10, o1) = v.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(Int64(d))
            guard !o1 && !o2 else { return nil }
            v = sum
            i += 1
        }
        return negative ? -v : v
    }

    /// A number as `Double` (also from a string holding a number).
    @inlinable public func double(_ t: Int) -> Double? {
        let tok = tokens[t]
        var r = raw(t)
        switch tok.kind {
        case .number: break
        case .string:
            guard !tok.flag, r.count > 2 else { return nil }
            r = UnsafeRawBufferPointer(rebasing: r[1..<(r.count - 1)])
        default: return nil
        }
        guard r.count < 64 else { return nil }
        return JSONDocument.parseDouble(r)
    }

    /// A boolean value.
    @inlinable public func bool(_ t: Int) -> Bool? {
        switch tokens[t].kind {
        case .true: return true
        case .false: return false
        default: return nil
        }
    }
}

/// Up to 16 member names and their length index, built once — a `static let` beside the code that
/// looks them up for every event — so `members(_:_:)` does not index the names again for each
/// object it reads. The index lives in memory allocated once and never freed (a few hundred bytes
/// per list, for the life of the process): reading it takes no retain, no array access.
/// `Sendable`; immutable.
@usableFromInline package struct MemberNames: @unchecked Sendable {
    /// A bit per name of each length below 64 (bit `i`: name `i`): 64 entries.
    @usableFromInline let byLength: UnsafePointer<UInt16>
    /// The address of each name's bytes.
    @usableFromInline let starts: UnsafePointer<UnsafePointer<UInt8>>
    /// Each name's length in bytes.
    @usableFromInline let lengths: UnsafePointer<Int>
    /// Each name's bytes as two words (``words(_:_:)``).
    @usableFromInline let first: UnsafePointer<UInt64>
    @usableFromInline let last: UnsafePointer<UInt64>
    /// A bit per name.
    @usableFromInline let all: UInt16
    /// How many names.
    package let count: Int

    package init(_ keys: StaticString...) { self.init(list: keys) }

    package init(list keys: [StaticString]) {
        precondition(keys.count <= 16, "MemberNames takes at most 16 names")
        let index = UnsafeMutablePointer<UInt16>.allocate(capacity: 64)
        index.initialize(repeating: 0, count: 64)
        let starts = UnsafeMutablePointer<UnsafePointer<UInt8>>.allocate(capacity: max(1, keys.count))
        let lengths = UnsafeMutablePointer<Int>.allocate(capacity: max(1, keys.count))
        let first = UnsafeMutablePointer<UInt64>.allocate(capacity: max(1, keys.count))
        let last = UnsafeMutablePointer<UInt64>.allocate(capacity: max(1, keys.count))
        for (i, key) in keys.enumerated() {
            if key.utf8CodeUnitCount < 64 { index[key.utf8CodeUnitCount] |= 1 &<< UInt16(i) }
            (starts + i).initialize(to: key.utf8Start)
            (lengths + i).initialize(to: key.utf8CodeUnitCount)
            let (a, b) = MemberNames.words(key.utf8Start, key.utf8CodeUnitCount)
            (first + i).initialize(to: a)
            (last + i).initialize(to: b)
        }
        byLength = UnsafePointer(index)
        self.starts = UnsafePointer(starts)
        self.lengths = UnsafePointer(lengths)
        self.first = UnsafePointer(first)
        self.last = UnsafePointer(last)
        all = UInt16(truncatingIfNeeded: (1 &<< keys.count) &- 1)
        count = keys.count
    }

    /// The `n` bytes at `p` as two words that, for a given `n`, are equal exactly when the bytes
    /// are, up to 16 bytes (beyond, they hold the first and last 8): the first and last 8 bytes
    /// (overlapping) from 8 bytes on, the first and last 4 from 4, else the first, middle and last
    /// byte. Reads no byte outside the range.
    @inline(__always)
    @inlinable static func words(_ p: UnsafePointer<UInt8>, _ n: Int) -> (UInt64, UInt64) {
        let r = UnsafeRawPointer(p)
        if n >= 8 {
            return (r.loadUnaligned(as: UInt64.self), r.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self))
        }
        if n >= 4 {
            return (UInt64(r.loadUnaligned(as: UInt32.self)), UInt64(r.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)))
        }
        if n <= 0 { return (0, 0) }
        return (UInt64(p[0]) | UInt64(p[n >> 1]) &<< 8, UInt64(p[n &- 1]))
    }
}
