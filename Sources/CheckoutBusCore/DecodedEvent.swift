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
    /// The checkout id. Usually read in place (``checkoutIdentifier``): this builds its `String`.
    public var checkoutID: String? {
        get { checkoutIdentifier.value }
        set { checkoutIdentifier = IdentifierText(string: newValue) }
    }
    /// The checkout id as read: in place in the decoded document's bytes (the message, or the
    /// decoder's document for JSON nested in a string), valid for as long as ``snapshot`` is; or
    /// a `String` when it is not in the message as is (escaped, or made up: `order:…`).
    var checkoutIdentifier = IdentifierText()
    /// The event id. Usually read in place (``eventIdentifier``): this builds its `String`.
    public var eventID: String? {
        get { eventIdentifier.value }
        set { eventIdentifier = IdentifierText(string: newValue) }
    }
    /// The event id as read, as ``checkoutIdentifier``.
    var eventIdentifier = IdentifierText()
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
    var hasCheckoutID: Bool { checkoutIdentifier.isPresent }

    /// Whether there is an event id (without building its `String`).
    var hasEventID: Bool { eventIdentifier.isPresent }

    /// Sets the checkout id to ``JSONDocument/identifier(_:)`` of token `t`, in place where it can be.
    mutating func setCheckoutID(_ doc: JSONDocument, _ t: Int) {
        checkoutIdentifier = RawEventDecoder.identifierText(doc, t)
    }

    /// Sets the event id to ``JSONDocument/identifier(_:)`` of token `t`, in place where it can be.
    mutating func setEventID(_ doc: JSONDocument, _ t: Int) {
        eventIdentifier = RawEventDecoder.identifierText(doc, t)
    }

    /// The event id's window key (``EventIDWindow/key(utf8:checkout:)`` of its UTF-8), if any.
    func eventIDKey(checkout: CheckoutStateTable.Key) -> (UInt64, UInt64)? {
        if let bytes = eventIdentifier.bytes { return EventIDWindow.key(utf8: bytes, checkout: checkout) }
        return eventIdentifier.string.map { EventIDWindow.key($0, checkout: checkout) }
    }

    /// Writes the event id as a JSON string, `null` without one.
    func writeEventID(to w: inout JSONWriter) {
        if !eventIdentifier.write(to: &w) { w.append("null") }
    }

    /// The checkout id's state-table key (``CheckoutStateTable/key(utf8:)`` of its UTF-8), if any.
    func checkoutKey() -> CheckoutStateTable.Key? {
        if let bytes = checkoutIdentifier.bytes { return CheckoutStateTable.key(utf8: bytes) }
        return checkoutIdentifier.string.map { CheckoutStateTable.key($0) }
    }

    /// Writes the checkout id as a JSON string (`""` without one), as `appendString` of its `String` would.
    func writeCheckoutID(to w: inout JSONWriter) {
        if !checkoutIdentifier.write(to: &w) { w.appendString("") }
    }
}

/// An identifier as the decoder read it. When the message holds it as is (an unescaped string's
/// text, a number's), it is those bytes in place and no `String` is built for it; otherwise
/// (escaped, or made up) it is a `String`. The bytes are valid only as long as what they point
/// into (a document, or a buffer of the processor's). Absent when neither is set.
struct IdentifierText {
    var bytes: UnsafeRawBufferPointer?
    var string: String?

    init(bytes: UnsafeRawBufferPointer? = nil, string: String? = nil) {
        self.bytes = bytes
        self.string = string
    }

    @inline(__always) var isPresent: Bool { bytes != nil || string != nil }

    /// Its `String`, built from the bytes when it was read in place; nil when absent.
    var value: String? { string ?? bytes.map { String(decoding: $0, as: UTF8.self) } }

    /// Writes it as a JSON string, as `appendString` of ``value`` would.
    /// - Returns: false, writing nothing, when it is absent.
    @inline(__always)
    func write(to w: inout JSONWriter) -> Bool {
        if let bytes {
            w.appendString(utf8: bytes)
        } else if let string {
            w.appendString(string)
        } else {
            return false
        }
        return true
    }
}
