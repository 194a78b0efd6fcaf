import CheckoutBusJSON
import CheckoutBusProtocol

/// One raw event after decoding, before the lifecycle rules. Refers into the pipeline's documents,
/// so it lives only while the message is being processed.
///
/// Not copyable: the decoder builds it and the processor borrows it, so its strings (an event id
/// is usually longer than a string stored inline) are never retained and released per copy.
package struct DecodedEvent: ~Copyable {
    package var kind: LifecycleKind
    package var format: RawFormat
    package var sdk: String
    package var platform: String?
    /// The checkout id. Usually read in place (``checkoutIdentifier``): this builds its `String`.
    package var checkoutID: String? {
        get { checkoutIdentifier.value }
        set { checkoutIdentifier = IdentifierText(string: newValue) }
    }
    /// The checkout id as read: in place in the decoded document's bytes (the message, or the
    /// decoder's document for JSON nested in a string), valid for as long as ``snapshot`` is; or
    /// a `String` when it is not in the message as is (escaped, or made up: `order:…`).
    var checkoutIdentifier = IdentifierText()
    /// The event id. Usually read in place (``eventIdentifier``): this builds its `String`.
    package var eventID: String? {
        get { eventIdentifier.value }
        set { eventIdentifier = IdentifierText(string: newValue) }
    }
    /// The event id as read, as ``checkoutIdentifier``.
    var eventIdentifier = IdentifierText()
    package var occurredAt: JSONRef?
    package var snapshot: JSONRef?
    package var payment: JSONRef?
    package var error: DecodedError?
    /// The order id. Usually read in place (``orderIdentifier``): this builds its `String`.
    package var orderID: String? {
        get { orderIdentifier.value }
        set { orderIdentifier = IdentifierText(string: newValue) }
    }
    /// The order id as read, as ``checkoutIdentifier``.
    var orderIdentifier = IdentifierText()

    package init(kind: LifecycleKind, format: RawFormat, sdk: String) {
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

    /// Sets the order id to ``JSONDocument/identifier(_:)`` of token `t`, in place where it can be.
    mutating func setOrderID(_ doc: JSONDocument, _ t: Int) {
        orderIdentifier = RawEventDecoder.identifierText(doc, t)
    }

    /// Whether there is an order id (without building its `String`).
    var hasOrderID: Bool { orderIdentifier.isPresent }

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

    /// Calls `body` with the checkout id's UTF-8 (empty without one), in place where it was read so.
    func withCheckoutIDBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        checkoutIdentifier.withUTF8(body)
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
///
/// The bytes need no escape in JSON (no control byte, quote or backslash): they come only from
/// an unescaped string the scanner checked, or a number's text, and are written between quotes
/// as they are (``write(to:)``). Anything else is given as a `String`.
struct IdentifierText {
    /// One case at a time: destroying one that holds no `String` (the usual case) releases nothing,
    /// where an optional `String` field beside the bytes was released (a runtime call) every time.
    private enum Storage {
        case absent
        case bytes(UnsafeRawBufferPointer)
        case string(String)
    }

    private var storage: Storage

    /// Bytes win when both are given; they must need no escape (see above).
    init(bytes: UnsafeRawBufferPointer? = nil, string: String? = nil) {
        if let bytes {
            assert(JSONWriter.needsNoEscape(bytes), "an identifier in place needs no escape")
            storage = .bytes(bytes)
        } else if let string {
            storage = .string(string)
        } else {
            storage = .absent
        }
    }

    /// The bytes, when it was read in place.
    var bytes: UnsafeRawBufferPointer? {
        if case .bytes(let b) = storage { return b }
        return nil
    }

    /// The `String`, when it was not read in place.
    var string: String? {
        if case .string(let s) = storage { return s }
        return nil
    }

    @inline(__always) var isPresent: Bool {
        if case .absent = storage { return false }
        return true
    }

    /// Its length in UTF-8 bytes (0 when absent).
    var utf8Count: Int {
        switch storage {
        case .absent: return 0
        case .bytes(let b): return b.count
        case .string(let s): return s.utf8.count
        }
    }

    /// Its `String`, built from the bytes when it was read in place; nil when absent.
    var value: String? {
        switch storage {
        case .absent: return nil
        case .bytes(let b): return String(decoding: b, as: UTF8.self)
        case .string(let s): return s
        }
    }

    /// Calls `body` with its UTF-8 (empty when absent).
    func withUTF8<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch storage {
        case .absent: return body(UnsafeRawBufferPointer(start: nil, count: 0))
        case .bytes(let b): return body(b)
        case .string(var s): return s.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        }
    }

    /// A buffer that keeps a copy of an identifier read in place, for a result that outlives its
    /// message (``EventProcessor``'s results): each ``keep(_:)`` replaces the last.
    final class Copy {
        private var bytes = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 8)
        private var capacity = 64

        deinit { bytes.deallocate() }

        /// `id` with its bytes, when it was read in place, copied here (valid until the next call);
        /// a `String` or nothing as it is.
        func keep(_ id: IdentifierText) -> IdentifierText {
            guard let text = id.bytes else { return id }
            if text.count > capacity {
                bytes.deallocate()
                capacity = max(text.count, 2 * capacity)
                bytes = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
            }
            if let from = text.baseAddress { bytes.copyMemory(from: from, byteCount: text.count) }
            return IdentifierText(bytes: UnsafeRawBufferPointer(start: bytes, count: text.count))
        }
    }

    /// Writes it as a JSON string, as `appendString` of ``value`` would.
    /// - Returns: false, writing nothing, when it is absent.
    @inline(__always)
    func write(to w: inout JSONWriter) -> Bool {
        switch storage {
        case .absent: return false
        case .bytes(let b): w.appendQuotedVerbatim(b)
        case .string(let s): w.appendString(s)
        }
        return true
    }
}
