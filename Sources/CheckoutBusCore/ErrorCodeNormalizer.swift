import CheckoutBusProtocol
import CheckoutBusJSON

/// Maps raw error spellings (codes, legacy error groups, HTTP statuses) onto ``StableErrorCode``.
///
/// A raw code is folded before lookup: lower-cased with everything but letters and digits removed,
/// so `cart_expired`, `CART_EXPIRED`, `cartExpired`, `CartExpired` and `cart-expired` are one key.
/// `Sendable`; pure.
package enum ErrorCodeNormalizer {
    /// Folded raw spelling → stable code. Documented row by row in `docs/error-codes.md`.
    static let table: [String: StableErrorCode] = {
        var t: [String: StableErrorCode] = [:]
        func add(_ code: StableErrorCode, _ spellings: [String]) {
            for s in spellings {
                // One code per spelling: a spelling listed under two codes is a mistake in this table.
                assert(t[fold(s)] == nil || t[fold(s)] == code, "\(s) is listed under two codes")
                t[fold(s)] = code
            }
            t[fold(code.rawValue)] = code
        }
        add(.storefrontPasswordRequired, ["storefront_password_required", "password_required"])
        add(.customerAccountRequired, [
            "customer_account_required", "authentication", "authentication_required", "authentication_exception",
            // Embedded Checkout Protocol message codes (UCP): the buyer must sign in or link an identity.
            "requires_sign_in", "identity_required", "requires_identity_linking",
        ])
        add(.cartExpired, ["cart_expired", "expired", "checkout_expired", "checkout_expired_error",
                           // The Android kit's exception classes by name (CheckoutException.kt), as
                           // wrappers send `getSimpleName()` for a code (docs/sdk-inventory/shopify.md §4a).
                           "checkout_expired_exception"])
        add(.cartCompleted, ["cart_completed", "checkout_completed"])
        add(.invalidCart, [
            "invalid_cart", "cart_invalid",
            // Embedded Checkout Protocol message codes (UCP): the checkout cannot go on as it is.
            "out_of_stock", "item_unavailable", "address_undeliverable", "invalid_address", "eligibility_invalid",
            "missing", "invalid",
            // Primer: the buyer's details or address failed validation, or cannot be shipped to.
            "shipping_address_unserviceable", "invalid_city", "invalid_country", "invalid_country_code",
            "invalid_postal_code", "invalid_state", "invalid_customer_email", "invalid_customer_email_address",
            "invalid_customer_first_name", "invalid_customer_firstname", "invalid_customer_last_name",
            "invalid_customer_lastname", "invalid_email", "invalid_first_name", "invalid_last_name",
            "invalid_mobile_number", "invalid_phone_number", "invalid_phone_number_country_code",
            "invalid_phone_country_dialling_code", "invalid_unknown_field",
        ])
        add(.httpError, [
            "http_error", "checkout_http_error", "bad_request", "not_found", "server_error", "http_exception",
            // Primer iOS: an answer that is no HTTP response, or has no body.
            "invalid_response", "no_data",
        ])
        add(.networkError, [
            "network_error", "bad_network", "network", "connectivity_error", "connectivity_errors",
            "no_network", "offline", "timeout", "timed_out", "request_timeout", "connection_error",
            // Primer: a network failure after retries, iPay88's connection error.
            "network_failed_after_retries", "ipay_sdk_connection_error",
        ])
        add(.webViewNotSupported,
            ["web_view_not_supported", "webview_not_supported", "unsupported_webview", "unsupported_browser"])
        add(.webContentProcessTerminated, [
            "web_content_process_terminated", "render_process_gone", "web_process_terminated",
        ])
        add(.sdkError, [
            "sdk_error", "internal", "internal_error", "unrecoverable", "unrecoverable_failure",
            "error_sending_message", "error_receiving_message", "client_error", "checkout_client_error",
            "underlying_errors", "generic_error", "checkout", "checkout_unavailable",
            "checkout_unavailable_exception", "client_exception", "checkout_sheet_kit_exception",
            // Embedded Checkout Protocol session and delegation errors (UCP's embedded protocol;
            // its `abort_error`, the buyer closing the sheet, is a cancellation below).
            "security_error", "invalid_state_error", "not_supported_error", "timeout_error",
            "not_allowed_error", "window_open_rejected_error",
            // Primer: its SDKs' and bridges' internal failures (React Native's `native-*`, wrapper
            // SDKs, 3DS set-up, encoding, assets), none the buyer or the merchant's data caused.
            "native_ios", "native_android", "native_bridge", "react_native", "react_native_bridge", "primer_rn_sdk",
            "primer_generic", "generic_underlying_errors", "apaya_internal", "google_pay_internal",
            "failed_to_decode", "failed_to_encode", "failed_to_serialize", "native_ui_start_failed",
            "failed_to_find_module", "failed_to_load_design_tokens", "missing_asset", "mismatch_asset", "mismatch",
            "klarna_sdk_error", "klarna_wrapper_sdk_error", "klarna_unknown_error_id", "stripe_sdk_error",
            "unknown_stp_payment_intent_status_error", "nol_pay_sdk_error", "nol_pay_sdk_init_error",
            // … and the `PrimerError` cases whose errorIds those are (primer-sdk-ios PrimerError.swift).
            "nol_error", "nol_sdk_init_error", "klarna_error",
            "huc_initialization_failed", "3ds_init_error", "3ds_sdk_init_failed", "missing_ds_rid",
            "3ds_missing_directory_server_id", "unsupported_protocol_version", "no_need_to_perform_3ds",
            "vaulted_manager_delete_failed", "payment_already_finalized",
        ])
        add(.paymentFailed, [
            "payment_failed", "payment_declined", "declined", "vaulted_payment_error", "applepay_timed_out",
            "failed_to_create_payment", "payment_creation_failed", "payment_error",
            // Primer: a payment the API or the method's own flow did not complete (3DS included),
            // and card details that failed validation (they reach a failure only as its cause).
            "failed_to_resume_payment", "failed_to_process_payment", "unhandled_pending_state", "failed_on_webview",
            "failed_to_redirect", "ipay88", "klarna_user_not_approved", "3ds_challenge_failed", "3ds_challenge_timed_out",
            "3ds_sdk_protocol_error", "3ds_sdk_runtime_error", "3ds_unknown_error", "3ds_unknown_protocol",
            "failed_to_perform_3ds", "failed_to_perform_3ds_and_should_break", "failed_to_perform_3ds_but_should_continue",
            "failed_to_create_3ds_transaction", "card_expired", "invalid_card_number", "invalid_cardnumber", "invalid_cvv",
            "invalid_expiry_date", "invalid_expiry_month", "invalid_expiry_year", "invalid_cardholder_name",
            "invalid_cardholder_name_length", "cardholder_name_length", "invalid_otp", "invalid_otp_code",
            // Embedded Checkout Protocol (UCP): the payment needs a 3DS step it could not take.
            "requires_3ds",
        ])
        add(.paymentCancelled, [
            "payment_cancelled", "payment_canceled", "cancelled", "canceled", "user_cancelled",
            "user_canceled", "cancelled_by_user",
            // Primer: the buyer cancelled the payment, its 3DS challenge, or dismissed the SDK.
            "cancelled_by_customer", "3ds_challenge_cancelled_by_the_user", "3ds_challenge_cancelled_by_user",
            "sdk_dismissed",
            // UCP's embedded protocol: the user cancelled the interaction, closed the sheet, say
            // (docs/specification/embedded-protocol.md, its table of error codes).
            "abort_error",
        ])
        add(.sessionInvalid, [
            "session_invalid", "invalid_client_token", "expired_client_token", "client_token_expired",
            "invalid_session", "session_expired", "failed_to_create_session", "failed_to_load_session",
            "missing_client_token", "invalid_client_session",
            // Primer: the client session was never created, could not be updated, or is refused.
            "session_not_created", "uninitialized_sdk_session", "failed_to_update_session",
            "failed_to_update_client_session", "unauthorized",
        ])
        add(.configurationError, [
            "configuration_error", "configuration", "unsupported", "misconfiguration",
            "missing_primer_configuration", "missing_configuration", "misconfigured_payment_methods",
            "invalid_merchant_identifier", "invalid_url", "invalid_value", "invalid_argument",
            "missing_sdk", "missing_primer_delegate", "unsupported_intent", "merchant_error",
            "checkout_liquid_not_migrated", "killswitch_enabled", "policy_violation",
            "configuration_exception", "invalid_settings",
            // Checkout Sheet Kit 4's app-authentication codes, and older web codes for a shop or URL
            // that cannot host the kit.
            "invalid_payload", "invalid_signature", "not_authorized", "payload_expired", "sdk_not_enabled",
            "invalid_checkout_url", "insufficient_scope",
            // Primer: what the merchant's integration set up or passed wrong (delegates, modules, 3DS
            // and Apple Pay set-up, wrapper SDK keys, headless data, vault manager).
            "apple_pay_configuration_error", "invalid_merchant_capabilities", "invalid_supported_payment_networks",
            "misconfigured_payment_method", "missing_3ds_configuration", "missing_3ds_library", "failed_to_import_3ds",
            "invalid_3ds_key", "invalid_3ds_library_version", "invalid_3ds_sdk_version", "3ds_invalid_configuration",
            "missing_sdk_dependency", "missing_primer_checkout_components_delegate", "missing_primer_input_element",
            "missing_custom_ui", "invalid_url_scheme", "invalid_architecture", "stripe_invalid_publishable_key",
            "manager_not_configured", "vault_manager_not_configured", "unsupported_payment_method_for_manager",
            "no_active_card_form", "invalid_vaulted_method_id", "invalid_vaulted_payment_method_id",
            "vaulted_payment_method_additional_data_mismatch", "huc_missing_configuration", "huc_invalid_input_data",
            "huc_invalid_raw_type_data", "invalid_raw_data", "invalid_raw_type_data", "invalid_setting",
            "invalid_client_session_setting", "invalid_client_session_value", "unsupported_session_intent",
            "invalid_payment_method_type", "invalid_payment_category", "invalid_retailer",
            "invalid_account_last_modified_date", "invalid_account_registration_date", "invalid_account_unique_id",
        ])
        add(.paymentMethodUnavailable, [
            "payment_method_unavailable", "unsupported_payment_method", "unsupported_payment_method_type",
            "unable_to_present_payment_method", "unable_to_make_payments_on_provided_networks",
            "payment_method_not_available", "no_payment_method_available", "payment_method_not_supported",
            // Primer: the wallet or method cannot be used on this device or for this card.
            "apple_pay_device_not_supported", "apple_pay_no_cards_in_wallet", "apple_pay_unavailable",
            "apple_pay_presentation_failed", "unable_to_present_apple_pay", "google_pay_unavailable", "banks_not_loaded",
            "unsupported_card_type", "invalid_card_network", "invalid_card_type", "invalid_bank_id",
        ])
        add(.unknown, ["unknown", "unknown_error"])
        return t
    }()

    /// Folds a spelling to the lookup key: ASCII letters and digits only, lower-cased.
    package static func fold(_ raw: String) -> String {
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
    package static func normalize(rawCode: String?, group: String? = nil, httpStatus: Int? = nil) -> StableErrorCode {
        var code: StableErrorCode?
        if let rawCode, !rawCode.isEmpty {
            let key = fold(rawCode)
            if let c = table[key] {
                code = c
            } else if let status = Int(key), (400...599).contains(status) {
                // Only a 4xx or 5xx is an HTTP error status; another number (`123`, `200`) is a
                // code nobody mapped, and stays `unknown` with its raw code.
                code = fromHTTP(status)
            } else if let rule = familyRules.first(where: { $0.matches(key) }) {
                // No exact entry: a rule from an SDK's naming (an exact entry always wins).
                code = rule.code
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

    /// A rule read from an SDK's naming of its error ids, for ids no exact entry names (new SDK
    /// releases' ids): matched on the folded key (docs/error-codes.md, "Family rules").
    package struct FamilyRule: Sendable, Equatable {
        package enum Position: String, Sendable { case prefix, suffix }
        package let position: Position
        /// Folded (letters and digits, lower case).
        package let text: String
        package let code: StableErrorCode
        func matches(_ key: String) -> Bool {
            key.count > text.count && (position == .prefix ? key.hasPrefix(text) : key.hasSuffix(text))
        }
    }

    /// Primer names an id for what went wrong, with the same words release after release:
    /// `missing-configuration`, `missing-3ds-configuration`, `3ds-invalid-configuration`,
    /// `huc-missing-configuration`, newer branches' `…-mandate-config`, and
    /// `misconfigured-payment-method(s)` are each the integration's configuration.
    package static let familyRules: [FamilyRule] = [
        FamilyRule(position: .suffix, text: "configuration", code: .configurationError),
        FamilyRule(position: .suffix, text: "config", code: .configurationError),
        FamilyRule(position: .prefix, text: "misconfigured", code: .configurationError),
    ]

    /// The SDKs' own sentences for an error whose code they do not send with it, folded
    /// (docs/error-codes.md, "Messages that name a cause"; each cited there).
    static let sentences: [String: StableErrorCode] = [
        // Checkout Sheet Kit Android, CheckoutBridge.kt: a message from checkout it cannot decode
        // (its code, ERROR_RECEIVING_MESSAGE_FROM_CHECKOUT, is `error_receiving_message`).
        fold("Error decoding message from checkout."): .sdkError,
        // CheckoutException.kt: CheckoutExpiredException's and CheckoutUnavailableException's
        // default descriptions.
        fold("Checkout is no longer available with the provided token. Please generate a new checkout URL"): .cartExpired,
        fold("Checkout is currently unavailable due to an internal error"): .sdkError,
        // CheckoutEventProcessor.kt (1.x–2.x), CheckoutLiquidNotMigratedException's description, and
        // the iOS kit's CheckoutWebView.swift for the same 404: a store still on checkout.liquid.
        fold("The checkout URL provided has resulted in an error. The store is still using checkout.liquid, "
             + "whereas the checkout SDK only supports checkout with extensibility."): .configurationError,
    ]

    /// What an error's message says of its cause, for an error whose code says nothing (none, or
    /// `unknown`): an HTTP status at its start (`HTTP 404 Error`, `http 503`: `HTTP`, one space,
    /// three digits, then anything but a digit), or one of the SDKs' own sentences
    /// (``sentences``), in English as the SDKs write them. Anything else names nothing: nil.
    /// - Returns: the code, and the HTTP status when the message gave one (4xx or 5xx only).
    package static func fromMessage(_ text: String) -> (code: StableErrorCode, httpStatus: Int?)? {
        let u = Array(text.utf8.prefix(9))
        if u.count >= 8, u[0] | 0x20 == 0x68, u[1] | 0x20 == 0x74, u[2] | 0x20 == 0x74, u[3] | 0x20 == 0x70, u[4] == 0x20,
            u[5...7].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), u.count == 8 || !(u[8] >= 0x30 && u[8] <= 0x39)
        {
            let status = Int(u[5] - 0x30) * 100 + Int(u[6] - 0x30) * 10 + Int(u[7] - 0x30)
            return (400...599).contains(status) ? (fromHTTP(status), status) : nil
        }
        if text.utf8.count <= 256, let code = sentences[fold(text)] { return (code, nil) }
        // A JVM `Throwable` printed (`toString()`): its message after its class's name
        // (`com.shopify.checkoutsheetkit.CheckoutExpiredException: Checkout is no longer …`).
        if let rest = RawEventDecoder.printedThrowable(text)?.message, !rest.isEmpty { return fromMessage(rest) }
        return nil
    }
}
