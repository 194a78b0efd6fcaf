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
public final class RawEventDecoder {
    /// Documents for JSON that arrived inside strings (a wrapper's `payload`, a bridge's `body`, a
    /// `data` or `checkout` a bridge serialised): handed out in turn for each message, kept for reuse.
    private var embeddedDocuments: [JSONDocument] = []
    private var embeddedUsed = 0
    /// The message's ingest wrapper names the checkout, which overrides any id inside the raw
    /// event: the family decoders then skip reading (and allocating) ids nobody will use.
    private var wrapperNamesCheckout = false

    /// The event id the message's ingest wrapper gave (nil without one), kept for a message the
    /// decoder then rejects: the producer's reply still names its event.
    public private(set) var wrapperEventID: String?

    public init() {}

    /// Decodes the message parsed into `doc`.
    /// - Throws: ``DecodeRejection`` with the dead-letter reason.
    public func decode(_ doc: JSONDocument) throws(DecodeRejection) -> DecodedEvent {
        let root = doc.root
        guard doc.kind(root) == .object else {
            throw DecodeRejection(.unknownShape, "top-level value is not an object")
        }
        embeddedUsed = 0
        wrapperEventID = nil
        var wrapper = Wrapper()
        var raw = JSONRef(doc, root)
        // A relay may wrap a wrapper: the outer one's fields win, the inner one's fill the gaps.
        // (An inner wrapper is looked for only when the payload has a `payload` of its own: the
        // usual payload, a raw event, costs one member lookup rather than a wrapper's scan.)
        var depth = 0
        while depth < 3, depth == 0 || raw.doc.member(raw.token, "payload") != nil,
            let payload = readWrapper(raw.doc, raw.token, into: &wrapper)
        {
            depth += 1
            wrapperEventID = wrapper.eventID
            let pd = raw.doc
            if pd.kind(payload) == .null {
                // `"payload": null` is no payload (a dismiss needs none): the wrapper's own name
                // and fields are the event.
                break
            }
            switch pd.kind(payload) {
            case .object: raw = JSONRef(pd, payload)
            case .string:
                let inner: JSONRef?
                do { inner = try embedded(pd, payload, always: true) } catch {
                    throw DecodeRejection(.invalidEmbeddedJSON, "payload string is not JSON: \(error.reason.name)")
                }
                guard let inner, inner.doc.kind(inner.token) == .object else {
                    throw DecodeRejection(.unknownShape, "payload is not an object")
                }
                raw = inner
            default:
                throw DecodeRejection(.wrongType, "`payload` must be an object or a JSON string")
            }
        }
        wrapperNamesCheckout = wrapper.checkoutID != nil
        var event = try decodeRaw(raw, wrapper: wrapper)
        if let id = wrapper.checkoutID { event.checkoutID = id }
        if let id = wrapper.eventID { event.eventID = id }
        if let at = wrapper.occurredAt { event.occurredAt = at }
        if let p = wrapper.platform { event.platform = p }
        if let s = wrapper.sdk { event.sdk = s }
        if event.checkoutID == nil {
            event.checkoutID = event.orderID.map { "order:" + $0 }
        }
        guard event.checkoutID != nil else {
            throw DecodeRejection(.missingCheckoutID, "no checkout id in the snapshot, the event or the wrapper")
        }
        return event
    }

    // MARK: Wrapper

    private struct Wrapper {
        var checkoutID: String?
        var eventID: String?
        var occurredAt: JSONRef?
        var platform: String?
        var sdk: String?
        /// The event name written on the wrapper itself, for a payload that names none.
        var name: JSONRef?
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
        return doc.members(root, RawEventDecoder.wrapperNames) { m -> Int? in
            // `type` and `callback` often tag a relay's message rather than name the event: they
            // do not stop `payload` from making a wrapper (whose name a nameless payload takes).
            let named = (m.at(1) ?? m.at(2) ?? m.at(3) ?? m.at(4) ?? m.at(5)) != nil
            let ownFields = (m.at(6) ?? m.at(8) ?? m.at(9) ?? m.at(10)) != nil
            guard ownFields || !named else { return nil }
            let anyName = named || (m.at(14) ?? m.at(15)) != nil
            guard let payload = m.at(0) ?? (ownFields && !anyName ? doc.member(root, anyOf: "data", "body") : nil)
            else { return nil }
            if w.checkoutID == nil, let v = m.at(6) ?? m.at(7) { w.checkoutID = doc.identifier(v) }
            if w.eventID == nil, let v = m.at(10) ?? m.at(11) { w.eventID = doc.identifier(v) }
            if w.occurredAt == nil, let v = m.at(12) ?? m.at(13), doc.kind(v) == .string || doc.kind(v) == .number {
                w.occurredAt = JSONRef(doc, v)
            }
            if w.platform == nil, let v = m.at(9) {
                w.platform = RawEventDecoder.usualPlatform(doc, v)
                    ?? doc.string(v).map(RawEventDecoder.platformSpelling)
            }
            if w.sdk == nil, let v = m.at(8), let usual = RawEventDecoder.usualSDK(doc, v) {
                w.sdk = usual
            } else if w.sdk == nil, let v = m.at(8), let sdk = doc.string(v) {
                // Usually lower-case already: only a name with an upper-case or non-ASCII byte is folded.
                let lower = sdk.utf8.contains { ($0 >= 0x41 && $0 <= 0x5A) || $0 >= 0x80 } ? sdk.lowercased() : sdk
                // `shopify-checkout-kit`, `Primer iOS`: the SDK family, as envelopes name it.
                w.sdk = lower.hasPrefix("shopify") ? "shopify" : lower.hasPrefix("primer") ? "primer" : lower
            }
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
    }

    /// The object or array JSON-encoded in string `t` — twice at most, as bridges that serialise an
    /// already serialised value send it — parsed into a spare document. Nil when `t` is not a string,
    /// or (unless `always`) when its text does not start like an object, an array or a string.
    /// - Throws: the parse error of a string that does not hold JSON.
    private func embedded(_ doc: JSONDocument, _ t: Int, always: Bool = false) throws(JSONParseError) -> JSONRef? {
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
    private func checkedObject(_ doc: JSONDocument, _ t: Int?, _ field: StaticString) throws(DecodeRejection) -> JSONRef? {
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
    private func objectValue(_ doc: JSONDocument, _ t: Int?) -> JSONRef? {
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

    /// A raw event's possible name fields and holders, read in one pass by ``decodeRaw(_:wrapper:)``.
    private static let rawEventNames = MemberNames(
        "event", "type", "state", "name", "callback", "method", "body", "data", "detail", "payload", "arguments",
        "args", "params", "nativeEvent")

    private func decodeRaw(_ raw: JSONRef, wrapper: Wrapper) throws(DecodeRejection) -> DecodedEvent {
        let doc = raw.doc
        let r = raw.token
        if let m = doc.member(r, "method"),
            doc.member(r, "jsonrpc") != nil || RawEventDecoder.hasPrefix(doc, m, "ec.") || RawEventDecoder.hasPrefix(doc, m, "checkout.")
        {
            return try decodeECP(doc, r, method: m)
        }
        if let name = doc.member(r, "name"), doc.kind(name) == .string, let body = doc.member(r, "body"),
            let event = try decodeSheetBridge(doc, r, name: name, body: body)
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
        let (nameTokens, holderToken) = doc.members(r, RawEventDecoder.rawEventNames) {
            m -> ((Int, Int, Int, Int, Int, Int), Int?) in
            // The strings among these, in this order, may name the event (an `event` object
            // beside a `type` name is the event's data); -1 pads.
            var t = (-1, -1, -1, -1, -1, -1)
            var k = 0
            withUnsafeMutableBytes(of: &t) { raw in
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
            let h = holder(7) ?? holder(8) ?? holder(13) ?? holder(0) ?? holder(9) ?? holder(6) ?? holder(10)
                ?? holder(11) ?? holder(12)
            return (t, h)
        }
        // Else the wrapper's own name.
        let nameToken = nameTokens.0 >= 0 ? nameTokens.0 : nil
        // A name seen lately (a stream repeats a handful): its string and what the tables say of
        // it, without building, folding and looking it up again.
        if let t = nameToken, let seen = recentName(doc, t) {
            return try decodeNamed(doc, r, holder: holderToken, wrapper: wrapper, name: seen.name, info: seen.info)
        }
        guard var name = nameToken.flatMap({ doc.string($0) }) ?? wrapper.name.flatMap({ $0.doc.string($0.token) }) else {
            if let event = try decodeUnnamed(doc, r, wrapper: wrapper) { return event }
            throw DecodeRejection(.unknownShape, "no event name (`method`, `name`, `event`, `type` or `state`)")
        }
        var folded = ErrorCodeNormalizer.fold(name)
        var info = NameInfo(folded)
        if info.isKnown, let t = nameToken { rememberName(doc, t, name, info) }
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
            withUnsafeBytes(of: nameTokens) { raw in
                for v in raw.bindMemory(to: Int.self).dropFirst() where v >= 0 {
                    if let text = doc.string(v) { others.append(text) }
                }
            }
            // The holder's own state (`{"event":"onCompletion","data":{"state":"failure",…}}`).
            if let h = objectValue(doc, holderToken), let v = h.doc.member(h.token, anyOf: "state", "event", "type"),
                let text = h.doc.string(v)
            {
                others.append(text)
            }
            if nameToken != nil, let w = wrapper.name, let text = w.doc.string(w.token) { others.append(text) }
            for other in others {
                let f = ErrorCodeNormalizer.fold(other)
                let i = NameInfo(f)
                if i.isKnown {
                    (name, folded, info) = (other, f, i)
                    break
                }
            }
        }
        return try decodeNamed(doc, r, holder: holderToken, wrapper: wrapper, name: name, info: info)
    }

    /// Objects that name no event but are one by their shape, as an app's bridge forwards what its
    /// SDK handed it: a React Native Checkout Sheet Kit error (`__typename` `CheckoutExpiredError`,
    /// …, with its `code`) is a fail; its `completed` event's data (`orderDetails`) a complete; an
    /// Embedded Checkout Protocol `ErrorResponse` (`ucp` and `messages`, what Checkout Kit's React
    /// Native relay hands JavaScript for `ec.error`) a fail. A JSON-RPC response (`result` or
    /// `error` beside `id`, no `method`) is no lifecycle event.
    /// - Returns: nil when the shape is none of these.
    ///
    /// Primer's, as its React Native provider hands them to JavaScript: a `PrimerError`
    /// (`errorId`), or `{"error":{"errorId",…},"checkoutData":…}`, is a failure; checkout data
    /// (`{"payment":{"id","orderId"?,"status"?}}`, `checkoutData`, `paymentResult`) a complete — the
    /// bare `payment` only under a wrapper that says `"sdk":"primer"`, since any JSON may hold a
    /// `payment`.
    private func decodeUnnamed(_ doc: JSONDocument, _ r: Int, wrapper: Wrapper) throws(DecodeRejection) -> DecodedEvent? {
        let saysPrimer = wrapper.sdk.map { $0.hasPrefix("primer") } ?? false
        if doc.member(r, anyOf: "errorId", "error_id") != nil
            || doc.object(r, "error").flatMap({ doc.member($0, anyOf: "errorId", "diagnosticsId", "error_id") }) != nil
        {
            return decodePrimer(doc, r, holder: nil, kind: .fail, name: "failure")
        }
        if doc.object(r, "paymentResult") != nil || doc.object(r, "payment_result") != nil || doc.object(r, "checkoutData") != nil
            || (saysPrimer && doc.object(r, "payment") != nil)
        {
            return decodePrimer(doc, r, holder: nil, kind: .complete, name: "success")
        }
        if doc.member(r, "jsonrpc") != nil, doc.member(r, "id") != nil,
            doc.member(r, "result") != nil || doc.member(r, "error") != nil
        {
            throw DecodeRejection(.notLifecycle, "a JSON-RPC response is not a lifecycle event")
        }
        if let t = doc.member(r, "__typename"), let typename = doc.string(t), typename.hasSuffix("Error"),
            doc.member(r, anyOf: "code", "message") != nil
        {
            return try decodeCallback(doc, r, holder: nil, kind: .fail, name: "error")
        }
        if doc.object(r, "orderDetails") != nil || doc.object(r, "order_details") != nil {
            return try decodeCallback(doc, r, holder: nil, kind: .complete, name: "completed")
        }
        // Checkout Sheet Kit React Native 4's `complete` and `start` bodies: the event's name is
        // its channel, never in the body (`{orderConfirmation, cart}`, `{cart, locale?}`).
        if doc.member(r, "id") == nil, doc.object(r, "orderConfirmation") != nil || doc.object(r, "cart") != nil {
            var event = DecodedEvent(kind: doc.object(r, "orderConfirmation") != nil ? .complete : .start,
                                     format: .sheetBridge, sdk: "shopify")
            event.snapshot = JSONRef(doc, r)
            readSnapshotIDs(doc, r, into: &event)
            return event
        }
        if doc.object(r, "ucp") != nil, doc.member(r, "messages").map({ doc.kind($0) == .array }) == true {
            var event = DecodedEvent(kind: .fail, format: .ecp, sdk: "shopify")
            event.error = ecpError(doc, r, snapshot: nil)
            return event
        }
        return nil
    }

    /// What the name tables say of one folded event name.
    struct NameInfo {
        var callback: LifecycleKind?
        var primer: LifecycleKind?
        var nonLifecycle: Bool

        init(_ folded: String) {
            callback = RawEventDecoder.callbackNames[folded]
            primer = RawEventDecoder.primerNames[folded]
            nonLifecycle = RawEventDecoder.nonLifecycleNames.contains(folded)
        }

        var isKnown: Bool { callback != nil || primer != nil || nonLifecycle }
    }

    /// Known names lately read from a name token, by their raw bytes (quotes included): at most
    /// ``recentNameLimit``, the oldest replaced first.
    private var recentNames: [(raw: [UInt8], name: String, info: NameInfo)] = []
    private var recentNameNext = 0
    private static let recentNameLimit = 16
    /// The longest name token remembered, quotes included (the longest listed name is 34 bytes).
    private static let recentNameMaxBytes = 66

    /// The remembered name whose raw text is string token `t`'s, if any. An escaped token (whose
    /// decoded text is another byte string) is never looked up.
    private func recentName(_ doc: JSONDocument, _ t: Int) -> (name: String, info: NameInfo)? {
        guard doc.kind(t) == .string, !doc.tokens[t].flag else { return nil }
        let raw = doc.raw(t)
        for entry in recentNames where entry.raw.count == raw.count {
            if entry.raw.withUnsafeBytes({ memcmp($0.baseAddress!, raw.baseAddress!, raw.count) == 0 }) {
                return (entry.name, entry.info)
            }
        }
        return nil
    }

    /// Remembers known name `name`, read from string token `t`, and what the tables say of it.
    private func rememberName(_ doc: JSONDocument, _ t: Int, _ name: String, _ info: NameInfo) {
        // Folding drops everything but letters and digits, so a known name can be padded to any
        // length: only names of a real name's length are kept (the cache stays a few KB).
        guard doc.kind(t) == .string, !doc.tokens[t].flag, doc.raw(t).count <= RawEventDecoder.recentNameMaxBytes
        else { return }
        let entry = (raw: Array(doc.raw(t)), name: name, info: info)
        if recentNames.count < RawEventDecoder.recentNameLimit {
            recentNames.append(entry)
        } else {
            recentNames[recentNameNext] = entry
            recentNameNext = (recentNameNext + 1) % RawEventDecoder.recentNameLimit
        }
    }

    /// The rest of ``decodeRaw(_:wrapper:)`` once the event's name is settled.
    private func decodeNamed(_ doc: JSONDocument, _ r: Int, holder holderToken: Int?, wrapper: Wrapper, name: String,
                             info: NameInfo) throws(DecodeRejection) -> DecodedEvent {
        if info.nonLifecycle {
            throw DecodeRejection(.notLifecycle, "`\(name)` is not a lifecycle event")
        }
        let primerKind = info.primer
        let shopifyKind = info.callback
        let saysPrimer = wrapper.sdk.map { $0.hasPrefix("primer") } ?? false
        let saysShopify = wrapper.sdk.map { $0.hasPrefix("shopify") } ?? false
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
            return decodePrimer(doc, r, holder: holderToken, kind: kind, name: name)
        }
        if let kind = shopifyKind {
            return try decodeCallback(doc, r, holder: holderToken, kind: kind, name: name)
        }
        throw DecodeRejection(.unknownEvent, "unknown event name `\(name)`")
    }

    // MARK: Embedded Checkout Protocol

    private func decodeECP(_ doc: JSONDocument, _ r: Int, method m: Int) throws(DecodeRejection) -> DecodedEvent {
        let kind = try ecpKind(doc, r, method: m)
        var event = DecodedEvent(kind: kind, format: .ecp, sdk: "shopify")
        // `params` null is no params (an `ec.error` needs none); a bridge may send it, or the
        // checkout in it, JSON-encoded in a string.
        var params = doc.member(r, "params")
        var pd = doc
        if let p = params, doc.kind(p) == .null { params = nil }
        if let p = params, doc.kind(p) != .object {
            guard let inner = objectValue(doc, p) else { throw DecodeRejection(.wrongType, "`params` is not an object") }
            (pd, params) = (inner.doc, inner.token)
        }
        // Checkout Sheet Kit 4's methods (`checkout.start`, `checkout.complete`, `checkout.error`):
        // `params` is `{cart, locale}` or `{orderConfirmation, cart}`, and the React Native kit puts
        // those fields beside `method`, without `jsonrpc` or `params`.
        let sheetKit4 = RawEventDecoder.hasPrefix(doc, m, "checkout.")
        if sheetKit4 { event.format = .sheetBridge }
        if sheetKit4, params == nil, doc.member(r, "jsonrpc") == nil { params = r }
        if let params, let checkout = pd.member(params, "checkout"), pd.kind(checkout) != .null || kind != .fail {
            guard let c = try checkedObject(pd, checkout, "params.checkout") else {
                throw DecodeRejection(.wrongType, "`params.checkout` is not an object")
            }
            event.snapshot = c
            readSnapshotIDs(c.doc, c.token, into: &event)
        } else if sheetKit4, kind != .fail, let params,
            pd.object(params, "cart") != nil || pd.object(params, "orderConfirmation") != nil
        {
            // The snapshot is the whole of it: the cart, and the order confirmation beside it.
            event.snapshot = JSONRef(pd, params)
            readSnapshotIDs(pd, params, into: &event)
        } else if kind == .update {
            // A start or a complete is published without a snapshot (a lost complete is a lost
            // order; the kits fire theirs on the method alone); an update means nothing without one.
            throw DecodeRejection(.wrongType, "`\(doc.string(m) ?? "")` carries no `params.checkout` snapshot")
        }
        if let params {
            if needsCheckoutID(event), let v = pd.member(params, anyOf: "checkout_id", "checkoutId") {
                event.checkoutID = pd.identifier(v)
            }
        }
        if kind == .fail {
            event.error = ecpError(pd, params, snapshot: event.snapshot)
        }
        return event
    }

    /// The kind of an ECP notification from its method. A plain ASCII method (the usual case) is
    /// matched on its bytes, without building a `String`; anything else takes ``ecpKind(method:_:_:)``.
    private func ecpKind(_ doc: JSONDocument, _ r: Int, method m: Int) throws(DecodeRejection) -> LifecycleKind {
        let raw = doc.raw(m)
        guard doc.kind(m) == .string, !doc.isEscaped(m), raw.allSatisfy({ $0 < 0x80 }) else {
            guard let method = doc.string(m) else { throw DecodeRejection(.wrongType, "`method` is not a string") }
            return try ecpKind(method: method, doc, r)
        }
        let p = raw.baseAddress! + 1
        let n = raw.count - 2
        func bytes(at offset: Int, _ text: StaticString) -> Bool {
            offset >= 0 && memcmp(p + offset, text.utf8Start, text.utf8CodeUnitCount) == 0
        }
        func `is`(_ text: StaticString) -> Bool { n == text.utf8CodeUnitCount && bytes(at: 0, text) }
        func hasPrefix(_ text: StaticString) -> Bool { n >= text.utf8CodeUnitCount && bytes(at: 0, text) }
        func hasSuffix(_ text: StaticString) -> Bool { bytes(at: n - text.utf8CodeUnitCount, text) }
        if `is`("ec.start") { return .start }
        if `is`("ec.complete") { return .complete }
        if `is`("ec.error") { return .fail }
        // Everything else (rejections included) is decided as before, on the method's `String`.
        if `is`("ec.ready") || `is`("ec.auth") || hasSuffix("_request") || !hasPrefix("ec.") || !hasSuffix(".change")
            || doc.member(r, "id") != nil
        {
            return try ecpKind(method: doc.string(m) ?? "", doc, r)
        }
        return .update
    }

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

    /// ``ecpKind(_:_:method:)`` on the method's decoded `String`.
    private func ecpKind(method: String, _ doc: JSONDocument, _ r: Int) throws(DecodeRejection) -> LifecycleKind {
        let kind: LifecycleKind
        if let known = RawEventDecoder.methods[method] {
            guard let known else { throw DecodeRejection(.notLifecycle, "`\(method)` is not a lifecycle event") }
            return known
        }
        switch method {
        default:
            if method.hasSuffix("_request") || doc.member(r, "id") != nil && !method.hasSuffix(".change") {
                throw DecodeRejection(.notLifecycle, "`\(method)` is a request, not a lifecycle event")
            }
            guard method.hasPrefix("ec."), method.hasSuffix(".change") else {
                throw DecodeRejection(.unknownEvent, "unknown method `\(method)`")
            }
            kind = .update
        }
        return kind
    }

    /// The failure of an `ec.error`: the first `error` message of severity `unrecoverable`, else the
    /// first `error` message (as Checkout Kit's web component chooses; its iOS and Android kits
    /// report `unknown` then), in the protocol's `ErrorResponse` at `params.error` (its
    /// `messages`, beside `ucp` and `continue_url`), or flat in `params` (the specification's own
    /// examples until 2026-06), or in the snapshot's `messages`; else `params.error` read as an
    /// error of its own. An `ErrorResponse` with no error message is `unknown`, no raw code.
    private func ecpError(_ doc: JSONDocument, _ params: Int?, snapshot: JSONRef?) -> DecodedError {
        var chosen: JSONRef?
        var fallback: JSONRef?
        var candidates: [JSONRef] = []
        var continueURL: String?
        let response = params.flatMap { doc.object($0, "error") }.flatMap { e in
            doc.member(e, "messages") != nil || doc.member(e, "ucp") != nil ? e : nil
        }
        for holder in [response, params] {
            guard let holder else { continue }
            if let m = doc.member(holder, "messages") { candidates.append(JSONRef(doc, m)) }
            if continueURL == nil, let u = doc.member(holder, anyOf: "continue_url", "continueUrl") {
                continueURL = doc.string(u)
            }
        }
        // The snapshot's messages, also when its checkout came as JSON in a string.
        if let c = snapshot, let m = c.doc.member(c.token, "messages") { candidates.append(JSONRef(c.doc, m)) }
        for list in candidates where chosen == nil {
            let d = list.doc
            d.forEachElement(list.token) { msg in
                guard chosen == nil, let t = d.member(msg, "type"), d.stringEqualsIgnoringCase(t, "error") else { return }
                if fallback == nil { fallback = JSONRef(d, msg) }
                if let s = d.member(msg, "severity"), d.stringEqualsIgnoringCase(s, "unrecoverable") {
                    chosen = JSONRef(d, msg)
                }
            }
        }
        var error: DecodedError
        if let msg = chosen ?? fallback {
            error = makeError(msg.doc, msg.token, terminal: true)
        } else if response == nil, let params, let e = doc.object(params, "error") {
            error = makeError(doc, e, terminal: true)
        } else if let params, doc.member(params, "code") != nil {
            // Checkout Sheet Kit 4's `checkout.error`: `{"code":"CART_COMPLETED","message":…}`.
            error = makeError(doc, params, terminal: true)
        } else {
            error = DecodedError(code: .unknown, rawCode: nil, message: nil, httpStatus: nil, terminal: true)
        }
        // An error answers for the whole checkout: a message's `recoverable` severity does not
        // make the notification any less final.
        error.terminal = true
        error.continueURL = error.continueURL ?? continueURL
        return error
    }

    // MARK: Checkout Sheet Kit bridge

    /// - Returns: nil when `name` is not one of the bridge's names but a callback's (a React Native
    ///   or Flutter emitter's `{"name":"checkoutDidComplete","body":{…}}`): decoded as a callback.
    private func decodeSheetBridge(_ doc: JSONDocument, _ r: Int, name n: Int, body: Int) throws(DecodeRejection) -> DecodedEvent? {
        let name = doc.string(n) ?? ""
        let folded = ErrorCodeNormalizer.fold(name)
        let kind: LifecycleKind
        switch folded {
        case "completed", "checkoutcompleted": kind = .complete
        case "error", "checkouterror": kind = .fail
        case "started", "checkoutstarted": kind = .start
        case "close", "closed", "checkoutclosed": kind = .dismiss
        default:
            if NameInfo(folded).isKnown { return nil }
            throw DecodeRejection(.unknownEvent, "unknown bridge event `\(name)`")
        }
        var bodyRef = JSONRef(doc, body)
        if doc.kind(body) == .string {
            let bytes = doc.unescapedBytes(body)
            if bytes.isEmpty && kind == .dismiss {
                bodyRef = JSONRef(doc, r)
            } else {
                let inner: JSONRef?
                do { inner = try embedded(doc, body, always: true) } catch {
                    throw DecodeRejection(.invalidEmbeddedJSON, "`body` string is not JSON: \(error.reason.name)")
                }
                guard let inner else { throw DecodeRejection(.wrongType, "`body` holds a string, not an object or array") }
                bodyRef = inner
            }
        }
        var event = DecodedEvent(kind: kind, format: .sheetBridge, sdk: "shopify")
        let bd = bodyRef.doc
        let b = bodyRef.token
        switch kind {
        case .fail:
            var first = b
            if bd.kind(b) == .array {
                guard let f = bd.firstElement(b) else {
                    event.error = DecodedError(code: .unknown, rawCode: nil, message: nil, httpStatus: nil, terminal: true)
                    return event
                }
                first = f
            }
            guard bd.kind(first) == .object else { throw DecodeRejection(.wrongType, "error body is not an object") }
            // Groups the kits do not report as a failure (Android's decoder ignores them; iOS maps
            // them to an unsupported event it drops): published, since nothing is dropped, but as
            // not ending the checkout.
            var terminal = true
            if let g = bd.member(first, "group"),
                bd.stringEqualsIgnoringCase(g, "authentication") || bd.stringEqualsIgnoringCase(g, "checkout")
                    || bd.stringEqualsIgnoringCase(g, "unsupported")
            {
                terminal = false
            }
            event.error = makeError(bd, first, terminal: terminal)
            if !wrapperNamesCheckout, let v = bd.member(first, anyOf: "checkout_id", "checkoutId") {
                event.checkoutID = bd.identifier(v)
            }
        case .complete, .start:
            guard bd.kind(b) == .object else { throw DecodeRejection(.wrongType, "`body` is not an object") }
            event.snapshot = bodyRef
            readSnapshotIDs(bd, b, into: &event)
        case .update, .dismiss:
            break
        }
        return event
    }

    // MARK: SDK callback events

    /// - Parameter holderToken: where a bridge put the event's fields (``holder(_:_:_:)``).
    private func decodeCallback(_ doc: JSONDocument, _ r: Int, holder holderToken: Int?, kind: LifecycleKind,
                                name: String) throws(DecodeRejection) -> DecodedEvent {
        var event = DecodedEvent(kind: kind, format: .callback, sdk: "shopify")
        event.platform = RawEventDecoder.platform(forCallback: name)
        let h = holder(doc, r, holderToken)
        let hd = h.doc
        let atTop = hd === doc && h.token == r
        var snapshot = try checkedObject(hd, hd.member(h.token, "checkout"), "checkout")
        if snapshot == nil && !atTop { snapshot = try checkedObject(doc, doc.member(r, "checkout"), "checkout") }
        if let c = snapshot {
            event.snapshot = c
            readSnapshotIDs(c.doc, c.token, into: &event)
        } else if kind == .complete || kind == .start || kind == .update,
            hd.object(h.token, "orderDetails") != nil || hd.object(h.token, "order_details") != nil
        {
            event.snapshot = h
            readSnapshotIDs(hd, h.token, into: &event)
        }
        if kind == .fail {
            if let e = hd.object(h.token, "error") {
                event.error = failureError(hd, object: e, fields: h.token, terminal: true)
            } else if hd === doc {
                event.error = failureError(doc, object: doc.object(r, "error"), fields: h.token, orStringIn: r, terminal: true)
            } else if hasErrorFields(hd, h.token) || doc.member(r, "error") == nil {
                event.error = failureError(hd, object: nil, fields: h.token, terminal: true)
            } else {
                // The holder was JSON in a string without the error: the event's own `error`.
                event.error = failureError(doc, object: doc.object(r, "error"), fields: r, orStringIn: r, terminal: true)
            }
        }
        readEventIDs(doc, r, into: &event)
        if !atTop { readEventIDs(hd, h.token, into: &event) }
        return event
    }

    // MARK: Primer

    private func decodePrimer(_ outer: JSONDocument, _ r: Int, holder holderToken: Int?, kind: LifecycleKind,
                              name: String) -> DecodedEvent {
        var event = DecodedEvent(kind: kind, format: .primer, sdk: "primer")
        event.platform = RawEventDecoder.platform(forPrimer: name)
        // Primer's own fields on the event itself win over a bridge's holder.
        let own = outer.member(r, anyOf: "paymentResult", "payment_result", "checkoutData", "checkout_data", "result",
                               "payment", "error", "primerError") != nil
        let h = own ? JSONRef(outer, r) : holder(outer, r, holderToken)
        let doc = h.doc
        let holder = h.token
        // The payment, and the order it names: on the event, else (iOS's
        // `primerDidFailWithError(_:data:)` relayed as `{"error":…,"data":{"payment":…}}`) in the
        // holder beside its own fields.
        readPrimerPayment(doc, holder, into: &event)
        if own, event.payment == nil, let other = objectValue(outer, holderToken) {
            readPrimerPayment(other.doc, other.token, into: &event)
        }
        // A success whose payment did not go through: iOS calls its success delegate when the
        // server says the checkout completed, whatever the payment's status, and Primer's React
        // Native v3 reads that status to tell success from failure. Published as what it is — a
        // fulfilment worker must not take a declined payment for an order.
        if kind == .complete, let p = event.payment, let v = p.doc.member(p.token, "status"), let status = p.doc.string(v) {
            let folded = ErrorCodeNormalizer.fold(status)
            if folded == "failed" || folded == "declined" || folded == "cancelled" || folded == "canceled" {
                event.kind = .fail
                event.error = DecodedError(
                    code: folded.hasPrefix("cancel") ? .paymentCancelled : .paymentFailed, rawCode: status,
                    message: "payment \(status) in the checkout's success data", httpStatus: nil, terminal: false)
            }
        }
        if kind == .fail {
            var terminal = false
            if let p = doc.member(holder, "phase"), doc.stringEquals(p, "initializing") { terminal = true }
            if let t = doc.member(holder, "terminal"), doc.bool(t) == true { terminal = true }
            event.error = failureError(doc, object: doc.object(holder, "error") ?? doc.object(holder, "primerError"),
                                       fields: holder, terminal: terminal)
        }
        readEventIDs(outer, r, into: &event)
        if doc !== outer || holder != r { readEventIDs(doc, holder, into: &event) }
        return event
    }

    /// A Primer event's payment (`paymentResult`, `result`, `checkoutData.payment` or `payment`)
    /// and order id, from the object at `holder`.
    private func readPrimerPayment(_ doc: JSONDocument, _ holder: Int, into event: inout DecodedEvent) {
        let checkoutData = doc.object(holder, "checkoutData") ?? doc.object(holder, "checkout_data")
        let payment = doc.object(holder, "paymentResult") ?? doc.object(holder, "payment_result")
            ?? doc.object(holder, "result") ?? checkoutData.flatMap { doc.object($0, "payment") }
            ?? doc.object(holder, "payment")
        if let payment {
            event.payment = JSONRef(doc, payment)
            if let v = doc.member(payment, anyOf: "orderId", "order_id") { event.orderID = doc.identifier(v) }
        }
        // A PaymentResult names no order; the checkout data's payment beside it may.
        if event.orderID == nil, let p = checkoutData.flatMap({ doc.object($0, "payment") }),
            let v = doc.member(p, anyOf: "orderId", "order_id")
        {
            event.orderID = doc.identifier(v)
        }
    }

    // MARK: Shared field readers

    /// Where a callback's fields are: the first object (or object in a JSON string) among `data`,
    /// `detail`, `nativeEvent` (a React Native synthetic event), `event`, `payload`, `body`,
    /// `arguments` (Flutter's method channel), `args` and
    /// `params` — `token`, as ``decodeRaw(_:wrapper:)`` found it — else the event itself.
    private func holder(_ doc: JSONDocument, _ r: Int, _ token: Int?) -> JSONRef {
        objectValue(doc, token) ?? JSONRef(doc, r)
    }

    /// The members ``readSnapshotIDs(_:_:into:)`` reads, indexed once.
    private static let snapshotIDNames = MemberNames(
        "id", "checkout_id", "checkoutId", "order", "orderDetails", "order_details", "order_id", "orderId", "cart",
        "orderConfirmation", "order_confirmation")

    /// Checkout and order ids from a snapshot (v4 `id`/`order.id`, or the older `orderDetails`),
    /// its members found in one pass (``JSONDocument/members(_:_:_:)``).
    private func readSnapshotIDs(_ doc: JSONDocument, _ c: Int, into event: inout DecodedEvent) {
        let skipCheckoutID = wrapperNamesCheckout
        doc.members(c, RawEventDecoder.snapshotIDNames) { m in
            if !skipCheckoutID, let v = m.at(0) ?? m.at(1) ?? m.at(2) { event.checkoutID = doc.identifier(v) }
            if let order = m.object(3), let v = doc.member(order, "id") { event.orderID = doc.identifier(v) }
            if let details = m.object(4) ?? m.object(5), let v = doc.member(details, "id") {
                event.orderID = doc.identifier(v)
            }
            if event.orderID == nil, let v = m.at(6) ?? m.at(7) { event.orderID = doc.identifier(v) }
            // Checkout Sheet Kit 4: `{"orderConfirmation":{"order":{"id":…}},"cart":{"id":…}}`.
            if let confirmation = m.object(9) ?? m.object(10), let order = doc.object(confirmation, "order"),
                let v = doc.member(order, "id")
            {
                event.orderID = doc.identifier(v) ?? event.orderID
            }
            if !skipCheckoutID, event.checkoutID == nil, let cart = m.object(8), let v = doc.member(cart, "id") {
                event.checkoutID = doc.identifier(v)
            }
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
    private func needsCheckoutID(_ event: borrowing DecodedEvent) -> Bool { event.checkoutID == nil && !wrapperNamesCheckout }

    /// Ids and timestamps written beside the event name.
    private func readEventIDs(_ doc: JSONDocument, _ r: Int, into event: inout DecodedEvent) {
        if needsCheckoutID(event), let v = doc.member(r, anyOf: "checkout_id", "checkoutId") {
            event.checkoutID = doc.identifier(v)
        }
        if event.eventID == nil, let v = doc.member(r, anyOf: "event_id", "eventId") { event.eventID = doc.identifier(v) }
        if event.orderID == nil, let v = doc.member(r, anyOf: "order_id", "orderId") { event.orderID = doc.identifier(v) }
        if event.occurredAt == nil, let v = doc.member(r, anyOf: "occurred_at", "occurredAt", "timestamp"),
            doc.kind(v) == .string || doc.kind(v) == .number
        {
            event.occurredAt = JSONRef(doc, v)
        }
    }

    /// A failure's error: the error object when there is one; else a bare-string `error` (on
    /// `fields`, then on `orStringIn`) when `fields` carries no code, status or group of its own;
    /// else `fields` read as the error.
    private func failureError(_ doc: JSONDocument, object: Int?, fields: Int, orStringIn other: Int? = nil,
                              terminal: Bool) -> DecodedError {
        if let object { return makeError(doc, object, terminal: terminal) }
        if !hasErrorFields(doc, fields), let text = errorString(doc, fields) ?? other.flatMap({ errorString(doc, $0) }) {
            return makeError(text: text, terminal: terminal)
        }
        return makeError(doc, fields, terminal: terminal)
    }

    /// Whether the event carries an error's code or status on itself: then those are read as
    /// before, and a bare-string `error` beside them is only the message.
    private func hasErrorFields(_ doc: JSONDocument, _ o: Int) -> Bool {
        doc.member(o, anyOf: "code", "errorId", "error_id", "errorCode", "error_code") != nil
            || doc.member(o, anyOf: "statusCode", "http_status", "httpStatus", "status_code") != nil
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
    private func makeError(text: String, terminal: Bool) -> DecodedError {
        let codeLike = text.utf8.count <= 128 && !text.utf8.contains { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        var code = ErrorCodeNormalizer.normalize(rawCode: codeLike ? text : nil)
        // A Swift case printed with its values (`cartExpired(message: "…")`) has spaces, yet names a code.
        if !codeLike, text.utf8.count <= 1024, let c = ErrorCodeNormalizer.enumCase(text) { code = c }
        return DecodedError(code: code, rawCode: codeLike ? text : nil, message: text, httpStatus: nil, terminal: terminal)
    }

    /// Builds a normalised error from any SDK's error object.
    private func makeError(_ doc: JSONDocument, _ e: Int, terminal: Bool) -> DecodedError {
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
        // The first of the code fields with a value: `"code": null` beside an `errorId` (a bridge
        // that copies every field it knows) does not hide it.
        var rawCode: String?
        for name: StaticString in ["code", "errorId", "error_id", "errorCode", "error_code"] where rawCode == nil {
            if let v = doc.member(e, name) { rawCode = doc.identifier(v) }
        }
        var group: String?
        if let v = doc.member(e, anyOf: "group", "__typename") { group = doc.string(v) }
        var message: String?
        if let v = doc.member(e, anyOf: "message", "description", "content", "reason", "errorDescription") {
            message = doc.string(v)
        } else if let text = errorString(doc, e) {
            message = text
        }
        var status: Int?
        if let v = doc.member(e, anyOf: "statusCode", "http_status", "httpStatus", "status_code", "status") {
            status = doc.int64(v).flatMap { (100...599).contains($0) ? Int($0) : nil }
        }
        var isTerminal = terminal
        if let v = doc.member(e, anyOf: "recoverable", "isRecoverable"), doc.bool(v) == true { isTerminal = false }
        // A code that is itself an enum case encoded by `Codable` (`"code":{"cartExpired":{}}`).
        if rawCode == nil, let v = doc.member(e, "code"), let (key, _) = RawEventDecoder.codableEnumCase(doc, v) {
            rawCode = doc.string(key)
        }
        var code = ErrorCodeNormalizer.normalize(rawCode: rawCode ?? group, group: group, httpStatus: status)
        // An `NSError` from Foundation's URL loading (`NSURLErrorDomain`, `-1009` offline, `-1001`
        // timed out): every code of that domain is the network's.
        if code == .unknown, let v = doc.member(e, "domain"), doc.stringEquals(v, "NSURLErrorDomain") {
            code = .networkError
        }
        let continueURL = doc.member(e, anyOf: "continue_url", "continueUrl").flatMap { doc.string($0) }
        return DecodedError(code: code, rawCode: rawCode ?? group ?? status.map { String($0) },
                            message: message, httpStatus: status, terminal: isTerminal, continueURL: continueURL)
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

    // MARK: Name tables (folded: lower-case letters and digits)

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
        for n in ["checkoutDidDismiss", "onDismiss", "onCheckoutDismissed", "dismiss", "checkoutDismissed",
                  "checkoutDidCancel", "onCheckoutCanceled", "onCheckoutCancelled", "onCancel", "cancel",
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

    static func platform(forCallback name: String) -> String? {
        if name.hasPrefix("checkoutDid") { return "ios" }
        if name.hasPrefix("onCheckout") { return "android" }
        return nil
    }

    static func platform(forPrimer name: String) -> String? {
        if name.hasPrefix("primerDid") { return "ios" }
        switch name {
        case "onCheckoutCompleted", "onFailed", "onDismissed": return "android"
        case "onCheckoutComplete", "onError", "onDismiss": return "react_native"
        default: return nil
        }
    }
}
