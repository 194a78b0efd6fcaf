#if canImport(Glibc)
import Glibc
import CheckoutBusProtocol
import CheckoutBusJSON
#elseif canImport(Darwin)
import Darwin
#endif

/// Recognises which raw family a message belongs to and decodes it into a ``DecodedEvent``.
///
/// Families are auto-detected (DESIGN §3, `docs/raw-shapes.md`): the ingest wrapper
/// `{"checkout_id":…,"payload":<raw>}` around any of them, Embedded Checkout Protocol notifications,
/// the older Checkout Sheet Kit bridge, SDK callback events in every platform's spelling, and Primer
/// Checkout states and callbacks.
///
/// Not `Sendable`: owns the reusable documents for JSON nested in strings; one per pipeline thread.
package final class RawEventDecoder {
    /// Documents for JSON that arrived inside strings (a wrapper's `payload`, a bridge's `body`, a
    /// `data` or `checkout` a bridge serialised): handed out in turn for each message, kept for reuse.
    private var embeddedDocuments: [JSONDocument] = []
    private var embeddedUsed = 0
    /// The message's ingest wrapper names the checkout, which overrides any id inside the raw
    /// event: the family decoders then skip reading (and allocating) ids nobody will use.
    private(set) var wrapperNamesCheckout = false
    /// The wrapper's checkout id is the Universal Checkout session the payload names in its
    /// `context` (``universalSession(_:_:wrapper:)``), not a checkout: the payload's own checkout
    /// id, when it has one, is the checkout's.
    private var wrapperNamesSession = false

    /// The event id the message's ingest wrapper gave (nil without one), kept for a message the
    /// decoder then rejects: the producer's reply still names its event.
    package var wrapperEventID: String? { wrapperEventIdentifier.value }
    /// ``wrapperEventID`` as read (in place: into the message's document, valid until the next decode).
    private var wrapperEventIdentifier = IdentifierText()

    package init() {
        let bytes = RawEventDecoder.recentNameSlots * RawEventDecoder.recentNameStride
        recentNameBytes = .allocate(capacity: bytes)
        recentNameBytes.initialize(repeating: 0, count: bytes)
        recentNameValues = Array(repeating: RecentName(name: "", info: NameInfo("", name: "")),
                                 count: RawEventDecoder.recentNameSlots)
    }

    deinit { recentNameBytes.deallocate() }

    /// Decodes the message parsed into `doc`.
    /// - Throws: ``DecodeRejection`` with the dead-letter reason.
    package func decode(_ doc: JSONDocument) throws(DecodeRejection) -> DecodedEvent {
        // Reset before anything can throw: a message rejected before its wrapper is read must not
        // carry the last message's event id (its dead letter would be taken for that one's retry).
        embeddedUsed = 0
        wrapperNamesSession = false
        wrapperEventIdentifier = IdentifierText()
        var root = doc.root
        if doc.kind(root) == .array {
            let notAnObject = DecodeRejection(.unknownShape, "top-level value is not an object")
            root = try RawEventDecoder.onlyEvent(doc, root, "the message", otherwise: notAnObject)
        }
        guard doc.kind(root) == .object else {
            throw DecodeRejection(.unknownShape, "top-level value is not an object")
        }
        var wrapper = Wrapper()
        // The raw event: its document and token. The document is `doc` or one of
        // ``embeddedDocuments``, which outlive the decode: used without a retain and release each time.
        var rawDoc = Unmanaged.passUnretained(doc)
        var rawToken = root
        // A relay may wrap a wrapper: the outer one's fields win, the inner one's fill the gaps.
        // (An inner wrapper is looked for only when the payload has a `payload` of its own: the
        // usual payload, a raw event, costs one member lookup rather than a wrapper's scan.)
        var depth = 0
        while depth < 3, depth == 0 || rawDoc._withUnsafeGuaranteedRef({ $0.member(rawToken, "payload") }) != nil,
            let payload = rawDoc._withUnsafeGuaranteedRef({ readWrapper($0, rawToken, into: &wrapper) })
        {
            depth += 1
            wrapperEventIdentifier = wrapper.eventID
            let payloadKind = rawDoc._withUnsafeGuaranteedRef { $0.kind(payload) }
            if payloadKind == .null {
                // `"payload": null` is no payload (a dismiss needs none): the wrapper's own name
                // and fields are the event.
                break
            }
            switch payloadKind {
            case .object: rawToken = payload
            case .array:
                // A JSON-RPC batch as the web content posts it: one member is that event.
                rawToken = try RawEventDecoder.onlyEvent(
                    rawDoc.takeUnretainedValue(), payload, "`payload`",
                    otherwise: DecodeRejection(.wrongType, "`payload` must be an object, a JSON string or a batch of "
                                               + "one"))
            case .string:
                let pd = rawDoc.takeUnretainedValue()
                let inner: JSONRef?
                do { inner = try embedded(pd, payload, always: true) } catch {
                    throw DecodeRejection(.invalidEmbeddedJSON, "payload string is not JSON: \(error.reason.name)")
                }
                guard let inner else { throw DecodeRejection(.unknownShape, "payload is not an object") }
                var token = inner.token
                if inner.doc.kind(token) == .array {
                    let notAnObject = DecodeRejection(.unknownShape, "payload is not an object")
                    token = try RawEventDecoder.onlyEvent(inner.doc, token, "`payload`", otherwise: notAnObject)
                }
                guard inner.doc.kind(token) == .object else {
                    throw DecodeRejection(.unknownShape, "payload is not an object")
                }
                (rawDoc, rawToken) = (Unmanaged.passUnretained(inner.doc), token)
            default:
                throw DecodeRejection(.wrongType, "`payload` must be an object, a JSON string or a batch of one")
            }
        }
        wrapperNamesCheckout = wrapper.checkoutID.isPresent
        // An event with no wrapper around it says its platform itself, as a wrapper would: the
        // producer's word, over what an event name's spelling suggests.
        if depth == 0, let v = doc.member(root, "platform"),
            let platform = RawEventDecoder.usualPlatform(doc, v)
                ?? doc.string(v).map(RawEventDecoder.platformSpelling).flatMap({
                    RawEventDecoder.knownPlatforms.contains($0) ? $0 : nil
                })
        {
            wrapper.platform = platform
        }
        // And its SDK (`{"checkout_id","sdk":"primer","event":"onCheckoutCompleted","data":…}`): a
        // Primer callback sharing a Shopify kit's name is Primer's, its order id read from its data.
        if depth == 0, let v = doc.member(root, "sdk") { wrapper.sdk = RawEventDecoder.sdkFamily(doc, v) }
        // Decoded on the guaranteed reference (no retain and release of the document); the
        // closure can neither return the event (not copyable) nor throw it typed, so both land here.
        var decoded: DecodedEvent?
        var rejection: DecodeRejection?
        rawDoc._withUnsafeGuaranteedRef { d in
            do throws(DecodeRejection) { decoded = try decodeRaw(d, rawToken, wrapper: wrapper) } catch { rejection = error }
        }
        if let rejection { throw rejection }
        var event = decoded.take()!
        // The wrapper's fields win; moved into the event (swapped: no retain now, no release of the
        // wrapper's copy later).
        if wrapper.checkoutID.isPresent && !(wrapperNamesSession && event.hasCheckoutID) {
            swap(&event.checkoutIdentifier, &wrapper.checkoutID)
        }
        if wrapper.eventID.isPresent { swap(&event.eventIdentifier, &wrapper.eventID) }
        if let at = wrapper.occurredAt { event.occurredAt = at }
        if wrapper.platform != nil { swap(&event.platform, &wrapper.platform) }
        if wrapper.sdk != nil { swap(&event.sdk, &wrapper.sdk!) }
        // Checked as given (a checkout id made of an order id below is 6 bytes longer).
        let longest = max(event.checkoutIdentifier.utf8Count, event.orderIdentifier.utf8Count,
                          event.eventIdentifier.utf8Count)
        if longest > DeadLetterReason.maxIDBytes {
            let which = event.orderIdentifier.utf8Count == longest ? "an order id"
                : event.eventIdentifier.utf8Count == longest ? "an event id" : "a checkout id"
            throw DecodeRejection(.idTooLong, "\(which) of \(longest) bytes: ids are at most "
                                  + "\(DeadLetterReason.maxIDBytes) bytes")
        }
        if !event.hasCheckoutID {
            event.checkoutID = event.orderID.map { "order:" + $0 }
        }
        guard event.hasCheckoutID else {
            throw DecodeRejection(.missingCheckoutID, "no checkout id in the snapshot, the event or the wrapper")
        }
        return event
    }

    /// Notes whether object `o` (an ECP notification's `params`, a web component's `detail` entry)
    /// names the wrapper's checkout id as its Universal Checkout session (`context.session_id`, or
    /// `context.sessionId` in the web component's events): a producer that wraps a session's
    /// notifications in its session id. A session spans one checkout per shop, each with its own
    /// order, so the checkout is then the payload's own (`checkout.id`): under the session id, a
    /// second shop's `complete` would be taken for a repeat of the first's, and its order lost.
    func universalSession(_ doc: JSONDocument, _ o: Int, wrapper: Wrapper) {
        guard wrapperNamesCheckout, let context = doc.object(o, "context"),
            let session = doc.member(context, anyOf: "session_id", "sessionId"),
            let text = doc.string(session), text == wrapper.checkoutID.value
        else { return }
        wrapperNamesSession = true
        // The payload's own checkout id is read after all (see ``wrapperNamesCheckout``).
        wrapperNamesCheckout = false
    }

    /// The one event of array `t` (`what` names it in a rejection): its only element when that is
    /// an object. A JSON-RPC batch (Checkout Kit web's Universal Checkout posts its notifications
    /// as one) or a web component's `detail` list of several entries is several events in one
    /// message: dead-lettered `batch`, for the producer to send each as a message of its own. An
    /// array that is empty, or not of objects, holds no event: `otherwise`.
    static func onlyEvent(_ doc: JSONDocument, _ t: Int, _ what: String,
                          otherwise: DecodeRejection) throws(DecodeRejection) -> Int {
        guard let first = doc.firstElement(t), doc.kind(first) == .object else { throw otherwise }
        let n = doc.count(t)
        guard n == 1 else {
            throw DecodeRejection(.batch, "\(what) holds \(n) events (a batch): one message is one event, so send "
                                  + "each as a message of its own")
        }
        return first
    }

    // MARK: Wrapper

    struct Wrapper {
        /// The checkout id and the event id, as read (in place where they can be).
        var checkoutID = IdentifierText()
        var eventID = IdentifierText()
        var occurredAt: JSONRef?
        var platform: String?
        /// The SDK family: `shopify`, `primer`, or another name, lower-cased, that starts with
        /// neither (``readWrapper(_:_:into:)`` maps every `shopify…` and `primer…` to the family).
        var sdk: String?
        /// The event name written on the wrapper itself, for a payload that names none.
        var name: JSONRef?

        /// The wrapper names Primer: `sdk` is `primer` (a comparison of two small strings).
        var saysPrimer: Bool { sdk == "primer" }
    }

    /// The members ``readWrapper(_:_:into:)`` reads, indexed once.
    private static let wrapperNames = MemberNames(
        "payload", "jsonrpc", "method", "name", "event", "state", "checkout_id", "checkoutId", "sdk", "platform",
        "event_id", "eventId", "occurred_at", "occurredAt", "type", "callback")

    /// Whether `root` is an ingest wrapper around the raw event: its payload, with its fields read
    /// into `w` where `w` has none yet (an outer wrapper's win) — every member the decision and the
    /// fields need found in one pass.
    ///
    /// `payload` makes a wrapper unless the object is itself a raw event with a payload field (it
    /// names an event and none of the wrapper's own fields). Without `payload`, an object with
    /// wrapper fields and no event name of its own wraps its `data` or `body`.
    private func readWrapper(_ doc: JSONDocument, _ root: Int, into w: inout Wrapper) -> Int? {
        let m = doc.members(root, RawEventDecoder.wrapperNames)
        // `type` and `callback` often tag a relay's message rather than name the event: they
        // do not stop `payload` from making a wrapper (whose name a nameless payload takes).
        let named = (m.at(1) ?? m.at(2) ?? m.at(3) ?? m.at(4) ?? m.at(5)) != nil
        let ownFields = (m.at(6) ?? m.at(8) ?? m.at(9) ?? m.at(10)) != nil
        guard ownFields || !named else { return nil }
        let anyName = named || (m.at(14) ?? m.at(15)) != nil
        guard let payload = m.at(0) ?? (ownFields && !anyName ? RawEventDecoder.heldEvent(doc, root) : nil)
        else { return nil }
        if !w.checkoutID.isPresent, let v = m.at(6) ?? m.at(7) { w.checkoutID = RawEventDecoder.identifierText(doc, v) }
        if !w.eventID.isPresent, let v = m.at(10) ?? m.at(11) { w.eventID = RawEventDecoder.identifierText(doc, v) }
        if w.occurredAt == nil, let v = m.at(12) ?? m.at(13), doc.kind(v) == .string || doc.kind(v) == .number {
            w.occurredAt = JSONRef(doc, v)
        }
        if w.platform == nil, let v = m.at(9) {
            w.platform = RawEventDecoder.usualPlatform(doc, v)
                ?? doc.string(v).map(RawEventDecoder.platformSpelling)
        }
        if w.sdk == nil, let v = m.at(8) { w.sdk = RawEventDecoder.sdkFamily(doc, v) }
        if w.name == nil, anyName {
            for i in [4, 14, 5, 3, 15, 2] {
                if let v = m.at(i), doc.kind(v) == .string {
                    w.name = JSONRef(doc, v)
                    break
                }
            }
        }
        return payload
    }

    /// Checkout Sheet Kit React Native's error classes (`CheckoutNativeErrorType` and `GenericError`
    /// in `modules/@shopify/checkout-sheet-kit/src/errors.d.ts`), as their instances' `name` says.
    static let kitErrorClasses: Set<String> = [
        "CheckoutExpiredError", "CheckoutHTTPError", "ConfigurationError", "CheckoutClientError", "GenericError",
        "InternalError", "UnknownError",
    ]

    /// The event a wrapper without `payload` holds: its `data` or `body` — unless it is itself the
    /// event, its data beside it: Primer React Native v3's `PaymentOutcome` spread among the
    /// wrapper's fields (`{"checkout_id","sdk":"primer","status":"error","error":{"errorId",…},
    /// "data":{"payment":{"id","orderId"}}}`, `PrimerCheckoutProvider.tsx`), whose data names the
    /// order of a payment that failed. Then `root`: the wrapper's fields are read, and it is decoded.
    static func heldEvent(_ doc: JSONDocument, _ root: Int) -> Int? {
        guard let held = doc.member(root, anyOf: "data", "body") else { return nil }
        if let e = doc.object(root, "error"), doc.member(e, anyOf: "errorId", "diagnosticsId", "error_id") != nil {
            return root
        }
        return held
    }

    /// A wrapper's `sdk` (string `v`) as envelopes name its family: every `shopify…` is `shopify`
    /// (`shopify-checkout-kit`), every `primer…` `primer` (`Primer iOS`), any other name lower-cased.
    static func sdkFamily(_ doc: JSONDocument, _ v: Int) -> String? {
        if let usual = usualSDK(doc, v) { return usual }
        guard let sdk = doc.string(v) else { return nil }
        // Usually lower-case already: only a name with an upper-case or non-ASCII byte is folded.
        let lower = sdk.utf8.contains { ($0 >= 0x41 && $0 <= 0x5A) || $0 >= 0x80 } ? sdk.lowercased() : sdk
        return lower.hasPrefix("shopify") ? "shopify" : lower.hasPrefix("primer") ? "primer" : lower
    }

    /// The object or array JSON-encoded in string `t` — twice at most, as bridges that serialise an
    /// already serialised value send it — parsed into a spare document. Nil when `t` is not a string,
    /// or (unless `always`) when its text does not start like an object, an array or a string.
    /// - Throws: the parse error of a string that does not hold JSON.
    func embedded(_ doc: JSONDocument, _ t: Int, always: Bool = false) throws(JSONParseError) -> JSONRef? {
        guard doc.kind(t) == .string else { return nil }
        var bytes = doc.unescapedBytes(t)
        for _ in 0..<2 {
            if !always {
                guard let first = bytes.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }),
                    first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || first == UInt8(ascii: "\"")
                else { return nil }
            }
            if embeddedUsed == embeddedDocuments.count { embeddedDocuments.append(JSONDocument()) }
            let d = embeddedDocuments[embeddedUsed]
            embeddedUsed += 1
            try d.parseOwned(bytes)
            guard d.kind(d.root) == .string, looksEmbedded(d, d.root) else { return JSONRef(d, d.root) }
            bytes = d.unescapedBytes(d.root)
        }
        return nil
    }

    /// ``objectValue(_:_:)``, except that a string that starts like JSON and is not JSON is a dead
    /// letter (`invalid_embedded_json`) rather than a snapshot dropped without a word.
    func checkedObject(_ doc: JSONDocument, _ t: Int?, _ field: StaticString) throws(DecodeRejection) -> JSONRef? {
        guard let t, doc.kind(t) == .string, looksEmbedded(doc, t) else { return objectValue(doc, t) }
        do {
            guard let e = try embedded(doc, t), e.doc.kind(e.token) == .object else { return nil }
            return e
        } catch {
            throw DecodeRejection(.invalidEmbeddedJSON, "`\(field)` string is not JSON: \(error.reason.name)")
        }
    }

    /// Whether `t` is a string whose text starts like JSON (`{`, `[`, or an escaped quote), read on
    /// its raw bytes: an event name is not unescaped just to find it is not JSON.
    private func looksEmbedded(_ doc: JSONDocument, _ t: Int) -> Bool {
        guard doc.kind(t) == .string else { return false }
        for b in doc.raw(t).dropFirst() {
            switch b {
            case 0x20, 0x09, 0x0A, 0x0D: continue
            case UInt8(ascii: "{"), UInt8(ascii: "["), UInt8(ascii: "\\"): return true
            default: return false
            }
        }
        return false
    }

    /// The object at `t`, or the object JSON-encoded in the string at `t`; nil for anything else
    /// (a string that is not JSON included).
    func objectValue(_ doc: JSONDocument, _ t: Int?) -> JSONRef? {
        guard let t else { return nil }
        switch doc.kind(t) {
        case .object: return JSONRef(doc, t)
        case .string:
            guard let e = try? embedded(doc, t), e.doc.kind(e.token) == .object else { return nil }
            return e
        default: return nil
        }
    }

    // MARK: Family detection

    /// A raw event's possible name fields and holders, read in one pass by ``decodeRaw(_:_:wrapper:)``.
    private static let rawEventNames = MemberNames(
        "event", "type", "state", "name", "callback", "method", "body", "data", "detail", "payload", "arguments",
        "args", "params", "nativeEvent", "requestId", "reason")

    func decodeRaw(_ doc: JSONDocument, _ r: Int, wrapper: Wrapper) throws(DecodeRejection) -> DecodedEvent {
        // The React Native kit's protocol relay, `{"type":"ec.complete","payload":<checkout>}`: the
        // wrapper loop took it for a wrapper named by its `type` around the payload, `r`.
        if let w = wrapper.name, RawEventDecoder.hasPrefix(w.doc, w.token, "ec."),
            RawEventDecoder.isRelayPayload(doc, r), let method = w.doc.string(w.token)
        {
            return try decodeECPRelay(doc, r, method: method)
        }
        if let m = doc.member(r, "method"),
            doc.member(r, "jsonrpc") != nil || RawEventDecoder.hasPrefix(doc, m, "ec.") || RawEventDecoder.hasPrefix(doc, m, "checkout.")
        {
            return try decodeECP(doc, r, method: m, wrapper: wrapper)
        }
        // (Primer React Native v3's `paymentOutcome` in the bridge's `{name, body}` is read below.)
        if let name = doc.member(r, "name"), doc.kind(name) == .string, let body = doc.member(r, "body"),
            !doc.stringEquals(name, "paymentOutcome"), let event = try decodeSheetBridge(doc, r, name: name, body: body)
        {
            return event
        }
        // Checkout Sheet Kit 0.x–2.x's bridge sent its error as `{"name":"error"}` alone, and the
        // kit read any such error as an expired checkout.
        if let name = doc.member(r, "name"), doc.count(r) == 1, doc.stringEquals(name, "error") {
            var event = DecodedEvent(kind: .fail, format: .sheetBridge, sdk: "shopify")
            event.error = DecodedError(code: .cartExpired, rawCode: nil, message: nil, httpStatus: nil, terminal: true)
            return event
        }
        // A callback's name and the member a bridge may have put its fields in, found in one pass.
        let m = doc.members(r, RawEventDecoder.rawEventNames)
        if wrapper.name == nil, !wrapper.saysPrimer,
            let rejection = RawEventDecoder.stateOfNoCheckout(doc, r, type: m.at(1), state: m.at(2), name: m.at(3),
                                                              requestID: m.at(14), reason: m.at(15))
        {
            throw rejection
        }
        // The strings among these, in this order, may name the event (an `event` object
        // beside a `type` name is the event's data); -1 pads.
        var nameTokens = (-1, -1, -1, -1, -1, -1)
        var k = 0
        withUnsafeMutableBytes(of: &nameTokens) { raw in
            let slots = raw.bindMemory(to: Int.self)
            for i in 0..<6 {
                if let v = m.at(i), doc.kind(v) == .string, !looksEmbedded(doc, v) {
                    slots[k] = v
                    k += 1
                }
            }
        }
        func holder(_ i: Int) -> Int? {
            guard let v = m.at(i), doc.kind(v) == .object || looksEmbedded(doc, v) else { return nil }
            return v
        }
        // A web component's `detail` may list its entries (Checkout Kit web's Universal Checkout:
        // `[{context, checkout}]`, `[{context?, scope, error}]`): one entry is the holder. Only
        // where no `data` object holds the event, and only a list of such entries.
        var detailEntry: Int?
        let data = holder(7)
        if data == nil, let d = m.at(8), doc.kind(d) == .array, let first = doc.firstElement(d),
            doc.kind(first) == .object, doc.member(first, anyOf: "context", "checkout", "error", "scope") != nil
        {
            let entry = try RawEventDecoder.onlyEvent(doc, d, "`detail`",
                                                      otherwise: DecodeRejection(.wrongType, "`detail` holds no event"))
            universalSession(doc, entry, wrapper: wrapper)
            detailEntry = entry
        }
        let holderToken = data ?? detailEntry ?? holder(8) ?? holder(13) ?? holder(0) ?? holder(9) ?? holder(6)
            ?? holder(10) ?? holder(11) ?? holder(12)
        // Else the wrapper's own name.
        let nameToken = nameTokens.0 >= 0 ? nameTokens.0 : nil
        let nameRef = nameToken.flatMap { doc.kind($0) == .string ? JSONRef(doc, $0) : nil } ?? wrapper.name
        // A name seen lately (a stream repeats a handful): its string and what the tables say of
        // it, without building, folding and looking it up again — the payload's name or the
        // wrapper's.
        if let ref = nameRef, let seen = recentName(ref.doc, ref.token) {
            return try decodeNamed(doc, r, holder: holderToken, wrapper: wrapper, name: seen.name, info: seen.info)
        }
        guard var name = nameRef.flatMap({ $0.doc.string($0.token) }) else {
            if let event = try decodeUnnamed(doc, r, wrapper: wrapper) { return event }
            if let op = doc.member(r, "op").flatMap({ doc.string($0) }), ControlRequestWire.ops.contains(op) {
                // A tool or subscriber given an ingest endpoint for the daemon's control endpoint.
                throw DecodeRejection(.unknownShape, "a control request (`op`: \(op)) sent to an ingest socket: "
                                      + "control requests go to the daemon's --control endpoint")
            }
            throw DecodeRejection(.unknownShape, "no event name (`method`, `name`, `event`, `type` or `state`)")
        }
        // The text a name was cut from when it is a Swift value printed whole (`success(…)`).
        var printed = name
        var folded = ErrorCodeNormalizer.fold(name)
        var info = NameInfo(folded, name: name)
        if info.isKnown, let ref = nameRef { rememberName(ref.doc, ref.token, name, info) }
        // A name no table knows gives way to one that is known: a Swift case printed with its
        // values (`success(PrimerSDK.PaymentResult(…))`), another name field (an `onCompletion`
        // callback with its `state`), or the wrapper's (a payload's `type` may be its error's kind).
        if !info.isKnown {
            var others: [String] = []
            if let paren = name.firstIndex(of: "(") { others.append(String(name[..<paren])) }
            // A class or event name under a qualifier: kotlinx's polymorphic `type`
            // (`com.shopify.checkoutkit.lifecycle.CheckoutStartEvent`), a nested class
            // (`CheckoutEvent$Started`), a web event (`shopify:checkout:dismiss`).
            if let cut = name.lastIndex(where: { $0 == "." || $0 == "$" || $0 == ":" || $0 == "/" }),
                name.index(after: cut) < name.endIndex
            {
                others.append(String(name[name.index(after: cut)...]))
            }
            // Texts a name was cut from (`success` from `success(PrimerSDK.PaymentResult(…))`), by
            // index in `others`.
            var cutFrom: [Int: String] = [:]
            withUnsafeBytes(of: nameTokens) { raw in
                for v in raw.bindMemory(to: Int.self).dropFirst() where v >= 0 {
                    guard let text = doc.string(v) else { continue }
                    others.append(text)
                    // Only a Primer state is read so (`success(…)`): any other text cut at a
                    // parenthesis (`error("boom")` in a log line) names nothing.
                    if let paren = text.firstIndex(of: "("),
                        NameInfo(ErrorCodeNormalizer.fold(String(text[..<paren])), name: "").primer != nil
                    {
                        cutFrom[others.count] = text
                        others.append(String(text[..<paren]))
                    }
                }
            }
            // The holder's own state (`{"event":"onCompletion","data":{"state":"failure",…}}`).
            if let h = objectValue(doc, holderToken), let v = h.doc.member(h.token, anyOf: "state", "event", "type"),
                let text = h.doc.string(v)
            {
                others.append(text)
            }
            if nameToken != nil, let w = wrapper.name, let text = w.doc.string(w.token) { others.append(text) }
            for (index, other) in others.enumerated() {
                let f = ErrorCodeNormalizer.fold(other)
                let i = NameInfo(f, name: other)
                if i.isKnown {
                    (name, folded, info) = (other, f, i)
                    if let text = cutFrom[index] { printed = text }
                    break
                }
            }
        }
        // Checkout Sheet Kit React Native's errors as its `error` listener hands them to JavaScript:
        // class instances whose `name` is their class (`errors.d.ts`: `this.name =
        // this.constructor.name`), serialised — `{"code","message","recoverable","name":"CheckoutExpiredError"}`.
        if !info.isKnown, RawEventDecoder.kitErrorClasses.contains(name), doc.member(r, anyOf: "code", "message") != nil {
            return try decodeCallback(doc, r, holder: nil, kind: .fail, platform: RawEventDecoder.platform(forCallback: "error"))
        }
        // Primer React Native v3's `paymentOutcome` (its provider's state, a `PaymentOutcome`): what
        // it holds says which outcome — beside the name, or in its holder (`{"name":"paymentOutcome",
        // "body":<outcome>}`, `{"event":"paymentOutcome","data":<outcome>}`).
        if !info.isKnown, folded == ErrorCodeNormalizer.fold("paymentOutcome") {
            // The name is Primer's own: its checkout data is read as a wrapper saying `primer` would.
            var primer = wrapper
            if primer.sdk == nil { primer.sdk = "primer" }
            if let event = try decodeUnnamed(doc, r, wrapper: primer) { return event }
            if let h = objectValue(doc, holderToken), let event = try decodeUnnamed(h.doc, h.token, wrapper: primer) {
                return event
            }
        }
        var event = try decodeNamed(doc, r, holder: holderToken, wrapper: wrapper, name: name, info: info)
        // Primer iOS's state printed with its values (`success(PrimerSDK.PaymentResult(paymentId: …,
        // status: PrimerSDK.PaymentStatus.failed, …))`): iOS reports success when the checkout
        // completed whatever the payment's status (as decodePrimer reads from a structured result).
        if event.kind == .complete, event.format == .primer, name != printed,
            let status = RawEventDecoder.printedPaymentStatus(printed)
        {
            event.kind = .fail
            event.error = DecodedError(
                code: status.hasPrefix("cancel") ? .paymentCancelled : .paymentFailed, rawCode: status,
                message: "payment \(status) in the checkout's success state", httpStatus: nil, terminal: false)
        }
        // Its failure state printed with its error (`failure(PrimerSDK.PrimerError.cancelled(
        // paymentMethodType: "APPLE_PAY", …))`, PrimerCheckoutState in CheckoutComponents'
        // PrimerCheckoutScope.swift): the printed error inside is read as an `error` string is, and
        // the order id it names (`orderId: Optional("ord_2")`) kept.
        if event.kind == .fail, event.format == .primer, name != printed, (event.error?.code ?? .unknown) == .unknown,
            let open = printed.firstIndex(of: "("), let inner = RawEventDecoder.firstPrintedValue(printed[open...])
        {
            let error = makeError(text: inner, terminal: event.error?.terminal ?? true)
            if error.code != .unknown { event.error = error }
            if event.orderID == nil, let order = RawEventDecoder.printedPaymentFailedOrderID(inner) {
                event.orderID = order
            }
        }
        return event
    }

    /// The first value in a printed Swift argument list (`(PrimerSDK.PrimerError.cancelled(…), checkoutData: nil)`,
    /// from its opening parenthesis); nil when the list does not close (or is over 4 KiB).
    static func firstPrintedValue(_ text: Substring) -> String? {
        let u = Array(text.utf8)
        guard let first = PrintedSwift.arguments(u, open: 0)?.first else { return nil }
        return String(decoding: u[first], as: UTF8.self)
    }

    /// The order id of a printed `PrimerError.paymentFailed(…, orderId: Optional("ord_2"), …)`: its
    /// own `orderId` argument, at the top of its argument list (never one inside a message or a
    /// nested value); nil for any other case, `nil`, or an id over the limit.
    static func printedPaymentFailedOrderID(_ text: String) -> String? {
        let u = Array(text.utf8)
        let opening = Array("PrimerError.paymentFailed(".utf8)
        let key = "orderId: ".utf8
        guard u.count <= PrintedSwift.maxBytes, u.count >= opening.count,
            let at = (0...(u.count - opening.count)).first(where: { u[$0..<($0 + opening.count)].elementsEqual(opening) }),
            let arguments = PrintedSwift.arguments(u, open: at + opening.count - 1),
            let argument = arguments.first(where: { u[$0].starts(with: key) }),
            let value = PrintedSwift.quotedValue(u[(argument.lowerBound + key.count)..<argument.upperBound]),
            !value.isEmpty, value.count <= DeadLetterReason.maxIDBytes
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// The payment status a printed Swift value names (`… status: PrimerSDK.PaymentStatus.failed, …`),
    /// folded, when it is one that did not go through: `failed`, `declined`, `cancelled`, `canceled`.
    static func printedPaymentStatus(_ text: String) -> String? {
        guard let value = PrintedSwift.fieldValues(text, after: "status: ").first(where: { $0.contains("PaymentStatus.") })
        else { return nil }
        let folded = ErrorCodeNormalizer.fold(value.split(separator: ".").last.map(String.init) ?? "")
        return ["failed", "declined", "cancelled", "canceled"].contains(folded) ? folded : nil
    }

    /// Checkout Kit React Native's states that spell a lifecycle word but are no checkout's lifecycle,
    /// as its module hands them to JavaScript — the preload state (`emitPreloadStateChange` in
    /// Shopify/checkout-kit `checkout-kit-react-native/android/…/ShopifyCheckoutKitModule.kt`:
    /// `{"requestId","type":"idle|loading|ready|expired|failed","reason"?,"statusCode"?}`; a
    /// background preload's failure reaches no buyer, the kits deliver no lifecycle event for it) and
    /// the accelerated checkout buttons' render state (`serialize(renderState:)` in
    /// `checkout-kit-react-native/ios/ShopifyCheckoutKit+EventSerialization.swift`:
    /// `{"state":"loading|rendered|error","reason"?}`, buttons that did or did not render).
    /// - Returns: the `not_lifecycle` rejection, or nil for anything else.
    /// The standard web pixel events' names (Shopify's Web Pixels API, as Checkout Sheet Kit relays
    /// them: PixelEvents.swift, PixelEvent.kt): a bare pixel is told from a lifecycle callback that
    /// also has a `name`, a `data` and a `timestamp` by its name (or, a custom pixel, by `customData`).
    static let pixelNames: Set<String> = [
        "checkout_started", "checkout_completed", "checkout_address_info_submitted",
        "checkout_contact_info_submitted", "checkout_shipping_info_submitted", "payment_info_submitted",
        "page_viewed", "product_viewed", "collection_viewed", "search_submitted", "cart_viewed",
        "product_added_to_cart", "product_removed_from_cart", "alert_displayed", "ui_extension_errored",
    ]

    static func stateOfNoCheckout(_ doc: JSONDocument, _ r: Int, type: Int?, state: Int?, name: Int?, requestID: Int?,
                                  reason: Int?) -> DecodeRejection? {
        // A web pixel event as Checkout Sheet Kit for iOS encodes it (`StandardEvent`, `CustomEvent`
        // in PixelEvents.swift: Codable with `context, data|customData, id, name, timestamp`, no
        // `type`): `name` is the pixel's (`checkout_completed`, `checkout_started`), never a
        // lifecycle event; its `data.checkout.order.id` is no order the buyer was told of.
        if type == nil, let n = name, let text = doc.string(n),
            RawEventDecoder.pixelNames.contains(text) || doc.member(r, "customData") != nil,
            doc.object(r, "context") != nil || doc.member(r, "timestamp") != nil,
            RawEventDecoder.membersAreAmong(doc, r, ["context", "data", "customData", "id", "name", "timestamp"])
        {
            return DecodeRejection(.notLifecycle, "a web pixel event (`\(text)`, checkoutDidEmitWebPixelEvent): "
                                   + "analytics, not a lifecycle event")
        }
        if requestID != nil, let t = type, let text = doc.string(t),
            ["idle", "loading", "ready", "expired", "failed"].contains(text),
            RawEventDecoder.membersAreAmong(doc, r, ["requestId", "type", "reason", "statusCode"])
        {
            return DecodeRejection(.notLifecycle, "a checkout preload's state (`\(text)`, onPreloadStateChange): "
                                   + "no buyer saw a checkout")
        }
        if let s = state, type == nil, doc.count(r) == (reason == nil ? 1 : 2),
            reason.map({ doc.kind($0) == .string }) ?? true, let text = doc.string(s),
            ["loading", "rendered", "error"].contains(text)
        {
            return DecodeRejection(.notLifecycle, "the accelerated checkout buttons' render state (`\(text)`, "
                                   + "onRenderStateChange): no checkout yet")
        }
        return nil
    }

    /// The platforms a flat event's own `platform` may name (as the envelope spells them).
    static let knownPlatforms: Set<String> = ["ios", "android", "react_native", "flutter", "web"]

    /// Whether object `o`'s members are all among `names` (spelled as given).
    static func membersAreAmong(_ doc: JSONDocument, _ o: Int, _ names: [StaticString]) -> Bool {
        var all = true
        doc.forEachMember(o) { k, _ in
            if all && !names.contains(where: { doc.stringEquals(k, $0) }) { all = false }
        }
        return all
    }

    /// Whether `r` is what the React Native protocol relay puts in `payload`: a checkout (an `id`, no
    /// member of a message or an event of its own), the params (`{checkout}`), or an `ErrorResponse`
    /// (`ucp` or `messages`).
    static func isRelayPayload(_ doc: JSONDocument, _ r: Int) -> Bool {
        if doc.member(r, anyOf: "method", "jsonrpc", "result", "payload", "event", "name", "body") != nil {
            return false
        }
        return doc.member(r, "id") != nil || doc.object(r, "checkout") != nil || doc.object(r, "ucp") != nil
            || doc.member(r, "messages") != nil
    }

    struct NameInfo {
        var callback: LifecycleKind?
        var primer: LifecycleKind?
        var nonLifecycle: Bool
        /// The platform the name's spelling gives away, as a callback's and as a Primer event's
        /// (``platform(forCallback:)``, ``platform(forPrimer:)``): remembered with the name, so a
        /// name seen lately is not compared with the prefixes again. Not `String`s: the info is
        /// plain data, copied without reference counting.
        var callbackPlatform: NamePlatform
        var primerPlatform: NamePlatform

        /// What the tables say of `name`, folded as `folded`.
        init(_ folded: String, name: String) {
            callback = RawEventDecoder.callbackNames[folded]
            primer = RawEventDecoder.primerNames[folded]
            nonLifecycle = RawEventDecoder.nonLifecycleNames.contains(folded)
            callbackPlatform = NamePlatform(callback != nil ? RawEventDecoder.platform(forCallback: name) : nil)
            primerPlatform = NamePlatform(primer != nil ? RawEventDecoder.platform(forPrimer: name) : nil)
        }

        var isKnown: Bool { callback != nil || primer != nil || nonLifecycle }
    }

    /// A platform a name's spelling gives away (``platform(forCallback:)``, ``platform(forPrimer:)``).
    enum NamePlatform: UInt8 {
        case none, ios, android, reactNative

        init(_ platform: String?) {
            switch platform {
            case "ios": self = .ios
            case "android": self = .android
            case "react_native": self = .reactNative
            default:
                precondition(platform == nil, "a platform NamePlatform cannot hold")
                self = .none
            }
        }

        /// As the envelope spells it.
        var name: String? {
            switch self {
            case .none: return nil
            case .ios: return "ios"
            case .android: return "android"
            case .reactNative: return "react_native"
            }
        }
    }

    /// Known names lately read from a name token, by their raw bytes (quotes included): a table of
    /// ``recentNameSlots`` slots indexed by a hash of those bytes, each slot's bytes in
    /// ``recentNameBytes`` (a length byte, 0 while empty, then the bytes) and its name and what the
    /// tables say of it in ``recentNameValues``; a name replaces whatever its slot held. Flood's
    /// mix alone names about forty events in turn (a list of sixteen, oldest replaced first, missed
    /// one event in five).
    private let recentNameBytes: UnsafeMutablePointer<UInt8>
    private var recentNameValues: [RecentName]
    /// A remembered name and what the tables say of it (a struct, not a tuple: a tuple's copies
    /// and destroys went through the runtime's generic tuple witnesses, about 90 instructions an
    /// event).
    private struct RecentName {
        var name: String
        var info: NameInfo
    }
    private static let recentNameSlots = 256
    /// The longest name token remembered, quotes included (the longest listed name is 34 bytes).
    private static let recentNameMaxBytes = 66
    private static let recentNameStride = 1 + recentNameMaxBytes

    /// The slot of a name token's raw bytes: the top 8 bits of their hash.
    @inline(__always)
    private static func recentNameSlot(_ raw: UnsafeRawBufferPointer) -> Int {
        Int(truncatingIfNeeded: CanonicalHash.hashBytes(raw.baseAddress!, raw.count, seed: 0x6E61_6D65) &>> 56)
    }

    /// The remembered name whose raw text is string token `t`'s, if any. An escaped token (whose
    /// decoded text is another byte string) is never looked up.
    private func recentName(_ doc: JSONDocument, _ t: Int) -> RecentName? {
        guard doc.kind(t) == .string, !doc.tokens[t].flag else { return nil }
        let raw = doc.raw(t)
        guard raw.count <= RawEventDecoder.recentNameMaxBytes else { return nil }
        let slot = RawEventDecoder.recentNameSlot(raw)
        let p = recentNameBytes + slot &* RawEventDecoder.recentNameStride
        // A raw string is at least its two quotes: an empty slot's length never matches.
        guard Int(p[0]) == raw.count && memcmp(p + 1, raw.baseAddress!, raw.count) == 0 else { return nil }
        return recentNameValues[slot]
    }

    /// Remembers known name `name`, read from string token `t`, and what the tables say of it.
    private func rememberName(_ doc: JSONDocument, _ t: Int, _ name: String, _ info: NameInfo) {
        // Folding drops everything but letters and digits, so a known name can be padded to any
        // length: only names of a real name's length are kept (the cache stays a few KB).
        guard doc.kind(t) == .string, !doc.tokens[t].flag, doc.raw(t).count <= RawEventDecoder.recentNameMaxBytes
        else { return }
        let raw = doc.raw(t)
        let slot = RawEventDecoder.recentNameSlot(raw)
        let p = recentNameBytes + slot &* RawEventDecoder.recentNameStride
        p[0] = UInt8(raw.count)
        UnsafeMutableRawPointer(p + 1).copyMemory(from: raw.baseAddress!, byteCount: raw.count)
        recentNameValues[slot] = RecentName(name: name, info: info)
    }

    /// The rest of ``decodeRaw(_:_:wrapper:)`` once the event's name is settled.
    private func decodeNamed(_ doc: JSONDocument, _ r: Int, holder holderToken: Int?, wrapper: Wrapper, name: String,
                             info: NameInfo) throws(DecodeRejection) -> DecodedEvent {
        if info.nonLifecycle {
            throw DecodeRejection(.notLifecycle, "`\(name)` is not a lifecycle event")
        }
        let primerKind = info.primer
        let shopifyKind = info.callback
        let saysPrimer = wrapper.saysPrimer
        let saysShopify = wrapper.sdk == "shopify"
        // Only a name both SDKs use, with no `sdk` to settle it, needs the payload's look.
        func looksPrimer(_ d: JSONDocument, _ o: Int) -> Bool {
            d.member(o, anyOf: "paymentResult", "checkoutData", "primerError", "payment_result") != nil
                || (d.object(o, "error").flatMap { d.member($0, anyOf: "errorId", "diagnosticsId", "error_id") } != nil)
        }
        func looksPrimer() -> Bool {
            if looksPrimer(doc, r) { return true }
            guard let h = objectValue(doc, holderToken) else { return false }
            return looksPrimer(h.doc, h.token)
        }
        if let kind = primerKind, saysPrimer || (!saysShopify && (shopifyKind == nil || looksPrimer())) {
            return decodePrimer(doc, r, holder: holderToken, kind: kind, platform: info.primerPlatform.name)
        }
        if let kind = shopifyKind {
            return try decodeCallback(doc, r, holder: holderToken, kind: kind, platform: info.callbackPlatform.name)
        }
        throw DecodeRejection(.unknownEvent, "unknown event name `\(name)`")
    }
}
