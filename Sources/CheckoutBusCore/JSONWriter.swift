#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Appends JSON text to a reusable byte buffer: no Foundation, no intermediate strings.
///
/// The buffer is memory the writer owns, so an append is a capacity check and a copy — no
/// uniqueness check, no reference counting. The writer cannot be copied (`~Copyable`): pass it
/// `inout`, move it, or read it through ``withUnsafeBytes(_:)``; ``bytes`` makes an array copy.
/// Not `Sendable` by use: each pipeline thread owns one writer and resets it per message.
public struct JSONWriter: ~Copyable {
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    /// Bytes written.
    public private(set) var count = 0
    @usableFromInline var capacity: Int

    public init(capacity: Int = 4096) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// A copy of what was written.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Calls `body` with what was written, in place.
    @inline(__always)
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    public mutating func reset() { count = 0 }

    /// Room for `n` more bytes at the end; the caller writes them and adds `n` to ``count``.
    @inline(__always)
    @usableFromInline
    mutating func reserve(_ n: Int) -> UnsafeMutablePointer<UInt8> {
        if _slowPath(count &+ n > capacity) { grow(count &+ n) }
        return base + count
    }

    @usableFromInline
    mutating func grow(_ needed: Int) {
        var bigger = capacity &* 2
        while bigger < needed { bigger &*= 2 }
        let fresh = UnsafeMutablePointer<UInt8>.allocate(capacity: bigger)
        fresh.update(from: base, count: count)
        base.deallocate()
        base = fresh
        capacity = bigger
    }

    @inline(__always)
    public mutating func append(_ text: StaticString) {
        appendRaw(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    public mutating func append(byte: UInt8) {
        reserve(1).pointee = byte
        count &+= 1
    }

    /// Appends bytes verbatim (already valid JSON).
    @inline(__always)
    public mutating func appendRaw(_ raw: UnsafeRawBufferPointer) {
        let n = raw.count
        guard n > 0 else { return }
        UnsafeMutableRawPointer(reserve(n)).copyMemory(from: raw.baseAddress!, byteCount: n)
        count &+= n
    }

    /// Appends a string's UTF-8 bytes verbatim (already valid JSON text, such as a number or
    /// an enum's raw value).
    public mutating func appendRaw(_ text: String) {
        JSONWriter.withUTF8(of: text) { appendRaw($0) }
    }

    /// Calls `body` with a string's UTF-8 bytes: a native string's in place (no copy of the
    /// string, so no retain), any other's after making it contiguous.
    @inline(__always)
    static func withUTF8(of text: String, _ body: (UnsafeRawBufferPointer) -> Void) {
        if text.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) != nil { return }
        var s = text
        s.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    public mutating func append(int value: Int64) {
        // Digits from the right, sign included, into 20 reserved bytes, then moved into place.
        let b = reserve(20)
        var v = value.magnitude
        var at = 20
        repeat {
            at &-= 1
            b[at] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v % 10)
            v /= 10
        } while v > 0
        if value < 0 {
            at &-= 1
            b[at] = UInt8(ascii: "-")
        }
        let n = 20 &- at
        if at > 0 { memmove(b, b + at, n) }
        count &+= n
    }

    public mutating func append(int value: Int) { append(int: Int64(value)) }

    public mutating func append(bool value: Bool) { append(value ? "true" : "false") }

    /// Appends a JSON string literal for UTF-8 `text`, escaping quotes, backslashes and controls.
    public mutating func appendString(utf8 text: UnsafeRawBufferPointer) {
        // The usual case, a string with nothing to escape: one scan, one copy between the quotes.
        let n = text.count
        if let p = text.baseAddress?.assumingMemoryBound(to: UInt8.self) {
            var i = 0
            // Eight bytes at a time: a word with no control byte, quote or backslash (exact
            // zero-byte tests; bytes from 0x80 up pass) moves on at once.
            while i &+ 8 <= n {
                let w = UInt64(littleEndian: UnsafeRawPointer(p + i).loadUnaligned(as: UInt64.self))
                if JSONWriter.needsEscape(w) { break }
                i &+= 8
            }
            while i < n {
                let c = p[i]
                if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { break }
                i &+= 1
            }
            if i == n {
                let b = reserve(n &+ 2)
                b[0] = UInt8(ascii: "\"")
                (b + 1).update(from: p, count: n)
                b[n &+ 1] = UInt8(ascii: "\"")
                count &+= n &+ 2
                return
            }
        } else {
            append("\"\"")
            return
        }
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
    static func needsEscape(_ w: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = w ^ (ones &* 0x22)
        let backslash = w ^ (ones &* 0x5C)
        let below = (w &- ones &* 0x20) & ~w
        return (below | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)) & highs != 0
    }

    public mutating func appendString(_ text: String) {
        JSONWriter.withUTF8(of: text) { appendString(utf8: $0) }
    }

    public mutating func appendString(_ text: StaticString) {
        appendString(utf8: UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends arbitrary bytes as a JSON string: valid UTF-8 passes through, every other byte becomes
    /// `\u00XX` of its value (so the exact raw bytes of bad input survive in a dead letter).
    public mutating func appendBytesEscaped(_ raw: UnsafeRawBufferPointer) {
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
    private mutating func appendUnicodeEscape(_ c: UInt8) {
        append("\\u00")
        append(byte: JSONWriter.hex[Int(c >> 4)])
        append(byte: JSONWriter.hex[Int(c & 0xF)])
    }

    static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}
