/// Appends JSON text to a reusable byte buffer: no Foundation, no intermediate strings.
///
/// Not `Sendable` by use: each pipeline thread owns one writer and resets it per message.
public struct JSONWriter {
    public var bytes: [UInt8] = []

    public init(capacity: Int = 4096) { bytes.reserveCapacity(capacity) }

    public mutating func reset() { bytes.removeAll(keepingCapacity: true) }

    @inline(__always)
    public mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    public mutating func append(byte: UInt8) { bytes.append(byte) }

    /// Appends bytes verbatim (already valid JSON).
    @inline(__always)
    public mutating func appendRaw(_ raw: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: raw)
    }

    public mutating func append(int value: Int64) {
        // Digits from the right into a stack buffer, sign included, then one copy.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buf in
            let b = buf.baseAddress!
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
            appendRaw(UnsafeRawBufferPointer(start: b + at, count: 20 &- at))
        }
    }

    public mutating func append(int value: Int) { append(int: Int64(value)) }

    public mutating func append(bool value: Bool) { append(value ? "true" : "false") }

    /// Appends a JSON string literal for UTF-8 `text`, escaping quotes, backslashes and controls.
    public mutating func appendString(utf8 text: UnsafeRawBufferPointer) {
        // The usual case, a short string with nothing to escape: quoted on the stack, one append.
        let n = text.count
        if n <= 256, let p = text.baseAddress?.assumingMemoryBound(to: UInt8.self) {
            var i = 0
            while i < n {
                let c = p[i]
                if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { break }
                i &+= 1
            }
            if i == n {
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: n &+ 2) { buf in
                    let b = buf.baseAddress!
                    b[0] = UInt8(ascii: "\"")
                    (b + 1).initialize(from: p, count: n)
                    b[n &+ 1] = UInt8(ascii: "\"")
                    appendRaw(UnsafeRawBufferPointer(start: b, count: n &+ 2))
                }
                return
            }
        }
        bytes.append(UInt8(ascii: "\""))
        var runStart = 0
        for i in 0..<text.count {
            let c = text[i]
            if c >= 0x20 && c != UInt8(ascii: "\"") && c != UInt8(ascii: "\\") { continue }
            if runStart < i { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: text[runStart..<i])) }
            runStart = i + 1
            switch c {
            case UInt8(ascii: "\""): append("\\\"")
            case UInt8(ascii: "\\"): append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            default:
                append("\\u00")
                bytes.append(JSONWriter.hex[Int(c >> 4)])
                bytes.append(JSONWriter.hex[Int(c & 0xF)])
            }
        }
        if runStart < text.count { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: text[runStart...])) }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func appendString(_ text: String) {
        var s = text
        s.withUTF8 { appendString(utf8: UnsafeRawBufferPointer($0)) }
    }

    public mutating func appendString(_ text: StaticString) {
        appendString(utf8: UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends arbitrary bytes as a JSON string: valid UTF-8 passes through, every other byte becomes
    /// `\u00XX` of its value (so the exact raw bytes of bad input survive in a dead letter).
    public mutating func appendBytesEscaped(_ raw: UnsafeRawBufferPointer) {
        bytes.append(UInt8(ascii: "\""))
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
                    append("\\u00")
                    bytes.append(JSONWriter.hex[Int(c >> 4)])
                    bytes.append(JSONWriter.hex[Int(c & 0xF)])
                default: bytes.append(c)
                }
                i += 1
                continue
            }
            let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let sequence = UTF8Validation.check(p, at: i, count: raw.count)
            if sequence.invalidAt == nil {
                bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[i..<sequence.end]))
                i = sequence.end
            } else {
                append("\\u00")
                bytes.append(JSONWriter.hex[Int(c >> 4)])
                bytes.append(JSONWriter.hex[Int(c & 0xF)])
                i += 1
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}
