import CheckoutBusCore
import ZeroMQ

/// A subscriber of several shards (docs/sharding.md): one ``BusSubscriber`` per shard, all driven
/// by one poll loop on the calling thread.
///
/// Each shard has its own journal, so each has its own `seq`, its own cursor and its own gap
/// recovery, exactly as a ``BusSubscriber`` of one daemon has; the handler is called once per
/// envelope, on the thread that called ``run(stop:deadline:handler:)``, never concurrently.
///
/// **Order.** Envelopes of one shard reach the handler in that shard's `seq` order; since every
/// event of a checkout goes to one shard, that is each checkout's order too. Envelopes of different
/// shards interleave as they arrive: there is no order across shards, and ``BusEnvelope/shard``
/// says which shard (and so which cursor) an envelope belongs to.
///
/// **The list is checked.** Endpoint `i` of `N` must be shard `i/N`. Before anything is replayed or
/// handed over, every shard's publish endpoint must show it in its first heartbeat (`shard` and
/// `shards`) and its control endpoint in its answer to a `stats` request; after that, every replay
/// reply and every envelope is checked as it comes. A mismatch — a list in the wrong order, one
/// shard missing, a daemon of another shard count, a control list in another order than the
/// publish list — stops the run with a ``SubscriberError`` naming the endpoint, before the handler
/// saw anything: a wrong list would otherwise move one shard's cursor with another's `seq`s. A
/// cursor ahead of its shard's journal (one daemon's cursor reused for shard 0, another
/// generation's) is refused the same way. With one endpoint nothing is checked and it behaves exactly like a
/// ``BusSubscriber`` (which may then be one shard of several, followed on its own).
///
/// Not `Sendable`: ``run(stop:deadline:handler:)`` creates every socket on the calling thread and
/// uses them there until it returns. Stop it by raising the ``StopSignal``.
public final class ShardedSubscriber {
    /// One subscriber per shard, in shard order; their ``BusSubscriber/statistics`` are per shard.
    public let shards: [BusSubscriber]
    /// Called once, when every shard's subscriptions are live (each has sent its first heartbeat).
    public var onSubscribed: (() -> Void)?
    /// Called with every heartbeat: the shard's position in the list, the topic and the envelope.
    public var onHeartbeat: ((_ shard: Int, _ topic: [UInt8], _ envelope: [UInt8]) -> Void)?
    /// Called after each round of reading every socket: a handler that buffers output flushes here.
    public var onBatchEnd: (() -> Void)?
    /// Given to every shard's subscriber when ``run(stop:deadline:handler:)`` starts, labelled with the shard.
    public var logger = Logger(label: "subscriber")

    /// - Parameters:
    ///   - shards: each shard's endpoints and options, in shard order: element `i` is shard `i` of
    ///     `shards.count`. At least one.
    ///   - cursors: each shard's cursor, in the same order (``FileCursor/shardCursors(path:shards:durable:)``
    ///     gives one file per shard).
    /// - Important: `shards` and `cursors` must have the same, non-zero count.
    public init(shards: [BusSubscriber.Options], cursors: [any SubscriberCursor]) {
        precondition(!shards.isEmpty && shards.count == cursors.count, "one cursor per shard, and at least one shard")
        self.shards = zip(shards, cursors).enumerated().map { index, pair in
            let subscriber = BusSubscriber(options: pair.0, cursor: pair.1)
            if shards.count > 1 { subscriber.expectedShard = (index, shards.count) }
            return subscriber
        }
    }

    /// Every shard's counts added up (``BusSubscriber/Statistics/lastSeq`` is 0: `seq`s of
    /// different shards do not add; read each shard's from ``shards``).
    public var statistics: BusSubscriber.Statistics {
        var total = BusSubscriber.Statistics()
        for s in shards.map(\.statistics) {
            total.handled += s.handled
            total.fromJournal += s.fromJournal
            total.missed += s.missed
            total.recovered += s.recovered
            total.gaps += s.gaps
            total.notRetained += s.notRetained
            total.duplicates += s.duplicates
            total.replayRequests += s.replayRequests
            total.heartbeats += s.heartbeats
        }
        return total
    }

    /// Connects to every shard, catches each up from its cursor, and follows them all live until
    /// `stop` is raised or `deadline` (monotonic nanoseconds, ``BusClock``) passes.
    /// - Parameter handler: called once per envelope, in `seq` order within each shard, on the
    ///   calling thread.
    /// - Throws: what the handler or a cursor throws, a ``ZMQError``, or a ``SubscriberError`` when a
    ///   daemon refuses a request or an endpoint is not the shard its position says.
    @discardableResult
    public func run(stop: StopSignal, deadline: UInt64? = nil, handler: (BusEnvelope) throws -> Void) throws
        -> BusSubscriber.Outcome
    {
        var live = 0
        for (index, subscriber) in shards.enumerated() {
            subscriber.reset()
            if shards.count > 1 {
                var shardLogger = logger
                shardLogger.label = "\(logger.label) shard=\(index)/\(shards.count)"
                subscriber.logger = shardLogger
            } else {
                subscriber.logger = logger
            }
            subscriber.onSubscribed = { [unowned self] in
                live += 1
                if live == self.shards.count { self.onSubscribed?() }
            }
            subscriber.onHeartbeat = { [unowned self] topic, envelope in self.onHeartbeat?(index, topic, envelope) }
            subscriber.onBatchEnd = nil
        }
        let context = try ZMQContext()
        let poller = ZMQPoller()
        defer { for subscriber in shards { subscriber.close() } }
        for subscriber in shards {
            try subscriber.open(context)
            subscriber.addSockets(to: poller)
        }
        while true {
            if stop.isRaised { return .stopped }
            let now = BusClock.monotonicNanoseconds()
            if let deadline, now >= deadline { return .deadlineReached }
            var wait = 200
            for subscriber in shards { wait = min(wait, try subscriber.prepareRound(now: now)) }
            if let deadline { wait = min(wait, Int((deadline - now) / 1_000_000) + 1) }
            try poller.poll(timeoutMilliseconds: wait)
            for subscriber in shards {
                if try subscriber.serviceSockets(stop: stop, handler: handler) { return .stopped }
            }
            if !shards[0].released && shards.allSatisfy(\.isIdentified) {
                for subscriber in shards { subscriber.released = true }
            }
            onBatchEnd?()
        }
    }
}
