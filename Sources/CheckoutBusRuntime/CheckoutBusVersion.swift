/// The package's version, reported by `--version`.
public enum CheckoutBusVersion {
    public static let current = "0.1.0"
}
