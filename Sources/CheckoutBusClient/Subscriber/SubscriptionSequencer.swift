import CheckoutBusProtocol
import CheckoutBusRuntime

/// The gap logic of one shard's subscription, without sockets: what arrives goes in (live
/// envelopes, heartbeats, replay replies with their page), what to do comes out as ``Action``s
/// (deliver this envelope, ask the journal from here, send a report).
///
/// Both subscribers drive it: ``BusSubscriber`` (blocking, a handler per envelope) and
/// ``Subscriber`` (async, a commit per envelope). Neither holds a copy of the rules below.
///
/// **Gaps.** ZeroMQ drops at a high-water mark without a word. The sequencer notices:
/// - when the prefixes match every journaled topic, `seq` itself is contiguous, and any jump is a gap;
/// - a jump in a fully covered kind's `kind_seq` is a gap;
/// - a heartbeat whose `kind_seqs` are ahead of what was delivered is a gap at the tail.
/// A gap is filled from the journal before anything after it is delivered. A live envelope is
/// delivered directly only when it provably follows the last one (the two rules above); with
/// several kinds, or prefixes narrower than a kind, the journal decides instead — one `replay`
/// round trip per burst of live envelopes.
///
/// **Delivery.** ``Action/deliver(_:)`` is emitted once per `seq`, in `seq` order, only once every
/// matching envelope before it was emitted. Emitting is not committing: the driver commits the
/// cursor when the envelope's work is done, and starts the next sequencer from that cursor.
///
/// **Identity.** With an ``ShardIdentity`` expected, nothing is delivered or replayed until the
/// publish endpoint's heartbeat and the control endpoint's `stats` reply have both shown that shard
/// and the driver has ``release()``d every shard; a mismatch throws a ``SubscriberError``.
///
/// Not `Sendable` by need (a value owned by its driver's thread); it does no I/O and reads no clock
/// (the driver passes `now`, monotonic nanoseconds).
package struct SubscriptionSequencer {
    /// What the driver does next, in the order given.
    package enum Action {
        /// Hand this envelope to the application.
        case deliver(BusEnvelope)
        /// Send `{"op":"replay","from":from,"prefix":…,"limit":…,"req":id}` on the control socket.
        case requestReplay(id: Int64, from: Int64)
        /// Send `{"op":"stats","req":id}` on the control socket: which shard are you?
        case requestIdentity(id: Int64)
        /// Send this subscriber's counts (`{"op":"report",…}`) on the control socket.
        case report(Report)
        /// The first heartbeat: the subscriptions are live.
        case subscribed
        /// Record that the kept position is in this journal (``SubscriberCursor/adoptJournal(_:)``):
        /// the first heartbeat's, for a position that named none.
        case adoptJournal(String)
    }

    /// The counts a `report` carries to the daemon (`stats` → `subscribers`).
    package struct Report: Equatable {
        package var id: Int64
        package var lastSeq: Int64
        package var missed: Int
        package var recovered: Int
        package var gaps: Int
        /// The seq through which every envelope this subscriber follows was delivered (past
        /// `lastSeq` when the bus published only what it does not follow).
        package var throughSeq: Int64
        /// The subscriber's last report: it is stopping.
        package var final = false
        /// Envelopes the application holds parked, not applied (set by the driver; nil: not said).
        package var rejected: Int? = nil
        /// Whether it keeps a position across runs (set by the driver; nil: not said).
        package var durable: Bool? = nil
    }

    /// A heartbeat's fields: the shard's last `seq`, each kind's `kind_seq`, and which shard it is.
    package typealias Heartbeat = HeartbeatWire.Fields

    /// A control reply's fields.
    package typealias Reply = ControlReplyWire.Fields

    package let options: BusSubscriber.Options
    package private(set) var statistics = BusSubscriber.Statistics()
    package var logger: BusLogger
    /// The prefixes the SUB socket subscribes to (more than ``BusSubscriber/Options/prefixes`` with
    /// ``BusSubscriber/LiveSubscription/everything``).
    package let wirePrefixes: [String]
    /// What the live stream carries: the prefixes, or with ``BusSubscriber/LiveSubscription/everything`` all.
    private let coverage: TopicCoverage
    /// Whether live envelopes must be matched against the prefixes here.
    private let filtersLocally: Bool

    // Position. Invariant: every matching envelope with seq ≤ verified was delivered, and
    // statistics.lastSeq ≤ verified.
    private var verified: Int64?
    /// The cursor's position when the subscriber started (nil when it started live).
    private var startedAt: Int64?
    /// Whether the position outlives the process (``SubscriberCursor/keepsPosition``): a kept
    /// position ahead of the daemon's journal is refused, a passing one (`tail --since`) warned.
    private var positionKept = false
    /// The journal a kept position is in, as its cursor keeps it (nil: not known).
    private var cursorJournal: String?
    /// Per kind, its `kind_seq` at `verified` (fully covered kinds), when known.
    private var exactKindSeq = [Int64?](repeating: nil, count: JournaledKind.allCases.count)
    /// Per partly covered kind: matching envelopes up to this `kind_seq` were delivered.
    private var checkedKindSeq = [Int64](repeating: -1, count: JournaledKind.allCases.count)

    // Live stream.
    /// Live envelopes not yet provably next, ascending by seq.
    private var pending = RingBuffer<BusEnvelope>()
    private var pendingBytes = 0
    /// Live envelopes up to here were received but let go from `pending` (memory bound).
    private var evictedThrough: Int64 = 0
    /// Envelopes at or below this were published before the subscriber joined.
    private var liveFloor: Int64?
    /// The highest seq the live stream has shown (envelopes and heartbeats).
    private var liveHigh: Int64 = 0
    private var lastHeartbeat: Heartbeat?
    /// Envelopes delivered from the journal before the live stream reached their seq: missed if the
    /// live stream passes them without bringing them. Ascending.
    private var unconfirmed = RingBuffer<Int64>()
    /// Whether the last envelope classified (in delivered order) was a missed one: a gap is a run.
    private var lastWasMissed = false

    // Identity.
    package let expectedShard: ShardIdentity?
    private var publishIdentified: Bool
    private var controlIdentified: Bool
    private var identityRequest: (id: Int64, sentAt: UInt64)?
    /// Whether live envelopes and replays count yet (see ``release()``).
    package private(set) var released: Bool
    /// Both endpoints have shown that they are the expected shard.
    package var isIdentified: Bool { publishIdentified && controlIdentified }

    /// The `started_at` of the daemon's run, from its heartbeats: a new value is a restart.
    private var daemonRun: String?

    // One journal behind both endpoints (docs/durability.md, step 9).
    /// Whether a heartbeat has arrived. Replays wait for the first, for at most
    /// ``BusSubscriber/Options/silenceMilliseconds`` (a daemon that cannot write its journal sends
    /// none): each reply's `journal_id` is checked against the heartbeats' before its page counts.
    private var heartbeatSeen = false
    /// Whether replays wait for the first heartbeat (always, but in unit tests of the gap logic alone,
    /// which feed no heartbeat before their first page).
    package var replayAwaitsHeartbeat = true
    /// When the sockets were connected (monotonic ns), for the wait above.
    private var connectedAt: UInt64 = 0
    /// Replays went out before any heartbeat (none came in time), with the journal of the first
    /// reply: the first heartbeat checks it.
    private var uncheckedJournal: (journal: String?, asked: Bool) = (nil, false)
    /// The publish endpoint's journal identity, from its last heartbeat (nil: it does not say).
    private var publishJournal: String?
    /// A replay reply from another journal than the heartbeats'. Its page was set aside, and no
    /// replay is asked until a heartbeat explains it: one showing the reply's journal (the daemon
    /// came back with another data directory) clears it. Heartbeats still showing the publish
    /// endpoint's journal are evidence of two daemons once sent after the reply's daemon started
    /// (earlier ones may be an old run's, still queued on the live socket behind the new run's
    /// reply, however many): two such stop the subscriber. A reply that does not say when its run
    /// started (a daemon before journal ids) gives no such evidence: the subscriber keeps waiting, and
    /// says so every ten heartbeats.
    private var foreignReply: ForeignReply?

    private struct ForeignReply {
        /// nil: a reply without `journal_id` (a daemon before journal ids) while the heartbeats have one.
        var journal: String?
        var startedAt: String?
        var fresh = 0
        var heartbeats = 0
    }

    // Control requests.
    private var needReplay = false
    private var inFlight: (id: Int64, from: Int64, sentAt: UInt64)?
    /// The in-flight request was sent before the page just received was delivered (a prefetch):
    /// ``pageDelivered(now:)`` restarts its clock, once. Any other reply leaves the clock alone.
    private var prefetchAwaitsDelivery = false
    private var nextRequestID: Int64 = 1
    /// Replays answered `busy` in a row (the daemon's control replies at their memory bound), and
    /// when the next may be asked: 20 ms after the first, doubling to a second.
    private var busyReplays = 0
    private var replayNotBefore: UInt64 = 0

    /// - Parameters:
    ///   - options: prefixes, live subscription, page size, timeouts, the pending-bytes bound, the name.
    ///   - expectedShard: the shard these endpoints must be; nil: whatever the daemon is.
    package init(options: BusSubscriber.Options, expectedShard: ShardIdentity? = nil,
                 logger: BusLogger = BusLogger(label: "subscriber")) {
        self.options = options
        self.expectedShard = expectedShard
        self.logger = logger
        publishIdentified = expectedShard == nil
        controlIdentified = expectedShard == nil
        released = expectedShard == nil
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

    // MARK: Driving

    /// The sockets are connected: begin after `cursor` (nil: with what is published from now on).
    /// - Parameter kept: the cursor outlives the process (a file, a worker's database); when it is
    ///   ahead of the daemon's journal the first heartbeat throws rather than warns.
    /// - Parameter journal: the journal a kept cursor is in (``SubscriberCursor/journal``): a daemon
    ///   whose first heartbeat names another journal is refused, its seqs not the cursor's.
    package mutating func start(cursor: Int64?, kept: Bool = false, journal: String? = nil, now: UInt64) -> [Action] {
        var actions: [Action] = []
        if expectedShard != nil { actions.append(identityRequestAction(now: now)) }
        connectedAt = now
        positionKept = kept
        cursorJournal = journal
        if let cursor {
            verified = cursor
            startedAt = cursor
            statistics.lastSeq = cursor
            needReplay = true
        }
        return actions
    }

    /// Every shard of the driver has shown its identity: live envelopes and replays count from now.
    package mutating func release() { released = true }

    /// Before polling: resends an unanswered request, asks the journal when needed.
    package mutating func tick(now: UInt64) -> [Action] {
        var actions: [Action] = []
        let timeout = UInt64(options.requestTimeoutMilliseconds) * 1_000_000
        if let request = inFlight, now - request.sentAt > timeout {
            logger.warning("control request unanswered; sending it again",
                           ["endpoint": options.control, "from": String(request.from)])
            inFlight = nil
            needReplay = true
        }
        if !controlIdentified, let request = identityRequest, now - request.sentAt > timeout {
            logger.warning("control endpoint has not said which shard it is; asking again", ["endpoint": options.control])
            actions.append(identityRequestAction(now: now))
        }
        if released && needReplay && inFlight == nil && !heartbeatSeen && !uncheckedJournal.asked
            && replayAwaitsHeartbeat && now - connectedAt > UInt64(options.silenceMilliseconds) * 1_000_000 {
            logger.warning("no heartbeat from the publish endpoint yet (a daemon that cannot write its journal sends "
                           + "none): replaying without checking that the control endpoint is the same daemon; "
                           + "the first heartbeat checks it", ["publish": options.publish, "control": options.control])
            uncheckedJournal.asked = true
        }
        if mayAskJournal && needReplay && inFlight == nil && now >= replayNotBefore {
            actions.append(replayAction(from: nil, now: now))
        }
        return actions
    }

    /// Whether a replay may be asked: the endpoints are released, a heartbeat showed the publish
    /// endpoint's journal (or none came in time), and no reply from another journal waits to be explained.
    private var mayAskJournal: Bool {
        released && (heartbeatSeen || !replayAwaitsHeartbeat || uncheckedJournal.asked) && foreignReply == nil
    }

    /// How long the driver may wait for its sockets before the next ``tick(now:)``, in milliseconds.
    /// (20 ms while replays are answered `busy`, whose pauses are 20 ms and longer.)
    package var pollTimeoutMilliseconds: Int {
        mayAskJournal && needReplay && inFlight == nil ? (busyReplays > 0 ? 20 : 10) : 200
    }

    /// The driver could not send the replay request it was asked for (the socket would block): ask again.
    package mutating func replayNotSent() {
        inFlight = nil
        needReplay = true
        statistics.replayRequests -= 1
    }

    /// The control endpoint answered as an acknowledged ingest socket: nothing more is sent to it
    /// (each request would be journaled as a dead letter), the final report included.
    package private(set) var controlIsIngest = false

    /// A report of the counts, for when the driver stops.
    package mutating func finalReport() -> Action {
        guard case .report(var report) = reportAction() else { preconditionFailure() }
        report.final = true
        return .report(report)
    }

    // MARK: Live stream

    /// An envelope from the publish socket.
    package mutating func receiveLive(_ received: BusEnvelope) throws(SubscriberError) -> [Action] {
        // Until every shard has shown which it is, nothing counts (the journal has it).
        guard released else { return [] }
        var envelope = received
        try checkShard(of: envelope, from: options.publish)
        if filtersLocally && !options.prefixes.contains(where: { envelope.topic.starts(with: $0.utf8) }) {
            envelope.positionOnly = true
        }
        confirm(through: envelope.seq, arrived: envelope.seq)
        liveHigh = max(liveHigh, envelope.seq)
        if liveFloor == nil { liveFloor = envelope.seq - 1 }
        if verified == nil { verified = envelope.seq - 1 }
        guard envelope.seq > verified! else {
            if !envelope.positionOnly { statistics.duplicates += 1 }
            return []
        }
        if inFlight != nil || needReplay || !pending.isEmpty {
            hold(envelope)
            return []
        }
        if isProvablyNext(envelope) {
            var actions: [Action] = []
            deliver(envelope, seenLive: true, into: &actions)
            return actions
        }
        hold(envelope)
        needReplay = true
        return []
    }

    /// A heartbeat from the publish socket.
    package mutating func receiveHeartbeat(_ heartbeat: Heartbeat) throws(SubscriberError) -> [Action] {
        try checkIdentity(heartbeat)
        if noteRun(heartbeat.startedAt) { try checkRestartedJournal(heartbeat) }
        try notePublishJournal(heartbeat)
        guard released else { return [] }
        var actions: [Action] = []
        statistics.heartbeats += 1
        confirm(through: heartbeat.seq, arrived: nil)
        liveHigh = max(liveHigh, heartbeat.seq)
        if liveFloor == nil { liveFloor = heartbeat.seq }
        if statistics.heartbeats == 1 { actions.append(.subscribed) }
        // Against the cursor the subscriber started from, not what it has delivered since: a replay
        // can deliver envelopes published after this heartbeat was sent, before it is read. A
        // journal never numbers below a seq it may have published (docs/durability.md, "No seq is
        // ever reused"), so a cursor ahead of it belongs to another journal: following it would
        // take the new journal's envelopes up to the cursor for seen ones and skip them (a
        // `complete` lost to the fulfilment worker). A kept cursor stops there; `tail --since`
        // only warns.
        if let start = startedAt, heartbeat.seq < start, statistics.heartbeats == 1 {
            if positionKept {
                throw SubscriberError(.cursorMismatch,
                    "the cursor is at seq \(start) but the daemon's journal ends at seq \(heartbeat.seq) "
                        + "(\(options.publish)): the cursor belongs to another journal (the daemon's data directory "
                        + "was reset or replaced); nothing was skipped. Move it to the journal's start with "
                        + "`checkoutbus cursor set PATH --to-seq 1` "
                        + "(docs/runbook.md, \"A daemon's journal was reset\")")
            }
            logger.warning("the daemon's last seq is behind this subscriber's cursor (was its journal reset?)",
                           ["daemon_seq": String(heartbeat.seq), "cursor": String(start)])
        }
        // A kept position in another journal than the daemon's: the daemon's data directory was reset
        // or replaced, and its seqs — even those past the position — are not the ones handled. The
        // seq check above cannot see a new journal that has already passed the position (a worker
        // restarted a second after it was refused, or frozen while the daemon was replaced).
        if positionKept, statistics.heartbeats == 1, let theirs = heartbeat.journal {
            if let kept = cursorJournal, kept != theirs {
                throw SubscriberError(.cursorMismatch,
                    "the cursor is at seq \(startedAt ?? 0) of journal \(kept), but the daemon's journal is \(theirs) "
                        + "(\(options.publish)): the daemon's data directory was reset or replaced, and its seqs are not "
                        + "the cursor's; nothing was skipped. Move the cursor to the journal's start with "
                        + "`checkoutbus cursor set PATH --to-seq 1` (docs/runbook.md, \"A daemon's journal was reset\")")
            }
            if cursorJournal == nil {
                cursorJournal = theirs
                actions.append(.adoptJournal(theirs))
            }
        }
        if verified == nil {
            verified = heartbeat.seq
            statistics.lastSeq = heartbeat.seq
        }
        lastHeartbeat = heartbeat
        if inFlight == nil && !needReplay && pending.isEmpty { evaluateHeartbeat() }
        actions.append(reportAction())
        return actions
    }

    /// A heartbeat from another run of the daemon than the last one: the requests in flight were
    /// lost with the old run (its successor on the endpoint never saw them), so they are asked
    /// again at once rather than after their timeout ("A request lost with the daemon").
    /// - Returns: whether the run is another than the last one seen.
    private mutating func noteRun(_ run: String?) -> Bool {
        guard let run else { return false }
        defer { daemonRun = run }
        guard let known = daemonRun, known != run else { return false }
        if let request = inFlight {
            logger.info("the daemon restarted; asking the journal again", ["from": String(request.from)])
            inFlight = nil
            needReplay = true
            prefetchAwaitsDelivery = false
        }
        if let request = identityRequest { identityRequest = (request.id, 0) }
        // The new run has no unread pages of anyone's: a pause after `busy` ends.
        busyReplays = 0
        replayNotBefore = 0
        return true
    }

    /// The first heartbeat of a new run of the daemon. A journal never numbers below a seq it may
    /// have published, across any restart (docs/durability.md, "No seq is ever reused"). Every
    /// envelope was written before it was published, and every heartbeat is sent once everything
    /// before it is published (`BusDaemon.settle`), so ``liveHigh`` — the highest seq the live
    /// socket showed, envelope or heartbeat — is a seq the old run wrote. A new run whose last seq
    /// is below it lost records it had published (a disk that dropped written pages, a data
    /// directory restored from a copy or replaced): it will give those seqs to new events, which
    /// this subscriber would take for seen ones and skip. The live socket delivers in order: what
    /// it showed before this heartbeat is the old run's, or the new run's at most at this seq. (A
    /// journal page may come from the new run before its first heartbeat is read: pages do not count.)
    private mutating func checkRestartedJournal(_ heartbeat: Heartbeat) throws(SubscriberError) {
        // Another journal than the old run's (its data directory replaced while this subscriber
        // waited, or was frozen): whatever its seqs, they are not the ones handled.
        if let old = publishJournal, let new = heartbeat.journal, old != new {
            if positionKept {
                throw SubscriberError(.cursorMismatch,
                    "the daemon at \(options.publish) restarted with another journal (\(new), was \(old)): its data "
                        + "directory was reset or replaced, and its seqs are not the ones this subscriber handled. "
                        + "Nothing was skipped. Move the position to the journal's start with "
                        + "`checkoutbus cursor set PATH --to-seq 1` (docs/runbook.md, \"A daemon's journal was reset\")")
            }
            logger.warning("the daemon restarted with another journal; its seqs are not the ones handled before",
                           ["journal": new, "was": old])
            return
        }
        let published = liveHigh
        guard heartbeat.seq < published else { return }
        if positionKept {
            throw SubscriberError(.cursorMismatch,
                "the daemon at \(options.publish) restarted with its journal ending at seq \(heartbeat.seq), "
                    + "but it had published seq \(published) to this subscriber: records it published were lost "
                    + "from its journal (a disk fault, or its data directory restored from a copy or replaced), "
                    + "and it will give those seqs to new events, which this subscriber would skip as seen. "
                    + "Nothing was skipped. Check the daemon's disk, then resume after the journal's last record, "
                    + "N in the daemon's `started … last_seq=N` line (at most \(heartbeat.seq)): "
                    + "`checkoutbus cursor set PATH --to-seq N+1` (docs/runbook.md, "
                    + "\"A daemon's journal lost records it had published\")")
        }
        logger.warning("the daemon restarted with its journal behind what it had published; new events up to the old "
                       + "seq will be taken for seen ones", ["daemon_seq": String(heartbeat.seq),
                                                            "published_seq": String(published)])
    }

    /// Notes the publish endpoint's journal from a heartbeat, and settles a reply that came from
    /// another journal: the same journal now (the daemon came back with another data directory, and
    /// the restart check has run) asks again; the publish endpoint's own journal twice since means
    /// two daemons, and stops.
    private mutating func notePublishJournal(_ heartbeat: Heartbeat) throws(SubscriberError) {
        let first = !heartbeatSeen
        heartbeatSeen = true
        publishJournal = heartbeat.journal
        if first, uncheckedJournal.asked, let theirs = uncheckedJournal.journal, let ours = heartbeat.journal,
            theirs != ours {
            throw twoDaemons(control: theirs, publish: ours,
                             handedOver: "Pages from the control endpoint were handed over before this first heartbeat")
        }
        guard var foreign = foreignReply else { return }
        if heartbeat.journal == nil || heartbeat.journal == foreign.journal {
            foreignReply = nil
            return
        }
        foreign.heartbeats += 1
        if let started = foreign.startedAt, let sent = heartbeat.sentAt, sent >= started { foreign.fresh += 1 }
        foreignReply = foreign
        if foreign.startedAt == nil && foreign.heartbeats % 10 == 1 {
            logger.warning("the control endpoint answered from a daemon without a journal id, the publish endpoint's "
                           + "heartbeats have one: nothing is replayed until they agree (two daemons, or one that "
                           + "was replaced by an older build)",
                           ["control": options.control, "publish": options.publish])
        }
        guard foreign.fresh >= 2 else { return }
        throw twoDaemons(control: foreign.journal ?? "(none: a daemon without journal ids)",
                         publish: heartbeat.journal ?? "?",
                         handedOver: "Nothing from the control endpoint was handed over")
    }

    private func twoDaemons(control: String, publish: String, handedOver: String) -> SubscriberError {
        SubscriberError(.endpointMismatch,
            "the control endpoint \(options.control) answers from journal \(control), the publish endpoint "
                + "\(options.publish) from journal \(publish): they are two daemons, and one's journal would be "
                + "delivered as the other's. \(handedOver). Give one daemon's --publish and --control endpoints "
                + "(docs/durability.md, \"One journal behind both endpoints\")")
    }

    private mutating func hold(_ envelope: BusEnvelope) {
        if let last = pending.last, last.seq >= envelope.seq { return }
        pending.append(envelope)
        pendingBytes += envelope.bytes.count + envelope.topic.count
        if pendingBytes > options.maxPendingBytes {
            // The journal has every one of them: let them go and read them from there.
            evictedThrough = max(evictedThrough, envelope.seq)
            pending.removeAll(keepingCapacity: false)
            pendingBytes = 0
            needReplay = true
        }
    }

    /// Whether `envelope` provably follows the last delivered matching envelope, with nothing between.
    private func isProvablyNext(_ envelope: BusEnvelope) -> Bool {
        guard let verified else { return false }
        if coverage.coversEverything { return envelope.seq == verified + 1 }
        if coverage.singleFullKind == envelope.kind, let known = exactKindSeq[envelope.kind.rawValue] {
            return envelope.kindSeq == known + 1
        }
        return false
    }

    /// Compares the last heartbeat with what was delivered: learns the `kind_seq`s at `verified`, or
    /// finds that something matching was published and not delivered, and asks the journal.
    private mutating func evaluateHeartbeat() {
        guard let heartbeat = lastHeartbeat, let v = verified else { return }
        if v >= heartbeat.seq {
            // Everything matching up to the heartbeat was delivered: its kind_seqs are ours too.
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
    private mutating func checkIdentity(_ heartbeat: Heartbeat) throws(SubscriberError) {
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
        // envelopes until its seq caught up. One daemon only warns (see receiveHeartbeat). Only the
        // first heartbeat is compared: nothing was replayed before it, while later ones may have
        // waited in the queue behind what the journal has already delivered.
        if !publishIdentified, let v = verified, heartbeat.seq < v {
            throw SubscriberError(.cursorMismatch,
                "the cursor of shard \(expected.shard)/\(expected.shards) is at seq \(v) but that shard's journal ends at "
                    + "seq \(heartbeat.seq) (\(options.publish)): the cursor belongs to another journal (one daemon's before "
                    + "sharding, or another shard count); start this shard's cursor over")
        }
        publishIdentified = true
    }

    private mutating func identityRequestAction(now: UInt64) -> Action {
        let id = nextRequestID
        nextRequestID += 1
        identityRequest = (id, now)
        return .requestIdentity(id: id)
    }

    private mutating func checkControlIdentity(_ reply: Reply, now: UInt64) throws(SubscriberError) {
        guard let expected = expectedShard else { return }
        if reply.error == "busy", let request = identityRequest {
            // A good request the daemon cannot answer now (its pipeline held up): asked again in a
            // second, not refused.
            let timeout = UInt64(options.requestTimeoutMilliseconds) * 1_000_000
            let wait = min(timeout, 1_000_000_000)
            identityRequest = (request.id, now - min(now, timeout - wait))  // tick asks again after `wait`
            logger.info("the control endpoint is busy; asking which shard it is again", ["endpoint": options.control,
                                                                                        "detail": reply.detail ?? ""])
            return
        }
        identityRequest = nil
        guard reply.ok else {
            throw SubscriberError(.refused, "the control endpoint \(options.control) refused stats: \(reply.error ?? "?") \(reply.detail ?? "")")
        }
        guard reply.shard == expected.shard && reply.shards == expected.shards else {
            throw expected.mismatch(endpoint: options.control,
                                    found: reply.shard.map { "shard \($0)/\(reply.shards ?? 1)" } ?? "a daemon that does not say its shard")
        }
        controlIdentified = true
    }

    /// An envelope from another shard than this endpoint's position would move the wrong cursor.
    private func checkShard(of envelope: BusEnvelope, from endpoint: String) throws(SubscriberError) {
        guard let expected = expectedShard, envelope.shard != expected.shard else { return }
        throw expected.mismatch(endpoint: endpoint, found: "an envelope of shard \(envelope.shard) (seq \(envelope.seq))")
    }

    // MARK: Journal

    /// Asks for the page from `from` (default: just after what was verified).
    private mutating func replayAction(from start: Int64?, now: UInt64) -> Action {
        let from = start ?? (verified ?? 0) + 1
        let id = nextRequestID
        nextRequestID += 1
        needReplay = false
        inFlight = (id, from, now)
        prefetchAwaitsDelivery = false
        statistics.replayRequests += 1
        return .requestReplay(id: id, from: from)
    }

    /// A reply on the control socket, with the envelopes of its page (a `replay` reply's frames
    /// after the first, parsed; empty for other replies).
    package mutating func receiveReply(_ reply: Reply, page: [BusEnvelope], now: UInt64) throws(SubscriberError) -> [Action] {
        if reply.isIngestAck {
            // Asking again would only journal another dead letter each time.
            controlIsIngest = true
            throw SubscriberError(.endpointMismatch,
                "the control endpoint \(options.control) answered as an acknowledged ingest socket (--ingest-acked): "
                    + "it took the request for an event and dead-lettered it. Give the daemon's --control endpoint")
        }
        if let request = identityRequest, reply.req == request.id {
            try checkControlIdentity(reply, now: now)
            return []
        }
        // Report replies, and answers to requests given up on, are not waited for.
        guard let request = inFlight, reply.req == request.id else { return [] }
        inFlight = nil
        if reply.error == "busy" {
            // The daemon holds as many unread replay pages as its --control-memory allows (clients
            // that do not read), or this one's own: asked again after a pause.
            busyReplays += 1
            replayNotBefore = now + min(1_000_000_000, 20_000_000 << UInt64(min(busyReplays - 1, 6)))
            needReplay = true
            prefetchAwaitsDelivery = false
            statistics.replayBusy += 1
            if busyReplays == 1 || busyReplays % 20 == 0 {
                logger.info("the control endpoint is busy; asking for the page again shortly",
                            ["endpoint": options.control, "from": String(request.from), "times": String(busyReplays),
                             "detail": reply.detail ?? ""])
            }
            return []
        }
        busyReplays = 0
        if reply.op != "replay" {
            throw SubscriberError(.refused, "the daemon refused replay from \(request.from): \(reply.error ?? "?") \(reply.detail ?? "")")
        }
        if let expected = expectedShard, reply.shard != expected.shard || reply.shards != expected.shards {
            throw expected.mismatch(endpoint: options.control,
                                    found: reply.shard.map { "shard \($0)/\(reply.shards ?? 1)" } ?? "a daemon that does not say its shard")
        }
        if !heartbeatSeen && uncheckedJournal.journal == nil { uncheckedJournal.journal = reply.journal }
        // A kept position in another journal, before any heartbeat said so (none came in time: the
        // replay went ahead unchecked): nothing of that journal is delivered.
        if positionKept, !heartbeatSeen, let kept = cursorJournal, let theirs = reply.journal, kept != theirs {
            throw SubscriberError(.cursorMismatch,
                "the cursor is at seq \(startedAt ?? 0) of journal \(kept), but the daemon's journal is \(theirs) "
                    + "(\(options.control)): the daemon's data directory was reset or replaced, and its seqs are not "
                    + "the cursor's; nothing was skipped. Move the cursor to the journal's start with "
                    + "`checkoutbus cursor set PATH --to-seq 1` (docs/runbook.md, \"A daemon's journal was reset\")")
        }
        if let ours = publishJournal, reply.journal != ours {
            // Not delivered, nor asked again until a heartbeat explains it (notePublishJournal).
            if foreignReply == nil || foreignReply?.journal != reply.journal {
                foreignReply = ForeignReply(journal: reply.journal, startedAt: reply.startedAt)
            }
            needReplay = true
            prefetchAwaitsDelivery = false
            logger.warning("the control endpoint answered from another journal than the publish endpoint's; "
                           + "waiting for heartbeats to tell a restart from two daemons",
                           ["control": options.control, "publish": options.publish,
                            "control_journal": reply.journal ?? "none", "publish_journal": ours])
            return []
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
                return []
            }
            throw SubscriberError(.refused, "the daemon refused replay from \(request.from): \(reply.error ?? "?") \(reply.detail ?? "")")
        }
        guard let next = reply.next, let lastSeq = reply.lastSeq else {
            throw SubscriberError(.badReply, "replay reply without next or last_seq")
        }
        var actions: [Action] = []
        let morePages = next <= lastSeq && next > request.from
        // Ask for the next page before delivering this one, so the daemon reads while the application works.
        if morePages {
            actions.append(replayAction(from: next, now: now))
            prefetchAwaitsDelivery = true
        }
        for envelope in page {
            try checkShard(of: envelope, from: options.control)
            guard envelope.seq > (verified ?? 0) else { continue }
            // A live copy held in `pending` means it was not missed.
            while let first = pending.first, first.seq < envelope.seq { dropPendingHead() }
            if let live = pending.first, live.seq == envelope.seq {
                // Received live after all: deliver that copy (the bytes are the same).
                dropPendingHead()
                deliver(live, seenLive: true, into: &actions)
            } else {
                deliver(envelope, seenLive: envelope.seq <= evictedThrough, into: &actions)
            }
        }
        verified = max(verified ?? 0, next - 1)
        if !morePages {
            if next <= request.from && next <= lastSeq {
                logger.warning("replay made no progress; following live", ["from": String(request.from)])
            }
            caughtUp(into: &actions)
        }
        return actions
    }

    /// The driver finished handling a reply: if it was a page whose next page was already asked
    /// for, time that request from now, since its answer may have waited while this page was
    /// delivered.
    ///
    /// Only that once. Restarting the clock after any reply (a `report`'s, every heartbeat) kept a
    /// request lost with a daemon that died after reading it in flight for ever: the subscriber held
    /// every live envelope behind it and delivered nothing again (docs/durability.md, "A request
    /// lost with the daemon").
    package mutating func pageDelivered(now: UInt64) {
        guard prefetchAwaitsDelivery else { return }
        prefetchAwaitsDelivery = false
        if let prefetched = inFlight { inFlight = (prefetched.id, prefetched.from, now) }
    }

    /// The journal has been read up to what it held: deliver the live envelopes held meanwhile
    /// while each provably follows the last, then check the last heartbeat.
    private mutating func caughtUp(into actions: inout [Action]) {
        while let first = pending.first, first.seq <= verified! { dropPendingHead() }
        while let envelope = pending.first {
            guard isProvablyNext(envelope) else {
                needReplay = true
                break
            }
            dropPendingHead()
            deliver(envelope, seenLive: true, into: &actions)
        }
        if pending.isEmpty {
            pendingBytes = 0
            if !needReplay { evaluateHeartbeat() }
        }
    }

    /// Takes the deliveries among `actions`, which were handed out and not done (the run stopped,
    /// or the handler or its commit threw), back out of ``statistics``; `lastSeq` is the last
    /// `seq` the handler returned from and the cursor committed. The run is ending: only the
    /// statistics and the position its final report gives are put right.
    package mutating func notDelivered(_ actions: ArraySlice<Action>, lastSeq: Int64) {
        for case .deliver(let envelope) in actions {
            statistics.handled -= 1
            if envelope.origin == .journal { statistics.fromJournal -= 1 }
        }
        statistics.lastSeq = lastSeq
        // The final report's position (`through_seq`) too.
        if let v = verified, v > lastSeq { verified = lastSeq }
    }

    private mutating func dropPendingHead() {
        guard let envelope = pending.popFirst() else { return }
        pendingBytes = pending.isEmpty ? 0 : pendingBytes - envelope.bytes.count - envelope.topic.count
    }

    // MARK: Delivery

    private mutating func deliver(_ envelope: BusEnvelope, seenLive: Bool, into actions: inout [Action]) {
        if envelope.positionOnly {
            // Another topic on the wire (LiveSubscription.everything): it only moves the position.
            verified = max(verified ?? 0, envelope.seq)
            if coverage.level(envelope.kind) == .full { exactKindSeq[envelope.kind.rawValue] = envelope.kindSeq }
            lastWasMissed = false
            return
        }
        actions.append(.deliver(envelope))
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
                if unconfirmed.isEmpty && envelope.seq <= liveHigh {
                    countMissed()
                } else {
                    unconfirmed.append(envelope.seq)
                    if unconfirmed.count > 1_000_000 { _ = unconfirmed.popFirst() }
                }
            } else {
                lastWasMissed = false
            }
        } else {
            lastWasMissed = false
        }
    }

    private mutating func countMissed() {
        statistics.missed += 1
        statistics.recovered += 1
        if !lastWasMissed { statistics.gaps += 1 }
        lastWasMissed = true
    }

    /// The live stream has reached `seq` (an envelope `arrived`, or a heartbeat sent after it):
    /// envelopes delivered from the journal before it that did not arrive live were missed.
    private mutating func confirm(through seq: Int64, arrived: Int64?) {
        while let first = unconfirmed.first, first <= seq {
            if first == arrived {
                lastWasMissed = false
            } else {
                countMissed()
            }
            _ = unconfirmed.popFirst()
        }
    }

    private mutating func reportAction() -> Action {
        let id = nextRequestID
        nextRequestID += 1
        return .report(Report(id: id, lastSeq: statistics.lastSeq, missed: statistics.missed,
                              recovered: statistics.recovered, gaps: statistics.gaps,
                              throughSeq: max(verified ?? statistics.lastSeq, statistics.lastSeq)))
    }
}
