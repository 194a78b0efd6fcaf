import CNATS

/// What a JetStream stream is: subjects, storage, replication, limits. `Sendable`.
///
/// The subset of `jsStreamConfig` a bridge needs to create a stream and check an existing one.
public struct StreamConfiguration: Sendable, Equatable {
    public enum Storage: Sendable, Equatable { case file, memory }
    public enum Retention: Sendable, Equatable { case limits, interest, workQueue }
    public enum Discard: Sendable, Equatable { case old, new }

    public var name: String
    public var subjects: [String]
    public var storage = Storage.file
    public var retention = Retention.limits
    public var discard = Discard.old
    /// Copies of every message across the cluster (1…5).
    public var replicas = 1
    /// Messages older than this are removed; 0: no age limit.
    public var maxAgeNanoseconds: Int64 = 0
    /// The stream's size limit in bytes; -1: none.
    public var maxBytes: Int64 = -1
    /// The stream's message limit; -1: none.
    public var maxMessages: Int64 = -1
    /// The largest message accepted, in bytes; -1: the server's limit.
    public var maxMessageSize: Int32 = -1
    /// How long the stream remembers a `Nats-Msg-Id` to drop a republished message.
    public var duplicateWindowNanoseconds: Int64 = 120_000_000_000
    /// Whether the stream acknowledges publishes (true for every stream this package creates).
    public var acknowledges = true
    /// Whether the stream was sealed (no more messages).
    public var sealed = false

    public init(name: String, subjects: [String]) {
        self.name = name
        self.subjects = subjects
    }

    init(_ c: jsStreamConfig) {
        name = c.Name.map { String(cString: $0) } ?? ""
        subjects = (0..<Int(c.SubjectsLen)).compactMap { c.Subjects?[$0].map { String(cString: $0) } }
        storage = c.Storage == js_MemoryStorage ? .memory : .file
        retention = c.Retention == js_InterestPolicy ? .interest : c.Retention == js_WorkQueuePolicy ? .workQueue : .limits
        discard = c.Discard == js_DiscardNew ? .new : .old
        replicas = Int(c.Replicas)
        maxAgeNanoseconds = c.MaxAge
        maxBytes = c.MaxBytes
        maxMessages = c.MaxMsgs
        maxMessageSize = c.MaxMsgSize
        duplicateWindowNanoseconds = c.Duplicates
        acknowledges = !c.NoAck
        sealed = c.Sealed
    }
}

