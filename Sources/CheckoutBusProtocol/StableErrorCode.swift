import CheckoutBusJSON

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
