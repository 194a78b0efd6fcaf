/// The one stable failure code every `fail` envelope carries, whatever SDK or platform sent it.
///
/// Closed on purpose: consumers switch on it, and the topic `checkout.fail.<code>` is built from
/// it, so a new raw spelling maps onto an existing case (or `unknown`) instead of growing the set.
/// The raw code is always kept beside it in `error.raw_code`. The full mapping table is in
/// `docs/error-codes.md`. `Sendable`.
public enum StableErrorCode: String, Sendable, CaseIterable {
    case storefrontPasswordRequired = "storefront_password_required"
    case customerAccountRequired = "customer_account_required"
    case cartExpired = "cart_expired"
    case cartCompleted = "cart_completed"
    case invalidCart = "invalid_cart"
    case httpError = "http_error"
    case networkError = "network_error"
    case webViewNotSupported = "web_view_not_supported"
    case webContentProcessTerminated = "web_content_process_terminated"
    case sdkError = "sdk_error"
    case paymentFailed = "payment_failed"
    case paymentCancelled = "payment_cancelled"
    case sessionInvalid = "session_invalid"
    case configurationError = "configuration_error"
    case paymentMethodUnavailable = "payment_method_unavailable"
    case unknown = "unknown"
}

/// Maps raw error spellings (codes, legacy error groups, HTTP statuses) onto ``StableErrorCode``.
///
/// A raw code is folded before lookup: lower-cased with everything but letters and digits removed,
/// so `cart_expired`, `CART_EXPIRED`, `cartExpired`, `CartExpired` and `cart-expired` are one key.
/// `Sendable`; pure.
public enum ErrorCodeNormalizer {
    /// Folded raw spelling → stable code. Documented row by row in `docs/error-codes.md`.
    static let table: [String: StableErrorCode] = {
        var t: [String: StableErrorCode] = [:]
        func add(_ code: StableErrorCode, _ spellings: [String]) {
            for s in spellings { t[fold(s)] = code }
            t[fold(code.rawValue)] = code
        }
        add(.storefrontPasswordRequired, ["storefront_password_required", "password_required"])
        add(.customerAccountRequired, ["customer_account_required", "authentication", "authentication_required"])
        add(.cartExpired, ["cart_expired", "expired", "checkout_expired", "checkout_expired_error"])
        add(.cartCompleted, ["cart_completed", "checkout_completed"])
        add(.invalidCart, ["invalid_cart", "cart_invalid"])
        add(.httpError, ["http_error", "checkout_http_error", "bad_request", "not_found", "server_error"])
        add(.networkError, [
            "network_error", "bad_network", "network", "connectivity_error", "connectivity_errors",
            "no_network", "offline", "timeout", "timed_out", "request_timeout", "connection_error",
        ])
        add(.webViewNotSupported, ["web_view_not_supported", "webview_not_supported", "unsupported_webview"])
        add(.webContentProcessTerminated, [
            "web_content_process_terminated", "render_process_gone", "web_process_terminated",
        ])
        add(.sdkError, [
            "sdk_error", "internal", "internal_error", "unrecoverable", "unrecoverable_failure",
            "error_sending_message", "error_receiving_message", "client_error", "checkout_client_error",
            "underlying_errors", "generic_error", "checkout", "checkout_unavailable",
        ])
        add(.paymentFailed, [
            "payment_failed", "payment_declined", "declined", "vaulted_payment_error", "applepay_timed_out",
            "failed_to_create_payment", "payment_creation_failed", "payment_error",
        ])
        add(.paymentCancelled, [
            "payment_cancelled", "payment_canceled", "cancelled", "canceled", "user_cancelled",
            "user_canceled", "cancelled_by_user",
        ])
        add(.sessionInvalid, [
            "session_invalid", "invalid_client_token", "expired_client_token", "client_token_expired",
            "invalid_session", "session_expired", "failed_to_create_session", "failed_to_load_session",
            "missing_client_token", "invalid_client_session",
        ])
        add(.configurationError, [
            "configuration_error", "configuration", "unsupported", "misconfiguration",
            "missing_primer_configuration", "missing_configuration", "misconfigured_payment_methods",
            "invalid_merchant_identifier", "invalid_url", "invalid_value", "invalid_argument",
            "missing_sdk", "missing_primer_delegate", "unsupported_intent", "merchant_error",
            "checkout_liquid_not_migrated", "killswitch_enabled", "policy_violation",
            "configuration_exception", "invalid_settings",
        ])
        add(.paymentMethodUnavailable, [
            "payment_method_unavailable", "unsupported_payment_method", "unsupported_payment_method_type",
            "unable_to_present_payment_method", "unable_to_make_payments_on_provided_networks",
            "payment_method_not_available", "no_payment_method_available", "payment_method_not_supported",
        ])
        add(.unknown, ["unknown", "unknown_error"])
        return t
    }()

    /// Folds a spelling to the lookup key: ASCII letters and digits only, lower-cased.
    public static func fold(_ raw: String) -> String {
        // One string built from a buffer, not one append per character (each a capacity check and
        // a UTF-8 re-encode): this runs on every event's name.
        var raw = raw
        return raw.withUTF8 { src in
            String(unsafeUninitializedCapacity: src.count) { dst in
                var n = 0
                for c in src {
                    switch c {
                    case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                        dst[n] = c | 0x20
                        n += 1
                    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                        dst[n] = c
                        n += 1
                    default: break
                    }
                }
                return n
            }
        }
    }

    /// Normalises what a failure event carried.
    ///
    /// The raw code wins when it is known. An HTTP 410 means the cart expired, whatever generic code
    /// came with it (`http_error`, none, or an unknown one); any other HTTP status with no better code
    /// is `http_error`. A legacy error group is used when the code is missing or unknown.
    /// - Parameters:
    ///   - rawCode: the code as sent (`cart_expired`, `CART_EXPIRED`, `payment-failed`, `410`, …).
    ///   - group: the older kit's error group (`expired`, `unrecoverable`, …), if any.
    ///   - httpStatus: an HTTP status the error carried, if any.
    public static func normalize(rawCode: String?, group: String? = nil, httpStatus: Int? = nil) -> StableErrorCode {
        var code: StableErrorCode?
        if let rawCode, !rawCode.isEmpty {
            let key = fold(rawCode)
            if let c = table[key] {
                code = c
            } else if let status = Int(key), (100...599).contains(status) {
                code = fromHTTP(status)
            }
        }
        if let httpStatus, code == nil || code == .httpError || code == .unknown {
            if httpStatus == 410 { return .cartExpired }
            // A code that says only "unknown" is no better than none.
            if code == nil || code == .unknown, (400...599).contains(httpStatus) { code = .httpError }
        }
        if code == nil || code == .unknown, let group, let g = table[fold(group)] {
            code = g
        }
        if code == nil || code == .unknown, let rawCode, let c = enumCase(rawCode) { code = c }
        return code ?? .unknown
    }

    /// An enum case as a platform prints it (`CheckoutError.cartExpired`,
    /// `CheckoutErrorCode.CART_EXPIRED`, `cartExpired(message: "…")`): the part after the last `.`
    /// when the part before it names an error type (ends in `Error` or `ErrorCode`), without the
    /// associated values a Swift case prints in parentheses.
    static func enumCase(_ raw: String) -> StableErrorCode? {
        var text = Substring(raw)
        // A Swift case printed with its associated values: `cartExpired(message: "…")`.
        if text.last == ")", let paren = text.firstIndex(of: "(") { text = text[..<paren] }
        if let dot = text.lastIndex(of: ".") {
            let type = text[..<dot]
            guard type.hasSuffix("Error") || type.hasSuffix("ErrorCode") else { return nil }
            text = text[text.index(after: dot)...]
        } else if text.count == raw.count {
            return nil
        }
        let last = fold(String(text))
        return last.isEmpty ? nil : table[last]
    }

    static func fromHTTP(_ status: Int) -> StableErrorCode {
        status == 410 ? .cartExpired : .httpError
    }
}
