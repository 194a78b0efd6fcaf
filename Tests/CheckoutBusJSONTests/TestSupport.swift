import Testing

import CheckoutBusJSON

/// Parses `text` into a fresh document that owns its bytes; records an issue if it does not parse.
func document(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> JSONDocument? {
    let doc = JSONDocument()
    do {
        try doc.parseOwned(Array(text.utf8))
        return doc
    } catch {
        Issue.record("fixture does not parse: \(error.reason.name) at \(error.offset): \(text)",
                     sourceLocation: sourceLocation)
        return nil
    }
}

/// The parse error for `bytes`, or `nil` if they parse.
func parseError(_ bytes: [UInt8], maxDepth: Int = 64) -> JSONParseError? {
    let doc = JSONDocument()
    doc.maxDepth = maxDepth
    return bytes.withUnsafeBytes { buf -> JSONParseError? in
        do throws(JSONParseError) {
            try doc.parse(buf)
            return nil
        } catch {
            return error
        }
    }
}

/// A small seeded generator (SplitMix64, as `CheckoutBusCore.SplitMix64`, which this target does not
/// depend on), so a failing run of a randomized test can be repeated.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
