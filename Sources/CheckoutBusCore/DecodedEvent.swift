import CheckoutBusJSON
import CheckoutBusProtocol

/// One raw event after decoding, before the lifecycle rules. Refers into the pipeline's documents,
/// so it lives only while the message is being processed.
///
/// Not copyable: the decoder builds it and the processor borrows it, so its strings (an event id
/// is usually longer than a string stored inline) are never retained and released per copy.
public struct DecodedEvent: ~Copyable {
    public var kind: LifecycleKind
    public var format: RawFormat
    public var sdk: String
    public var platform: String?
    /// The checkout id. Usually read in place (``checkoutIDText``): this builds its `String`.
    public var checkoutID: String? {
        get { checkoutIDString ?? checkoutIDText.map { String(decoding: $0, as: UTF8.self) } }
        set {
            checkoutIDString = newValue
            checkoutIDText = nil
        }
    }
    /// The checkout id as written in the message — an unescaped string's text or a number's —
    /// when it was read from one: no `String` is built for it. Points into the decoded document's
    /// bytes (the message, or the decoder's document for JSON nested in a string), so it is
    /// valid for as long as ``snapshot`` is. Nil when ``checkoutIDString`` holds the id, or there is none.
    var checkoutIDText: UnsafeRawBufferPointer?
    /// The checkout id when it is not in the message as is (escaped, or made up: `order:…`).
    var checkoutIDString: String?
    /// The event id. Usually read in place (``eventIDText``): this builds its `String`.
    public var eventID: String? {
        get { eventIDString ?? eventIDText.map { String(decoding: $0, as: UTF8.self) } }
        set {
            eventIDString = newValue
            eventIDText = nil
        }
    }
    /// The event id as written in the message, as ``checkoutIDText``.
    var eventIDText: UnsafeRawBufferPointer?
    /// The event id when it is not in the message as is (an escaped string's text).
    var eventIDString: String?
    public var occurredAt: JSONRef?
    public var snapshot: JSONRef?
    public var payment: JSONRef?
    public var error: DecodedError?
    public var orderID: String?

    public init(kind: LifecycleKind, format: RawFormat, sdk: String) {
        self.kind = kind
        self.format = format
        self.sdk = sdk
    }

    /// Whether there is a checkout id (without building its `String`).
    var hasCheckoutID: Bool { checkoutIDText != nil || checkoutIDString != nil }

    /// Whether there is an event id (without building its `String`).
    var hasEventID: Bool { eventIDText != nil || eventIDString != nil }

    /// Sets the checkout id to ``JSONDocument/identifier(_:)`` of token `t`, in place where it can be.
    mutating func setCheckoutID(_ doc: JSONDocument, _ t: Int) {
        (checkoutIDText, checkoutIDString) = RawEventDecoder.identifierText(doc, t)
    }

    /// Sets the event id to ``JSONDocument/identifier(_:)`` of token `t`, in place where it can be.
    mutating func setEventID(_ doc: JSONDocument, _ t: Int) {
        (eventIDText, eventIDString) = RawEventDecoder.identifierText(doc, t)
    }

    /// The event id's window key (``EventIDWindow/key(utf8:checkout:)`` of its UTF-8), if any.
    func eventIDKey(checkout: CheckoutStateTable.Key) -> (UInt64, UInt64)? {
        if let text = eventIDText { return EventIDWindow.key(utf8: text, checkout: checkout) }
        return eventIDString.map { EventIDWindow.key($0, checkout: checkout) }
    }

    /// Writes the event id as a JSON string, `null` without one.
    func writeEventID(to w: inout JSONWriter) {
        if let text = eventIDText {
            w.appendString(utf8: text)
        } else if let id = eventIDString {
            w.appendString(id)
        } else {
            w.append("null")
        }
    }

    /// The checkout id's state-table key (``CheckoutStateTable/key(utf8:)`` of its UTF-8), if any.
    func checkoutKey() -> CheckoutStateTable.Key? {
        if let text = checkoutIDText { return CheckoutStateTable.key(utf8: text) }
        return checkoutIDString.map { CheckoutStateTable.key($0) }
    }

    /// Writes the checkout id as a JSON string (`""` without one), as `appendString` of its `String` would.
    func writeCheckoutID(to w: inout JSONWriter) {
        if let text = checkoutIDText { w.appendString(utf8: text) } else { w.appendString(checkoutIDString ?? "") }
    }
}
