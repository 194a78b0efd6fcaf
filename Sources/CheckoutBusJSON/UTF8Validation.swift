/// Validation of one multi-byte UTF-8 sequence (RFC 3629: no overlongs, no surrogates,
/// nothing above U+10FFFF), shared by the JSON scanner and the dead-letter escaper. `Sendable`; pure.
@usableFromInline package enum UTF8Validation {
    /// Checks the sequence whose lead byte (≥ 0x80) is at `i` of `p[0..<count]`.
    /// - Returns: the index after the sequence, or the offset of the byte that makes it invalid
    ///   (the lead byte itself when it cannot start a sequence or the input ends too soon).
    @inline(__always)
    @usableFromInline package static func check(_ p: UnsafePointer<UInt8>, at i: Int, count: Int) -> (end: Int, invalidAt: Int?) {
        var need: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch p[i] {
        case 0xC2...0xDF: need = 1
        case 0xE0: need = 2; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: need = 2
        case 0xED: need = 2; upper = 0x9F
        case 0xF0: need = 3; lower = 0x90
        case 0xF1...0xF3: need = 3
        case 0xF4: need = 3; upper = 0x8F
        default: return (i, i)
        }
        guard i + need < count else { return (i, i) }
        let b1 = p[i + 1]
        guard b1 >= lower && b1 <= upper else { return (i, i + 1) }
        var k = 2
        while k <= need {
            guard p[i + k] & 0xC0 == 0x80 else { return (i, i + k) }
            k += 1
        }
        return (i + need + 1, nil)
    }
}
