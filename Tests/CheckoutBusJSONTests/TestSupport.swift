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
