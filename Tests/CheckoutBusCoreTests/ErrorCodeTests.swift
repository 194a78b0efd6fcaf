import Testing

import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol

@Suite("Stable error codes (DESIGN §6)")
struct ErrorCodeTests {
    struct Row: Sendable, CustomTestStringConvertible {
        var raw: String?
        var group: String?
        var http: Int?
        var expected: StableErrorCode
        init(_ raw: String?, group: String? = nil, http: Int? = nil, _ expected: StableErrorCode) {
            self.raw = raw
            self.group = group
            self.http = http
            self.expected = expected
        }
        var testDescription: String {
            "raw=\(raw ?? "nil") group=\(group ?? "nil") http=\(http.map(String.init) ?? "nil") → \(expected.rawValue)"
        }
    }

    static let table: [Row] = [
        // The spellings DESIGN §6 names.
        Row("cart_expired", .cartExpired),
        Row("CART_EXPIRED", .cartExpired),
        Row("cartExpired", .cartExpired),
        Row("CartExpired", .cartExpired),
        Row("cart-expired", .cartExpired),
        Row(nil, http: 410, .cartExpired),
        Row("410", .cartExpired),
        Row(nil, group: "expired", .cartExpired),
        Row("payment-failed", .paymentFailed),
        Row("bad-network", .networkError),
        Row("invalid-client-token", .sessionInvalid),
        // Checkout Kit v4 codes in platform spellings (iOS/RN strings, Android enum names).
        Row("STOREFRONT_PASSWORD_REQUIRED", .storefrontPasswordRequired),
        Row("storefrontPasswordRequired", .storefrontPasswordRequired),
        Row("CUSTOMER_ACCOUNT_REQUIRED", .customerAccountRequired),
        Row("CartCompleted", .cartCompleted),
        Row("INVALID_CART", .invalidCart),
        Row("httpError", .httpError),
        Row("NETWORK_ERROR", .networkError),
        Row("networkError", .networkError),
        Row("WebViewNotSupported", .webViewNotSupported),
        Row("WEB_CONTENT_PROCESS_TERMINATED", .webContentProcessTerminated),
        Row("sdkError", .sdkError),
        // HTTP statuses.
        Row("http_error", http: 410, .cartExpired),
        Row("HTTP_ERROR", http: 500, .httpError),
        Row(nil, http: 503, .httpError),
        Row(nil, http: 404, .httpError),
        Row("503", .httpError),
        Row("unknown", http: 410, .cartExpired),
        Row("cart_completed", http: 410, .cartCompleted),  // a known code wins over the status
        Row("network_error", http: 500, .networkError),
        Row("unknown", http: 503, .httpError),  // "unknown" is no better than no code
        Row("UNKNOWN", http: 502, .httpError),
        Row("unknown", group: "expired", .cartExpired),
        // Legacy Checkout Sheet Kit error groups, used when the code is missing or unknown.
        Row("some_new_code", group: "expired", .cartExpired),
        Row(nil, group: "configuration", .configurationError),
        Row(nil, group: "unrecoverable", .sdkError),
        Row(nil, group: "authentication", .customerAccountRequired),
        Row("network_error", group: "expired", .networkError),  // a known code wins over the group
        // Primer error ids (iOS kebab-case, Android SCREAMING_SNAKE).
        Row("PAYMENT_FAILED", .paymentFailed),
        Row("payment-cancelled", .paymentCancelled),
        Row("cancelled", .paymentCancelled),
        Row("expired-client-token", .sessionInvalid),
        Row("failed-to-create-session", .sessionInvalid),
        Row("connectivity-errors", .networkError),
        Row("unable-to-present-payment-method", .paymentMethodUnavailable),
        Row("unsupported-payment-method-type", .paymentMethodUnavailable),
        Row("missing-primer-configuration", .configurationError),
        Row("invalid-merchant-identifier", .configurationError),
        // React Native's __typename names, and enum cases as a platform prints them.
        Row("CheckoutExpiredError", .cartExpired),
        Row("CheckoutHTTPError", .httpError),
        Row("CheckoutClientError", .sdkError),
        Row("ConfigurationError", .configurationError),
        Row("InternalError", .sdkError),
        Row("CheckoutError.cartExpired", .cartExpired),
        Row("ShopifyCheckoutSheetKit.CheckoutError.checkoutUnavailable", .sdkError),
        Row("CheckoutError.quantumFlux", .unknown),
        Row("trailing.", .unknown),
        Row("token.expired", http: 401, .httpError),  // not an error type's case: the status decides
        // Not `expired` after a dot: the whole spelling, Primer's `card-expired` (an expired card), folds to it.
        Row("card.expired", .paymentFailed),
        Row("CheckoutError.quantumFlux", http: 503, .httpError),
        // Unknown stays unknown.
        Row("brand_new_code", .unknown),
        Row("", .unknown),
        Row(nil, .unknown),
        Row(nil, http: 200, .unknown),
    ]

    @Test("every raw spelling normalises", arguments: table)
    func normalises(_ row: Row) {
        #expect(ErrorCodeNormalizer.normalize(rawCode: row.raw, group: row.group, httpStatus: row.http) == row.expected)
    }

    @Test("every stable code's own spelling maps to itself, in every casing", arguments: StableErrorCode.allCases)
    func roundTrip(code: StableErrorCode) {
        let snake = code.rawValue
        let words = snake.split(separator: "_").map(String.init)
        let camel = words[0] + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        let pascal = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        let kebab = words.joined(separator: "-")
        for spelling in [snake, snake.uppercased(), camel, pascal, kebab] {
            #expect(ErrorCodeNormalizer.normalize(rawCode: spelling) == code, "spelling \(spelling)")
        }
    }

    @Test("the enum is the closed set of DESIGN §6")
    func closedSet() {
        #expect(StableErrorCode.allCases.map(\.rawValue) == [
            "storefront_password_required", "customer_account_required", "cart_expired", "cart_completed",
            "invalid_cart", "http_error", "network_error", "web_view_not_supported",
            "web_content_process_terminated", "sdk_error", "payment_failed", "payment_cancelled",
            "session_invalid", "configuration_error", "payment_method_unavailable", "unknown",
        ])
    }

    @Test("fold keeps ASCII letters and digits only, lower-cased")
    func fold() {
        #expect(ErrorCodeNormalizer.fold("Cart_Expired-2 é!") == "cartexpired2")
        #expect(ErrorCodeNormalizer.fold("") == "")
    }

    @Test("an unknown code on a fail event becomes `unknown` and keeps raw_code")
    func unknownThroughProcessor() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"checkoutDidFail","checkout_id":"ck-1","error":{"code":"quantum_flux","message":"odd"}}"#)
        #expect(out.outcome == .published(.fail))
        #expect(out.topic == "checkout.fail.unknown")
        #expect(out["error.code"] == "unknown")
        #expect(out["error.raw_code"] == "quantum_flux")
        #expect(out["error.message"] == "odd")
    }

    @Test("an HTTP 410 without a code still publishes cart_expired with the status as raw_code")
    func statusOnly() {
        let p = EventProcessor()
        let out = p.feed(#"{"event":"onFail","checkout_id":"ck-1","error":{"message":"Gone","http_status":410}}"#)
        #expect(out.topic == "checkout.fail.cart_expired")
        #expect(out["error.code"] == "cart_expired")
        #expect(out["error.raw_code"] == "410")
        #expect(out["error.http_status"] == 410)
    }

    @Test("enum cases as Kotlin and Swift print them map to their code", arguments: [
        #"{"code":"CheckoutErrorCode.CART_EXPIRED","message":"Cart expired"}"#,
        #"{"code":"ShopifyCheckoutKit.CheckoutErrorCode.cartExpired"}"#,
        #""cartExpired(message: \"Cart expired\")""#,
        #"{"code":"CheckoutError.cartExpired(message: \"x\")"}"#,
    ])
    func printedEnumCases(_ error: String) {
        let out = EventProcessor().feed(#"{"event":"onFail","checkout_id":"ck-1","error":"# + error + "}")
        #expect(out["error.code"] == "cart_expired", "\(out.text)")
    }

    @Test("a printed case of a type that names no error is not read as one")
    func notEnumCases() {
        for code in ["Checkout.cartExpired", "Shipping.cart_expired_notice", "Cart.expired(x)"] {
            let out = EventProcessor().feed(#"{"event":"onFail","checkout_id":"ck-1","error":{"code":"# + jsonStringLiteral(code) + "}}")
            #expect(out["error.code"] == "unknown", "\(code)")
        }
    }

    @Test("only a 4xx or 5xx is an HTTP status: another number as a code stays unknown with its raw code",
          arguments: ["123", "200", "302", "399", "600", "0"])
    func numbersThatAreNoStatus(_ number: String) {
        let out = EventProcessor().feed(#"{"event":"onFail","checkout_id":"ck-1","error":{"code":"# + jsonStringLiteral(number) + "}}")
        #expect(out["error.code"] == "unknown", "\(number): \(out.text)")
        #expect(out["error.raw_code"] == .string(number))
        #expect(ErrorCodeNormalizer.normalize(rawCode: number) == .unknown)
    }

    @Test("4xx and 5xx as a code stay HTTP statuses", arguments: [("400", StableErrorCode.httpError), ("410", .cartExpired), ("599", .httpError)])
    func numbersThatAreStatuses(_ number: String, _ expected: StableErrorCode) {
        #expect(ErrorCodeNormalizer.normalize(rawCode: number) == expected)
    }

    /// Messages that name their cause. `Error decoding message from checkout.` and the default
    /// descriptions: Shopify/checkout-sheet-kit-android,
    /// lib/src/main/java/com/shopify/checkoutsheetkit/CheckoutBridge.kt and CheckoutException.kt.
    @Test("a message that names its cause sets the code when the error has none", arguments: [
        (#""HTTP 404 Error""#, "http_error", 404),
        (#""HTTP 410 Error""#, "cart_expired", 410),
        (#""http 503""#, "http_error", 503),
        (#"{"message":"HTTP 404 Error"}"#, "http_error", 404),
        (#"{"code":"unknown","message":"HTTP 410 Error"}"#, "cart_expired", 410),
        (#""Error decoding message from checkout.""#, "sdk_error", nil),
        (#"{"errorDescription":"Error decoding message from checkout.","isRecoverable":true}"#, "sdk_error", nil),
        (#"{"message":"Checkout is no longer available with the provided token. Please generate a new checkout URL"}"#, "cart_expired", nil),
    ] as [(String, String, Int?)])
    func messagesThatNameACause(_ error: String, _ expected: String, _ status: Int?) {
        let out = EventProcessor().feed(#"{"event":"onFail","checkout_id":"ck-1","error":"# + error + "}")
        #expect(out["error.code"] == .string(expected), "\(error): \(out.text)")
        #expect((out["error.http_status"] ?? .null) == (status.map { J.int(Int64($0)) } ?? .null), "\(error): \(out.text)")
    }

    @Test("a message that names nothing, or a status beside a code, leaves the code alone", arguments: [
        (#""HTTP 200 OK""#, "unknown"),
        (#""HTTP 4040 Error""#, "unknown"),
        (#""HTTP/1.1 404 Not Found""#, "unknown"),
        (#""the HTTP 404 Error page""#, "unknown"),
        (#""Payment declined by issuer""#, "unknown"),
        (#"{"code":"quantum_flux","message":"HTTP 404 Error"}"#, "unknown"),
        (#"{"code":"payment_failed","message":"HTTP 410 Error"}"#, "payment_failed"),
    ] as [(String, String)])
    func messagesThatNameNothing(_ error: String, _ expected: String) {
        let out = EventProcessor().feed(#"{"event":"onFail","checkout_id":"ck-1","error":"# + error + "}")
        #expect(out["error.code"] == .string(expected), "\(error): \(out.text)")
    }

    @Test("unknown failures are counted by raw code: the first 64 apart, the rest summed, long codes cut to 64 bytes")
    func unknownRawCodes() {
        let p = EventProcessor()
        func fail(_ i: Int, _ error: String) {
            _ = p.feed(#"{"event":"onFail","checkout_id":"ck-u\#(i)","error":"# + error + "}")
        }
        fail(1, #"{"code":"stripe-new-thing"}"#)
        fail(2, #"{"code":"stripe-new-thing"}"#)
        fail(3, #"{"message":"no code at all"}"#)
        fail(4, #"{"code":"payment_failed"}"#)  // known: not counted here
        #expect(p.counters.unknownRawCodes == ["stripe-new-thing": 2, "": 1])
        let long = String(repeating: "z", count: 100)
        fail(5, #"{"code":"\#(long)"}"#)
        #expect(p.counters.unknownRawCodes[String(long.prefix(EventProcessor.maxUnknownRawCodeBytes))] == 1)
        for i in 0..<70 { fail(100 + i, #"{"code":"new-id-\#(i)"}"#) }
        #expect(p.counters.unknownRawCodes.count == EventProcessor.maxUnknownRawCodes)
        #expect(p.counters.unknownRawCodesOther == UInt64(3 + 70 - EventProcessor.maxUnknownRawCodes))
    }

    @Test("family rules name new ids by their SDK's words; an exact entry always wins", arguments: [
        ("stripe-mandate-config", StableErrorCode.configurationError),
        ("klarna-missing-configuration", .configurationError),
        ("MISCONFIGURED_GOOGLE_PAY", .configurationError),
        ("misconfigured-payment-methods", .configurationError),
        ("additional-info-unhandled", .unknown),
        ("stripe-something-new", .unknown),
        ("config", .unknown),  // the rule's word alone, no id around it
    ])
    func familyRules(_ raw: String, _ expected: StableErrorCode) {
        #expect(ErrorCodeNormalizer.normalize(rawCode: raw) == expected, "\(raw)")
    }
}
