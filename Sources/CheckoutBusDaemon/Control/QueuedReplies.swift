import Synchronization
import ZeroMQ

/// The replay pages queued in libzmq for the control clients, counted until libzmq has written or
/// dropped them: what bounds the control replies' memory (`--control-memory`, docs/security.md).
///
/// A page's records are copied once into memory of their own (a ``LentPage``) and lent to libzmq
/// frame by frame, so the daemon knows when the last frame has left its queue: the count goes down
/// on libzmq's I/O thread as it gives the page back, not when the page was handed over. A client
/// that never reads keeps its pages counted for as long as it stays connected.
///
/// The budget is split in two halves. Pages within a client's share (``ControlService/pageBytes(budget:clients:)``)
/// count against one: a client with no page queued is always sent its page (so clients that never
/// read cannot keep a reader waiting), a client with one queued only while the half has room. So
/// that half is passed by at most one page per client, sized for the clients connected when it
/// was read (a quarter of the budget in all when they were connected together). Pages of a single
/// record larger than the share count against the other half, which takes one such page whatever
/// its size when none is queued, and no more than the half otherwise: while clients that never
/// read hold it, other clients' replays of such records are answered `busy`.
///
/// `Sendable`: atomics, updated on the control thread and on libzmq's I/O thread.
package final class QueuedReplies: Sendable {
    /// Bytes of pages within their client's share queued in libzmq.
    let shareBytes = Atomic<Int>(0)
    /// Bytes of one-record pages larger than their client's share queued in libzmq.
    let oversizeBytes = Atomic<Int>(0)
    /// Replay requests answered `busy` because of the bounds here.
    let busy = Atomic<UInt64>(0)

    package init() {}

    /// Adds `bytes` (negative: takes them away) to the half a page counts against.
    func count(_ bytes: Int, oversize: Bool) {
        if oversize {
            oversizeBytes.wrappingAdd(bytes, ordering: .relaxed)
        } else {
            shareBytes.wrappingAdd(bytes, ordering: .relaxed)
        }
    }

    /// Bytes of replay pages queued for all control clients.
    package var bytes: Int { shareBytes.load(ordering: .relaxed) + oversizeBytes.load(ordering: .relaxed) }
}

/// The pages queued for one control client.
final class ClientQueue: Sendable {
    let pages = Atomic<Int>(0)
}

/// One replay page's records, in memory of their own, lent to libzmq a frame at a time: every
/// frame holds a reference, which libzmq's ``giveBack`` drops (exactly once per frame, on any
/// thread), and the last one frees the memory and takes the page out of the counts.
final class LentPage: Sendable {
    /// The records' bytes. Written once, before any frame is lent; read by libzmq only after.
    nonisolated(unsafe) let memory: UnsafeMutableRawBufferPointer
    private let counter: QueuedReplies
    private let oversize: Bool
    private let client: ClientQueue

    /// Counts a page of `byteCount` bytes as queued for `client`, and allocates its memory.
    init(byteCount: Int, oversize: Bool, client: ClientQueue, counter: QueuedReplies) {
        memory = .allocate(byteCount: max(1, byteCount), alignment: 16)
        self.counter = counter
        self.oversize = oversize
        self.client = client
        client.pages.wrappingAdd(1, ordering: .relaxed)
        counter.count(memory.count, oversize: oversize)
    }

    deinit {
        counter.count(-memory.count, oversize: oversize)
        client.pages.wrappingSubtract(1, ordering: .relaxed)
        memory.deallocate()
    }

    /// Sends `frame` (bytes inside ``memory``) without copying it; the page lives until libzmq
    /// gives the frame back.
    /// - Returns: whether the frame was queued (when not, it was given back already).
    func send(_ frame: UnsafeRawBufferPointer, on socket: ZMQSocket, more: Bool) throws -> Bool {
        try socket.send(lending: frame, giveBack: LentPage.giveBack, hint: Unmanaged.passRetained(self).toOpaque(),
                        more: more)
    }

    /// Drops the reference a lent frame held (`zmq_free_fn`'s shape: the bytes, then the hint).
    static let giveBack: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, hint in
        guard let hint else { return }
        Unmanaged<LentPage>.fromOpaque(hint).release()
    }
}
