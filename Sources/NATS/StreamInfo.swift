import CNATS

/// A stream's configuration and state. `Sendable`.
package struct StreamInfo: Sendable {
    package var configuration: StreamConfiguration
    package var messages: UInt64
    package var bytes: UInt64
    package var firstSequence: UInt64
    package var lastSequence: UInt64
    /// The cluster's stream leader, when clustered.
    package var leader: String?

    init(_ info: jsStreamInfo) {
        configuration = info.Config.map { StreamConfiguration($0.pointee) } ?? StreamConfiguration(name: "", subjects: [])
        messages = info.State.Msgs
        bytes = info.State.Bytes
        firstSequence = info.State.FirstSeq
        lastSequence = info.State.LastSeq
        leader = info.Cluster?.pointee.Leader.map { String(cString: $0) }
    }
}
