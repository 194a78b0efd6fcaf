/// How long a topic prefix may be and how many a replay may name: one definition for the daemon,
/// which enforces them, and the clients, which keep within them (docs/security.md, "Limits").
/// Every topic the bus publishes is under 64 bytes (`checkout.fail.<code>` is the longest kind).
public enum TopicLimits {
    /// The longest topic prefix a subscription or a replay may give, in bytes.
    public static let maxPrefixBytes = 64
    /// The longest subscription message the publish socket takes: a ZMTP 3.1 `SUBSCRIBE` command
    /// (`\x09SUBSCRIBE` and the prefix, 10 bytes more than the prefix) or the older form (one flag
    /// byte and the prefix). A longer one cuts its connection as its size arrives.
    public static let maxSubscriptionMessageBytes = maxPrefixBytes + 10
    /// The same with CURVE: the limit applies to frames as they arrive, and CURVE's handshake
    /// (`INITIATE`, about 260 bytes and the client's metadata) and its encrypted frames (33 bytes
    /// more than the message) are larger. Only listed keys get past the handshake.
    public static let maxCurveSubscriptionMessageBytes = 1024
    /// The most prefixes one replay request may name.
    public static let maxReplayPrefixes = 32
}

/// How deep an envelope may nest, for every reader of envelopes (workers, subscribers, tools, the
/// daemon's own restore at start). The daemon accepts raw events nested up to 64 levels (its
/// parser's limit, also for JSON nested in a string, such as a bridge's `body`), and an envelope
/// holds the snapshot one level below its root: a snapshot the daemon took whole is 65 levels
/// deep in its envelope (66: one spare, for tool output that puts an envelope one level down).
/// Read with the parser's 64, such an envelope was parked `unreadable` by the fulfilment worker,
/// its order never recorded.
public enum EnvelopeLimits {
    public static let maxDepth = 66
}
