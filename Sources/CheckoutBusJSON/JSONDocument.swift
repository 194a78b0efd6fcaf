#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A parsed JSON text: a flat tape of tokens pointing into the original bytes, never copied.
///
/// Not `Sendable`: one document is owned by one pipeline thread and reused message after message, so
/// parsing allocates nothing once its token array has grown to the largest message seen.
/// The bytes must stay valid while the document is read: the pipeline parses inside the receive
/// buffer's `withUnsafeBytes`, or points the document at storage it owns (``parseOwned(_:)``).
public final class JSONDocument {
    /// What a token is.
    public enum Kind: UInt8, Sendable {
        case object, array, string, number, `true`, `false`, null
    }

    /// One value on the tape. Strings span their quotes; containers span their brackets.
    @usableFromInline package struct Token {
        @usableFromInline package var kind: Kind
        /// Strings: contains a backslash escape. Numbers: has a fraction or exponent.
        @usableFromInline package var flag: Bool
        @usableFromInline package var start: Int32
        @usableFromInline package var end: Int32
        /// Index of the token after this value's whole subtree.
        @usableFromInline package var next: Int32
    }

    /// The tape. Unsafe storage the document owns and grows, so reads cost one load, no checks.
    @exclusivity(unchecked) @usableFromInline package private(set) var tokens: UnsafeMutablePointer<Token>
    @exclusivity(unchecked) @usableFromInline package private(set) var tokenCount = 0
    /// The tape's size in tokens: memory safety rests on it matching the allocation, so only
    /// ``reserveTape(_:)`` sets it.
    @exclusivity(unchecked) @usableFromInline package private(set) var tokenCapacity: Int
    @exclusivity(unchecked) @usableFromInline package private(set) var base: UnsafePointer<UInt8> = UnsafePointer(bitPattern: 1)!
    @exclusivity(unchecked) @usableFromInline package private(set) var length = 0
    @exclusivity(unchecked) @usableFromInline package var owned: UnsafeMutablePointer<UInt8>?
    @exclusivity(unchecked) @usableFromInline package var ownedCapacity = 0

    /// Whether the last parsed text had no whitespace between tokens, so any value's raw bytes are
    /// already compact JSON on one line.
    @exclusivity(unchecked) public private(set) var isCompact = true

    /// Deepest nesting accepted; deeper input is rejected as `too_deep` rather than risking the stack.
    @exclusivity(unchecked) public var maxDepth = 64

    /// A document that accepts `maxDepth` levels of nesting.
    @inlinable public convenience init(maxDepth: Int) {
        self.init()
        self.maxDepth = maxDepth
    }

    @inlinable public init() {
        tokenCapacity = 256
        tokens = .allocate(capacity: tokenCapacity)
    }

    deinit {
        owned?.deallocate()
        tokens.deallocate()
    }

    /// The root value (index 0) after a successful parse.
    @inlinable public var root: Int { 0 }

    /// The bytes being read.
    @inlinable public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: length) }

    /// Parses `buffer` in place. The buffer must outlive every read of this document.
    /// - Throws: ``JSONParseError`` naming what is wrong and where.
    @inlinable public func parse(_ buffer: UnsafeRawBufferPointer) throws(JSONParseError) {
        base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(bitPattern: 1)!
        length = buffer.count
        try run()
    }

    /// Copies `source` into storage the document owns, then parses it (used for JSON nested in strings).
    @inlinable public func parseOwned(_ source: [UInt8]) throws(JSONParseError) {
        let storage: UnsafeMutablePointer<UInt8>
        if let owned, ownedCapacity >= source.count {
            storage = owned
        } else {
            owned?.deallocate()
            ownedCapacity = max(source.count, 1024)
            storage = .allocate(capacity: ownedCapacity)
            owned = storage
        }
        source.withUnsafeBufferPointer { src in
            if let s = src.baseAddress { storage.update(from: s, count: src.count) }
        }
        base = UnsafePointer(storage)
        length = source.count
        try run()
    }

    @usableFromInline package func run() throws(JSONParseError) {
        let needed = JSONDocument.tapeBound(length: length, maxDepth: maxDepth)
        if needed > tokenCapacity { reserveTape(needed) }
        var scanner = Scanner(base: base, length: length, tokens: tokens, capacity: tokenCapacity, maxDepth: maxDepth)
        defer {
            tokenCount = scanner.count
            isCompact = !scanner.sawSpace
        }
        try scanner.parseDocument()
    }

    /// The most tokens a scan of `length` bytes can append, whether it succeeds or fails, so the
    /// scanner can append without a capacity check.
    ///
    /// Every token starts at a byte of its own, so there are at most `length`. Tighter: a complete
    /// value of B bytes and T tokens has B ≥ 2T − 1 (a scalar is at least one byte; an array adds
    /// its two brackets and a comma per child after the first; an object also a key of at least two
    /// bytes and a colon per member, for one more token). A container still open when the scan
    /// stops (its closing bracket and perhaps a comma not seen) has B ≥ 2T − 2, counting its last
    /// open child separately; tokens are appended only once a scalar is complete, and a container
    /// only after the depth check, so at most `maxDepth` are open. Hence 2T ≤ length + maxDepth + 1,
    /// T ≤ length / 2 + maxDepth + 1 (the `+ 1` is needed: `0` alone at depth limit 0 is one token).
    /// A large reservation costs address space only: the tape's pages are touched as tokens are
    /// written.
    @usableFromInline package static func tapeBound(length: Int, maxDepth: Int) -> Int {
        min(length, length / 2 + min(max(maxDepth, 0), length)) + 1
    }

    /// Replaces the tape with one of at least `needed` tokens (contents not kept: a parse follows):
    /// twice the old size, or exactly `needed` when that is more, so a large message reserves no
    /// more than its bound (a 1 MiB message: 8 MiB of address space, touched only as tokens are
    /// written), never the next power of two.
    @usableFromInline package func reserveTape(_ needed: Int) {
        let bigger = max(tokenCapacity * 2, needed)
        tokens.deallocate()
        tokens = .allocate(capacity: bigger)
        tokenCapacity = bigger
    }

    /// The parser proper: a struct over local pointers, so the hot loop has no class accesses.
    @usableFromInline package struct Scanner {
        let base: UnsafePointer<UInt8>
        let length: Int
        let tokens: UnsafeMutablePointer<Token>
        let capacity: Int
        var count = 0
        let maxDepth: Int
        /// Whether any whitespace separated two tokens.
        var sawSpace = false

        init(base: UnsafePointer<UInt8>, length: Int, tokens: UnsafeMutablePointer<Token>, capacity: Int, maxDepth: Int) {
            self.base = base
            self.length = length
            self.tokens = tokens
            self.capacity = capacity
            self.maxDepth = maxDepth
        }

        mutating func parseDocument() throws(JSONParseError) {
            var i = skipSpace(0)
            if i >= length { throw JSONParseError(.empty, at: i) }
            i = try parseValue(i, room: maxDepth)
            i = skipSpace(i)
            if i != length { throw JSONParseError(.trailingData, at: i) }
        }

        /// Appends a token; the tape was reserved for the most tokens the text can hold
        /// (``JSONDocument/tapeBound(length:maxDepth:)``), so there is no capacity check.
        @inline(__always)
        mutating func append(_ kind: Kind, _ flag: Bool, _ start: Int, _ end: Int) {
            assert(count < capacity, "the tape bound does not hold")
            tokens[count] = Token(kind: kind, flag: flag, start: Int32(truncatingIfNeeded: start),
                                  end: Int32(truncatingIfNeeded: end), next: Int32(truncatingIfNeeded: count &+ 1))
            count &+= 1
        }

        @inline(__always)
        mutating func skipSpace(_ start: Int) -> Int {
            var i = start
            // Compact input: the byte after a token is structural, never whitespace.
            if i < length && base[i] > 0x20 { return i }
            while i < length {
                let c = base[i]
                // Compares with immediates, not a bit test against a 64-bit mask: the mask's
                // register would be kept (and reloaded) across the hot member loop.
                if c == 0x20 || c &- 0x09 < 2 || c == 0x0D {
                    i &+= 1
                    sawSpace = true
                } else {
                    break
                }
            }
            return i
        }

        /// - Parameter room: how many more containers may open around this value (``maxDepth`` at
        ///   the root): a parameter, in a register, rather than a depth counted up and down in
        ///   the scanner.
        mutating func parseValue(_ start: Int, room: Int) throws(JSONParseError) -> Int {
            guard start < length else { throw JSONParseError(.truncated, at: start) }
            switch base[start] {
            case UInt8(ascii: "{"): return try parseObject(start, room: room)
            case UInt8(ascii: "["): return try parseArray(start, room: room)
            case UInt8(ascii: "\""): return try string(start)
            case UInt8(ascii: "t"): return try literal(start, "true", .true)
            case UInt8(ascii: "f"): return try literal(start, "false", .false)
            case UInt8(ascii: "n"): return try literal(start, "null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber(start)
            default: throw JSONParseError(.unexpectedCharacter, at: start)
            }
        }

        /// A non-negative integer without fraction or exponent (most numbers), scanned inline;
        /// anything else goes to ``parseNumber(_:)`` from the start.
        @inline(__always)
        mutating func number(_ start: Int) throws(JSONParseError) -> Int {
            var i = start &+ 1
            if base[start] != UInt8(ascii: "0") {
                while i < length && base[i] &- UInt8(ascii: "0") < 10 { i &+= 1 }
            }
            if i < length && (base[i] == UInt8(ascii: ".") || (base[i] | 0x20) == UInt8(ascii: "e")) || i &- start > 300 {
                return try parseNumber(start)
            }
            append(.number, false, start, i)
            return i
        }

        mutating func literal(_ start: Int, _ word: StaticString, _ kind: Kind) throws(JSONParseError) -> Int {
            let n = word.utf8CodeUnitCount
            guard start + n <= length else { throw JSONParseError(.truncated, at: start) }
            let w = word.utf8Start
            for k in 0..<n where base[start + k] != w[k] { throw JSONParseError(.unexpectedCharacter, at: start + k) }
            append(kind, false, start, start + n)
            return start + n
        }

        mutating func parseNumber(_ start: Int) throws(JSONParseError) -> Int {
            var i = start
            var fractional = false
            if base[i] == UInt8(ascii: "-") { i += 1 }
            guard i < length else { throw JSONParseError(.truncated, at: i) }
            if base[i] == UInt8(ascii: "0") {
                i += 1
            } else if base[i] >= UInt8(ascii: "1") && base[i] <= UInt8(ascii: "9") {
                while i < length && base[i] &- UInt8(ascii: "0") < 10 { i += 1 }
            } else {
                throw JSONParseError(.badNumber, at: i)
            }
            if i < length && base[i] == UInt8(ascii: ".") {
                fractional = true
                i += 1
                let digits = i
                while i < length && base[i] &- UInt8(ascii: "0") < 10 { i += 1 }
                if i == digits { throw JSONParseError(.badNumber, at: i) }
            }
            var exponent = false
            if i < length && (base[i] | 0x20) == UInt8(ascii: "e") {
                fractional = true
                exponent = true
                i += 1
                if i < length && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) { i += 1 }
                let digits = i
                while i < length && base[i] &- UInt8(ascii: "0") < 10 { i += 1 }
                if i == digits { throw JSONParseError(.badNumber, at: i) }
            }
            // Numbers beyond a double's range are legal JSON text that most consumers cannot read
            // (Foundation rejects them, others turn them into infinity): refuse them here.
            if (exponent || i - start > 300) && !JSONDocument.isFiniteNumber(base + start, i - start) {
                throw JSONParseError(.numberOutOfRange, at: start)
            }
            append(.number, fractional, start, i)
            return i
        }

        /// Scans a string of plain printable ASCII that ends within its first 16 bytes (most keys
        /// and many values) without a call: one or two words, one mask each. Anything else, or too
        /// near the end of the text, goes to ``parseString(_:from:)``, which resumes where this stopped.
        @inline(__always)
        mutating func string(_ start: Int) throws(JSONParseError) -> Int {
            let i = start &+ 1
            if i &+ 16 <= length {
                let p = UnsafeRawPointer(base + i)
                var m = Scanner.lookMask(UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)))
                var at = i
                if m == 0 {
                    m = Scanner.lookMask(UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                    at = i &+ 8
                }
                if m == 0 { return try parseString(start, from: i &+ 16) }
                let j = at &+ (m.trailingZeroBitCount &>> 3)
                if base[j] == UInt8(ascii: "\"") {
                    append(.string, false, start, j &+ 1)
                    return j &+ 1
                }
                // The bytes before `j` are plain (the mask's lowest bit is exact).
                return try parseString(start, from: j)
            }
            return try parseString(start, from: i)
        }

        /// The usual compact member's start, `"key":` with a key of 0…15 plain printable ASCII
        /// bytes, recognised with one check against the text's length: the key's two words, the
        /// colon and the value's first byte all lie within the 19 bytes from `start`.
        /// - Returns: the offset just past the key's closing quote (where the colon is) and the
        ///   byte after the colon; nil for anything else (the member is then scanned the careful
        ///   way, from `start`).
        @inline(__always)
        func compactKey(_ start: Int) -> (Int, UInt8)? {
            guard start &+ 19 <= length && base[start] == UInt8(ascii: "\"") else { return nil }
            let p = UnsafeRawPointer(base + (start &+ 1))
            var m = Scanner.lookMask(UInt64(littleEndian: p.loadUnaligned(as: UInt64.self)))
            var at = start &+ 1
            if m == 0 {
                m = Scanner.lookMask(UInt64(littleEndian: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                at = start &+ 9
                if m == 0 { return nil }
            }
            // The closing quote at `j` ≤ start + 16: the colon at j + 1 and the value's first
            // byte at j + 2 ≤ start + 18 are inside the text.
            let j = at &+ (m.trailingZeroBitCount &>> 3)
            guard base[j] == UInt8(ascii: "\"") && base[j &+ 1] == UInt8(ascii: ":") else { return nil }
            return (j &+ 1, base[j &+ 2])
        }

        /// Scans a string, validating escapes and UTF-8; plain ASCII takes a tight loop.
        /// - Parameter from: where to start looking; the bytes from `start + 1` to it are known to
        ///   be plain printable ASCII.
        mutating func parseString(_ start: Int, from: Int) throws(JSONParseError) -> Int {
            var i = from
            var escaped = false
            while true {
                // Fast path: eight bytes at a time; the first byte that needs a look (a quote, a
                // backslash, a control or a non-ASCII byte) is found from the word's mask.
                var found = false
                while i &+ 8 <= length {
                    let w = UInt64(littleEndian: UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self))
                    let m = Scanner.lookMask(w)
                    if m != 0 {
                        i &+= m.trailingZeroBitCount &>> 3
                        found = true
                        break
                    }
                    i &+= 8
                }
                if !found {
                    while i < length {
                        let c = base[i]
                        guard c >= 0x20 && c < 0x80 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") else { break }
                        i &+= 1
                    }
                    guard i < length else { throw JSONParseError(.truncated, at: i) }
                }
                let c = base[i]
                if c == UInt8(ascii: "\"") { break }
                if c == UInt8(ascii: "\\") {
                    escaped = true
                    guard i + 1 < length else { throw JSONParseError(.truncated, at: i) }
                    switch base[i + 1] {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        i += 2
                    case UInt8(ascii: "u"):
                        guard i + 6 <= length else { throw JSONParseError(.truncated, at: i) }
                        for k in 2..<6 where JSONDocument.hexValue(base[i + k]) == nil {
                            throw JSONParseError(.badEscape, at: i + k)
                        }
                        i += 6
                    default:
                        throw JSONParseError(.badEscape, at: i)
                    }
                    continue
                }
                if c < 0x20 { throw JSONParseError(.controlCharacter, at: i) }
                i = try validateUTF8(at: i)
            }
            append(.string, escaped, start, i + 1)
            return i + 1
        }

        /// The high bit of every byte of `w` that is a control character, non-ASCII, `"` or `\\`
        /// (SWAR tests). Bits above the lowest may be false positives (borrows); the lowest is exact.
        ///
        /// Controls and the quote are one test: flipping bit 1 maps `"` (0x22) to 0x20 and keeps
        /// 0x00…0x1F among themselves (0x20 and 0x21 go to 0x22 and 0x23), so exactly those bytes
        /// are below 0x21 after the flip.
        @inline(__always)
        static func lookMask(_ w: UInt64) -> UInt64 {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            let flipped = w ^ (ones &* 0x02)
            let backslash = w ^ (ones &* 0x5C)
            let controlOrQuote = (flipped &- ones &* 0x21) & ~flipped
            let hasBackslash = (backslash &- ones) & ~backslash
            return (controlOrQuote | hasBackslash | w) & highs
        }

        /// Validates one multi-byte UTF-8 sequence; returns the index after it.
        func validateUTF8(at i: Int) throws(JSONParseError) -> Int {
            let r = UTF8Validation.check(base, at: i, count: length)
            if let bad = r.invalidAt { throw JSONParseError(.invalidUTF8, at: bad) }
            return r.end
        }

        /// The comma or closing bracket after a container's member or element, which compact input
        /// has right after the value: both are tested first, and whitespace is skipped only when
        /// the byte is neither.
        /// - Returns: its offset, and whether it is a comma (more follows).
        @inline(__always)
        mutating func afterValue(_ start: Int, close: UInt8) throws(JSONParseError) -> (Int, Bool) {
            var i = start
            var c: UInt8 = i < length ? base[i] : 0
            if c == UInt8(ascii: ",") { return (i, true) }
            if c == close { return (i, false) }
            if c <= 0x20 {
                i = skipSpace(i)
                guard i < length else { throw JSONParseError(.truncated, at: i) }
                c = base[i]
                if c == UInt8(ascii: ",") { return (i, true) }
                if c == close { return (i, false) }
            }
            throw JSONParseError(.expectedCommaOrEnd, at: i)
        }

        mutating func parseObject(_ start: Int, room: Int) throws(JSONParseError) -> Int {
            if room <= 0 { throw JSONParseError(.tooDeep, at: start) }
            let inner = room &- 1
            let me = count
            append(.object, false, start, 0)
            // The loop starts right after the brace: the usual first member is compact, and an
            // empty object is found on the careful path, where `}` stands instead of a first key.
            var i = start &+ 1
            while true {
                let c: UInt8
                if let (keyEnd, next) = compactKey(i) {
                    // `"key":` and the value's first byte, all known to be inside the text.
                    append(.string, false, i, keyEnd)
                    i = keyEnd &+ 1
                    c = next
                } else {
                    // Whitespace before the key (after `{` or a comma) is skipped only here.
                    i = skipSpace(i)
                    guard i < length else { throw JSONParseError(.truncated, at: i) }
                    if base[i] != UInt8(ascii: "\"") {
                        // `}` before any member (nothing appended after the object's token).
                        if base[i] == UInt8(ascii: "}") && count == me &+ 1 { break }
                        throw JSONParseError(.expectedKey, at: i)
                    }
                    i = try string(i)
                    // Compact input (the usual case) has the colon right after the key, and the
                    // value right after the colon: whitespace is looked for only when it is not
                    // (and after the value, by `afterValue`).
                    if i < length && base[i] == UInt8(ascii: ":") {
                        i &+= 1
                    } else {
                        i = skipSpace(i)
                        guard i < length else { throw JSONParseError(.truncated, at: i) }
                        guard base[i] == UInt8(ascii: ":") else { throw JSONParseError(.expectedColon, at: i) }
                        i = skipSpace(i + 1)
                    }
                    c = i < length ? base[i] : 0
                }
                // The value, dispatched here rather than through `parseValue` (a call per
                // value): strings and plain integers inline, containers by a direct call.
                // Whitespace before it (rare) is skipped on the way to `parseValue`.
                if c == UInt8(ascii: "\"") {
                    i = try string(i)
                } else if c &- UInt8(ascii: "0") < 10 {
                    i = try number(i)
                } else if c == UInt8(ascii: "{") {
                    i = try parseObject(i, room: inner)
                } else if c == UInt8(ascii: "[") {
                    i = try parseArray(i, room: inner)
                } else {
                    i = try parseValue(c <= 0x20 ? skipSpace(i) : i, room: inner)
                }
                let (at, more) = try afterValue(i, close: UInt8(ascii: "}"))
                if more {
                    i = at &+ 1  // any whitespace after the comma: skipped before the key
                    continue
                }
                i = at
                break
            }
            tokens[me].end = Int32(truncatingIfNeeded: i &+ 1)
            tokens[me].next = Int32(truncatingIfNeeded: count)
            return i &+ 1
        }

        mutating func parseArray(_ start: Int, room: Int) throws(JSONParseError) -> Int {
            if room <= 0 { throw JSONParseError(.tooDeep, at: start) }
            let inner = room &- 1
            let me = count
            append(.array, false, start, 0)
            // The loop starts right after the bracket; an empty array is found where `]` stands
            // instead of a first element.
            var i = start &+ 1
            while true {
                // The element, dispatched here rather than through `parseValue` (a call per
                // value): strings and plain integers inline, containers by a direct call. The
                // same lines as in `parseObject`, on purpose: one `@inline(__always)` helper for
                // both is not inlined through the recursion (+830 instructions per bench event).
                // Whitespace before it (rare) is skipped on the way to `parseValue`.
                let c: UInt8 = i < length ? base[i] : 0
                if c == UInt8(ascii: "{") {  // arrays of objects (line items, totals) first
                    i = try parseObject(i, room: inner)
                } else if c == UInt8(ascii: "\"") {
                    i = try string(i)
                } else if c &- UInt8(ascii: "0") < 10 {
                    i = try number(i)
                } else if c == UInt8(ascii: "[") {
                    i = try parseArray(i, room: inner)
                } else {
                    if c <= 0x20 { i = skipSpace(i) }
                    // `]` before any element (nothing appended after the array's token).
                    if i < length && base[i] == UInt8(ascii: "]") && count == me &+ 1 { break }
                    i = try parseValue(i, room: inner)
                }
                let (at, more) = try afterValue(i, close: UInt8(ascii: "]"))
                if more {
                    i = at &+ 1  // any whitespace after the comma: skipped by the dispatch
                    continue
                }
                i = at
                break
            }
            tokens[me].end = Int32(truncatingIfNeeded: i &+ 1)
            tokens[me].next = Int32(truncatingIfNeeded: count)
            return i &+ 1
        }
    }

    /// Whether the number text parses to a finite double.
    package static func isFiniteNumber(_ p: UnsafePointer<UInt8>, _ n: Int) -> Bool {
        parseDouble(UnsafeRawBufferPointer(start: p, count: n))?.isFinite ?? false
    }

    /// `strtod` over a span of number text; nil unless the whole span is the number.
    @usableFromInline package static func parseDouble(_ r: UnsafeRawBufferPointer) -> Double? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: r.count + 1) { buf -> Double? in
            for k in 0..<r.count { buf[k] = CChar(bitPattern: r[k]) }
            buf[r.count] = 0
            var endp: UnsafeMutablePointer<CChar>?
            let d = strtod(buf.baseAddress!, &endp)
            guard let endp, endp == buf.baseAddress! + r.count else { return nil }
            return d
        }
    }

    @inline(__always)
    @usableFromInline package static func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(c - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }
}

/// Why a text is not JSON this daemon will read, and the byte offset where that became clear.
public struct JSONParseError: Error, Sendable, Equatable {
    /// A machine-readable reason, stable across releases.
    public struct Reason: Sendable, Equatable, Hashable {
        public let name: String
        init(_ name: String) { self.name = name }

        public static let empty = Reason("empty")
        public static let truncated = Reason("truncated")
        public static let trailingData = Reason("trailing_data")
        public static let unexpectedCharacter = Reason("unexpected_character")
        public static let badNumber = Reason("bad_number")
        public static let numberOutOfRange = Reason("number_out_of_range")
        public static let badEscape = Reason("bad_escape")
        public static let controlCharacter = Reason("control_character_in_string")
        public static let invalidUTF8 = Reason("invalid_utf8")
        public static let expectedKey = Reason("expected_key")
        public static let expectedColon = Reason("expected_colon")
        public static let expectedCommaOrEnd = Reason("expected_comma_or_end")
        public static let tooDeep = Reason("too_deep")
    }

    public let reason: Reason
    public let offset: Int

    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }
}
