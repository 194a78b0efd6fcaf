import CheckoutBusCore
import CheckoutBusRuntime
import CheckoutBusProtocol
import ZeroMQ

/// The messages of one parallel batch (``BusDaemon``'s `drainIngestInParallel`): each slot holds a
/// received message, when it arrived, the ``EventDecodeContext`` it is prepared in and what the
/// prepare found, until the pipeline thread commits it. Reused batch after batch. Each slot is
/// used by one thread at a time, handed over by ``PrepareWorkers``: an ``Exclusive`` holds it,
/// which checks that claim in debug builds, so this type is `Sendable` as the compiler sees it.
final class PreparedSlots: Sendable {
    /// Messages per parallel batch.
    static let batch = 128
    /// Fewer messages than this are prepared on the pipeline thread alone.
    static let parallelFrom = 16

    final class Slot {
        let message = ZMQMessage()
        let context = EventDecodeContext()
        /// What the prepare found, and the event it decoded (taken by the commit).
        var prepared: PreparedEvent?
        var event: DecodedEvent?
        /// The message's stages are timed (about one in ``StageTimes/sampleInterval``).
        var timed = false
        var arrival: UInt64 = 0
        var receivedAt = Timestamp(milliseconds: 0)
        var now: UInt32 = 0
        /// Frames in the message; above 1 it is rejected, and ``firstFrame`` holds its first.
        var frames = 1
        var firstFrame: [UInt8] = []
    }

    private let slots: [Exclusive<Slot>]

    init(count: Int) { slots = (0..<count).map { _ in Exclusive(Slot()) } }

    var count: Int { slots.count }

    subscript(i: Int) -> Exclusive<Slot> { slots[i] }
}
