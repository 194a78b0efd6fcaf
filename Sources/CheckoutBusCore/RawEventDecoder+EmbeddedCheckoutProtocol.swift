import Glibc
import CheckoutBusJSON
import CheckoutBusProtocol

/// Embedded Checkout Protocol (JSON-RPC 2.0) notifications: the method's kind, the checkout, the error.
extension RawEventDecoder {
    func decodeECP(_ doc: JSONDocument, _ r: Int, method m: Int,
                   wrapper: Wrapper) throws(DecodeRejection) -> DecodedEvent {
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
        // Universal Checkout: `params.context` names the session the wrapper may have given as its
        // checkout. Looked for only beside another member (the usual `params` is `{checkout}` alone).
        if let params, !sheetKit4, wrapperNamesCheckout, RawEventDecoder.hasSeveralMembers(pd, params) {
            universalSession(pd, params, wrapper: wrapper)
        }
        if let params, let checkout = pd.member(params, "checkout"), pd.kind(checkout) != .null || kind != .fail {
            guard let c = try checkedObject(pd, checkout, "params.checkout") else {
                throw DecodeRejection(.wrongType, "`params.checkout` is not an object")
            }
            // Read before `c` moves into the event, on its document's guaranteed reference.
            let token = c.token
            Unmanaged.passUnretained(c.doc)._withUnsafeGuaranteedRef { readSnapshotIDs($0, token, into: &event) }
            event.snapshot = c
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
                event.setCheckoutID(pd, v)
            }
        }
        if kind == .fail {
            event.error = ecpError(pd, params, snapshot: event.snapshot)
        }
        return event
    }

    /// A notification as the React Native kit relays it to JavaScript (`ProtocolRelay.forwardEnvelope`
    /// in Shopify/checkout-kit's `checkout-kit-react-native/android`): `{"type":METHOD,"payload":P}`,
    /// where `P` is the notification's checkout itself (`ec.start`, `ec.complete`, `ec.*.change`) or,
    /// for `ec.error`, its error response (`{ucp, messages}`). `r` is `P`; a `P` that is the params
    /// (`{checkout}`) is read as such too.
    func decodeECPRelay(_ doc: JSONDocument, _ r: Int, method: String) throws(DecodeRejection) -> DecodedEvent {
        let kind: LifecycleKind
        if let known = RawEventDecoder.methods[method] {
            guard let known else { throw DecodeRejection(.notLifecycle, "`\(method)` is not a lifecycle event") }
            kind = known
        } else if method.hasSuffix("_request") {
            throw DecodeRejection(.notLifecycle, "`\(method)` is a request, not a lifecycle event")
        } else if method.hasSuffix(".change") {
            kind = .update
        } else {
            throw DecodeRejection(.unknownEvent, "unknown method `\(method)`")
        }
        var event = DecodedEvent(kind: kind, format: .ecp, sdk: "shopify")
        let params = doc.object(r, "checkout").flatMap { doc.member(r, "id") == nil ? $0 : nil }
        if kind == .fail {
            event.error = ecpError(doc, r, snapshot: params.map { JSONRef(doc, $0) })
            return event
        }
        let snapshot = params ?? r
        event.snapshot = JSONRef(doc, snapshot)
        readSnapshotIDs(doc, snapshot, into: &event)
        return event
    }

    /// The kind of an ECP notification from its method. A plain ASCII method (the usual case) is
    /// matched on its bytes, without building a `String`; anything else takes ``ecpKind(method:_:_:)``.
    private func ecpKind(_ doc: JSONDocument, _ r: Int, method m: Int) throws(DecodeRejection) -> LifecycleKind {
        let raw = doc.raw(m)
        guard doc.kind(m) == .string, !doc.isEscaped(m), RawEventDecoder.isASCII(raw) else {
            guard let method = doc.string(m) else { throw DecodeRejection(.wrongType, "`method` is not a string") }
            return try ecpKind(method: method, doc, r)
        }
        let p = raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + 1
        let n = raw.count - 2
        func bytes(at offset: Int, _ text: StaticString) -> Bool {
            offset >= 0 && JSONDocument.bytesEqual(p + offset, text.utf8Start, text.utf8CodeUnitCount)
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

    /// Whether object `o` has more than one member, from the tape alone: its first value's subtree
    /// ends before the object does.
    @inline(__always)
    static func hasSeveralMembers(_ doc: JSONDocument, _ o: Int) -> Bool {
        let end = Int(doc.tokens[o].next)
        return o &+ 2 < end && Int(doc.tokens[o &+ 2].next) < end
    }

    /// Whether every byte of `raw` is ASCII: eight at a time, then one at a time.
    static func isASCII(_ raw: UnsafeRawBufferPointer) -> Bool {
        let n = raw.count
        var i = 0
        while i &+ 8 <= n {
            if raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return false }
            i &+= 8
        }
        while i < n {
            if raw[i] >= 0x80 { return false }
            i &+= 1
        }
        return true
    }

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
    func ecpError(_ doc: JSONDocument, _ params: Int?, snapshot: JSONRef?) -> DecodedError {
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
}
