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
