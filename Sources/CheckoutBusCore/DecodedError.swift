import CheckoutBusJSON
import CheckoutBusProtocol

/// What a failure carried, normalised.
package struct DecodedError {
    package var code: StableErrorCode
    package var rawCode: String?
    package var message: String?
    package var httpStatus: Int?
    /// Whether the checkout ended with this failure (Shopify: always; Primer: only an inline
    /// session's initialisation failure).
    package var terminal: Bool
    /// Where the buyer can go on (an Embedded Checkout Protocol error's `continue_url`: for
    /// `cart_completed`, the order's status page).
    package var continueURL: String? = nil

    package init(code: StableErrorCode, rawCode: String?, message: String?, httpStatus: Int?, terminal: Bool,
                continueURL: String? = nil) {
        self.code = code
        self.rawCode = rawCode
        self.message = message
        self.httpStatus = httpStatus
        self.terminal = terminal
        self.continueURL = continueURL
    }
}
