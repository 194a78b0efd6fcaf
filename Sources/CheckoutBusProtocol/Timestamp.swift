import CheckoutBusJSON

/// Milliseconds since the Unix epoch, written as RFC 3339 UTC (`2026-12-02T11:39:01.123Z`).
/// `Sendable`.
public struct Timestamp: Sendable, Equatable, Comparable {
    public var milliseconds: Int64
    public init(milliseconds: Int64) { self.milliseconds = milliseconds }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.milliseconds < b.milliseconds }

    /// Appends the RFC 3339 text, quoted, to `out`.
    public func write(to out: inout JSONWriter) {
        let ms = milliseconds
        var days = ms >= 0 ? ms / 86_400_000 : (ms - 86_399_999) / 86_400_000
        let dayMs = ms - days * 86_400_000
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        // The 26 bytes are written in place; every digit is a division by a constant (a multiply),
        // never by a variable.
        out.append(exactly: 26) { b in
            b[0] = UInt8(ascii: "\"")
            Timestamp.digits(y, 1000, 4, b + 1)
            b[5] = UInt8(ascii: "-")
            Timestamp.digits(m, 10, 2, b + 6)
            b[8] = UInt8(ascii: "-")
            Timestamp.digits(d, 10, 2, b + 9)
            b[11] = UInt8(ascii: "T")
            Timestamp.digits(dayMs / 3_600_000, 10, 2, b + 12)
            b[14] = UInt8(ascii: ":")
            Timestamp.digits(dayMs / 60_000 % 60, 10, 2, b + 15)
            b[17] = UInt8(ascii: ":")
            Timestamp.digits(dayMs / 1000 % 60, 10, 2, b + 18)
            b[20] = UInt8(ascii: ".")
            Timestamp.digits(dayMs % 1000, 100, 3, b + 21)
            b[24] = UInt8(ascii: "Z")
            b[25] = UInt8(ascii: "\"")
        }
    }

    /// The text ``write(to:)`` writes, without its quotes (`2026-12-02T11:39:01.123Z`).
    public var rfc3339: String {
        var w = JSONWriter(capacity: 32)
        write(to: &w)
        return String(decoding: w.bytes.dropFirst().dropLast(), as: UTF8.self)
    }

    /// Reads the text ``write(to:)`` writes, without its quotes (`2026-12-02T11:39:01.123Z`); nil
    /// for anything else.
    public init?(rfc3339 text: UnsafeRawBufferPointer) {
        guard text.count == 24, text[4] == UInt8(ascii: "-"), text[7] == UInt8(ascii: "-"),
            text[10] == UInt8(ascii: "T"), text[13] == UInt8(ascii: ":"), text[16] == UInt8(ascii: ":"),
            text[19] == UInt8(ascii: "."), text[23] == UInt8(ascii: "Z")
        else { return nil }
        func number(_ from: Int, _ width: Int) -> Int64? { Timestamp.decimalField(text, from: from, count: width) }
        guard let y0 = number(0, 4), let m = number(5, 2), let d = number(8, 2), let h = number(11, 2),
            let mi = number(14, 2), let s = number(17, 2), let ms = number(20, 3),
            (1...12).contains(m), (1...31).contains(d), h < 24, mi < 60, s < 61
        else { return nil }
        milliseconds = Timestamp.daysSinceEpoch(year: y0, month: m, day: d) * 86_400_000 + h * 3_600_000
            + mi * 60_000 + s * 1000 + ms
    }

    /// The value of the `count` decimal digits of `text` from offset `from`; nil when one of them
    /// is not a digit or the run does not fit in `text`. The field reader every RFC 3339 reader
    /// here uses.
    public static func decimalField<Text: RandomAccessCollection>(_ text: Text, from: Int, count: Int) -> Int64?
    where Text.Element == UInt8, Text.Index == Int {
        guard from >= text.startIndex, from + count <= text.endIndex else { return nil }
        var v: Int64 = 0
        for i in from..<(from + count) {
            let d = text[i] &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            v = v * 10 + Int64(d)
        }
        return v
    }

    /// Days since 1970-01-01 of a civil (proleptic Gregorian) date, month 1…12 (Howard Hinnant's
    /// algorithm): the one date computation every RFC 3339 reader here uses.
    public static func daysSinceEpoch(year: Int64, month m: Int64, day d: Int64) -> Int64 {
        let y = m <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Writes the last `width` decimal digits of `v` (`top` is 10^(width-1)) to `out`.
    @inline(__always)
    private static func digits(_ v: Int64, _ top: Int64, _ width: Int, _ out: UnsafeMutablePointer<UInt8>) {
        var div = top
        for k in 0..<width {
            out[k] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: v / div % 10)
            div /= 10
        }
    }
}

