/// The endpoints a daemon binds and its clients connect to when none is given: declared once, read
/// by the daemon's settings and every client's flags.
public enum DefaultEndpoints {
    /// Fire-and-forget ingest (PULL).
    public static let ingest = "tcp://127.0.0.1:7700"
    /// Acknowledged ingest (ROUTER).
    public static let ingestAcked = "tcp://127.0.0.1:7701"
    /// Typed topics out (XPUB).
    public static let publish = "tcp://127.0.0.1:7702"
    /// Replay, stats, subscriber reports (ROUTER).
    public static let control = "tcp://127.0.0.1:7703"
}
