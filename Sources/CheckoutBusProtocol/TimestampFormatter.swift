import CheckoutBusJSON

/// Writes timestamps exactly as ``Timestamp/write(to:)`` does, remembering the text of the last
/// minute it wrote: another time in that minute copies it and formats only its seconds and
/// milliseconds. A value, `Sendable`; each writer keeps its own (the event processor keeps one).
public struct TimestampFormatter: Sendable {
    /// The first and last millisecond of the remembered minute (`first > last`: none yet).
    private var first: Int64 = 1
    private var last: Int64 = 0
    /// The minute's first 18 bytes, `"YYYY-MM-DDTHH:MM:`, as bytes 0..<8, 8..<16 and 16..<18.
    private var head0: UInt64 = 0
    private var head1: UInt64 = 0
    private var head2: UInt16 = 0

    public init() {}

    /// Appends `time`'s RFC 3339 text, quoted, to `out`: the bytes ``Timestamp/write(to:)`` appends.
    public mutating func write(_ time: Timestamp, to out: inout JSONWriter) {
        let ms = time.milliseconds
        guard ms >= first && ms <= last else {
            let start = out.count
            time.write(to: &out)
            out.withUnsafeBytes { remember(ms, UnsafeRawBufferPointer(rebasing: $0[start...])) }
            return
        }
        // Within the minute: seconds 0...59 and milliseconds 0...999 after the remembered head.
        let offset = Int(truncatingIfNeeded: ms &- first)
        let seconds = offset / 1000
        let millis = offset &- seconds &* 1000
        let hundreds = millis / 100
        let (h0, h1, h2) = (head0, head1, head2)
        out.append(exactly: 26) { b in
            let raw = UnsafeMutableRawPointer(b)
            raw.storeBytes(of: h0, as: UInt64.self)
            raw.storeBytes(of: h1, toByteOffset: 8, as: UInt64.self)
            raw.storeBytes(of: h2, toByteOffset: 16, as: UInt16.self)
            JSONWriter.storeDigitPair(seconds, at: b + 18)
            b[20] = UInt8(ascii: ".")
            b[21] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: hundreds)
            JSONWriter.storeDigitPair(millis &- hundreds &* 100, at: b + 22)
            b[24] = UInt8(ascii: "Z")
            b[25] = UInt8(ascii: "\"")
        }
    }

    /// Remembers the minute of `ms` and its head, the first 18 bytes of `text` (its full text as
    /// ``Timestamp/write(to:)`` wrote it, so `ms` is past the range where that traps).
    private mutating func remember(_ ms: Int64, _ text: UnsafeRawBufferPointer) {
        var intoMinute = ms % 60_000
        if intoMinute < 0 { intoMinute += 60_000 }
        first = ms - intoMinute
        last = first <= Int64.max - 59_999 ? first + 59_999 : Int64.max
        head0 = text.loadUnaligned(as: UInt64.self)
        head1 = text.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
        head2 = text.loadUnaligned(fromByteOffset: 16, as: UInt16.self)
    }
}
