import Foundation
import Synchronization
import CheckoutBusRuntime

/// The async subscriber: every envelope of one shard or several, at least once, in `seq` order
/// per shard, across drops and restarts — with the cursor moved only when the caller says its work
/// is done.
///
///     let subscriber = try Subscriber(options: options, cursor: FileCursor(path: "orders.cursor"))
///     for try await envelope in subscriber.envelopes {
///         try await handle(envelope.decode())
///         try await subscriber.commit(envelope)
///     }
///
/// **Threads.** The ZeroMQ sockets live on a `Thread` of their own, started when ``envelopes`` is
/// first iterated — never a cooperative-pool thread, which a blocking poll would hold. That thread
/// runs the same gap logic as ``BusSubscriber`` (``SubscriptionSequencer``) and hands envelopes
/// over through a bounded queue (``init(shards:cursors:shardIDs:of:bufferCapacity:logger:onSubscribed:)``'s
/// `bufferCapacity`): when the consumer lags, the thread stops reading once the queue is full and
/// starts again when the consumer has taken it down to half (watermarks: one wake-up per half a
/// queue, not one per envelope); meanwhile ZeroMQ's high-water mark drops, and the journal fills
/// the gap later.
///
/// **Commits.** ``commit(_:)`` writes the envelope's shard's cursor, there and then: everything of
/// that shard up to it is done. A cursor whose commit may block (a ``FileCursor``; any cursor but
/// ``MemoryCursor`` by default, ``SubscriberCursor/commitMayBlock``) is written on a serial queue
/// of the subscriber's while the calling task is suspended, never on a cooperative-pool thread. Nothing else moves a cursor. Envelopes delivered and not committed
/// when the process ends are delivered again by the next subscriber on the same cursor.
///
/// **Stopping.** Cancel the task iterating ``envelopes`` (or leave the loop): the thread stops at
/// its next round (within 200 ms), sends a last report and closes its sockets; `next()` returns nil
/// once it has. An error on the thread (a refused request, a wrong shard, a cursor that cannot be
/// read) ends the iteration by throwing it.
///
/// **Shards.** One endpoint pair, or one per shard as ``ShardedSubscriber`` takes them and checks
/// them (each endpoint must show the shard its position says before anything is delivered);
/// ``ReceivedEnvelope/shard`` says which cursor a commit moves.
///
/// `Sendable`: iterate it from one task; ``commit(_:)`` and ``statistics`` from any.
public final class Subscriber: Sendable {
    /// Each shard's endpoints and options, in endpoint order.
    public let shards: [BusSubscriber.Options]
    /// The shard each endpoint is; nil: endpoint `i` is shard `i` of `shards.count` (or, with one
    /// endpoint, whatever that daemon is).
    public let shardIDs: [Int]?
    /// The bus's number of shards.
    public let shardCount: Int
    private let handOver: SubscriberHandOver
    private let logger: BusLogger
    private let onSubscribed: (@Sendable () -> Void)?

    /// A subscriber of one daemon (or one shard followed on its own).
    /// - Parameters:
    ///   - options: endpoints, prefixes and tuning.
    ///   - cursor: where to resume; moved by ``commit(_:)`` only.
    ///   - bufferCapacity: envelopes delivered ahead of the consumer, at most.
    public convenience init(options: BusSubscriber.Options, cursor: sending any SubscriberCursor,
                            bufferCapacity: Int = 1024, logger: BusLogger = BusLogger(label: "subscriber"),
                            onSubscribed: (@Sendable () -> Void)? = nil) {
        self.init(shards: [options], cursors: [cursor], bufferCapacity: bufferCapacity, logger: logger,
                  onSubscribed: onSubscribed)
    }

    /// A subscriber of several shards: endpoint `i` is shard `shardIDs[i]` of `shardCount` (by
    /// default, shard `i` of `shards.count`).
    /// - Parameters:
    ///   - shards: each shard's endpoints and options.
    ///   - cursors: each shard's cursor, in the same order (``FileCursor/shardCursors(path:shards:durable:)``).
    ///   - shardIDs: a subset of the shards, checked with ``ShardedSubscriber/validate(shardIDs:of:)``.
    ///   - shardCount: the bus's number of shards, with `shardIDs`.
    ///   - bufferCapacity: envelopes delivered ahead of the consumer, at most.
    ///   - onSubscribed: called once on the poll thread when every shard's subscriptions are live.
    /// - Important: `shards` and `cursors` must have the same, non-zero count.
    public init(shards: [BusSubscriber.Options], cursors: sending [any SubscriberCursor], shardIDs: [Int]? = nil,
                of shardCount: Int? = nil, bufferCapacity: Int = 1024,
                logger: BusLogger = BusLogger(label: "subscriber"), onSubscribed: (@Sendable () -> Void)? = nil) {
        precondition(!shards.isEmpty && shards.count == cursors.count, "one cursor per shard, and at least one shard")
        self.shards = shards
        self.shardIDs = shardIDs
        self.shardCount = shardCount ?? shards.count
        self.logger = logger
        self.onSubscribed = onSubscribed
        handOver = SubscriberHandOver(capacity: bufferCapacity, cursors: cursors)
    }

    deinit { handOver.cancel() }

    /// The envelopes, as they become deliverable; iterate once.
    public var envelopes: Envelopes { Envelopes(subscriber: self) }

    /// Records that `envelope`'s work is done: its shard's cursor moves to its `seq`.
    /// - Throws: what the cursor throws (a ``SubscriberError`` for a file that cannot be written).
    public func commit(_ envelope: ReceivedEnvelope) async throws {
        let handOver = handOver
        let (position, seq) = (envelope.position, envelope.seq)
        // Known without the cursors' lock, which the commit queue holds through a file write.
        defer { handOver.committed.withLock { $0[position] = max($0[position] ?? 0, seq) } }
        guard handOver.commitMayBlock[position] else {
            return try handOver.cursors.withLock { cursors throws in try cursors[position].commit(seq) }
        }
        // A cursor that writes a file blocks: it is written on the hand-over's commit queue while
        // this task is suspended, not on a thread of the cooperative pool.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            handOver.commits.async {
                continuation.resume(with: Result { try handOver.cursors.withLock { cursors throws in try cursors[position].commit(seq) } })
            }
        }
    }

    /// Says that the application stopped on an error, before it leaves the loop over
    /// ``envelopes``: the last report the daemons are sent is not final, so they show this
    /// subscriber gone and silent, as after a crash, rather than stopped (a clean stop). That
    /// report names the last position committed.
    public func abandon() {
        handOver.abandoned.store(true, ordering: .releasing)
    }

    /// Says how many envelopes of the shard at `position` the application holds parked because it
    /// could not apply them (the fulfilment worker's `rejected` table): sent to that shard's daemon
    /// with every report from now on, shown by its `stats` (`subscribers`) and metrics
    /// (`checkoutbus_subscriber_rejected`), so that an operator sees them without the worker's store.
    public func reportRejected(_ count: Int, position: Int = 0) {
        handOver.rejected.withLock { $0[position] = count }
    }

    /// The positions of the shards from which no heartbeat has arrived for
    /// ``BusSubscriber/Options/silenceMilliseconds`` (the daemon stopped, unreachable, or not at
    /// the endpoint); empty while every shard is heard. The poll thread also logs each silence
    /// and its end. Readable from any thread.
    public var silentShards: Set<Int> { handOver.silent.withLock { $0 } }

    /// Every shard's counts added up, as of the poll thread's last round.
    public var statistics: BusSubscriber.Statistics { handOver.statistics.withLock { $0 } }

    /// The envelopes of a ``Subscriber``: an `AsyncSequence` of ``ReceivedEnvelope``. `Sendable`.
    public struct Envelopes: AsyncSequence, Sendable {
        public typealias Element = ReceivedEnvelope
        let subscriber: Subscriber

        public func makeAsyncIterator() -> Iterator {
            subscriber.startThread()
            return Iterator(handOver: subscriber.handOver, stopper: Stopper(handOver: subscriber.handOver))
        }

        /// Not `Sendable`: used by the iterating task.
        public struct Iterator: AsyncIteratorProtocol {
            let handOver: SubscriberHandOver
            /// Stops the thread when the loop is left without cancelling its task.
            let stopper: Stopper

            public mutating func next() async throws -> ReceivedEnvelope? { try await handOver.next() }
        }
    }

    /// Stops the poll thread when the last iterator holding it goes away. `Sendable`.
    final class Stopper: Sendable {
        let handOver: SubscriberHandOver
        init(handOver: SubscriberHandOver) { self.handOver = handOver }
        deinit { handOver.cancel() }
    }

    /// Starts the poll thread (once), which runs a ``ShardedSubscriber`` whose handler queues.
    private func startThread() {
        guard handOver.claimStart() else { return }
        let handOver = handOver
        let (shards, shardIDs, shardCount, logger, onSubscribed) = (shards, shardIDs, shardCount, logger, onSubscribed)
        let thread = Thread {
            let cursors: [any SubscriberCursor] = shards.indices.map { DeliveryCursor(handOver: handOver, position: $0) }
            let hooks = ShardedSubscriber.Hooks(
                onSubscribed: onSubscribed,
                onBatchEnd: { loop in handOver.statistics.withLock { $0 = loop.statistics } },
                onSilence: { position, silent in
                    handOver.silent.withLock { if silent { $0.insert(position) } else { $0.remove(position) } }
                },
                rejectedCount: { position in handOver.rejected.withLock { $0[position] } ?? 0 },
                committedSeq: { position in handOver.committed.withLock { $0[position] } },
                sendsFinalReport: { !handOver.abandoned.load(ordering: .acquiring) })
            let loop = shardIDs.map {
                ShardedSubscriber(shards: shards, cursors: cursors, shardIDs: $0, of: shardCount, hooks: hooks, logger: logger)
            } ?? ShardedSubscriber(shards: shards, cursors: cursors, hooks: hooks, logger: logger)
            do {
                try loop.run(stop: handOver.stop) { envelope in
                    let position = shardIDs?.firstIndex(of: envelope.shard) ?? (shards.count > 1 ? envelope.shard : 0)
                    if !handOver.push(ReceivedEnvelope(raw: envelope, position: position)) { handOver.stop.raise() }
                }
                handOver.statistics.withLock { $0 = loop.statistics }
                handOver.finish(failure: nil)
            } catch {
                handOver.finish(failure: error)
            }
        }
        thread.name = "checkoutbus-subscriber"
        thread.start()
    }
}

/// The poll loop's view of a cursor: it loads the real one, and its commits (once an envelope is
/// queued) move nothing — the consumer's ``Subscriber/commit(_:)`` does. Not `Sendable`: the poll
/// thread's.
final class DeliveryCursor: SubscriberCursor {
    let handOver: SubscriberHandOver
    let position: Int

    init(handOver: SubscriberHandOver, position: Int) {
        self.handOver = handOver
        self.position = position
    }

    func load() throws -> Int64 {
        let seq = try handOver.cursors.withLock { cursors throws in try cursors[position].load() }
        handOver.committed.withLock { $0[position] = seq }
        return seq
    }

    func commit(_ seq: Int64) {}

    var keepsPosition: Bool { handOver.cursors.withLock { $0[position].keepsPosition } }

    var journal: String? { handOver.cursors.withLock { $0[position].journal } }

    func adoptJournal(_ id: String) throws {
        try handOver.cursors.withLock { cursors throws in try cursors[position].adoptJournal(id) }
    }
}
