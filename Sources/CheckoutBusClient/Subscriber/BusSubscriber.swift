#if canImport(Glibc)
import Glibc
#endif
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// A subscriber that sees every envelope once, in `seq` order, across drops and restarts.
///
/// It joins the live stream and the daemon's journal as the ZeroMQ guide's Clone pattern does
/// (docs/durability.md): a SUB socket subscribes to the topic prefixes and then to `bus.heartbeat`,
/// and a DEALER on the control socket replays from the cursor + 1, a page at a time with the same
/// prefixes, until it has caught up with what arrives live; then it follows live.
///
/// **Gaps.** ZeroMQ drops at a high-water mark without a word. The subscriber notices:
/// - when the prefixes match every journaled topic, `seq` itself is contiguous, and any jump is a gap;
/// - a jump in a fully covered kind's `kind_seq` is a gap;
/// - a heartbeat whose `kind_seqs` are ahead of what was delivered is a gap at the tail.
/// A gap is filled from the journal before anything after it is handed over. A live envelope is
/// handed over directly only when it provably follows the last one (the two rules above); with
/// several kinds, or prefixes narrower than a kind (`checkout.fail.network_error`, whose `kind_seq`
/// jumps over other codes' failures naturally), the journal decides instead — one `replay` round
/// trip per burst of live envelopes, which returns only matching records, so a natural jump costs
/// one page and never loops. ``LiveSubscription/everything`` trades that for receiving every topic.
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
        /// Topic prefixes to follow; the subscriber adds `bus.heartbeat` itself.
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
    public private(set) var statistics = Statistics()
    /// Called once, at the first heartbeat: the subscriptions are live.
    public var onSubscribed: (() -> Void)?
    /// Called with every heartbeat's topic and envelope.
    public var onHeartbeat: ((_ topic: [UInt8], _ envelope: [UInt8]) -> Void)?
    /// Called after each round of reading both sockets: a handler that buffers output flushes here.
    public var onBatchEnd: (() -> Void)?
    public var logger = BusLogger(label: "subscriber")

    private let cursor: any SubscriberCursor
    /// What the live stream carries: the prefixes, or with ``LiveSubscription/everything`` all.
    private let coverage: TopicCoverage
    /// The prefixes the SUB socket subscribes to.
    private let wirePrefixes: [String]
    /// Whether live envelopes must be matched against ``Options/prefixes`` here.
    private let filtersLocally: Bool
    private let document = JSONDocument()

    // Position. Invariant: every matching envelope with seq ≤ verified was handled, and
    // statistics.lastSeq ≤ verified.
    private var verified: Int64?
    /// Per kind, its `kind_seq` at `verified` (fully covered kinds), when known.
    private var exactKindSeq = [Int64?](repeating: nil, count: JournaledKind.allCases.count)
    /// Per partly covered kind: matching envelopes up to this `kind_seq` were handled.
    private var checkedKindSeq = [Int64](repeating: -1, count: JournaledKind.allCases.count)

    // Live stream.
    /// Live envelopes not yet provably next, ascending by seq, from `pendingHead` on.
    private var pending: [BusEnvelope] = []
    private var pendingHead = 0
    private var pendingBytes = 0
    /// Live envelopes up to here were received but let go from `pending` (memory bound).
    private var evictedThrough: Int64 = 0
    /// Envelopes at or below this were published before the subscriber joined.
    private var liveFloor: Int64?
    /// The highest seq the live stream has shown (envelopes and heartbeats).
    private var liveHigh: Int64 = 0
    private var lastHeartbeat: Heartbeat?
    /// Envelopes handled from the journal before the live stream reached their seq: missed if the
    /// live stream passes them without bringing them. Ascending, from `unconfirmedHead` on.
    private var unconfirmed: [Int64] = []
    private var unconfirmedHead = 0
    /// Whether the last envelope classified (in handled order) was a missed one: a gap is a run.
    private var lastWasMissed = false

    // Identity (set by ShardedSubscriber): the shard these endpoints must be. The publish endpoint
    // shows it in its first heartbeat, the control endpoint in its answer to a `stats` request.
    // Until the ShardedSubscriber has seen every shard identified and `released` them all, live
    // envelopes are ignored and nothing is replayed: under a wrong list nothing is handled at all.
    package var expectedShard: ShardIdentity?
    private var publishIdentified = true
    private var controlIdentified = true
    private var identityRequest: (id: Int64, sentAt: UInt64)?
    package var released = true
    /// Both endpoints have shown that they are the expected shard.
    package var isIdentified: Bool { publishIdentified && controlIdentified }

    // Sockets, while run(stop:deadline:handler:) or a ShardedSubscriber's run is going.
    private var sub: ZMQSocket?
    private var control: ZMQSocket?

    // Control requests.
    private var needReplay = false
    private var inFlight: (id: Int64, from: Int64, sentAt: UInt64)?
    private var nextRequestID: Int64 = 1

    /// - Parameters:
    ///   - options: endpoints, prefixes and tuning.
    ///   - cursor: where to resume, and where each handled `seq` is committed.
    public init(options: Options, cursor: any SubscriberCursor) {
        self.options = options
        self.cursor = cursor
        let userCoverage = TopicCoverage(prefixes: options.prefixes)
        if options.liveSubscription == .everything && !userCoverage.coversEverything {
            wirePrefixes = options.prefixes + JournaledKind.allCases.filter { userCoverage.level($0) != .full }.map {
                $0.topicIsExact ? $0.topicRoot : String($0.topicRoot.dropLast())
            }
            filtersLocally = true
            coverage = TopicCoverage(prefixes: wirePrefixes)
        } else {
            wirePrefixes = options.prefixes
            filtersLocally = false
            coverage = userCoverage
        }
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
        while true {
            if stop.isRaised { return .stopped }
            let now = BusClock.monotonicNanoseconds()
            if let deadline, now >= deadline { return .deadlineReached }
            var wait = try prepareRound(now: now)
            if let deadline { wait = min(wait, Int((deadline - now) / 1_000_000) + 1) }
            try poller.poll(timeoutMilliseconds: wait)
            if try serviceSockets(stop: stop, handler: handler) { return .stopped }
            onBatchEnd?()
        }
    }

    // MARK: One round of the loop (shared with ShardedSubscriber, which polls several at once)

    /// Creates, configures and connects both sockets in `context`, and loads the cursor.
    func open(_ context: ZMQContext) throws {
        let sub = try ZMQSocket(context: context, type: .sub)
        try sub.setOption(.receiveHighWaterMark, options.receiveHighWaterMark)
        if let bytes = options.receiveBufferBytes { try sub.setOption(.receiveBuffer, bytes) }
        try sub.setLinger(milliseconds: 0)
        try options.curve?.apply(to: sub)
        try sub.connect(options.publish)
        for prefix in wirePrefixes { try sub.subscribe(prefix) }
        // Last: the heartbeat answering it proves the others are live.
        try sub.subscribe("bus.heartbeat")
        let control = try ZMQSocket(context: context, type: .dealer)
        // Long enough for the last report to leave when the subscriber stops.
        try control.setLinger(milliseconds: 200)
        try options.curve?.apply(to: control)
        try control.connect(options.control)
        self.sub = sub
        self.control = control
        if expectedShard != nil { try sendIdentityRequest(control) }

        switch options.start {
        case .cursor:
            let from = try cursor.load()
            verified = from
            startedAt = from
            statistics.lastSeq = from
            needReplay = true
        case .live:
            verified = nil
        }
    }

    package func addSockets(to poller: ZMQPoller) {
        guard let sub, let control else { return }
        poller.addReadable(sub)
        poller.addReadable(control)
    }

    /// Sends the last report and closes both sockets.
    package func close() {
        if let control { sendReport(control) }
        sub = nil
        control = nil
    }

    /// Before polling: resends an unanswered request, asks the journal when needed.
    /// - Returns: how long the poll may wait, in milliseconds.
    package func prepareRound(now: UInt64) throws -> Int {
        guard let control else { return 200 }
        if let request = inFlight,
            now - request.sentAt > UInt64(options.requestTimeoutMilliseconds) * 1_000_000
        {
            logger.warning("control request unanswered; sending it again",
                           ["endpoint": options.control, "from": String(request.from)])
            inFlight = nil
            needReplay = true
        }
        if !controlIdentified, let request = identityRequest,
            now - request.sentAt > UInt64(options.requestTimeoutMilliseconds) * 1_000_000
        {
            logger.warning("control endpoint has not said which shard it is; asking again", ["endpoint": options.control])
            try sendIdentityRequest(control)
        }
        guard released else { return 200 }
        if needReplay && inFlight == nil { try sendReplay(control) }
        return needReplay && inFlight == nil ? 10 : 200
    }

    /// After polling: reads what both sockets hold (the live one at most 1024 messages).
    /// - Returns: whether `stop` was raised meanwhile.
    package func serviceSockets(stop: StopSignal, handler: (BusEnvelope) throws -> Void) throws -> Bool {
        guard let sub, let control else { return false }
        while let frames = try control.receiveMultipart(dontWait: true) {
            try handleControlReply(frames, control: control, stop: stop, handler: handler)
            if stop.isRaised { return true }
        }
        var batch = 0
        while batch < 1024, let frames = try sub.receiveMultipart(dontWait: true) {
            batch += 1
            try handleLive(frames, control: control, stop: stop, handler: handler)
            if stop.isRaised { return true }
        }
        return false
    }

    package func reset() {
        statistics = Statistics()
        publishIdentified = expectedShard == nil
        controlIdentified = expectedShard == nil
        released = expectedShard == nil
        identityRequest = nil
        verified = nil
        startedAt = nil
        exactKindSeq = [Int64?](repeating: nil, count: JournaledKind.allCases.count)
        checkedKindSeq = [Int64](repeating: -1, count: JournaledKind.allCases.count)
        pending = []
        pendingHead = 0
        pendingBytes = 0
        evictedThrough = 0
        liveFloor = nil
        liveHigh = 0
        lastHeartbeat = nil
        unconfirmed = []
        unconfirmedHead = 0
        lastWasMissed = false
        needReplay = false
        inFlight = nil
    }

    // MARK: Live stream

    private func handleLive(_ frames: [[UInt8]], control: ZMQSocket, stop: StopSignal,
                            handler: (BusEnvelope) throws -> Void) throws {
        guard frames.count >= 2 else { return }
        let topic = frames[0]
        if topic.elementsEqual("bus.heartbeat".utf8) {
            guard let heartbeat = parseHeartbeat(frames[1]) else {
                logger.warning("heartbeat without seq or kind_seqs; ignored")
                return
            }
            try checkIdentity(heartbeat)
            guard released else { return }
            try handleHeartbeat(heartbeat, frames: frames, control: control, stop: stop, handler: handler)
            return
        }
        // Until every shard has shown which it is, nothing counts (the journal has it).
        guard released else { return }
        guard var envelope = makeEnvelope(topic: topic, bytes: frames[1], origin: .live) else { return }
        try checkShard(of: envelope, from: options.publish)
        if filtersLocally && !options.prefixes.contains(where: { topic.starts(with: $0.utf8) }) {
            envelope.positionOnly = true
        }
        confirm(through: envelope.seq, arrived: envelope.seq)
        liveHigh = max(liveHigh, envelope.seq)
        if liveFloor == nil { liveFloor = envelope.seq - 1 }
        if verified == nil { verified = envelope.seq - 1 }
        guard envelope.seq > verified! else {
            if !envelope.positionOnly { statistics.duplicates += 1 }
            return
        }
        if inFlight != nil || needReplay || pendingHead < pending.count {
            hold(envelope)
            return
        }
        if isProvablyNext(envelope) {
            try deliver(envelope, seenLive: true, handler: handler)
        } else {
            hold(envelope)
            needReplay = true
        }
    }

    private func hold(_ envelope: BusEnvelope) {
        if let last = pending.last, pendingHead < pending.count, last.seq >= envelope.seq { return }
        pending.append(envelope)
        pendingBytes += envelope.bytes.count + envelope.topic.count
        if pendingBytes > options.maxPendingBytes {
            // The journal has every one of them: let them go and read them from there.
            evictedThrough = max(evictedThrough, envelope.seq)
            pending.removeAll(keepingCapacity: false)
            pendingHead = 0
            pendingBytes = 0
            needReplay = true
        }
    }

    /// The cursor's position when the subscriber started (nil when it started live).
    private var startedAt: Int64?

    /// Whether `envelope` provably follows the last handled matching envelope, with nothing between.
    private func isProvablyNext(_ envelope: BusEnvelope) -> Bool {
        guard let verified else { return false }
        if coverage.coversEverything { return envelope.seq == verified + 1 }
        if coverage.singleFullKind == envelope.kind, let known = exactKindSeq[envelope.kind.rawValue] {
            return envelope.kindSeq == known + 1
        }
        return false
    }

    private func handleHeartbeat(_ heartbeat: Heartbeat, frames: [[UInt8]], control: ZMQSocket, stop: StopSignal,
                                 handler: (BusEnvelope) throws -> Void) throws {
        statistics.heartbeats += 1
        confirm(through: heartbeat.seq, arrived: nil)
        liveHigh = max(liveHigh, heartbeat.seq)
        if liveFloor == nil { liveFloor = heartbeat.seq }
        if statistics.heartbeats == 1 { onSubscribed?() }
        if verified == nil {
            verified = heartbeat.seq
            statistics.lastSeq = heartbeat.seq
        }
        // Against the cursor the subscriber started from, not what it has handled since: a replay
        // can hand over envelopes published after this heartbeat was sent, before it is read.
        if let start = startedAt, heartbeat.seq < start, statistics.heartbeats == 1 {
            logger.warning("the daemon's last seq is behind this subscriber's cursor (was its journal reset?)",
                           ["daemon_seq": String(heartbeat.seq), "cursor": String(start)])
        }
        lastHeartbeat = heartbeat
        if inFlight == nil && !needReplay && pendingHead == pending.count { evaluateHeartbeat() }
        onHeartbeat?(frames[0], frames[1])
        sendReport(control)
    }

    /// Compares the last heartbeat with what was handled: learns the `kind_seq`s at `verified`, or
    /// finds that something matching was published and not delivered, and asks the journal.
    private func evaluateHeartbeat() {
        guard let heartbeat = lastHeartbeat, let v = verified else { return }
        if v >= heartbeat.seq {
            // Everything matching up to the heartbeat was handled: its kind_seqs are ours too.
            for kind in JournaledKind.allCases {
                switch coverage.level(kind) {
                case .full: if exactKindSeq[kind.rawValue] == nil { exactKindSeq[kind.rawValue] = heartbeat.kindSeqs[kind.rawValue] }
                case .partial: checkedKindSeq[kind.rawValue] = max(checkedKindSeq[kind.rawValue], heartbeat.kindSeqs[kind.rawValue])
                case .none: break
                }
            }
            lastHeartbeat = nil
            return
        }
        var behind = coverage.coversEverything
        for kind in coverage.subscribedKinds where !behind {
            let published = heartbeat.kindSeqs[kind.rawValue]
            switch coverage.level(kind) {
            case .full:
                // Unknown and something of this kind exists: only the journal can say where we are.
                behind = (exactKindSeq[kind.rawValue] ?? (published == 0 ? 0 : -1)) < published
            case .partial:
                behind = checkedKindSeq[kind.rawValue] < published
            case .none:
                break
            }
        }
        if behind {
            needReplay = true
        } else {
            verified = heartbeat.seq
            lastHeartbeat = nil
        }
    }

    // MARK: Identity

    /// Checks a heartbeat's `shard` and `shards` against the position this endpoint was given; a
    /// single subscriber only notes that it sees one shard of several.
    private func checkIdentity(_ heartbeat: Heartbeat) throws {
        guard let expected = expectedShard else {
            if statistics.heartbeats == 0 && heartbeat.shards > 1 {
                logger.info("this daemon is one shard of several: only its checkouts are seen",
                            ["shard": "\(heartbeat.shard)/\(heartbeat.shards)", "endpoint": options.publish])
            }
            return
        }
        guard heartbeat.shard == expected.shard && heartbeat.shards == expected.shards else {
            throw expected.mismatch(endpoint: options.publish, found: "shard \(heartbeat.shard)/\(heartbeat.shards)")
        }
        // A cursor ahead of the shard's journal belongs to another journal (one daemon's, before it
        // was split into shards, or another generation's): following it would skip this shard's
        // envelopes until its seq caught up. One daemon only warns (see handleHeartbeat). Only the
        // first heartbeat is compared: nothing was replayed before it, while later ones may have
        // waited in the queue behind what the journal has already delivered.
        if !publishIdentified, let v = verified, heartbeat.seq < v {
            throw SubscriberError(
                "the cursor of shard \(expected.shard)/\(expected.shards) is at seq \(v) but that shard's journal ends at "
                    + "seq \(heartbeat.seq) (\(options.publish)): the cursor belongs to another journal (one daemon's before "
                    + "sharding, or another shard count); start this shard's cursor over")
        }
        publishIdentified = true
    }

    /// Asks the control endpoint which shard it is (every reply carries `shard` and `shards`).
    private func sendIdentityRequest(_ control: ZMQSocket) throws {
        let id = nextRequestID
        nextRequestID += 1
        var w = JSONWriter(capacity: 64)
        w.append("{\"op\":\"stats\",\"req\":")
        w.append(int: id)
        w.append("}")
        identityRequest = (id, BusClock.monotonicNanoseconds())
        _ = try control.send(w.bytes, dontWait: true)
    }

    private func checkControlIdentity(_ reply: Reply) throws {
        guard let expected = expectedShard else { return }
        identityRequest = nil
        guard reply.ok else {
            throw SubscriberError("the control endpoint \(options.control) refused stats: \(reply.error ?? "?") \(reply.detail ?? "")")
        }
        guard reply.shard == expected.shard && reply.shards == expected.shards else {
            throw expected.mismatch(endpoint: options.control,
                                    found: reply.shard.map { "shard \($0)/\(reply.shards ?? 1)" } ?? "a daemon that does not say its shard")
        }
        controlIdentified = true
    }

    /// An envelope from another shard than this endpoint's position would move the wrong cursor.
    private func checkShard(of envelope: BusEnvelope, from endpoint: String) throws {
        guard let expected = expectedShard, envelope.shard != expected.shard else { return }
        throw expected.mismatch(endpoint: endpoint, found: "an envelope of shard \(envelope.shard) (seq \(envelope.seq))")
    }

    // MARK: Journal

    /// Asks for the page from `from` (default: just after what was verified).
    private func sendReplay(_ control: ZMQSocket, from start: Int64? = nil) throws {
        let from = start ?? (verified ?? 0) + 1
        let id = nextRequestID
        nextRequestID += 1
        var w = JSONWriter(capacity: 256)
        w.append("{\"op\":\"replay\",\"from\":")
        w.append(int: from)
        w.append(",\"prefix\":[")
        for (i, prefix) in options.prefixes.enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(prefix)
        }
        w.append("],\"limit\":")
        w.append(int: options.pageSize)
        w.append(",\"req\":")
        w.append(int: id)
        w.append("}")
        guard try control.send(w.bytes, dontWait: true) else { return }
        needReplay = false
        inFlight = (id, from, BusClock.monotonicNanoseconds())
        statistics.replayRequests += 1
    }

    private func handleControlReply(_ frames: [[UInt8]], control: ZMQSocket, stop: StopSignal,
                                    handler: (BusEnvelope) throws -> Void) throws {
        var frames = frames[...]
        // Tolerate a REQ-style empty delimiter before the reply.
        if frames.first?.isEmpty == true { frames = frames.dropFirst() }
        guard let head = frames.first, let reply = parseReply(head) else { return }
        if let request = identityRequest, reply.req == request.id {
            try checkControlIdentity(reply)
            return
        }
        // Report replies, and answers to requests given up on, are not waited for.
        guard let request = inFlight, reply.req == request.id else { return }
        inFlight = nil
        if reply.op != "replay" {
            throw SubscriberError("the daemon refused replay from \(request.from): \(reply.error ?? "?") \(reply.detail ?? "")")
        }
        if let expected = expectedShard, reply.shard != expected.shard || reply.shards != expected.shards {
            throw expected.mismatch(endpoint: options.control,
                                    found: reply.shard.map { "shard \($0)/\(reply.shards ?? 1)" } ?? "a daemon that does not say its shard")
        }
        guard reply.ok else {
            if reply.error == "not_retained", let first = reply.firstSeq {
                let skipped = first - request.from
                logger.warning("envelopes no longer retained by the journal; skipping to the oldest retained",
                               ["from": String(request.from), "first_seq": String(first)])
                if skipped > 0 {
                    statistics.notRetained += Int(skipped)
                    verified = max(verified ?? 0, first - 1)
                }
                needReplay = true
                return
            }
            throw SubscriberError("the daemon refused replay from \(request.from): \(reply.error ?? "?") \(reply.detail ?? "")")
        }
        guard let next = reply.next, let lastSeq = reply.lastSeq else {
            throw SubscriberError("replay reply without next or last_seq")
        }
        let morePages = next <= lastSeq && next > request.from
        // Ask for the next page before handling this one, so the daemon reads while the handler works.
        if morePages { try sendReplay(control, from: next) }
        var i = frames.startIndex + 1
        while i + 1 < frames.endIndex {
            if stop.isRaised { return }
            guard let envelope = makeEnvelope(topic: frames[i], bytes: frames[i + 1], origin: .journal) else {
                i += 2
                continue
            }
            i += 2
            try checkShard(of: envelope, from: options.control)
            guard envelope.seq > (verified ?? 0) else { continue }
            // A live copy held in `pending` means it was not missed.
            while pendingHead < pending.count && pending[pendingHead].seq < envelope.seq { dropPendingHead() }
            if pendingHead < pending.count && pending[pendingHead].seq == envelope.seq {
                // Received live after all: hand over that copy (the bytes are the same).
                let live = pending[pendingHead]
                dropPendingHead()
                try deliver(live, seenLive: true, handler: handler)
            } else {
                try deliver(envelope, seenLive: envelope.seq <= evictedThrough, handler: handler)
            }
        }
        verified = max(verified ?? 0, next - 1)
        if !morePages {
            if next <= request.from && next <= lastSeq {
                logger.warning("replay made no progress; following live", ["from": String(request.from)])
            }
            try caughtUp(handler: handler, stop: stop)
        } else if let prefetched = inFlight {
            // Its answer may have waited while this page was handled: time it from now.
            inFlight = (prefetched.id, prefetched.from, BusClock.monotonicNanoseconds())
        } else {
            needReplay = true
        }
    }

    /// The journal has been read up to what it held: hand over the live envelopes held meanwhile
    /// while each provably follows the last, then check the last heartbeat.
    private func caughtUp(handler: (BusEnvelope) throws -> Void, stop: StopSignal) throws {
        while pendingHead < pending.count && pending[pendingHead].seq <= verified! { dropPendingHead() }
        while pendingHead < pending.count {
            if stop.isRaised { return }
            let envelope = pending[pendingHead]
            guard isProvablyNext(envelope) else {
                needReplay = true
                break
            }
            dropPendingHead()
            try deliver(envelope, seenLive: true, handler: handler)
        }
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
            pendingBytes = 0
            if !needReplay { evaluateHeartbeat() }
        }
    }

    private func dropPendingHead() {
        pendingBytes -= pending[pendingHead].bytes.count + pending[pendingHead].topic.count
        pendingHead += 1
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
            pendingBytes = 0
        } else if pendingHead >= 4096 {
            pending.removeFirst(pendingHead)
            pendingHead = 0
        }
    }

    // MARK: Delivery

    private func deliver(_ envelope: BusEnvelope, seenLive: Bool, handler: (BusEnvelope) throws -> Void) throws {
        if envelope.positionOnly {
            // Another topic on the wire (LiveSubscription.everything): it only moves the position.
            verified = max(verified ?? 0, envelope.seq)
            if coverage.level(envelope.kind) == .full { exactKindSeq[envelope.kind.rawValue] = envelope.kindSeq }
            lastWasMissed = false
            return
        }
        try handler(envelope)
        verified = max(verified ?? 0, envelope.seq)
        statistics.handled += 1
        statistics.lastSeq = envelope.seq
        switch coverage.level(envelope.kind) {
        case .full: exactKindSeq[envelope.kind.rawValue] = envelope.kindSeq
        case .partial: checkedKindSeq[envelope.kind.rawValue] = max(checkedKindSeq[envelope.kind.rawValue], envelope.kindSeq)
        case .none: break
        }
        if envelope.origin == .journal {
            statistics.fromJournal += 1
            if seenLive {
                lastWasMissed = false
            } else if let floor = liveFloor, envelope.seq > floor {
                // Published after the subscriber joined. Missed if the live stream has already gone
                // past it; otherwise it is decided when the live stream gets there.
                if unconfirmedHead == unconfirmed.count && envelope.seq <= liveHigh {
                    countMissed()
                } else {
                    unconfirmed.append(envelope.seq)
                    if unconfirmed.count - unconfirmedHead > 1_000_000 { unconfirmedHead += 1 }
                }
            } else {
                lastWasMissed = false
            }
        } else {
            lastWasMissed = false
        }
        try cursor.commit(envelope.seq)
    }

    private func countMissed() {
        statistics.missed += 1
        statistics.recovered += 1
        if !lastWasMissed { statistics.gaps += 1 }
        lastWasMissed = true
    }

    /// The live stream has reached `seq` (an envelope `arrived`, or a heartbeat sent after it):
    /// envelopes handled from the journal before it that did not arrive live were missed.
    private func confirm(through seq: Int64, arrived: Int64?) {
        while unconfirmedHead < unconfirmed.count && unconfirmed[unconfirmedHead] <= seq {
            if unconfirmed[unconfirmedHead] == arrived {
                lastWasMissed = false
            } else {
                countMissed()
            }
            unconfirmedHead += 1
        }
        if unconfirmedHead == unconfirmed.count {
            unconfirmed.removeAll(keepingCapacity: true)
            unconfirmedHead = 0
        } else if unconfirmedHead >= 4096 {
            unconfirmed.removeFirst(unconfirmedHead)
            unconfirmedHead = 0
        }
    }

    /// Sends this subscriber's counts to the control socket; the reply is read and ignored.
    private func sendReport(_ control: ZMQSocket) {
        var w = JSONWriter(capacity: 256)
        w.append("{\"op\":\"report\",\"subscriber\":")
        w.appendString(options.name)
        w.append(",\"last_seq\":")
        w.append(int: statistics.lastSeq)
        w.append(",\"missed\":")
        w.append(int: statistics.missed)
        w.append(",\"recovered\":")
        w.append(int: statistics.recovered)
        w.append(",\"gaps\":")
        w.append(int: statistics.gaps)
        w.append(",\"req\":")
        w.append(int: nextRequestID)
        w.append("}")
        nextRequestID += 1
        _ = try? control.send(w.bytes, dontWait: true)
    }

    // MARK: Parsing (JSONDocument, no Foundation)

    private func makeEnvelope(topic: [UInt8], bytes: [UInt8], origin: BusEnvelope.Origin) -> BusEnvelope? {
        guard let kind = JournaledKind(topic: topic) else { return nil }
        let fields = bytes.withUnsafeBytes { buf -> LeadingPositions? in
            if let fields = BusSubscriber.leadingPositions(buf) { return fields }
            do throws(JSONParseError) { try document.parse(buf) } catch { return nil }
            let root = document.root
            guard let seq = document.member(root, "seq").flatMap({ document.int64($0) }),
                let kindSeq = document.member(root, "kind_seq").flatMap({ document.int64($0) })
            else { return nil }
            let shard = document.member(root, "shard").flatMap { document.int64($0) } ?? 0
            return LeadingPositions(seq: seq, kindSeq: kindSeq, shard: Int(shard))
        }
        guard let fields else {
            logger.warning("envelope without seq or kind_seq; ignored", ["topic": String(decoding: topic, as: UTF8.self)])
            return nil
        }
        return BusEnvelope(seq: fields.seq, kindSeq: fields.kindSeq, kind: kind, topic: topic, bytes: bytes,
                           origin: origin, shard: fields.shard)
    }

    /// The positions an envelope starts with.
    package struct LeadingPositions: Equatable {
        package var seq: Int64
        package var kindSeq: Int64
        /// 0 when the envelope has no `shard` (written before shards existed).
        package var shard: Int
    }

    /// `seq`, `kind_seq` and `shard` read from the start of an envelope written the daemon's way,
    /// `{"v":1,"seq":N,"kind_seq":M,"shard":I,…` (or without `shard`, as before shards existed),
    /// without parsing the rest; nil for any other layout, which is then parsed in full.
    package static func leadingPositions(_ buf: UnsafeRawBufferPointer) -> LeadingPositions? {
        let head: StaticString = #"{"v":1,"seq":"#
        let middle: StaticString = #","kind_seq":"#
        let shardLabel: StaticString = #","shard":"#
        var i = 0
        func literal(_ text: StaticString) -> Bool {
            let n = text.utf8CodeUnitCount
            guard i + n <= buf.count else { return false }
            for k in 0..<n where buf[i + k] != text.utf8Start[k] { return false }
            i += n
            return true
        }
        func number() -> Int64? {
            let start = i
            var value: Int64 = 0
            while i < buf.count, i - start < 18, buf[i] >= 0x30, buf[i] <= 0x39 {
                value = value * 10 + Int64(buf[i] - 0x30)
                i += 1
            }
            guard i > start, i < buf.count, buf[i] == UInt8(ascii: ",") || buf[i] == UInt8(ascii: "}") else { return nil }
            return value
        }
        guard literal(head), let seq = number(), literal(middle), let kindSeq = number() else { return nil }
        let afterKindSeq = i
        if literal(shardLabel), let shard = number() { return LeadingPositions(seq: seq, kindSeq: kindSeq, shard: Int(shard)) }
        i = afterKindSeq
        // A `shard` further on (another writer's layout) must not be missed: parse in full then.
        let rest = UnsafeRawBufferPointer(rebasing: buf[i...])
        if BusSubscriber.contains(rest, shardLabel) { return nil }
        return LeadingPositions(seq: seq, kindSeq: kindSeq, shard: 0)
    }

    private static func contains(_ buf: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        let n = text.utf8CodeUnitCount
        guard buf.count >= n else { return false }
        var i = 0
        while i + n <= buf.count {
            var k = 0
            while k < n && buf[i + k] == text.utf8Start[k] { k += 1 }
            if k == n { return true }
            i += 1
        }
        return false
    }

    package struct Heartbeat {
        var seq: Int64
        var kindSeqs: [Int64]
        /// `shard` and `shards` (0 and 1 from a daemon without shards).
        var shard = 0
        var shards = 1
    }

    private func parseHeartbeat(_ bytes: [UInt8]) -> Heartbeat? {
        bytes.withUnsafeBytes { buf -> Heartbeat? in
            do throws(JSONParseError) { try document.parse(buf) } catch { return nil }
            let root = document.root
            guard let seq = document.member(root, "seq").flatMap({ document.int64($0) }),
                let kinds = document.object(root, "kind_seqs")
            else { return nil }
            var kindSeqs = [Int64](repeating: 0, count: JournaledKind.allCases.count)
            document.forEachMember(kinds) { key, value in
                for kind in JournaledKind.allCases where document.string(key) == kind.name {
                    kindSeqs[kind.rawValue] = document.int64(value) ?? 0
                }
            }
            var heartbeat = Heartbeat(seq: seq, kindSeqs: kindSeqs)
            if let i = document.member(root, "shard").flatMap({ document.int64($0) }) { heartbeat.shard = Int(i) }
            if let n = document.member(root, "shards").flatMap({ document.int64($0) }) { heartbeat.shards = Int(n) }
            return heartbeat
        }
    }

    package struct Reply {
        var op: String?
        var ok = false
        var req: Int64?
        var next: Int64?
        var lastSeq: Int64?
        var firstSeq: Int64?
        var error: String?
        var detail: String?
        var shard: Int?
        var shards: Int?
    }

    private func parseReply(_ bytes: [UInt8]) -> Reply? {
        bytes.withUnsafeBytes { buf -> Reply? in
            do throws(JSONParseError) { try document.parse(buf) } catch { return nil }
            let d = document
            let root = d.root
            var r = Reply()
            r.op = d.member(root, "op").flatMap { d.string($0) }
            r.ok = d.member(root, "ok").flatMap { d.bool($0) } ?? false
            r.req = d.member(root, "req").flatMap { d.int64($0) }
            r.next = d.member(root, "next").flatMap { d.int64($0) }
            r.lastSeq = d.member(root, "last_seq").flatMap { d.int64($0) }
            r.firstSeq = d.member(root, "first_seq").flatMap { d.int64($0) }
            r.error = d.member(root, "error").flatMap { d.string($0) }
            r.detail = d.member(root, "detail").flatMap { d.string($0) }
            r.shard = d.member(root, "shard").flatMap { d.int64($0) }.map { Int($0) }
            r.shards = d.member(root, "shards").flatMap { d.int64($0) }.map { Int($0) }
            return r
        }
    }
}
