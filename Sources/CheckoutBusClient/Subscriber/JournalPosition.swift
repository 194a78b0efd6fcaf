#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// A position in a daemon's journal as people give it (`tail --since`, `cursor set`): a seq, a
/// time, or a duration back from now (docs/commands.md, "Positions"). `Sendable`: a value.
public enum JournalPosition: Sendable, Equatable {
    /// This seq (1: the oldest retained).
    case seq(Int64)
    /// The first envelope received at or after this time, in ms since the epoch; the daemon finds
    /// its seq (``resolve(control:curve:timeoutSeconds:)``).
    case time(milliseconds: Int64)

    /// Reads `text`: digits are a seq; a duration (`90s`, `10m`, `2h`, `1d`, `1h30m`, `500ms`) is
    /// that long before `now`; an RFC 3339 time (`2026-12-05T14:00:00Z`, with a fraction or an
    /// offset such as `+01:00`; a space for the `T`) is that time.
    /// - Parameter now: the present, ms since the epoch (for durations).
    /// - Throws: a ``SubscriberError`` ``SubscriberError/Code/badPosition`` saying what is accepted.
    public static func parse(_ text: String, now: Int64) throws(SubscriberError) -> JournalPosition {
        let t = text.trimmingSpaces()
        if !t.isEmpty, t.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard let seq = Int64(t) else { throw bad(text) }
            return .seq(seq)
        }
        // A duration reaching before 1970 is "from the oldest": every journal begins after the epoch
        // (and a time before year 0 cannot even be written).
        if let ms = duration(t) { return .time(milliseconds: max(0, now - ms)) }
        if let ms = rfc3339(t) { return .time(milliseconds: ms) }
        throw bad(text)
    }

    private static func bad(_ text: String) -> SubscriberError {
        SubscriberError(.badPosition, "`\(text)` is not a position: a seq (12345), a duration back from now (90s, 10m, 2h, 1d, 1h30m) or an RFC 3339 time (2026-12-05T14:00:00Z, 2026-12-05T15:00:00+01:00)")
    }

    /// Milliseconds of a duration such as `1h30m`, `90s`, `500ms`; nil for anything else.
    static func duration(_ t: String) -> Int64? {
        var total: Int64 = 0
        var number: Int64?
        var bytes = Array(t.utf8)[...]
        guard !bytes.isEmpty else { return nil }
        while let c = bytes.first {
            if c >= 48 && c <= 57 {
                let (v, o1) = (number ?? 0).multipliedReportingOverflow(by: 10)
                let (w, o2) = v.addingReportingOverflow(Int64(c - 48))
                if o1 || o2 { return nil }
                number = w
                bytes = bytes.dropFirst()
                continue
            }
            guard let n = number else { return nil }
            let unit: Int64
            if bytes.starts(with: Array("ms".utf8)) {
                unit = 1
                bytes = bytes.dropFirst(2)
            } else {
                switch c {
                case UInt8(ascii: "s"): unit = 1000
                case UInt8(ascii: "m"): unit = 60_000
                case UInt8(ascii: "h"): unit = 3_600_000
                case UInt8(ascii: "d"): unit = 86_400_000
                default: return nil
                }
                bytes = bytes.dropFirst()
            }
            let (p, o1) = n.multipliedReportingOverflow(by: unit)
            let (sum, o2) = total.addingReportingOverflow(p)
            if o1 || o2 { return nil }
            total = sum
            number = nil
        }
        return number == nil ? total : nil
    }

    /// Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; nil otherwise.
    public static func milliseconds(rfc3339 t: String) -> Int64? { rfc3339(t) }

    static func rfc3339(_ t: String) -> Int64? {
        let b = Array(t.utf8)
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
            b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
            b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":")
        else { return nil }
        func n(_ from: Int, _ count: Int) -> Int64? { Timestamp.decimalField(b, from: from, count: count) }
        guard let y = n(0, 4), let mo = n(5, 2), let d = n(8, 2), let h = n(11, 2), let mi = n(14, 2), let s = n(17, 2),
            (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
        else { return nil }
        var i = 19
        var ms: Int64 = 0
        if i < b.count && b[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 3 { ms = ms * 10 + Int64(b[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 3 { for _ in digits..<3 { ms *= 10 } }
        }
        guard i < b.count else { return nil }
        var offset: Int64 = 0
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard b.count == i + 6, b[i + 3] == UInt8(ascii: ":"), let oh = n(i + 1, 2), let om = n(i + 4, 2), oh < 24, om < 60
            else { return nil }
            offset = (oh * 60 + om) * 60_000 * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        return Timestamp.daysSinceEpoch(year: y, month: mo, day: d) * 86_400_000 + h * 3_600_000 + mi * 60_000 + s * 1000 + ms - offset
    }

    /// What a daemon answered to `seek`. `Sendable`.
    public struct Resolved: Sendable, Equatable {
        /// The first seq received at or after the time (the last seq + 1 when none was).
        public var seq: Int64
        /// The time is before the oldest retained envelope: `seq` is the first retained.
        public var beforeRetention: Bool
        public var firstSeq: Int64
        public var lastSeq: Int64
    }

    /// The seq this position names on the daemon at `control`: a seq as it is, a time by the
    /// daemon's `seek`.
    /// - Throws: ``SubscriberError`` ``SubscriberError/Code/noAnswer`` when the daemon does not
    ///   answer within `timeoutSeconds`, ``SubscriberError/Code/refused`` when it refuses.
    public func resolve(control: String, curve: CurveClientKeys? = nil, timeoutSeconds: Int = 10) throws -> Resolved {
        guard case .time(let ms) = self else {
            guard case .seq(let seq) = self else { preconditionFailure() }
            return Resolved(seq: seq, beforeRetention: false, firstSeq: 0, lastSeq: 0)
        }
        guard let reply = try ControlRequest.send(ControlRequestWire.seek(timeMilliseconds: Int64(ms)), to: control,
                                                  timeoutSeconds: timeoutSeconds, curve: curve) else {
            throw SubscriberError(.noAnswer, "no answer to seek from \(control) within \(timeoutSeconds) s")
        }
        let doc = JSONDocument()
        guard ControlReplyWire.parse(reply, into: doc) else { throw SubscriberError(.refused, "seek: the reply from \(control) is not JSON") }
        let head = ControlReplyWire.read(doc)
        guard let sought = ControlReplyWire.readSeek(doc) else {
            throw SubscriberError(.refused, "seek refused by \(control): \(head.detail ?? String(decoding: reply, as: UTF8.self))")
        }
        return Resolved(seq: sought.seq, beforeRetention: sought.beforeRetention, firstSeq: head.firstSeq ?? 0,
                        lastSeq: head.lastSeq ?? 0)
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
