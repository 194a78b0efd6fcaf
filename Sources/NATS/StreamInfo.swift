import CNATS

/// A stream's configuration and state. `Sendable`.
public struct StreamInfo: Sendable {
    public var configuration: StreamConfiguration
    public var messages: UInt64
    public var bytes: UInt64
    public var firstSequence: UInt64
    public var lastSequence: UInt64
    /// The cluster's stream leader, when clustered.
    public var leader: String?

    init(_ info: jsStreamInfo) {
        configuration = info.Config.map { StreamConfiguration($0.pointee) } ?? StreamConfiguration(name: "", subjects: [])
        messages = info.State.Msgs
        bytes = info.State.Bytes
        firstSequence = info.State.FirstSeq
        lastSequence = info.State.LastSeq
        leader = info.Cluster?.pointee.Leader.map { String(cString: $0) }
    }
}
