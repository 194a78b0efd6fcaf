import CheckoutBusJSON
import CheckoutBusProtocol

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
