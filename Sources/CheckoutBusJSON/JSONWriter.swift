/// Appends JSON text to a reusable byte buffer: no Foundation, no intermediate strings.
///
/// The buffer is memory the writer owns, so an append is a capacity check and a copy — no
/// uniqueness check, no reference counting. The writer cannot be copied (`~Copyable`): pass it
/// `inout`, move it, or read it through ``withUnsafeBytes(_:)``; ``bytes`` makes an array copy.
/// Not `Sendable` by use: each pipeline thread owns one writer and resets it per message.
public struct JSONWriter: ~Copyable {
    @usableFromInline package var base: UnsafeMutablePointer<UInt8>
    /// Bytes written so far.
    @inlinable public var count: Int { written }
    @usableFromInline package var written = 0
    @usableFromInline package var capacity: Int

    @inlinable public init(capacity: Int = 4096) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// A copy of what was written.
    @inlinable public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Calls `body` with what was written, in place.
    @inline(__always)
    @inlinable public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// What was written, in place, for a caller that keeps it past this call: valid until the writer's
    /// next change (a reset, an append or its end). The pipeline returns its output frames this way.
    @inlinable @inline(__always)
    public var unsafeBytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    @inlinable public mutating func reset() { written = 0 }

    /// Room for `n` more bytes at the end; the caller writes them and adds `n` to ``count``.
    @inlinable @inline(__always)
    package mutating func reserve(_ n: Int) -> UnsafeMutablePointer<UInt8> {
        if _slowPath(count &+ n > capacity) { grow(count &+ n) }
        return base + count
    }

    @usableFromInline
    package mutating func grow(_ needed: Int) {
        var bigger = capacity &* 2
        while bigger < needed { bigger &*= 2 }
        let fresh = UnsafeMutablePointer<UInt8>.allocate(capacity: bigger)
        fresh.update(from: base, count: count)
        base.deallocate()
        base = fresh
        capacity = bigger
    }

    @inline(__always)
    @inlinable public mutating func append(_ text: StaticString) {
        appendRaw(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    @inlinable public mutating func append(byte: UInt8) {
        reserve(1).pointee = byte
        written &+= 1
    }

    /// Appends bytes verbatim (already valid JSON).
    @inline(__always)
    @inlinable public mutating func appendRaw(_ raw: UnsafeRawBufferPointer) {
        let n = raw.count
        guard n > 0 else { return }
        UnsafeMutableRawPointer(reserve(n)).copyMemory(from: raw.baseAddress!, byteCount: n)
        written &+= n
    }

    /// Appends a string's UTF-8 bytes verbatim (already valid JSON text, such as a number or
    /// an enum's raw value).
    @inlinable public mutating func appendRaw(_ text: String) {
        JSONWriter.withUTF8(of: text) { appendRaw($0) }
    }

    /// Calls `body` with a string's UTF-8 bytes: a native string's in place (no copy of the
    /// string, so no retain), any other's after making it contiguous.
    @inline(__always)
    @inlinable package static func withUTF8(of text: String, _ body: (UnsafeRawBufferPointer) -> Void) {
        if text.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) != nil { return }
        var s = text
        s.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    /// Appends `value` in decimal (`-` before a negative one), written in place: its digits are
    /// counted first, then written from the right two at a time.
    @inlinable public mutating func append(int value: Int64) {
        // No call on the usual path (room for the longest, 20 bytes, is there), so no register saves.
        guard _fastPath(count &+ 20 <= capacity) else { return appendGrowing(int: value) }
        let b = base + count
        let v = value.magnitude
        let sign = value < 0 ? 1 : 0
        let n = JSONWriter.decimalDigitCount(v)
        written &+= n &+ sign
        b.pointee = UInt8(ascii: "-")  // overwritten by the first digit when not negative
        JSONWriter.writeDecimal(v, digits: n, to: b + sign)
    }

    /// ``append(int:)`` when the buffer must grow first.
    @inline(never)
    @inlinable package mutating func appendGrowing(int value: Int64) {
        grow(count &+ 20)
        append(int: value)
    }

    /// Appends exactly `n` bytes, which `body` writes at the pointer it is given.
    @inline(__always)
    @inlinable package mutating func append(exactly n: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Void) {
        body(reserve(n))
        written &+= n
    }

    /// The number of decimal digits of `v` (1 for 0).
    @inline(__always)
    @inlinable package static func decimalDigitCount(_ v: UInt64) -> Int {
        if v < 10_000 {
            if v < 100 { return v < 10 ? 1 : 2 }
            return v < 1000 ? 3 : 4
        }
        if v < 100_000_000 {
            if v < 1_000_000 { return v < 100_000 ? 5 : 6 }
            return v < 10_000_000 ? 7 : 8
        }
        var n = 9
        var x = v / 100_000_000
        while x >= 10 {
            x /= 10
            n &+= 1
        }
        return n
    }

    /// Writes the `n` decimal digits of `v` (``decimalDigitCount(_:)``) at `out`.
    @inline(__always)
    @inlinable package static func writeDecimal(_ v: UInt64, digits n: Int, to out: UnsafeMutablePointer<UInt8>) {
        var x = v
        var end = out + n
        while x >= 100 {
            let q = x / 100
            end -= 2
            storeDigitPair(Int(truncatingIfNeeded: x &- q &* 100), at: end)
            x = q
        }
        if x >= 10 {
            storeDigitPair(Int(truncatingIfNeeded: x), at: out)
        } else {
            out.pointee = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: x)
        }
    }

    /// Writes the two decimal digits of `v` (0...99) at `out`.
    @inline(__always)
    @inlinable package static func storeDigitPair(_ v: Int, at out: UnsafeMutablePointer<UInt8>) {
        let pair = UnsafeRawPointer(digitPairs.utf8Start).loadUnaligned(fromByteOffset: v &* 2, as: UInt16.self)
        UnsafeMutableRawPointer(out).storeBytes(of: pair, as: UInt16.self)
    }

    /// "00", "01" … "99", back to back: the two digits of `v` start at byte `2 * v`.
    @inline(__always)
    @inlinable package static var digitPairs: StaticString {
        """
        0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899
        """
    }

    @inlinable public mutating func append(int value: Int) { append(int: Int64(value)) }

    /// Appends `true` or `false`: one word stored (room for eight bytes is reserved), where a
    /// literal of either length went through a `memcpy` call.
    @inlinable public mutating func append(bool value: Bool) {
        let b = UnsafeMutableRawPointer(reserve(8))
        // "true" and "fals" read as little-endian words; the `e` of `false` after them.
        b.storeBytes(of: (value ? 0x6575_7274 : 0x736C_6166 as UInt32).littleEndian, as: UInt32.self)
        b.storeBytes(of: UInt8(ascii: "e"), toByteOffset: 4, as: UInt8.self)
        written &+= value ? 4 : 5
    }

    /// Appends a JSON string literal for UTF-8 `text`, escaping quotes, backslashes and controls.
    @inlinable public mutating func appendString(utf8 text: UnsafeRawBufferPointer) {
        // The usual case, a string with nothing to escape: checked and copied in one pass, in place
        // (no call), then closed; a byte that needs an escape drops what was copied and escapes.
        let n = text.count
        guard let p = text.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            append("\"\"")
            return
        }
        // Room for the quotes, and for a whole word stored at `b` (a short string's, below).
        let b = reserve(n &+ 10) + 1
        var i = 0
        if n < 8 {
            // A short string: its bytes in one word, read by two loads that may overlap and
            // never reach past it; the test sees a plain byte (`A`) in place of each byte past
            // it, and the word is stored whole (the bytes past the string are overwritten or
            // lie past what is written).
            let w = JSONWriter.shortWord(p, n)
            if !JSONWriter.needsEscape(w | 0x4141_4141_4141_4141 &<< UInt64(truncatingIfNeeded: n &* 8)) {
                UnsafeMutableRawPointer(b).storeBytes(of: w.littleEndian, as: UInt64.self)
                b[-1] = UInt8(ascii: "\"")
                b[n] = UInt8(ascii: "\"")
                written &+= n &+ 2
                return
            }
        }
        // Eight bytes at a time: a word with no control byte, quote or backslash (exact zero-byte
        // tests; bytes from 0x80 up pass) is stored at once.
        while i &+ 8 <= n {
            let w = UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self)
            if JSONWriter.needsEscape(UInt64(littleEndian: w)) { break }
            UnsafeMutableRawPointer(b + i).storeBytes(of: w, as: UInt64.self)
            i &+= 8
        }
        // The last bytes of a string of eight or more (when no word above needed an escape): the
        // word that ends it (overlapping bytes already checked), rather than one byte at a time.
        if i < n && n >= 8 && i &+ 8 > n {
            let w = UnsafeRawPointer(p + (n &- 8)).loadUnaligned(as: UInt64.self)
            if !JSONWriter.needsEscape(UInt64(littleEndian: w)) {
                UnsafeMutableRawPointer(b + (n &- 8)).storeBytes(of: w, as: UInt64.self)
                i = n
            }
        }
        while i < n {
            let c = p[i]
            if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { break }
            b[i] = c
            i &+= 1
        }
        if i == n {
            b[-1] = UInt8(ascii: "\"")
            b[n] = UInt8(ascii: "\"")
            written &+= n &+ 2
            return
        }
        appendEscaping(text)
    }

    /// Appends `text` between quotes as it is: for bytes known to need no escape (no control
    /// byte, quote or backslash, and valid UTF-8), such as an unescaped JSON string's contents as
    /// the scanner checked them, or a number's text. ``appendString(utf8:)`` without its tests: a
    /// word at a time, the last word overlapping the one before it.
    @inlinable package mutating func appendQuotedVerbatim(_ text: UnsafeRawBufferPointer) {
        let n = text.count
        guard let p = text.baseAddress else {
            append("\"\"")
            return
        }
        assert(JSONWriter.needsNoEscape(text), "needs escaping")
        // Room for the quotes, and for a whole word stored at `b` (a short string's, below).
        let b = UnsafeMutableRawPointer(reserve(n &+ 10) + 1)
        if n < 8 {
            let w = JSONWriter.shortWord(p.assumingMemoryBound(to: UInt8.self), n)
            b.storeBytes(of: w.littleEndian, as: UInt64.self)
        } else {
            var i = 0
            while i &+ 8 < n {
                b.storeBytes(of: p.loadUnaligned(fromByteOffset: i, as: UInt64.self), toByteOffset: i, as: UInt64.self)
                i &+= 8
            }
            let last = p.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
            b.storeBytes(of: last, toByteOffset: n &- 8, as: UInt64.self)
        }
        b.storeBytes(of: UInt8(ascii: "\""), toByteOffset: -1, as: UInt8.self)
        b.storeBytes(of: UInt8(ascii: "\""), toByteOffset: n, as: UInt8.self)
        written &+= n &+ 2
    }

    /// Whether `text` holds no byte ``appendString(utf8:)`` escapes (a control, a quote or a
    /// backslash), so ``appendQuotedVerbatim(_:)`` may write it: a byte at a time, for checks.
    @inlinable package static func needsNoEscape(_ text: UnsafeRawBufferPointer) -> Bool {
        !text.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
    }

    /// ``appendString(utf8:)`` for a string with a byte to escape.
    @inline(never)
    @inlinable package mutating func appendEscaping(_ text: UnsafeRawBufferPointer) {
        append(byte: UInt8(ascii: "\""))
        var runStart = 0
        for i in 0..<text.count {
            let c = text[i]
            if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") { continue }
            if runStart < i { appendRaw(UnsafeRawBufferPointer(rebasing: text[runStart..<i])) }
            runStart = i + 1
            switch c {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            default:
                appendUnicodeEscape(c)
            }
        }
        if runStart < text.count { appendRaw(UnsafeRawBufferPointer(rebasing: text[runStart...])) }
        append(byte: UInt8(ascii: "\""))
    }

    /// Whether any byte of `w` is a control character, a quote or a backslash (the classic
    /// zero-byte tests: exact for "any", whatever the other bytes are).
    @inline(__always)
    @inlinable package static func needsEscape(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        // Controls and the quote in one test, as in the scanner's `lookMask`: with bit 1 flipped,
        // exactly they are below 0x21.
        let flipped = w ^ (ones &* 0x02)
        let backslash = w ^ (ones &* 0x5C)
        return (((flipped &- ones &* 0x21) & ~flipped) | ((backslash &- ones) & ~backslash)) & highs != 0
    }

    /// The `n` bytes (0…7) at `p` as a little-endian word, the rest zero: two loads that may
    /// overlap (the same bytes, so or-ing them is harmless), none past the `n` bytes.
    @inline(__always)
    @inlinable package static func shortWord(_ p: UnsafePointer<UInt8>, _ n: Int) -> UInt64 {
        let r = UnsafeRawPointer(p)
        if n >= 4 {
            let low = UInt64(UInt32(littleEndian: r.loadUnaligned(as: UInt32.self)))
            let high = UInt64(UInt32(littleEndian: r.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)))
            return low | high &<< UInt64(truncatingIfNeeded: (n &- 4) &* 8)
        }
        if n >= 2 {
            let low = UInt64(UInt16(littleEndian: r.loadUnaligned(as: UInt16.self)))
            let high = UInt64(UInt16(littleEndian: r.loadUnaligned(fromByteOffset: n &- 2, as: UInt16.self)))
            return low | high &<< UInt64(truncatingIfNeeded: (n &- 2) &* 8)
        }
        return n == 1 ? UInt64(p.pointee) : 0
    }

    @inline(__always)
    @inlinable public mutating func appendString(_ text: String) {
        JSONWriter.withUTF8(of: text) { appendString(utf8: $0) }
    }

    @inlinable public mutating func appendString(_ text: StaticString) {
        appendString(utf8: UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends arbitrary bytes as a JSON string: valid UTF-8 passes through, every other byte becomes
    /// `\u00XX` of its value (so the exact raw bytes of bad input survive in a dead letter).
    @inlinable public mutating func appendBytesEscaped(_ raw: UnsafeRawBufferPointer) {
        append(byte: UInt8(ascii: "\""))
        var i = 0
        while i < raw.count {
            let c = raw[i]
            if c < 0x80 {
                switch c {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case 0x0A: append("\\n")
                case 0x0D: append("\\r")
                case 0x09: append("\\t")
                case 0..<0x20, 0x7F:
                    appendUnicodeEscape(c)
                default: append(byte: c)
                }
                i += 1
                continue
            }
            let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let sequence = UTF8Validation.check(p, at: i, count: raw.count)
            if sequence.invalidAt == nil {
                appendRaw(UnsafeRawBufferPointer(rebasing: raw[i..<sequence.end]))
                i = sequence.end
            } else {
                appendUnicodeEscape(c)
                i += 1
            }
        }
        append(byte: UInt8(ascii: "\""))
    }

    /// `\u00XX` for byte `c`.
    @inlinable package mutating func appendUnicodeEscape(_ c: UInt8) {
        append("\\u00")
        append(byte: JSONWriter.hex[Int(c >> 4)])
        append(byte: JSONWriter.hex[Int(c & 0xF)])
    }

    @usableFromInline package static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}
