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
        out.append(byte: UInt8(ascii: "\""))
        digits(y, 4, &out)
        out.append(byte: UInt8(ascii: "-"))
        digits(m, 2, &out)
        out.append(byte: UInt8(ascii: "-"))
        digits(d, 2, &out)
        out.append(byte: UInt8(ascii: "T"))
        digits(dayMs / 3_600_000, 2, &out)
        out.append(byte: UInt8(ascii: ":"))
        digits(dayMs / 60_000 % 60, 2, &out)
        out.append(byte: UInt8(ascii: ":"))
        digits(dayMs / 1000 % 60, 2, &out)
        out.append(byte: UInt8(ascii: "."))
        digits(dayMs % 1000, 3, &out)
        out.append("Z\"")
    }

    private func digits(_ v: Int64, _ width: Int, _ out: inout JSONWriter) {
        var div: Int64 = 1
        for _ in 1..<width { div *= 10 }
        var x = v
        while div > 0 {
            out.append(byte: UInt8(ascii: "0") + UInt8(truncatingIfNeeded: x / div % 10))
            x %= div
            div /= 10
        }
    }
}
