#if canImport(Glibc)
import Glibc
#endif
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// Seconds as a short decimal (`5.0`) for messages.
enum SecondsText {
    static func format(_ nanoseconds: UInt64) -> String {
        let tenths = (nanoseconds + 50_000_000) / 100_000_000
        return "\(tenths / 10).\(tenths % 10)"
    }
}

/// A subscriber that sees every envelope once, in `seq` order, across drops and restarts.
///
/// It joins the live stream and the daemon's journal as the ZeroMQ guide's Clone pattern does
/// (docs/durability.md): a SUB socket subscribes to the topic prefixes and then to `bus.heartbeat`,
/// and a DEALER on the control socket replays from the cursor + 1, a page at a time with the same
/// prefixes, until it has caught up with what arrives live; then it follows live.
///
/// **Gaps.** ZeroMQ drops at a high-water mark without a word. The rules that notice and fill
/// gaps from the journal live in ``SubscriptionSequencer``, shared with the async ``Subscriber``;
/// this type owns the sockets and calls the handler. ``LiveSubscription/everything`` trades one
/// `replay` round trip per burst of live envelopes for receiving every topic.
///
/// **Exactly once, in order.** The handler is called only for a `seq` greater than the last one
/// handled, only once every matching envelope before it was handled, and the cursor is committed
/// after it returns. A handler that throws stops the subscriber without committing that envelope.
///
/// **Counting.** An envelope the subscriber should have received live (published after it joined,
/// before something it did receive) but got from the journal instead was *missed* and *recovered*;
/// a run of them is a *gap*. An envelope fetched from the journal before the live stream reached
/// it is counted once the live stream passes it (the next live envelope or heartbeat after it). After every heartbeat, and when it stops, the subscriber sends a
/// `report` with these counts to the control socket, where `stats` shows them by ``Options/name``.
///
/// Not `Sendable`: ``run(stop:deadline:handler:)`` creates both sockets on the calling thread and
/// uses them there until it returns. Stop it by raising the ``StopSignal`` (from a signal handler,
/// another thread, or the handler itself).
public final class BusSubscriber {
    /// Where to connect and what to follow. `Sendable`.
    public struct Options: Sendable {
        /// The daemon's publish (XPUB) endpoint.
        public var publish: String
        /// The daemon's control (ROUTER) endpoint.
        public var control: String
        /// Topic prefixes to follow; the subscriber adds `bus.heartbeat` itself. At most
        /// ``TopicLimits/maxReplayPrefixes``, each at most ``TopicLimits/maxPrefixBytes``
        /// (``checkPrefixes(_:)``).
        public var prefixes: [String] = ["checkout.", "bus.deadletter"]
        /// The name this subscriber reports under (`stats` → `subscribers`).
        public var name: String = "subscriber-\(getpid())"
        /// The SUB socket's receive high-water mark (`ZMQ_RCVHWM`), in messages.
        public var receiveHighWaterMark: Int32 = 100_000
        /// The kernel receive buffer of the SUB's connection (`SO_RCVBUF`), in bytes; nil: the OS
        /// default, which grows to many megabytes. With a small one (and a small receive HWM), a
        /// subscriber that falls behind is dropped for sooner, and recovers from the journal.
        public var receiveBufferBytes: Int32?
        /// Records asked for per `replay` request (the daemon allows 1…10000).
        public var pageSize = 1000
        /// A control request unanswered this long is sent again.
        public var requestTimeoutMilliseconds = 15_000
        /// No heartbeat for this long (the daemon sends one a second by default) and the
        /// subscriber says so: a warning naming the endpoint, ``BusSubscriber/Hooks/onSilence`` and
        /// ``BusSubscriber/isSilent``; it keeps waiting, and says so again when heartbeats are back.
        public var silenceMilliseconds = 5_000
        /// Where to begin: after the cursor's `seq`, or with what is published from now on.
        public var start = StartPosition.cursor
        /// What the SUB socket subscribes to.
        public var liveSubscription = LiveSubscription.prefixes
        /// CURVE client keys for both sockets, when the daemon requires them (docs/security.md).
        public var curve: CurveClientKeys?
        /// Live envelopes held while the journal is being read, at most this many bytes; beyond it
        /// they are let go and read from the journal instead.
        public var maxPendingBytes = 64 << 20

        public init(publish: String, control: String) {
            self.publish = publish
            self.control = control
        }
    }

    /// Where the subscriber begins. `Sendable`.
    public enum StartPosition: Sendable, Equatable {
        /// After the cursor's `seq` (0: the oldest retained envelope).
        case cursor
        /// With the first live message, ignoring the cursor: only what is published from now on.
        case live
    }

    /// What the SUB socket asks the daemon for. `Sendable`.
    public enum LiveSubscription: Sendable, Equatable {
        /// Only ``Options/prefixes``: the daemon filters. With several kinds, or a prefix narrower
        /// than a kind, a live envelope cannot prove that nothing before it was dropped, so the
        /// journal is asked (one `replay` round trip per burst, served on the daemon's pipeline).
        case prefixes
        /// Every journaled topic, filtered here: `seq` is contiguous on the wire, so a live envelope
        /// proves itself and the journal is read only for real gaps — at the cost of receiving
        /// (and discarding) the other topics. Worth it for several kinds under heavy traffic.
        case everything
    }

    /// What the subscriber has done since ``run(stop:deadline:handler:)`` began. `Sendable`.
    public struct Statistics: Sendable, Equatable {
        /// Envelopes handed to the handler.
        public var handled = 0
        /// Of those, how many came from the journal only (catching up, or filling gaps); an envelope
        /// also received live counts as live even when the journal confirmed it.
        public var fromJournal = 0
        /// Envelopes dropped on the way to this subscriber and handled from the journal instead.
        public var missed = 0
        /// Of the missed, how many were recovered from the journal.
        public var recovered = 0
        /// Runs of consecutive missed envelopes.
        public var gaps = 0
        /// Envelopes older than the oldest retained `seq` when the subscriber asked for them
        /// (`not_retained`): skipped, and counted here by `seq` distance.
        public var notRetained = 0
        /// Live envelopes already handled from the journal, dropped.
        public var duplicates = 0
        /// `replay` requests sent.
        public var replayRequests = 0
        /// Of those, how many the daemon answered `busy` (its control replies at their memory
        /// bound): each was asked again after a pause.
        public var replayBusy = 0
        public var heartbeats = 0
        /// The last `seq` handled (the cursor).
        public var lastSeq: Int64 = 0
    }

    /// Why ``run(stop:deadline:handler:)`` returned.
    public enum Outcome: Sendable, Equatable {
        case stopped
        case deadlineReached
    }

    public let options: Options
    /// What the subscriber has done since ``run(stop:deadline:handler:)`` began.
    public var statistics: Statistics { sequencer.statistics }
    /// What the subscriber calls besides the handler, all on its thread; given to its initialiser.
    public struct Hooks {
        /// Called once, at the first heartbeat: the subscriptions are live.
        public var onSubscribed: (() -> Void)?
        /// Called with every heartbeat: the subscriber, the topic and the envelope.
        public var onHeartbeat: ((_ subscriber: BusSubscriber, _ topic: [UInt8], _ envelope: [UInt8]) -> Void)?
        /// Called after each round of reading both sockets: a handler that buffers output flushes here.
        public var onBatchEnd: ((_ subscriber: BusSubscriber) -> Void)?
        /// Called when no heartbeat has arrived for ``Options/silenceMilliseconds`` (`true`: the
        /// daemon is stopped, unreachable or not at the endpoint), and when heartbeats arrive again (`false`).
        public var onSilence: ((_ silent: Bool) -> Void)?
        /// How many envelopes the application holds parked because it could not apply them (a
        /// table of rejects, say): sent with every report as `rejected`, shown by the daemon's
        /// `stats` and `checkoutbus_subscriber_rejected`. nil: not reported.
        public var rejectedCount: (() -> Int)?
        /// The position the application has committed, when it commits after the handler returns
        /// (the async ``Subscriber``, whose handler only queues): reports say it rather than what
        /// was handed over, so the daemon's `last_seq` and lag are the application's. nil: what
        /// the handler was given.
        public var committedSeq: (() -> Int64?)?
        /// Whether the report sent when the subscriber closes is final (a clean stop): false for an
        /// application that stopped on an error, which the daemon then shows gone and silent, as
        /// after a crash. nil: always final.
        public var sendsFinalReport: (() -> Bool)?

        public init(onSubscribed: (() -> Void)? = nil,
                    onHeartbeat: ((_ subscriber: BusSubscriber, _ topic: [UInt8], _ envelope: [UInt8]) -> Void)? = nil,
                    onBatchEnd: ((_ subscriber: BusSubscriber) -> Void)? = nil, onSilence: ((_ silent: Bool) -> Void)? = nil,
                    rejectedCount: (() -> Int)? = nil, committedSeq: (() -> Int64?)? = nil,
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
    public let logger: BusLogger
    /// No heartbeat for ``Options/silenceMilliseconds``, as of the last round.
    public private(set) var isSilent = false
    /// When the last heartbeat arrived (or the sockets were opened), monotonic ns.
    private var lastHeardAt: UInt64 = 0

    private let cursor: any SubscriberCursor
    /// The gap logic; a new one for every run.
    private var sequencer: SubscriptionSequencer
    /// The last `seq` the handler returned from and the cursor committed (or the position the run
    /// began at, or a heartbeat moved): what ``statistics`` say when a run ends midway through a batch.
    private var handedOver: Int64 = 0
    private let wire: SubscriptionWire
    /// The shard these endpoints must be (given by ShardedSubscriber). The publish endpoint shows
    /// it in its first heartbeat, the control endpoint in its answer to a `stats` request. Until the
    /// ShardedSubscriber has seen every shard identified and released them all, nothing counts.
    package let expectedShard: ShardIdentity?
    package var released: Bool { sequencer.released }
    /// Both endpoints have shown that they are the expected shard.
    package var isIdentified: Bool { sequencer.isIdentified }

    // Sockets, while run(stop:deadline:handler:) or a ShardedSubscriber's run is going.
    private var sub: ZMQSocket?
    private var control: ZMQSocket?

    /// - Parameters:
    ///   - options: endpoints, prefixes and tuning.
    ///   - cursor: where to resume, and where each handled `seq` is committed.
    ///   - hooks: what to call besides the handler.
    public convenience init(options: Options, cursor: any SubscriberCursor, hooks: Hooks = Hooks(),
                            logger: BusLogger = BusLogger(label: "subscriber")) {
        self.init(options: options, cursor: cursor, hooks: hooks, logger: logger, expectedShard: nil)
    }

    /// - Parameter expectedShard: the shard these endpoints must be; nil: whatever the daemon is.
    package init(options: Options, cursor: any SubscriberCursor, hooks: Hooks, logger: BusLogger,
                 expectedShard: ShardIdentity?) {
        self.options = options
        self.cursor = cursor
        self.hooks = hooks
        self.logger = logger
        self.expectedShard = expectedShard
        sequencer = SubscriptionSequencer(options: options, expectedShard: expectedShard, logger: logger)
        wire = SubscriptionWire(logger: logger)
    }

    /// Connects, catches up from the cursor, and follows live until `stop` is raised or `deadline`
    /// (monotonic nanoseconds, ``BusClock``) passes.
    /// - Parameter handler: called once per envelope, in `seq` order, on the calling thread.
    /// - Throws: what the handler or the cursor throws, a ``ZMQError``, or a ``SubscriberError``
    ///   when the daemon refuses a request.
    @discardableResult
    public func run(stop: StopSignal, deadline: UInt64? = nil, handler: (BusEnvelope) throws -> Void) throws -> Outcome {
        reset()
        let context = try ZMQContext()
        try open(context)
        let poller = ZMQPoller()
        addSockets(to: poller)
        defer { close() }
        do {
            while true {
                if stop.isRaised { return .stopped }
                let now = BusClock.monotonicNanoseconds()
                if let deadline, now >= deadline { return .deadlineReached }
                var wait = try prepareRound(now: now)
                if let deadline { wait = min(wait, Int((deadline - now) / 1_000_000) + 1) }
                try poller.poll(timeoutMilliseconds: wait)
                if try serviceSockets(stop: stop, handler: handler) { return .stopped }
                hooks.onBatchEnd?(self)
            }
        } catch {
            // Stopped by an error: the last report is not final (the daemon shows a crash, not a stop).
            close(final: false)
            throw error
        }
    }

    // MARK: One round of the loop (shared with ShardedSubscriber, which polls several at once)

    /// A fresh sequencer, for a new run.
    package func reset() {
        sequencer = SubscriptionSequencer(options: options, expectedShard: expectedShard, logger: logger)
    }

    /// Refuses prefixes the daemon would not take (docs/security.md, "Limits"): a subscription
    /// longer than ``TopicLimits/maxPrefixBytes`` has its connection cut, and a replay naming more
    /// than ``TopicLimits/maxReplayPrefixes`` is refused.
    /// - Throws: ``SubscriberError`` ``SubscriberError/Code/badPrefix``.
    public static func checkPrefixes(_ prefixes: [String]) throws {
        if let long = prefixes.first(where: { $0.utf8.count > TopicLimits.maxPrefixBytes }) {
            throw SubscriberError(.badPrefix, "topic prefix of \(long.utf8.count) bytes: at most \(TopicLimits.maxPrefixBytes) (\(long.prefix(40))…)")
        }
        if prefixes.count > TopicLimits.maxReplayPrefixes {
            throw SubscriberError(.badPrefix, "\(prefixes.count) topic prefixes: at most \(TopicLimits.maxReplayPrefixes)")
        }
    }

    /// Creates, configures and connects both sockets in `context`, and loads the cursor.
    package func open(_ context: ZMQContext) throws {
        try BusSubscriber.checkPrefixes(options.prefixes)
        let sub = try ZMQSocket(context: context, type: .sub)
        try sub.setOption(.receiveHighWaterMark, options.receiveHighWaterMark)
        if let bytes = options.receiveBufferBytes { try sub.setOption(.receiveBuffer, bytes) }
        try sub.setLinger(milliseconds: 0)
        try options.curve?.apply(to: sub)
        try sub.connect(options.publish)
        for prefix in sequencer.wirePrefixes { try sub.subscribe(prefix) }
        // Last: the heartbeat answering it proves the others are live.
        try sub.subscribe("bus.heartbeat")
        let control = try ZMQSocket(context: context, type: .dealer)
        // Long enough for the last report to leave when the subscriber stops.
        try control.setLinger(milliseconds: 200)
        try options.curve?.apply(to: control)
        try control.connect(options.control)
        self.sub = sub
        self.control = control
        lastHeardAt = BusClock.monotonicNanoseconds()
        isSilent = false
        let from: Int64? = options.start == .cursor ? try cursor.load() : nil
        try perform(sequencer.start(cursor: from, kept: cursor.keepsPosition, journal: cursor.journal,
                                    now: BusClock.monotonicNanoseconds()),
                    stop: nil, handler: { _ in })
    }

    package func addSockets(to poller: ZMQPoller) {
        guard let sub, let control else { return }
        poller.addReadable(sub)
        poller.addReadable(control)
    }

    /// Lets live envelopes and replays count (ShardedSubscriber: once every shard is identified).
    package func release() { sequencer.release() }

    /// Sends the last report and closes both sockets (again: nothing).
    /// - Parameter final: whether the last report is final (a clean stop); false when the loop
    ///   stopped on an error, which the daemon then shows as it shows a crash.
    package func close(final: Bool = true) {
        if control != nil && !sequencer.controlIsIngest {
            var last = sequencer.finalReport()
            if !final || hooks.sendsFinalReport?() == false, case .report(var report) = last {
                report.final = false
                last = .report(report)
            }
            try? perform([last], stop: nil, handler: { _ in })
        }
        sub = nil
        control = nil
    }

    /// Before polling: resends an unanswered request, asks the journal when needed.
    /// - Returns: how long the poll may wait, in milliseconds.
    package func prepareRound(now: UInt64) throws -> Int {
        guard control != nil else { return 200 }
        try perform(sequencer.tick(now: now), stop: nil, handler: { _ in })
        return sequencer.pollTimeoutMilliseconds
    }

    /// Says once when nothing has arrived for ``Options/silenceMilliseconds``. Called only after a
    /// round that emptied the live socket: messages still queued (a consumer that held the thread)
    /// are not silence, they are the daemon's and are read first.
    private func checkSilence(now: UInt64) {
        let silence = UInt64(max(1, options.silenceMilliseconds)) * 1_000_000
        guard !isSilent, now >= lastHeardAt &+ silence else { return }
        isSilent = true
        let seconds = SecondsText.format(now - lastHeardAt)
        logger.warning(statistics.heartbeats == 0
            ? "no heartbeat from the daemon in \(seconds) s since connecting: is it running, at this endpoint, with these keys? still waiting"
            : "no heartbeat from the daemon for \(seconds) s: it is stopped or unreachable; still waiting",
            ["endpoint": options.publish, "control": options.control])
        hooks.onSilence?(true)
    }

    /// A message arrived from the daemon (a heartbeat or an envelope): ends a silence, saying so.
    private func heard(now: UInt64) {
        defer { lastHeardAt = now }
        guard isSilent else { return }
        isSilent = false
        logger.warning("heartbeats from the daemon again after \(SecondsText.format(now - lastHeardAt)) s of silence",
                       ["endpoint": options.publish])
        hooks.onSilence?(false)
    }

    /// After polling: reads what both sockets hold (the live one at most 1024 messages).
    /// - Returns: whether `stop` was raised meanwhile.
    package func serviceSockets(stop: StopSignal, handler: (BusEnvelope) throws -> Void) throws -> Bool {
        guard let sub, let control else { return false }
        while let frames = try control.receiveMultipart(dontWait: true) {
            var frames = frames[...]
            // Tolerate a REQ-style empty delimiter before the reply.
            if frames.first?.isEmpty == true { frames = frames.dropFirst() }
            guard let head = frames.first, let reply = wire.reply(head) else { continue }
            let page = reply.op == "replay" && reply.ok ? wire.page(frames.dropFirst()) : []
            try perform(sequencer.receiveReply(reply, page: page, now: BusClock.monotonicNanoseconds()),
                        stop: stop, handler: handler)
            if stop.isRaised { return true }
            sequencer.pageDelivered(now: BusClock.monotonicNanoseconds())
        }
        var batch = 0
        var drained = false
        defer {
            let now = BusClock.monotonicNanoseconds()
            if batch > 0 { heard(now: now) }
            if drained { checkSilence(now: now) }
        }
        while batch < 1024 {
            guard let frames = try sub.receiveMultipart(dontWait: true) else {
                drained = true
                break
            }
            batch += 1
            guard frames.count >= 2 else { continue }
            if frames[0].elementsEqual("bus.heartbeat".utf8) {
                guard let heartbeat = wire.heartbeat(frames[1]) else {
                    logger.warning("heartbeat without seq or kind_seqs; ignored")
                    continue
                }
                let actions = try sequencer.receiveHeartbeat(heartbeat)
                try perform(actions, stop: stop, handler: handler)
                if sequencer.released { hooks.onHeartbeat?(self, frames[0], frames[1]) }
            } else if sequencer.released, let envelope = wire.envelope(topic: frames[0], bytes: frames[1], origin: .live) {
                try perform(sequencer.receiveLive(envelope), stop: stop, handler: handler)
            }
            if stop.isRaised { return true }
        }
        return false
    }

    /// Does what the sequencer asks: hands envelopes to the handler and commits each after it
    /// returns, sends requests and reports. Stops handing over once `stop` is raised. Actions left
    /// undone (a stop, or a handler, commit or send that threw) are taken back out of
    /// ``statistics``, which then count what the handler returned from and the cursor holds.
    private func perform(_ actions: [SubscriptionSequencer.Action], stop: StopSignal?,
                         handler: (BusEnvelope) throws -> Void) throws {
        var done = 0
        defer {
            if done < actions.count {
                sequencer.notDelivered(actions[done...], lastSeq: handedOver)
            } else {
                handedOver = sequencer.statistics.lastSeq
            }
        }
        for (index, action) in actions.enumerated() {
            done = index
            switch action {
            case .deliver(let envelope):
                if stop?.isRaised == true { return }
                try handler(envelope)
                try cursor.commit(envelope.seq)
                handedOver = envelope.seq
            case .requestReplay(let id, let from):
                guard let control else { continue }
                let request = SubscriptionWire.replayRequest(id: id, from: from, prefixes: options.prefixes,
                                                             limit: options.pageSize)
                if try !control.send(request, dontWait: true) { sequencer.replayNotSent() }
            case .requestIdentity(let id):
                _ = try control?.send(SubscriptionWire.identityRequest(id: id), dontWait: true)
            case .report(var report):
                report.rejected = hooks.rejectedCount?()
                if let committed = hooks.committedSeq?() {
                    report.lastSeq = min(report.lastSeq, committed)
                    report.throughSeq = min(report.throughSeq, committed)
                }
                report.durable = cursor.keepsPosition
                _ = try? control?.send(SubscriptionWire.report(report, name: options.name), dontWait: true)
            case .subscribed:
                hooks.onSubscribed?()
            case .adoptJournal(let id):
                try cursor.adoptJournal(id)
            }
        }
        done = actions.count
    }
}
