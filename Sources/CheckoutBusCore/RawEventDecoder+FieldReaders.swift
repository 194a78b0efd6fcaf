import Glibc
import CheckoutBusJSON
import CheckoutBusProtocol

/// The field readers the family decoders share: checkout and order ids, event ids, errors.
extension RawEventDecoder {
    /// Where a callback's fields are: the first object (or object in a JSON string) among `data`,
    /// `detail`, `nativeEvent` (a React Native synthetic event), `event`, `payload`, `body`,
    /// `arguments` (Flutter's method channel), `args` and
    /// `params` — `token`, as ``decodeRaw(_:_:wrapper:)`` found it — else the event itself.
    func holder(_ doc: JSONDocument, _ r: Int, _ token: Int?) -> JSONRef {
        objectValue(doc, token) ?? JSONRef(doc, r)
    }

    /// The members ``readSnapshotIDs(_:_:into:)`` reads, indexed once.
    private static let snapshotIDNames = MemberNames(
        "id", "checkout_id", "checkoutId", "order", "orderDetails", "order_details", "order_id", "orderId", "cart",
        "orderConfirmation", "order_confirmation")

    /// Checkout and order ids from a snapshot (v4 `id`/`order.id`, or the older `orderDetails`),
    /// its members found in one pass (``JSONDocument/members(_:_:)``).
    func readSnapshotIDs(_ doc: JSONDocument, _ c: Int, into event: inout DecodedEvent) {
        let skipCheckoutID = wrapperNamesCheckout
        let m = doc.members(c, RawEventDecoder.snapshotIDNames)
        if !skipCheckoutID, let v = m.at(0) ?? m.at(1) ?? m.at(2) { event.setCheckoutID(doc, v) }
        if let order = m.object(3), let v = doc.member(order, "id") { event.setOrderID(doc, v) }
        if let details = m.object(4) ?? m.object(5), let v = doc.member(details, "id") { event.setOrderID(doc, v) }
        if !event.hasOrderID, let v = m.at(6) ?? m.at(7) { event.setOrderID(doc, v) }
        // Checkout Sheet Kit 4: `{"orderConfirmation":{"order":{"id":…}},"cart":{"id":…}}`.
        if let confirmation = m.object(9) ?? m.object(10), let order = doc.object(confirmation, "order"),
            let v = doc.member(order, "id")
        {
            let id = RawEventDecoder.identifierText(doc, v)
            if id.isPresent { event.orderIdentifier = id }
        }
        if !skipCheckoutID, !event.hasCheckoutID, let cart = m.object(8), let v = doc.member(cart, "id") {
            event.setCheckoutID(doc, v)
        }
    }

    /// ``JSONDocument/identifier(_:)`` of token `t`, in place where it can be: the text of an
    /// unescaped string (not a placeholder) or of a number, as bytes in the document; else the
    /// identifier's `String` (an escaped string's decoded text), or neither (no id). The bytes are
    /// exactly the `String`'s UTF-8 (the scanner validates strings' UTF-8).
    static func identifierText(_ doc: JSONDocument, _ t: Int) -> IdentifierText {
        switch doc.kind(t) {
        case .string where !doc.isEscaped(t):
            let raw = doc.raw(t)
            if JSONDocument.isPlaceholder(raw) { return IdentifierText() }
            return IdentifierText(bytes: UnsafeRawBufferPointer(rebasing: raw[1..<(raw.count - 1)]))
        case .number: return IdentifierText(bytes: doc.raw(t))
        default: return IdentifierText(string: doc.identifier(t))
        }
    }

    /// Whether string token `t` starts with `prefix` (its raw bytes, after the opening quote).
    static func hasPrefix(_ doc: JSONDocument, _ t: Int, _ prefix: StaticString) -> Bool {
        guard doc.kind(t) == .string else { return false }
        let raw = doc.raw(t)
        let n = prefix.utf8CodeUnitCount
        return raw.count >= n + 2 && memcmp(raw.baseAddress! + 1, prefix.utf8Start, n) == 0
    }

    /// Whether the raw event's own checkout id is still wanted.
    func needsCheckoutID(_ event: borrowing DecodedEvent) -> Bool { !event.hasCheckoutID && !wrapperNamesCheckout }

    /// The members ``readEventIDs(_:_:into:)`` reads, indexed once: each field's spellings in the
    /// order they are preferred.
    private static let eventIDNames = MemberNames(
        "checkout_id", "checkoutId", "event_id", "eventId", "order_id", "orderId", "occurred_at", "occurredAt",
        "timestamp")

    /// Ids and timestamps written beside the event name, found in one pass over `r`'s members
    /// (``JSONDocument/members(_:_:)``) rather than one per field: of each field, the first
    /// spelling present, as ``JSONDocument/member(_:anyOf:_:)`` picks it.
    func readEventIDs(_ doc: JSONDocument, _ r: Int, into event: inout DecodedEvent) {
        let m = doc.members(r, RawEventDecoder.eventIDNames)
        if needsCheckoutID(event), let v = m.at(0) ?? m.at(1) { event.setCheckoutID(doc, v) }
        if !event.hasEventID, let v = m.at(2) ?? m.at(3) { event.setEventID(doc, v) }
        if !event.hasOrderID, let v = m.at(4) ?? m.at(5) { event.setOrderID(doc, v) }
        if event.occurredAt == nil, let v = m.at(6) ?? m.at(7) ?? m.at(8),
            doc.kind(v) == .string || doc.kind(v) == .number
        {
            event.occurredAt = JSONRef(doc, v)
        }
    }

    /// A failure's error: the error object when there is one; else a bare-string `error` (on
    /// `fields`, then on `orStringIn`) when `fields` carries no code, status or group of its own;
    /// else `fields` read as the error.
    func failureError(_ doc: JSONDocument, object: Int?, fields: Int, orStringIn other: Int? = nil,
                              terminal: Bool) -> DecodedError {
        if let object { return makeError(doc, object, terminal: terminal) }
        if !hasErrorFields(doc, fields), let text = errorString(doc, fields) ?? other.flatMap({ errorString(doc, $0) }) {
            return makeError(text: text, terminal: terminal)
        }
        return makeError(doc, fields, terminal: terminal)
    }

    /// Whether the event carries an error's code or status on itself: then those are read as
    /// before, and a bare-string `error` beside them is only the message.
    func hasErrorFields(_ doc: JSONDocument, _ o: Int) -> Bool {
        doc.member(o, anyOf: "code", "errorId", "error_id", "errorCode", "error_code") != nil
            || doc.member(o, anyOf: "statusCode", "http_status", "httpStatus", "status_code", "httpStatusCode") != nil
            || doc.member(o, anyOf: "group", "__typename") != nil
    }

    /// An `error` given as a bare string (`"error":"network_error"`, or a sentence), if any.
    private func errorString(_ doc: JSONDocument, _ o: Int) -> String? {
        guard let v = doc.member(o, anyOf: "error", "primerError"), doc.kind(v) == .string,
            let text = doc.string(v), !text.isEmpty
        else { return nil }
        return text
    }

    /// The error of an event whose `error` is a bare string: normalised as a code (`network_error`,
    /// `CheckoutError.cartExpired`, …) and kept whole as `message`; also as `raw_code` when it
    /// reads as a code (no whitespace, at most 128 bytes) rather than a sentence.
    func makeError(text: String, terminal: Bool) -> DecodedError {
        let codeLike = text.utf8.count <= 128 && !text.utf8.contains { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        var code = ErrorCodeNormalizer.normalize(rawCode: codeLike ? text : nil)
        // A Swift case printed with its values (`cartExpired(message: "…")`) has spaces, yet names a code.
        if !codeLike, text.utf8.count <= 1024, let c = ErrorCodeNormalizer.enumCase(text) { code = c }
        var status: Int?
        var isTerminal = terminal
        var rawCode = codeLike ? text : nil
        if !codeLike, text.utf8.count <= 1024, text.last == ")" {
            // Its values may say more (Checkout Sheet Kit iOS's `checkoutUnavailable(message: …, code:
            // …CheckoutUnavailable.clientError(code: …CheckoutErrorCode.storefrontPasswordRequired),
            // recoverable: false)`, `…httpError(statusCode: 404)`): the innermost `code:` a table
            // knows, the HTTP status, and whether it is recoverable.
            let printed = RawEventDecoder.printedValues(text)
            if let inner = printed.code, inner != .unknown { code = inner }
            if let s = printed.status {
                status = s
                if code == .unknown || code == .sdkError || code == .httpError {
                    code = ErrorCodeNormalizer.fromHTTP(s)
                }
            }
            if printed.recoverable == true { isTerminal = false }
        }
        // Primer's `errorDescription`, `[<errorId>] <text> (diagnosticsId: …)`, given alone.
        if code == .unknown, text.contains("(diagnosticsId:"), let id = RawEventDecoder.bracketedID(text) {
            let named = ErrorCodeNormalizer.normalize(rawCode: id)
            if named != .unknown { (code, rawCode) = (named, id) }
        }
        // A sentence that names its cause (`HTTP 404 Error`, the SDKs' own messages).
        if code == .unknown, let named = ErrorCodeNormalizer.fromMessage(text) { (code, status) = named }
        return DecodedError(code: code, rawCode: rawCode, message: text, httpStatus: status, terminal: isTerminal)
    }

    /// A JVM `Throwable`'s `toString()` taken apart: the simple name of its class (a qualified name:
    /// at least one `.`, no spaces, the last part capitalised, ending in `Exception` or `Error`) and
    /// its message after `": "`, if it has one. Nil for anything else.
    ///
    /// ``ErrorCodeNormalizer/fromMessage(_:)`` reads such an error by its message alone: the class
    /// says too little (Checkout Sheet Kit Android's `CheckoutExpiredException` is also a completed
    /// or invalid cart, its `HttpException` also a load that reached no server).
    package static func printedThrowable(_ text: String) -> (name: String, message: String?)? {
        let u = text.utf8
        let colon = u.prefix(256).firstIndex(of: UInt8(ascii: ":"))
        let qualified = u[..<(colon ?? u.endIndex)]
        guard qualified.count <= 200, !qualified.contains(where: { $0 <= 0x20 }),
            let dot = qualified.lastIndex(of: UInt8(ascii: ".")), dot != qualified.startIndex
        else { return nil }
        let simple = qualified[qualified.index(after: dot)...]
        guard let first = simple.first, first &- UInt8(ascii: "A") < 26,
            simple.allSatisfy({ $0 &- UInt8(ascii: "a") < 26 || $0 &- UInt8(ascii: "A") < 26
                                || $0 &- UInt8(ascii: "0") < 10 || $0 == UInt8(ascii: "$") }),
            Substring(simple).hasSuffix("Exception") || Substring(simple).hasSuffix("Error")
        else { return nil }
        var message: String?
        if let colon {
            let after = u[u.index(after: colon)...]
            guard after.first == UInt8(ascii: " ") else { return nil }
            message = String(Substring(after.dropFirst()))
        }
        return (String(Substring(simple)), message)
    }

    /// What a Swift error printed with its values says inside them: the code of the last `code: `
    /// value a table knows (`…CheckoutErrorCode.storefrontPasswordRequired`), the first
    /// `statusCode: N` that is an HTTP status, and `recoverable: true` / `false`.
    static func printedValues(_ text: String) -> (code: StableErrorCode?, status: Int?, recoverable: Bool?) {
        var code: StableErrorCode?
        for v in PrintedSwift.fieldValues(text, after: "code: ").suffix(4).reversed() where code == nil {
            code = ErrorCodeNormalizer.enumCase(v) ?? {
                let n = ErrorCodeNormalizer.normalize(rawCode: v.split(separator: ".").last.map(String.init))
                return n == .unknown ? nil : n
            }()
        }
        let status = PrintedSwift.fieldValues(text, after: "statusCode: ").lazy.compactMap { Int($0) }
            .first { (400...599).contains($0) }
        // The last: the outermost value's own (Swift prints a case's values in order, nested ones first).
        let recoverable = PrintedSwift.fieldValues(text, after: "recoverable: ").last.map { $0 == "true" }
        return (code, status, recoverable)
    }

    /// The members of an error object ``makeError(_:_:terminal:)`` reads, indexed once (two lists: a
    /// list holds at most 16 names). Each field's spellings in the order they are preferred; a
    /// field split across the lists (`recoverable`) takes the first list's first.
    private static let errorNames = MemberNames(
        "code", "errorId", "error_id", "errorCode", "error_code", "group", "__typename", "message", "description",
        "content", "reason", "errorDescription", "errorMessage", "error_message", "domain", "recoverable")
    private static let errorMoreNames = MemberNames(
        "statusCode", "http_status", "httpStatus", "status_code", "status", "isRecoverable", "continue_url",
        "continueUrl", "httpStatusCode", "localizedDescription", "name")

    /// Builds a normalised error from any SDK's error object.
    func makeError(_ doc: JSONDocument, _ e: Int, terminal: Bool) -> DecodedError {
        // Swift's synthesised `Codable` for an error enum with associated values: one member naming
        // the case, its values inside (`{"checkoutExpired":{"message":…,"recoverable":false}}`).
        if let (key, inner) = RawEventDecoder.codableEnumCase(doc, e) {
            var error = makeError(doc, inner, terminal: terminal)
            if error.rawCode == nil || error.code == .unknown, let name = doc.string(key) {
                let code = ErrorCodeNormalizer.normalize(rawCode: name, httpStatus: error.httpStatus)
                if error.rawCode == nil || code != .unknown { (error.code, error.rawCode) = (code, name) }
            }
            return error
        }
        // Every field read below, found in two passes over the members (``errorNames``,
        // ``errorMoreNames``) rather than one per field; of each field, the first spelling present.
        let m = doc.members(e, RawEventDecoder.errorNames)
        let more = doc.members(e, RawEventDecoder.errorMoreNames)
        // The first of the code fields with a value: `"code": null` beside an `errorId` (a bridge
        // that copies every field it knows) does not hide it.
        var rawCode: String?
        for i in 0..<5 where rawCode == nil {
            if let v = m.at(i) { rawCode = doc.identifier(v) }
        }
        var group: String?
        if let v = m.at(5) ?? m.at(6) { group = doc.string(v) }
        // A React Native kit error instance's class (`ConfigurationError`), where a bridge's body has
        // its `__typename`.
        if group == nil, let v = more.at(10), let n = doc.string(v), RawEventDecoder.kitErrorClasses.contains(n) {
            group = n
        }
        var message: String?
        if let v = m.at(7) ?? m.at(8) ?? m.at(9) ?? m.at(10) ?? m.at(11) {
            message = doc.string(v)
        } else if let v = m.at(12) ?? m.at(13) {
            // Wrappers that flatten the error beside the event (Banxa's Flutter bridge of Primer).
            message = doc.string(v)
        } else if let text = errorString(doc, e) {
            message = text
        } else if let v = more.at(9) {
            // An `NSError` relayed as its `localizedDescription` alone.
            message = doc.string(v)
        }
        var status: Int?
        // `httpStatusCode`: the kits' own property (CheckoutError.swift, CheckoutException.kt), as an
        // app that encodes the error object itself sends it; their bridges write `statusCode`.
        // Android's WebView reports a load that reached no server with its own codes
        // (`WebViewClient.ERROR_HOST_LOOKUP` -2, `ERROR_TIMEOUT` -8, …, -1 to -16), which Checkout
        // Sheet Kit passes on as an `HttpException`'s status (`BaseWebView.onReceivedError`): no
        // HTTP status, a network failure.
        var webViewFailure = false
        if let v = more.at(0) ?? more.at(8) ?? more.at(1) ?? more.at(2) ?? more.at(3) ?? more.at(4) {
            let n = doc.int64(v)
            status = n.flatMap { (100...599).contains($0) ? Int($0) : nil }
            webViewFailure = n.map { (-16 ... -2).contains($0) } ?? false
        }
        var isTerminal = terminal
        if let v = m.at(15) ?? more.at(5), doc.bool(v) == true { isTerminal = false }
        // A code that is itself an enum case encoded by `Codable` (`"code":{"cartExpired":{}}`).
        if rawCode == nil, let v = m.at(0), let (key, values) = RawEventDecoder.codableEnumCase(doc, v) {
            rawCode = doc.string(key)
            // Its values may name the cause: Checkout Sheet Kit iOS's `CheckoutUnavailable`
            // (`{"clientError":{"code":"storefront_password_required"}}`, `{"httpError":{"statusCode":404}}`).
            if let c = doc.member(values, "code"), let inner = doc.identifier(c),
                ErrorCodeNormalizer.normalize(rawCode: inner) != .unknown
            {
                rawCode = inner
            }
            if status == nil, let sc = doc.member(values, "statusCode").flatMap({ doc.int64($0) }),
                (100...599).contains(sc)
            {
                status = Int(sc)
            }
        }
        var code = ErrorCodeNormalizer.normalize(rawCode: rawCode ?? group, group: group, httpStatus: status)
        if webViewFailure && code == .httpError { code = .networkError }
        // An `NSError` from Foundation's URL loading (`NSURLErrorDomain`, `-1009` offline, `-1001`
        // timed out): every code of that domain is the network's. Primer React Native's iOS bridge
        // sends a foreign error's domain as its `errorId` (`Error+Extensions.swift`).
        if code == .unknown,
            m.at(14).map({ doc.stringEquals($0, "NSURLErrorDomain") }) ?? (rawCode == "NSURLErrorDomain")
        {
            code = .networkError
        }
        // Primer's iOS SDK before 2.17 kept `PrimerError` internal: React Native's bridge sent such
        // an error's `NSError` domain as its `errorId` (`PrimerSDK.PrimerError`), and the id only
        // in its description, `[<errorId>] <text> (diagnosticsId: …)`. For such a domain, an id in
        // brackets at the start of the message that names a cause is read, and kept as the raw code —
        // also with no code at all (an `NSError` relayed as its `localizedDescription` alone).
        if code == .unknown, rawCode?.hasPrefix("PrimerSDK.") == true
            || (rawCode == nil && message?.contains("(diagnosticsId:") == true), let message,
            let id = RawEventDecoder.bracketedID(message)
        {
            let named = ErrorCodeNormalizer.normalize(rawCode: id, httpStatus: status)
            if named != .unknown { (code, rawCode) = (named, id) }
        }
        // A message that names its cause, when the code says nothing (none, or `unknown`, as the
        // Android kit's default is): `HTTP 404 Error`, the SDKs' own sentences. A status read from
        // the message fills `http_status`, never `raw_code` (the SDK sent no code).
        let statusField = status
        if code == .unknown, rawCode.map({ ErrorCodeNormalizer.fold($0) == "unknown" }) ?? true, group == nil,
            let message, let named = ErrorCodeNormalizer.fromMessage(message)
        {
            code = named.code
            if status == nil { status = named.httpStatus }
        }
        let continueURL = (more.at(6) ?? more.at(7)).flatMap { doc.string($0) }
        return DecodedError(code: code, rawCode: rawCode ?? group ?? statusField.map { String($0) },
                            message: message, httpStatus: status, terminal: isTerminal, continueURL: continueURL)
    }

    /// The id between brackets at the start of `message` (`[payment-cancelled] Payment method …`):
    /// 1 to 64 bytes, no space; nil for anything else.
    static func bracketedID(_ message: String) -> String? {
        let u = message.utf8
        guard u.first == UInt8(ascii: "["), let close = u.prefix(66).firstIndex(of: UInt8(ascii: "]")) else {
            return nil
        }
        let id = u[u.index(after: u.startIndex)..<close]
        guard !id.isEmpty, !id.contains(where: { $0 <= 0x20 }) else { return nil }
        return String(decoding: id, as: UTF8.self)
    }

    /// The case name and values of an enum case encoded by Swift's synthesised `Codable`: an
    /// object whose only member holds an object, under a name that is not one of an error's own
    /// fields. Nil for anything else.
    static func codableEnumCase(_ doc: JSONDocument, _ o: Int) -> (key: Int, value: Int)? {
        guard doc.kind(o) == .object, doc.count(o) == 1 else { return nil }
        var found: (key: Int, value: Int)?
        doc.forEachMember(o) { k, v in
            guard doc.kind(v) == .object, let name = doc.string(k) else { return }
            switch ErrorCodeNormalizer.fold(name) {
            case "error", "primererror", "data", "details", "userinfo", "cause", "underlyingerror", "code", "errorcode",
                 "errorid", "message", "status", "statuscode", "httpstatus", "response":
                return
            default: found = (k, v)
            }
        }
        return found
    }
}
