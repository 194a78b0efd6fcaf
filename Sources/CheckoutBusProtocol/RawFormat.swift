/// Which raw family an event was decoded from (`source.format`). `Sendable`.
///
/// The families are declared here once: the daemon's counters and metrics, `stats`, the error
/// map's family prefixes, `top` and the tools' help derive their lists from ``allCases`` and
/// ``name`` (docs/architecture.md, "Adding a raw family").
public enum RawFormat: UInt8, Sendable, CaseIterable {
    /// Embedded Checkout Protocol JSON-RPC notifications (`ec.*`).
    case ecp
    /// The older Checkout Sheet Kit bridge: `{"name":…,"body":"<JSON string>"}`.
    case sheetBridge
    /// SDK callback events named by any platform's spelling.
    case callback
    /// Primer Checkout states and callbacks.
    case primer

    /// The family's name in envelopes (`source.format`), metrics labels and `stats`.
    public var name: StaticString {
        switch self {
        case .ecp: "ecp"
        case .sheetBridge: "sheet_bridge"
        case .callback: "callback"
        case .primer: "primer"
        }
    }

    /// ``name`` as a `String`.
    public var label: String { "\(name)" }

    /// Every family's name, in declaration order (the order of the daemon's per-family counters).
    public static let labels: [String] = allCases.map(\.label)
}
