import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

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
/// **A subset of the shards.** ``init(shards:cursors:shardIDs:of:hooks:logger:)`` takes chosen shards of a bus
/// of `N`, in any order: endpoint `p` must then be shard `shardIDs[p]` of `N`, checked the same
/// way — also when there is only one endpoint. Several subscribers, each of a disjoint subset, share
/// the bus's work between them (docs/sharding.md).
///
/// Not `Sendable`: ``run(stop:deadline:handler:)`` creates every socket on the calling thread and
/// uses them there until it returns. Stop it by raising the ``StopSignal``.
public final class ShardedSubscriber {
    /// One subscriber per shard, in the order given; their ``BusSubscriber/statistics`` are per shard.
    public let shards: [BusSubscriber]
    /// The shard each element of ``shards`` is: `0..<N` for the whole bus, else the ids given.
    public let shardIDs: [Int]
    /// The bus's number of shards, `N`.
    public let shardCount: Int
    /// What the subscriber calls besides the handler, all on the thread that runs it; given to its initialiser.
    public struct Hooks {
        /// Called once, when every shard's subscriptions are live (each has sent its first heartbeat).
        public var onSubscribed: (() -> Void)?
        /// Called with every heartbeat: the shard's position in the list (its id is
        /// ``ShardedSubscriber/shardIDs``[position]), the topic and the envelope.
        public var onHeartbeat: ((_ shard: Int, _ topic: [UInt8], _ envelope: [UInt8]) -> Void)?
        /// Called after each round of reading every socket, with the subscriber: a handler that
        /// buffers output flushes here.
        public var onBatchEnd: ((_ subscriber: ShardedSubscriber) -> Void)?
        /// Called when a shard's heartbeats stop (`true`) and start again (`false`)
        /// (``BusSubscriber/Hooks/onSilence``), with the shard's position in the list.
        public var onSilence: ((_ shard: Int, _ silent: Bool) -> Void)?
        /// Each shard's parked envelopes (``BusSubscriber/Hooks/rejectedCount``), by the shard's
        /// position in the list; nil: not reported.
        public var rejectedCount: ((_ position: Int) -> Int)?
        /// Each shard's position as the application committed it (``BusSubscriber/Hooks/committedSeq``).
        public var committedSeq: ((_ position: Int) -> Int64?)?
        /// Whether the last report is final (``BusSubscriber/Hooks/sendsFinalReport``).
        public var sendsFinalReport: (() -> Bool)?

        public init(onSubscribed: (() -> Void)? = nil,
                    onHeartbeat: ((_ shard: Int, _ topic: [UInt8], _ envelope: [UInt8]) -> Void)? = nil,
                    onBatchEnd: ((_ subscriber: ShardedSubscriber) -> Void)? = nil,
                    onSilence: ((_ shard: Int, _ silent: Bool) -> Void)? = nil,
                    rejectedCount: ((_ position: Int) -> Int)? = nil, committedSeq: ((_ position: Int) -> Int64?)? = nil,
                    sendsFinalReport: (() -> Bool)? = nil) {
            self.onSubscribed = onSubscribed
            self.onHeartbeat = onHeartbeat
            self.onBatchEnd = onBatchEnd
            self.onSilence = onSilence
            self.rejectedCount = rejectedCount
            self.committedSeq = committedSeq
            self.sendsFinalReport = sendsFinalReport
        }
    }

    public let hooks: Hooks
    /// Given to every shard's subscriber, labelled with the shard when there are several or they were chosen.
    public let logger: BusLogger
    /// Shards whose subscriptions are live in this run (``Hooks/onSubscribed`` is called when all are).
    private let live = LiveShards()

    /// - Parameters:
    ///   - shards: each shard's endpoints and options, in shard order: element `i` is shard `i` of
    ///     `shards.count`. At least one.
    ///   - cursors: each shard's cursor, in the same order (``FileCursor/shardCursors(path:shards:durable:)``
    ///     gives one file per shard).
    ///   - hooks: what to call besides the handler.
    /// - Important: `shards` and `cursors` must have the same, non-zero count.
    public convenience init(shards: [BusSubscriber.Options], cursors: [any SubscriberCursor], hooks: Hooks = Hooks(),
                            logger: BusLogger = BusLogger(label: "subscriber")) {
        precondition(!shards.isEmpty && shards.count == cursors.count, "one cursor per shard, and at least one shard")
        let n = shards.count
        self.init(shards: shards, cursors: cursors, shardIDs: Array(0..<n), of: n, hooks: hooks, logger: logger) { index in
            n > 1 ? ShardIdentity(position: index, shard: index, shards: n, chosen: nil) : nil
        }
    }

    /// A subscriber of some of a bus's shards: endpoint `p` is shard `shardIDs[p]` of `shardCount`.
    ///
    /// Every endpoint is checked, even a single one: its heartbeat and its control endpoint's
    /// `stats` must say `"shard":shardIDs[p],"shards":shardCount` before anything is replayed or
    /// handed over, or the run stops with a ``SubscriberError`` naming the position, the shard
    /// expected and the one found. With `shardIDs` `0..<shardCount` it is the whole bus, as
    /// ``init(shards:cursors:hooks:logger:)`` with more than one shard.
    /// - Parameters:
    ///   - shards: each chosen shard's endpoints and options, in the order of `shardIDs`.
    ///   - cursors: each chosen shard's cursor, in the same order
    ///     (``FileCursor/paths(_:shardIDs:of:)`` names one file per shard).
    ///   - shardIDs: distinct shard ids, each in `0..<shardCount`, as many as `shards`.
    ///   - shardCount: the bus's number of shards, `N`.
    ///   - hooks: what to call besides the handler.
    /// - Important: check ids that come from outside with ``validate(shardIDs:of:)`` first.
    public convenience init(shards: [BusSubscriber.Options], cursors: [any SubscriberCursor], shardIDs: [Int], of shardCount: Int,
                            hooks: Hooks = Hooks(), logger: BusLogger = BusLogger(label: "subscriber")) {
        precondition(!shards.isEmpty && shards.count == cursors.count && shards.count == shardIDs.count,
                     "one cursor and one shard id per shard, and at least one shard")
        precondition((try? Self.validate(shardIDs: shardIDs, of: shardCount)) != nil, "invalid shard ids")
        self.init(shards: shards, cursors: cursors, shardIDs: shardIDs, of: shardCount, hooks: hooks, logger: logger) { index in
            ShardIdentity(position: index, shard: shardIDs[index], shards: shardCount, chosen: shardIDs)
        }
    }

    /// Makes one ``BusSubscriber`` per shard, each expecting `identity(position)`, whose hooks
    /// call this subscriber's with the shard's position.
    private init(shards: [BusSubscriber.Options], cursors: [any SubscriberCursor], shardIDs: [Int], of shardCount: Int,
                 hooks: Hooks, logger: BusLogger, identity: (Int) -> ShardIdentity?) {
        self.shardIDs = shardIDs
        self.shardCount = shardCount
        self.hooks = hooks
        self.logger = logger
        let live = live
        let count = shards.count
        self.shards = zip(shards, cursors).enumerated().map { index, pair in
            let expected = identity(index)
            var shardLogger = logger
            if expected != nil { shardLogger.label = "\(logger.label) shard=\(shardIDs[index])/\(shardCount)" }
            let shardHooks = BusSubscriber.Hooks(
                onSubscribed: hooks.onSubscribed.map { all in { if live.subscribed() == count { all() } } },
                onHeartbeat: hooks.onHeartbeat.map { forward in { _, topic, envelope in forward(index, topic, envelope) } },
                onSilence: hooks.onSilence.map { forward in { silent in forward(index, silent) } },
                rejectedCount: hooks.rejectedCount.map { count in { count(index) } },
                committedSeq: hooks.committedSeq.map { committed in { committed(index) } },
                sendsFinalReport: hooks.sendsFinalReport)
            return BusSubscriber(options: pair.0, cursor: pair.1, hooks: shardHooks, logger: shardLogger, expectedShard: expected)
        }
    }

    /// Checks a list of shard ids for ``init(shards:cursors:shardIDs:of:hooks:logger:)``: at least one, distinct,
    /// each in `0..<shardCount`, and `1 ≤ shardCount ≤ ShardLimits.maxShards` (1024).
    /// - Throws: a ``SubscriberError`` saying what is wrong.
    public static func validate(shardIDs: [Int], of shardCount: Int) throws(SubscriberError) {
        guard (1...ShardLimits.maxShards).contains(shardCount) else {
            throw SubscriberError(.badShardList, "the shard count must be 1 to \(ShardLimits.maxShards), not \(shardCount)")
        }
        guard !shardIDs.isEmpty else { throw SubscriberError(.badShardList, "no shard ids") }
        if let bad = shardIDs.first(where: { !(0..<shardCount).contains($0) }) {
            throw SubscriberError(.badShardList, "shard id \(bad) is not one of the \(shardCount) shards 0…\(shardCount - 1)")
        }
        guard Set(shardIDs).count == shardIDs.count else {
            throw SubscriberError(.badShardList, "shard ids \(shardIDs.map(String.init).joined(separator: ",")) name a shard twice")
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
            total.replayBusy += s.replayBusy
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
        live.reset()
        for subscriber in shards { subscriber.reset() }
        let context = try ZMQContext()
        let poller = ZMQPoller()
        defer { for subscriber in shards { subscriber.close() } }
        do {
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
                    for subscriber in shards { subscriber.release() }
                }
                hooks.onBatchEnd?(self)
            }
        } catch {
            // Stopped by an error: the last reports are not final (the daemons show a crash, not a stop).
            for subscriber in shards { subscriber.close(final: false) }
            throw error
        }
    }
}

/// How many of a ``ShardedSubscriber``'s shards are live in the current run: counted by the
/// shards' hooks, all on the thread that runs it.
private final class LiveShards {
    private var count = 0
    func reset() { count = 0 }
    /// Counts one more shard live; returns how many are.
    func subscribed() -> Int {
        count += 1
        return count
    }
}

/// What a ``ShardedSubscriber`` expects one endpoint to be: shard `shard` of `shards`, at
/// `position` in its list. `Sendable`.
package struct ShardIdentity: Sendable {
    package let position: Int
    package let shard: Int
    package let shards: Int
    /// The shard ids the subscriber was given; nil: the whole bus, position `i` being shard `i`.
    package let chosen: [Int]?

    /// The error for an endpoint that turned out to be `found` instead.
    package func mismatch(endpoint: String, found: String) -> SubscriberError {
        guard let chosen else {
            return SubscriberError.wrongShard(position: position, count: shards, endpoint: endpoint, found: found)
        }
        let ids = chosen.map(String.init).joined(separator: ",")
        return SubscriberError(.wrongShard,
            "the endpoint at position \(position) of \(chosen.count) (\(endpoint)) answered as \(found), not shard "
                + "\(shard)/\(shards), which the shard ids (\(ids)) put at position \(position): "
                + "list the endpoints in the order of their shard ids")
    }
}

extension FileCursor {
    /// The cursor files of a subscriber of some of a bus's `count` shards, one per shard id, named
    /// as ``paths(_:shards:)`` names them for the whole bus (`path.I-of-N`, the real shard id `I`),
    /// so that subscribers of different subsets never share a file and a shard's file stays the
    /// same whichever subset it is in. With `count` 1, `path` itself.
    public static func paths(_ path: String, shardIDs: [Int], of count: Int) -> [String] {
        count <= 1 ? [path] : shardIDs.map { "\(path).\($0)-of-\(count)" }
    }
}
