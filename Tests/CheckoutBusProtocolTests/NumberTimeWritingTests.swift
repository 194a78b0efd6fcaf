import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

/// `JSONWriter.append(int:)`, `Timestamp.write(to:)` and `TimestampFormatter` against
/// straightforward references: the standard library's decimal text, and a calendar walked a year
/// and a month at a time.
@Suite("number and time writing")
struct NumberTimeWritingTests {
    // MARK: integers

    /// Every power of ten in range, one less and one more, with both signs; the extremes; 0.
    static let edgeIntegers: [Int64] = {
        var values: [Int64] = [0, 1, -1, 9, -9, 10, -10, 11, -11, 99, -99, 100, -100, .max, .min, .max - 1, .min + 1]
        var p: Int64 = 1
        for _ in 0...18 {
            values += [p - 1, p, p + 1, -(p - 1), -p, -(p + 1)]
            if p <= Int64.max / 10 { p *= 10 }
        }
        return values
    }()

    @Test("edge integers are written as String(_:) writes them, each alone and after others")
    func edgeIntegers() {
        var all = JSONWriter(capacity: 16)
        var expected = ""
        for v in Self.edgeIntegers {
            var w = JSONWriter(capacity: 0)
            w.append(int: v)
            #expect(String(decoding: w.bytes, as: UTF8.self) == String(v), "\(v)")
            // Behind other text, in a buffer that keeps growing.
            all.append(int: v)
            all.append(",")
            expected += String(v) + ","
        }
        #expect(String(decoding: all.bytes, as: UTF8.self) == expected)
    }

    @Test("random integers of every length (and the Int overload) are written as String(_:) writes them")
    func randomIntegers() {
        var rng = SplitMix64(seed: 0x1D_EC1A)
        var w = JSONWriter(capacity: 16)
        var expected = ""
        for i in 0..<50_000 {
            // A random bit length, so short numbers are as common as long ones.
            let raw = Int64(bitPattern: rng.next() >> (rng.next() % 64))
            let v = i % 2 == 0 ? raw : -raw
            if i % 3 == 0 { w.append(int: Int(v)) } else { w.append(int: v) }
            w.append(byte: UInt8(ascii: " "))
            expected += String(v) + " "
        }
        #expect(String(decoding: w.bytes, as: UTF8.self) == expected)
    }

    // MARK: timestamps

    static func isLeap(_ y: Int64) -> Bool { y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) }

    /// The quoted RFC 3339 text of `ms`, from a calendar walked a year and a month at a time.
    static func reference(_ ms: Int64) -> String {
        var days = ms / 86_400_000
        var dayMs = ms % 86_400_000
        if dayMs < 0 {
            days -= 1
            dayMs += 86_400_000
        }
        var year: Int64 = 1970
        while days < 0 {
            year -= 1
            days += isLeap(year) ? 366 : 365
        }
        while days >= (isLeap(year) ? 366 : 365) {
            days -= isLeap(year) ? 366 : 365
            year += 1
        }
        let lengths: [Int64] = [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        var month = 0
        while days >= lengths[month] {
            days -= lengths[month]
            month += 1
        }
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\"" + pad(year, 4) + "-" + pad(Int64(month + 1), 2) + "-" + pad(days + 1, 2) + "T"
            + pad(dayMs / 3_600_000, 2) + ":" + pad(dayMs / 60_000 % 60, 2) + ":" + pad(dayMs / 1000 % 60, 2)
            + "." + pad(dayMs % 1000, 3) + "Z\""
    }

    /// Milliseconds of a UTC civil time.
    static func at(_ y: Int64, _ mo: Int64, _ d: Int64, _ h: Int64 = 0, _ mi: Int64 = 0, _ s: Int64 = 0,
                   _ ms: Int64 = 0) -> Int64 {
        Timestamp.daysSinceEpoch(year: y, month: mo, day: d) * 86_400_000 + h * 3_600_000 + mi * 60_000
            + s * 1000 + ms
    }

    /// Writes every instant of `times` in order with one formatter (after some text, so the
    /// writer's count is not 0), and each alone with `Timestamp.write(to:)`; both must give the
    /// reference text.
    static func check(_ times: [Int64], formatter: inout TimestampFormatter) {
        var w = JSONWriter(capacity: 16)
        w.append("[")
        var expected = "["
        for t in times {
            let start = w.count
            formatter.write(Timestamp(milliseconds: t), to: &w)
            let written = w.withUnsafeBytes { String(decoding: UnsafeRawBufferPointer(rebasing: $0[start...]), as: UTF8.self) }
            w.append(",")
            let text = reference(t)
            expected += text + ","
            #expect(written == text, "\(t)")
            var alone = JSONWriter(capacity: 0)
            Timestamp(milliseconds: t).write(to: &alone)
            #expect(String(decoding: alone.bytes, as: UTF8.self) == text, "\(t)")
        }
        let whole = w.bytes == Array(expected.utf8)
        #expect(whole, "the writer's bytes are the texts in order")
    }

    /// Instants next to minute, hour, day, month and year boundaries, leap days among them.
    static let boundaries: [Int64] = {
        let starts: [Int64] = [
            0, at(1970, 1, 1, 0, 1), at(1972, 2, 29), at(1972, 3, 1), at(1999, 12, 31, 23, 59), at(2000, 1, 1),
            at(2000, 2, 29), at(2000, 3, 1), at(2023, 12, 31, 23), at(2024, 2, 28, 23, 59), at(2024, 2, 29),
            at(2024, 3, 1), at(2026, 12, 3, 8, 40, 12, 345), at(2099, 12, 31, 23, 59), at(2100, 2, 28, 23, 59),
            at(2100, 3, 1), at(2100, 12, 31, 23, 59, 59, 999), at(2101, 1, 1),
        ]
        let offsets: [Int64] = [-60_001, -60_000, -1, 0, 1, 999, 1000, 59_999, 60_000]
        return starts.flatMap { t in offsets.map { t + $0 } }
    }()

    @Test("boundary and leap-day instants match the reference: alone, in order, and in reverse")
    func boundaryTimes() {
        var f = TimestampFormatter()
        Self.check(Self.boundaries, formatter: &f)
        Self.check(Self.boundaries.reversed(), formatter: &f)
        // Spot checks of the reference itself.
        #expect(Self.reference(0) == "\"1970-01-01T00:00:00.000Z\"")
        #expect(Self.reference(-1) == "\"1969-12-31T23:59:59.999Z\"")
        #expect(Self.reference(Self.at(2024, 2, 29, 12, 34, 56, 789)) == "\"2024-02-29T12:34:56.789Z\"")
        #expect(Self.reference(951_782_400_000) == "\"2000-02-29T00:00:00.000Z\"")
    }

    @Test("random instants from 1970 to 2100 match the reference, with one formatter and with fresh ones")
    func randomTimes() {
        var rng = SplitMix64(seed: 0x7157_A4F)
        let end = UInt64(Self.at(2101, 1, 1))
        let times = (0..<20_000).map { _ in Int64(rng.next() % end) }
        var shared = TimestampFormatter()
        Self.check(times, formatter: &shared)
        for t in times.prefix(2_000) {
            var fresh = TimestampFormatter()
            Self.check([t], formatter: &fresh)
        }
    }

    @Test("consecutive times through minute, hour, day and year boundaries reuse the minute only within it")
    func consecutiveTimes() {
        var rng = SplitMix64(seed: 0xC10C)
        // Forward in small random steps across midnight of a new year (and of a leap day), and
        // backward across the same; then alternating between neighbouring minutes.
        for start in [Self.at(2025, 12, 31, 23, 58), Self.at(2028, 2, 29, 23, 58), Self.at(1969, 12, 31, 23, 58)] {
            var t = start
            var forward: [Int64] = []
            while t < start + 4 * 60_000 {
                forward.append(t)
                t += Int64(rng.next() % 1500)
            }
            // Each minute's first millisecond and the one before it, among the random steps.
            forward = (forward + (1...3).flatMap { [start + $0 * 60_000 - 1, start + $0 * 60_000] }).sorted()
            var f = TimestampFormatter()
            Self.check(forward, formatter: &f)
            Self.check(forward.reversed(), formatter: &f)
            Self.check(forward.enumerated().map { $0.offset % 2 == 0 ? $0.element : $0.element + 60_000 }, formatter: &f)
        }
        // The same minute a day, a month and a year later is another minute.
        var f = TimestampFormatter()
        let t = Self.at(2026, 5, 17, 10, 20, 30, 400)
        Self.check([t, t + 86_400_000, t + 31 * 86_400_000, t + 365 * 86_400_000, t, t + 3_600_000, t + 1],
                   formatter: &f)
    }
}
