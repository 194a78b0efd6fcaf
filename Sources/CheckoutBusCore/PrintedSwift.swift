/// Swift values as `String(describing:)` prints them (`failure(PrimerSDK.PrimerError.cancelled(
/// paymentMethodType: "APPLE_PAY", …))`), which SDK bridges forward as text: read outside their
/// double-quoted strings (a message's own words), escapes inside them honoured. Texts over 4 KiB
/// are not read.
enum PrintedSwift {
    static let maxBytes = 4096

    /// Calls `body(i, depth)` for each byte of `u` from `start` that is outside double quotes,
    /// `depth` being the parentheses, brackets and braces opened and not closed since `start`
    /// before it (a closing one at the level of `start` is seen at depth 0, and the depth goes
    /// negative after it); stops when `body` returns false. With `quotes` false (Kotlin's form,
    /// which quotes no string) a `"` is a character like any other.
    static func walk(_ u: [UInt8], from start: Int, quotes: Bool = true, _ body: (_ i: Int, _ depth: Int) -> Bool) {
        var depth = 0
        var quoted = false
        var i = start
        while i < u.count {
            let b = u[i]
            if quoted {
                if b == UInt8(ascii: "\\") { i += 1 } else if b == UInt8(ascii: "\"") { quoted = false }
            } else {
                guard body(i, depth) else { return }
                switch b {
                case UInt8(ascii: "\""): quoted = quotes
                case UInt8(ascii: "("), UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
                case UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
                default: break
                }
            }
            i += 1
        }
    }

    /// Where a value starting at `start` ends: the first `,` or closing bracket outside what it
    /// opens (`u.count` when none does).
    static func valueEnd(_ u: [UInt8], from start: Int, quotes: Bool) -> Int {
        var end = u.count
        walk(u, from: start, quotes: quotes) { i, depth in
            guard depth == 0 else { return true }
            switch u[i] {
            case UInt8(ascii: ","), UInt8(ascii: ")"), UInt8(ascii: "]"), UInt8(ascii: "}"):
                end = i
                return false
            default: return true
            }
        }
        return end
    }

    /// The top-level arguments of the argument list whose `(` is at `open`, each without the
    /// `, ` before it (`label: value` or a bare value); nil when the list does not close.
    static func arguments(_ u: [UInt8], open: Int) -> [Range<Int>]? {
        guard u.count <= maxBytes, open < u.count, u[open] == UInt8(ascii: "(") else { return nil }
        var ranges: [Range<Int>] = []
        var start = open + 1
        var closed = false
        walk(u, from: open + 1) { i, depth in
            guard depth == 0 else { return true }
            switch u[i] {
            case UInt8(ascii: ","):
                ranges.append(start..<i)
                start = i + 1 < u.count && u[i + 1] == 0x20 ? i + 2 : i + 1
                return true
            case UInt8(ascii: ")"), UInt8(ascii: "]"):
                ranges.append(start..<i)
                closed = true
                return false
            default: return true
            }
        }
        return closed ? ranges : nil
    }

    /// The values `key` (`"status: "`) labels anywhere in `text`, in order, each up to the next `,`,
    /// `(`, `)` or space.
    static func fieldValues(_ text: String, after key: StaticString) -> [String] {
        let u = Array(text.utf8)
        let k = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        guard u.count <= maxBytes, let first = k.first else { return [] }
        var values: [String] = []
        var skipTo = 0
        walk(u, from: 0) { i, _ in
            guard i >= skipTo, u[i] == first, i + k.count <= u.count, u[i..<(i + k.count)].elementsEqual(k)
            else { return true }
            let value = u[(i + k.count)...].prefix {
                $0 != UInt8(ascii: ",") && $0 != UInt8(ascii: ")") && $0 != UInt8(ascii: "(") && $0 != 0x20
            }
            values.append(String(decoding: value, as: UTF8.self))
            skipTo = i + k.count
            return true
        }
        return values
    }

    /// The string a printed argument's value holds (`"ord_2"` or `Optional("ord_2")`), unescaped;
    /// nil for anything else (`nil`, a number, a value that does not close).
    static func quotedValue(_ u: ArraySlice<UInt8>) -> [UInt8]? {
        var v = u[...]
        let optional = "Optional(".utf8
        if v.starts(with: optional) {
            guard v.last == UInt8(ascii: ")") else { return nil }
            v = v.dropFirst(optional.count).dropLast()
        }
        guard v.count >= 2, v.first == UInt8(ascii: "\""), v.last == UInt8(ascii: "\"") else { return nil }
        var out: [UInt8] = []
        var i = v.startIndex + 1
        while i < v.endIndex - 1 {
            if v[i] == UInt8(ascii: "\\") { i += 1 }
            if i < v.endIndex - 1 { out.append(v[i]) }
            i += 1
        }
        return out
    }
}
