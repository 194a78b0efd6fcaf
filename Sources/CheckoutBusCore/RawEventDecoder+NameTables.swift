#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CheckoutBusJSON
import CheckoutBusProtocol

/// The decoder's name tables: every JSON-RPC method, callback, Primer and non-lifecycle name it knows, and the
/// usual platform and SDK spellings. `scripts/name-tables` reads them from this file for docs/raw-shapes.md.
extension RawEventDecoder {
    /// JSON-RPC methods named one by one (the `ec.*.change` notifications are updates by their
    /// form): their lifecycle kind, or nil for a message that is not a lifecycle event.
    static let methods: [String: LifecycleKind?] = [
        "ec.start": .start, "ec.complete": .complete, "ec.error": .fail, "ec.ready": nil, "ec.auth": nil,
        // Checkout Kit web's universal checkout protocol: a full snapshot, as a `.change`.
        "ec.update": .update,
        // Checkout Sheet Kit 4 (its release candidates): the same lifecycle under other names;
        // `checkout.addressChangeStart`, `…paymentMethodChangeStart`, `…submitStart` are requests.
        "checkout.start": .start, "checkout.complete": .complete, "checkout.error": .fail,
        "checkoutBlockingEvent": nil,
    ]

    /// The folded names of ``methods``, for the docs' drift test.
    static var documentedMethods: [String] { methods.keys.map(ErrorCodeNormalizer.fold) }

    static let callbackNames: [String: LifecycleKind] = {
        var t: [String: LifecycleKind] = [:]
        for n in ["checkoutDidStart", "onStart", "onCheckoutStarted", "start", "started", "checkoutStarted", "checkoutStart",
                  "CheckoutStartEvent", "CheckoutStartedEvent"] {
            t[ErrorCodeNormalizer.fold(n)] = .start
        }
        for n in ["checkoutDidUpdate", "onUpdate", "onCheckoutUpdated", "update", "updated", "checkoutUpdated", "checkoutUpdate",
                  "CheckoutUpdateEvent", "CheckoutUpdatedEvent"] {
            t[ErrorCodeNormalizer.fold(n)] = .update
        }
        for n in ["checkoutDidComplete", "onComplete", "onCheckoutCompleted", "complete", "completed", "checkoutCompleted", "checkoutComplete",
                  "CheckoutCompleteEvent", "CheckoutCompletedEvent"] {
            t[ErrorCodeNormalizer.fold(n)] = .complete
        }
        for n in ["checkoutDidFail", "checkoutDidFailWithError", "onFail", "onCheckoutFailed", "fail", "failed",
                  "error", "checkoutFailed", "onError", "checkoutFail", "checkoutError", "CheckoutFailureEvent",
                  "CheckoutFailedEvent", "CheckoutErrorEvent"] {
            t[ErrorCodeNormalizer.fold(n)] = .fail
        }
        // `canceled` is a community wrapper's result for a dismissed sheet (checkout_sheet_kit_flutter,
        // docs/sdk-inventory/shopify.md, §4a), with its British spelling.
        for n in ["checkoutDidDismiss", "onDismiss", "onCheckoutDismissed", "dismiss", "checkoutDismissed",
                  "checkoutDidCancel", "onCheckoutCanceled", "onCheckoutCancelled", "onCancel", "cancel",
                  "canceled", "cancelled", "checkoutCanceled", "checkoutCancelled",
                  "close", "closed", "checkoutClosed", "checkoutDismiss", "checkoutClose",
                  "CheckoutDismissEvent", "CheckoutDismissedEvent", "CheckoutCanceledEvent"] {
            t[ErrorCodeNormalizer.fold(n)] = .dismiss
        }
        return t
    }()

    static let primerNames: [String: LifecycleKind] = {
        var t: [String: LifecycleKind] = [:]
        for n in ["success", "primerDidCompleteCheckoutWithData", "onCheckoutComplete", "onCheckoutCompleted", "onPaid",
                  "primerCheckoutSuccess", "primerHeadlessUniversalCheckoutDidCompleteCheckoutWithData",
                  "primerCheckoutPresenterDidCompleteWithSuccess", "onPaymentSuccess", "primer:payment-success"] {
            t[ErrorCodeNormalizer.fold(n)] = .complete
        }
        for n in ["failure", "primerDidFailWithError", "onFailed", "onError", "primerCheckoutFailure",
                  "primerHeadlessUniversalCheckoutDidFail", "primerCheckoutPresenterDidFailWithError", "onCheckoutFail",
                  "onPaymentFailure", "primer:payment-failure"] {
            t[ErrorCodeNormalizer.fold(n)] = .fail
        }
        for n in ["dismissed", "primerDidDismiss", "onDismissed", "onDismiss", "primerCheckoutDismissed",
                  "primerCheckoutPresenterDidDismiss"] {
            t[ErrorCodeNormalizer.fold(n)] = .dismiss
        }
        return t
    }()

    /// Known messages that are not lifecycle events: dead-lettered as `not_lifecycle`.
    static let nonLifecycleNames: Set<String> = Set([
        "webPixels", "web_pixels", "webPixelEvent", "checkoutDidEmitWebPixelEvent", "onWebPixelEvent",
        "pixel", "analytics", "checkoutBlockingEvent", "instrumentation", "checkoutDidClickLink",
        "onLinkClick", "checkoutDidClickContactLink", "onShowFileChooser", "onGeolocationPermissionsShowPrompt",
        "onGeolocationPermissionsHidePrompt", "onPermissionRequest", "ready", "initializing",
        "primerWillCreatePaymentWithData", "onBeforePaymentCreate", "onTokenizeSuccess",
        "primerDidTokenizePaymentMethod", "onBeforeClientSessionUpdate", "onClientSessionUpdate",
        "primerClientSessionWillUpdate", "primerClientSessionDidUpdate",
        // Checkout Kit's and Checkout Sheet Kit's React Native events that are no lifecycle: link
        // clicks, geolocation prompts, Sheet Kit 4's address, payment-method and submit requests,
        // and a pixel event's `type` (`STANDARD`, `CUSTOM`) when it is all that names it.
        "linkClick", "geolocationRequest", "onGeolocationRequest", "addressChangeStart", "paymentMethodChangeStart",
        "submitStart", "standard", "custom",
        // Primer: a payment left pending (it settles later, or fails on resume).
        "onResumePending", "onCheckoutPending", "primerDidEnterResumePendingWithPaymentAdditionalInfo",
        // Checkout Kit React Native: a background preload's state (`onPreloadStateChange`, whose
        // `failed` is no checkout's failure: the buyer saw none) and the accelerated checkout
        // buttons' render state (`onRenderStateChange`, whose `error` is buttons that did not render).
        "onPreloadStateChange", "preloadStateChange", "onRenderStateChange", "renderStateChange",
        // Primer's callbacks along a payment that are no outcome (primer-sdk-react-native's
        // PrimerSettings / headless handlers, primer-sdk-ios's delegates): tokenization, additional
        // info to show (a voucher, a QR code), a resume, a payment method's own screen.
        "onTokenizationStart", "onTokenizationSuccess", "onPreparationStart", "onPaymentMethodShow",
        "onAvailablePaymentMethodsLoad", "onCheckoutReceivedAdditionalInfo", "onCheckoutAdditionalInfo",
        "onCheckoutResume", "onResumeSuccess", "primerDidReceiveAdditionalInfo",
        "primerHeadlessUniversalCheckoutUIDidDismissPaymentMethod",
        // … and their spellings in primer-sdk-android's `PrimerCheckoutListener` /
        // `PrimerHeadlessUniversalCheckoutListener` and primer-sdk-ios's delegates.
        "onClientSessionUpdated", "onAvailablePaymentMethodsLoaded", "onPaymentMethodShowed", "onPreparationStarted",
        "onTokenizationStarted", "onAdditionalInfoReceived", "primerDidResumeWith",
        "primerHeadlessUniversalCheckoutDidResumeWith", "primerHeadlessUniversalCheckoutDidTokenizePaymentMethod",
        "primerHeadlessUniversalCheckoutWillCreatePaymentWithData",
        "primerHeadlessUniversalCheckoutDidUpdateClientSession",
        "primerHeadlessUniversalCheckoutDidLoadAvailablePaymentMethods",
        "primerHeadlessUniversalCheckoutDidStartTokenization",
        "primerHeadlessUniversalCheckoutUIDidShowPaymentMethod",
        // (the SDK's own spelling)
        "primerHeadlessUniveraslCheckoutUIDidDismissPaymentMethod",
        // More of them: primer-io/sdk-android's `PrimerCheckoutListener` (`onBeforePaymentCreated`,
        // `onBeforeClientSessionUpdated`), its headless listener (`onCheckoutAdditionalInfoReceived`)
        // and raw data manager listener (`onValidationChanged`, `onMetadataChanged`: a card form's
        // input), and primer-sdk-ios's headless delegates.
        "onBeforePaymentCreated", "onBeforeClientSessionUpdated", "onCheckoutAdditionalInfoReceived",
        "onValidationChanged", "onMetadataChanged", "primerHeadlessUniversalCheckoutWillUpdateClientSession",
        "primerHeadlessUniversalCheckoutUIDidStartPreparation",
        "primerHeadlessUniversalCheckoutDidReceiveAdditionalInfo",
        "primerHeadlessUniversalCheckoutDidEnterResumePendingWithPaymentAdditionalInfo",
    ].map(ErrorCodeNormalizer.fold))

    /// A wrapper's `platform` already in the published spelling (the usual case), as a literal:
    /// no string is built from the input. Nil for any other value. (Unrolled compares: a loop over
    /// a table of literals measured ~150–240 more instructions per event.)
    @inline(__always)
    static func usualPlatform(_ doc: JSONDocument, _ v: Int) -> String? {
        if doc.stringEquals(v, "ios") { return "ios" }
        if doc.stringEquals(v, "android") { return "android" }
        if doc.stringEquals(v, "react_native") { return "react_native" }
        if doc.stringEquals(v, "flutter") { return "flutter" }
        return nil
    }

    /// A wrapper's `sdk` that is exactly a family's name (the usual case), as a literal.
    @inline(__always)
    static func usualSDK(_ doc: JSONDocument, _ v: Int) -> String? {
        if doc.stringEquals(v, "shopify") { return "shopify" }
        if doc.stringEquals(v, "primer") { return "primer" }
        return nil
    }

    /// A wrapper's `platform` in the spelling the decoder infers (`ios`, `android`, `react_native`):
    /// lower-cased, spaces and dashes as `_`, and `reactnative` as `react_native`, so analytics
    /// never splits one platform by how a producer capitalised it. Usually already so: returned as is.
    static func platformSpelling(_ raw: String) -> String {
        guard raw.utf8.contains(where: { ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x20 || $0 == 0x2D || $0 >= 0x80 }) else {
            return raw == "reactnative" ? "react_native" : raw
        }
        var trimmed = Substring(raw)
        while trimmed.first?.isWhitespace == true { trimmed.removeFirst() }
        while trimmed.last?.isWhitespace == true { trimmed.removeLast() }
        var folded = ""
        for c in trimmed.lowercased().unicodeScalars { folded.unicodeScalars.append(c == " " || c == "-" ? "_" : c) }
        return folded == "reactnative" ? "react_native" : folded
    }

    /// `name.hasPrefix(prefix)` for an ASCII `prefix`, by its UTF-8 bytes where that settles it:
    /// `String.hasPrefix` compares by grapheme (about a hundred instructions per event, measured).
    /// The bytes match and the next is ASCII (or there is none): a grapheme ends with the prefix, so
    /// the answer is yes; they differ: no. A non-ASCII byte after matching bytes may continue the
    /// prefix's last grapheme (a combining accent): `hasPrefix` decides.
    package static func starts(_ name: String, with prefix: StaticString) -> Bool {
        var copy = name
        let n = prefix.utf8CodeUnitCount
        let bytes = copy.withUTF8 { b -> Bool? in
            guard b.count >= n && memcmp(b.baseAddress!, prefix.utf8Start, n) == 0 else { return false }
            return b.count == n || b[n] < 0x80 ? true : nil
        }
        return bytes ?? name.hasPrefix(String(describing: prefix))
    }

    package static func platform(forCallback name: String) -> String? {
        if starts(name, with: "checkoutDid") { return "ios" }
        if starts(name, with: "onCheckout") { return "android" }
        return nil
    }

    static func platform(forPrimer name: String) -> String? {
        if starts(name, with: "primerDid") { return "ios" }
        switch name {
        case "onCheckoutCompleted", "onFailed", "onDismissed": return "android"
        case "onCheckoutComplete", "onError", "onDismiss": return "react_native"
        default: return nil
        }
    }
}
