/// The package's version, reported by `--version` and `checkoutbus_build_info`.
public enum CheckoutBusVersion {
    public static let current = "0.1.0"
    /// The git commit it was built from (12 hex digits, `-dirty` with uncommitted changes), or
    /// `unknown` when built outside a git checkout.
    public static let revision = BuildRevision.value
}
