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
