import CheckoutBusJSON
import CheckoutBusProtocol

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
