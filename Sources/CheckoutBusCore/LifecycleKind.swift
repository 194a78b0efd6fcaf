/// The five lifecycle kinds every raw event is normalised into. `Sendable`.
public enum LifecycleKind: UInt8, Sendable, CaseIterable {
    case start, update, complete, fail, dismiss

    /// The kind's name in envelopes (`"kind"`) and topics.
    public var name: StaticString {
        switch self {
        case .start: "start"
        case .update: "update"
        case .complete: "complete"
        case .fail: "fail"
        case .dismiss: "dismiss"
        }
    }

    /// The topic an event of this kind is published on (failures append `.<code>`).
    public var topic: StaticString {
        switch self {
        case .start: "checkout.start"
        case .update: "checkout.update"
        case .complete: "checkout.complete"
        case .fail: "checkout.fail"
        case .dismiss: "checkout.dismiss"
        }
    }
}

/// Which raw family an event was decoded from (`source.format`). `Sendable`.
public enum RawFormat: UInt8, Sendable {
    /// Embedded Checkout Protocol JSON-RPC notifications (`ec.*`).
    case ecp
    /// The older Checkout Sheet Kit bridge: `{"name":…,"body":"<JSON string>"}`.
    case sheetBridge
    /// SDK callback events named by any platform's spelling.
    case callback
    /// Primer Checkout states and callbacks.
    case primer

    public var name: StaticString {
        switch self {
        case .ecp: "ecp"
        case .sheetBridge: "sheet_bridge"
        case .callback: "callback"
        case .primer: "primer"
        }
    }
}

/// A value inside one of the pipeline's parsed documents.
///
/// Does not keep its document alive (no reference counting as events move through the pipeline):
/// a `JSONRef` is valid while its document is and until the document parses again. The pipeline's
/// documents belong to its processor and decoder; elsewhere, hold the document (or use
/// `withExtendedLifetime`) for as long as its refs are read.
public struct JSONRef {
    public unowned(unsafe) let doc: JSONDocument
    public let token: Int

    public init(_ doc: JSONDocument, _ token: Int) {
        self.doc = doc
        self.token = token
    }
}

/// What a failure carried, normalised.
public struct DecodedError {
    public var code: StableErrorCode
    public var rawCode: String?
    public var message: String?
    public var httpStatus: Int?
    /// Whether the checkout ended with this failure (Shopify: always; Primer: only an inline
    /// session's initialisation failure).
    public var terminal: Bool
    /// Where the buyer can go on (an Embedded Checkout Protocol error's `continue_url`: for
    /// `cart_completed`, the order's status page).
    public var continueURL: String? = nil

    public init(code: StableErrorCode, rawCode: String?, message: String?, httpStatus: Int?, terminal: Bool,
                continueURL: String? = nil) {
        self.code = code
        self.rawCode = rawCode
        self.message = message
        self.httpStatus = httpStatus
        self.terminal = terminal
        self.continueURL = continueURL
    }
}

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
    public var checkoutID: String?
    public var eventID: String?
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
}
