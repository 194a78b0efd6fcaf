import Testing

import CheckoutBusCore
import CheckoutBusJSON

/// A message that is not JSON is dead-lettered with a reason named after the parse error.
@Suite("parse errors as dead-letter reasons")
struct ParseErrorReasonTests {
    @Test("dead-letter reasons follow the parse error", arguments: [
        (JSONParseError.Reason.invalidUTF8, "invalid_utf8"),
        (.tooDeep, "too_deep"),
        (.truncated, "invalid_json"),
        (.trailingData, "invalid_json"),
        (.badNumber, "invalid_json"),
        (.badEscape, "invalid_json"),
        (.controlCharacter, "invalid_json"),
        (.empty, "invalid_json"),
    ])
    func deadLetterReason(reason: JSONParseError.Reason, code: String) {
        #expect(DeadLetterReason(parseError: JSONParseError(reason, at: 0)).code == code)
    }
}
