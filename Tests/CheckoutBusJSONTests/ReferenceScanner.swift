import CheckoutBusJSON

/// One tape entry, as compared by the differential tests.
struct TapeEntry: Equatable, CustomStringConvertible {
    var kind: JSONDocument.Kind
    var flag: Bool
    var start: Int32
    var end: Int32
    var next: Int32

    var description: String { "\(kind)\(flag ? "*" : "") \(start)..<\(end) next \(next)" }
}

/// The scanner as it was before its fast paths were reworked (a byte loop per number, a call to
/// `parseValue` for every value, a capacity check per token), kept as the reference the production
/// scanner is compared against: same tape, same errors.
struct ReferenceScanner {
    let base: UnsafePointer<UInt8>
    let length: Int
    var tokens: [TapeEntry] = []
    var depth = 0
    let maxDepth: Int
    var sawSpace = false

    /// The tape `bytes` scan to, or the error; and whether no whitespace separated two tokens.
    static func scan(_ bytes: [UInt8], maxDepth: Int = 64) -> (Result<[TapeEntry], JSONParseError>, compact: Bool) {
        bytes.withUnsafeBufferPointer { buf -> (Result<[TapeEntry], JSONParseError>, compact: Bool) in
            // An empty array may have no base address; any non-null pointer serves for zero bytes.
            let base = buf.baseAddress ?? UnsafePointer(bitPattern: 1)!
            var scanner = ReferenceScanner(base: base, length: buf.count, maxDepth: maxDepth)
            do throws(JSONParseError) {
                try scanner.parseDocument()
                return (.success(scanner.tokens), !scanner.sawSpace)
            } catch {
                return (.failure(error), !scanner.sawSpace)
            }
        }
    }

    init(base: UnsafePointer<UInt8>, length: Int, maxDepth: Int) {
        self.base = base
        self.length = length
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONParseError) {
        var i = skipSpace(0)
        if i >= length { throw JSONParseError(.empty, at: i) }
        i = try parseValue(i)
        i = skipSpace(i)
        if i != length { throw JSONParseError(.trailingData, at: i) }
    }

    mutating func append(_ kind: JSONDocument.Kind, _ flag: Bool, _ start: Int, _ end: Int) {
        tokens.append(TapeEntry(kind: kind, flag: flag, start: Int32(truncatingIfNeeded: start),
                                end: Int32(truncatingIfNeeded: end), next: Int32(truncatingIfNeeded: tokens.count + 1)))
    }

    mutating func skipSpace(_ start: Int) -> Int {
        var i = start
        while i < length {
            let c = base[i]
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 {
                i += 1
                sawSpace = true
            } else {
                break
            }
        }
        return i
    }

    mutating func parseValue(_ start: Int) throws(JSONParseError) -> Int {
        guard start < length else { throw JSONParseError(.truncated, at: start) }
        switch base[start] {
        case UInt8(ascii: "{"): return try parseObject(start)
        case UInt8(ascii: "["): return try parseArray(start)
        case UInt8(ascii: "\""): return try parseString(start)
        case UInt8(ascii: "t"): return try literal(start, "true", .true)
        case UInt8(ascii: "f"): return try literal(start, "false", .false)
        case UInt8(ascii: "n"): return try literal(start, "null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber(start)
        default: throw JSONParseError(.unexpectedCharacter, at: start)
        }
    }

    mutating func literal(_ start: Int, _ word: StaticString, _ kind: JSONDocument.Kind) throws(JSONParseError) -> Int {
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
        if (exponent || i - start > 300) && !JSONDocument.isFiniteNumber(base + start, i - start) {
            throw JSONParseError(.numberOutOfRange, at: start)
        }
        append(.number, fractional, start, i)
        return i
    }

    /// Byte by byte: escapes, controls, then UTF-8 by the table in RFC 3629.
    mutating func parseString(_ start: Int) throws(JSONParseError) -> Int {
        var i = start + 1
        var escaped = false
        while true {
            guard i < length else { throw JSONParseError(.truncated, at: i) }
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
                    for k in 2..<6 where !Self.isHex(base[i + k]) {
                        throw JSONParseError(.badEscape, at: i + k)
                    }
                    i += 6
                default:
                    throw JSONParseError(.badEscape, at: i)
                }
                continue
            }
            if c < 0x20 { throw JSONParseError(.controlCharacter, at: i) }
            if c < 0x80 {
                i += 1
                continue
            }
            i = try utf8(at: i)
        }
        append(.string, escaped, start, i + 1)
        return i + 1
    }

    static func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }

    /// One multi-byte sequence, straight from RFC 3629's table. A sequence the text ends inside
    /// is invalid at its lead byte.
    func utf8(at i: Int) throws(JSONParseError) -> Int {
        var n: Int
        var lo: UInt8 = 0x80
        var hi: UInt8 = 0xBF
        switch base[i] {
        case 0xC2...0xDF: n = 2
        case 0xE0: n = 3; lo = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: n = 3
        case 0xED: n = 3; hi = 0x9F
        case 0xF0: n = 4; lo = 0x90
        case 0xF1...0xF3: n = 4
        case 0xF4: n = 4; hi = 0x8F
        default: throw JSONParseError(.invalidUTF8, at: i)
        }
        guard i + n <= length else { throw JSONParseError(.invalidUTF8, at: i) }
        for k in 1..<n {
            let b = base[i + k]
            let (l, h) = k == 1 ? (lo, hi) : (UInt8(0x80), UInt8(0xBF))
            if b < l || b > h { throw JSONParseError(.invalidUTF8, at: i + k) }
        }
        return i + n
    }

    mutating func parseObject(_ start: Int) throws(JSONParseError) -> Int {
        depth += 1
        if depth > maxDepth { throw JSONParseError(.tooDeep, at: start) }
        let me = tokens.count
        append(.object, false, start, 0)
        var i = skipSpace(start + 1)
        guard i < length else { throw JSONParseError(.truncated, at: i) }
        if base[i] != UInt8(ascii: "}") {
            while true {
                guard i < length else { throw JSONParseError(.truncated, at: i) }
                guard base[i] == UInt8(ascii: "\"") else { throw JSONParseError(.expectedKey, at: i) }
                i = try parseString(i)
                i = skipSpace(i)
                guard i < length else { throw JSONParseError(.truncated, at: i) }
                guard base[i] == UInt8(ascii: ":") else { throw JSONParseError(.expectedColon, at: i) }
                i = try parseValue(skipSpace(i + 1))
                i = skipSpace(i)
                guard i < length else { throw JSONParseError(.truncated, at: i) }
                if base[i] == UInt8(ascii: ",") {
                    i = skipSpace(i + 1)
                    continue
                }
                guard base[i] == UInt8(ascii: "}") else { throw JSONParseError(.expectedCommaOrEnd, at: i) }
                break
            }
        }
        tokens[me].end = Int32(truncatingIfNeeded: i + 1)
        tokens[me].next = Int32(truncatingIfNeeded: tokens.count)
        depth -= 1
        return i + 1
    }

    mutating func parseArray(_ start: Int) throws(JSONParseError) -> Int {
        depth += 1
        if depth > maxDepth { throw JSONParseError(.tooDeep, at: start) }
        let me = tokens.count
        append(.array, false, start, 0)
        var i = skipSpace(start + 1)
        guard i < length else { throw JSONParseError(.truncated, at: i) }
        if base[i] != UInt8(ascii: "]") {
            while true {
                i = try parseValue(i)
                i = skipSpace(i)
                guard i < length else { throw JSONParseError(.truncated, at: i) }
                if base[i] == UInt8(ascii: ",") {
                    i = skipSpace(i + 1)
                    continue
                }
                guard base[i] == UInt8(ascii: "]") else { throw JSONParseError(.expectedCommaOrEnd, at: i) }
                break
            }
        }
        tokens[me].end = Int32(truncatingIfNeeded: i + 1)
        tokens[me].next = Int32(truncatingIfNeeded: tokens.count)
        depth -= 1
        return i + 1
    }
}
