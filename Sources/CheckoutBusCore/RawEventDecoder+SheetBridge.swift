import CheckoutBusJSON
import CheckoutBusProtocol

/// The older Checkout Sheet Kit bridge: `{"name":…,"body":…}`, the body often JSON in a string.
extension RawEventDecoder {
    /// - Returns: nil when `name` is not one of the bridge's names but a callback's (a React Native
    ///   or Flutter emitter's `{"name":"checkoutDidComplete","body":{…}}`): decoded as a callback.
    func decodeSheetBridge(_ doc: JSONDocument, _ r: Int, name n: Int, body: Int) throws(DecodeRejection) -> DecodedEvent? {
        let name = doc.string(n) ?? ""
        let folded = ErrorCodeNormalizer.fold(name)
        let kind: LifecycleKind
        switch folded {
        case "completed", "checkoutcompleted": kind = .complete
        case "error", "checkouterror": kind = .fail
        case "started", "checkoutstarted": kind = .start
        case "close", "closed", "checkoutclosed": kind = .dismiss
        default:
            if NameInfo(folded, name: name).isKnown { return nil }
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
                event.setCheckoutID(bd, v)
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
}
