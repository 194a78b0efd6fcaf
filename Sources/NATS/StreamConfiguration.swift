import CNATS

/// What a JetStream stream is: subjects, storage, replication, limits. `Sendable`.
///
/// The subset of `jsStreamConfig` a bridge needs to create a stream and check an existing one.
package struct StreamConfiguration: Sendable, Equatable {
    package enum Storage: Sendable, Equatable { case file, memory }
    package enum Retention: Sendable, Equatable { case limits, interest, workQueue }
    package enum Discard: Sendable, Equatable { case old, new }

    package var name: String
    package var subjects: [String]
    package var storage = Storage.file
    package var retention = Retention.limits
    package var discard = Discard.old
    /// Copies of every message across the cluster (1…5).
    package var replicas = 1
    /// Messages older than this are removed; 0: no age limit.
    package var maxAgeNanoseconds: Int64 = 0
    /// The stream's size limit in bytes; -1: none.
    package var maxBytes: Int64 = -1
    /// The stream's message limit; -1: none.
    package var maxMessages: Int64 = -1
    /// The largest message accepted, in bytes; -1: the server's limit.
    package var maxMessageSize: Int32 = -1
    /// How long the stream remembers a `Nats-Msg-Id` to drop a republished message.
    package var duplicateWindowNanoseconds: Int64 = 120_000_000_000
    /// Whether the stream acknowledges publishes (true for every stream this package creates).
    package var acknowledges = true
    /// Whether the stream was sealed (no more messages).
    package var sealed = false

    package init(name: String, subjects: [String]) {
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

