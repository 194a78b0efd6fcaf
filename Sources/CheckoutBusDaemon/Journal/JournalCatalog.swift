import Synchronization
import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// What the journal holds right now, for readers on other threads: the retained segments (first
/// seq, path, bytes written) and the last seq written.
///
/// `Sendable`: one mutex around a small value. The pipeline thread (``Journal``) updates it once
/// per written batch, per new segment and per retired segment; a ``JournalReader`` on any thread
/// takes a copy per request and reads the files on its own descriptors, never past a segment's
/// recorded size, so it sees only whole records that were written.
package final class JournalCatalog: Sendable {
    package struct Segment: Sendable {
        var firstSeq: UInt64
        var path: String
        /// Bytes of whole records written (the file may be longer: a direct write's zero padding).
        var size: Int
    }

    package struct Contents: Sendable {
        var segments: [Segment] = []
        /// The last seq written to a segment file (0 for an empty journal).
        var lastSeq: UInt64 = 0

        /// The oldest seq still retained (`lastSeq + 1` when nothing is).
        var firstSeq: UInt64 { segments.first?.firstSeq ?? lastSeq + 1 }
    }

    private let state = Mutex(Contents())

    /// A copy of the catalog as it is now.
    package var contents: Contents { state.withLock { $0 } }

    package func replace(_ contents: Contents) { state.withLock { $0 = contents } }

    /// The newest segment grew to `size` bytes, holding records up to `lastSeq`.
    package func written(size: Int, lastSeq: UInt64) {
        state.withLock { s in
            if !s.segments.isEmpty { s.segments[s.segments.count - 1].size = size }
            s.lastSeq = lastSeq
        }
    }

    package func appendSegment(_ segment: Segment) { state.withLock { $0.segments.append(segment) } }

    package func removeOldestSegment() { state.withLock { if !$0.segments.isEmpty { $0.segments.removeFirst() } } }
}
