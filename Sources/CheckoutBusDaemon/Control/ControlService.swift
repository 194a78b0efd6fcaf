#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import Synchronization
import ZeroMQ
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// The control socket's requests (`replay`, `stats`, `report`; protocol in `docs/durability.md`),
/// served on the control thread (``ControlServer``), never on the pipeline's.
///
/// Replay pages are read by this service's own ``JournalReader``; one page per request, each
/// bounded in records read, records returned and bytes, so a client that asks for the whole
/// journal gets it a page at a time, taking turns with every other client (the ROUTER socket
/// queues requests fairly across connections). `stats` is answered from a ``DaemonSnapshot`` the
/// pipeline takes after the request arrived (``SnapshotExchange``); requests wait for it without
/// holding up replays, and are answered from the last one, with its age, if the pipeline does not
/// answer within ``statsWaitNanoseconds``.
///
/// Not `Sendable`: lives on the control thread with its socket.
package final class ControlService {
    package static let maxPage = 10_000
    package static let defaultPage = 1000
    /// Records one replay request reads at most, matched or not.
    package static let maxExamined = 100_000
    /// A page ends once it has read the journal this long (ns): with clients taking turns a page
    /// at a time, `stats` and the next client wait for at most a few such pages, whatever the
    /// prefixes, the record sizes and the build.
    package static let pageTimeBudget: UInt64 = 10_000_000
    /// A page ends before its topics and envelopes pass this many bytes (it holds at least one record).
    package static let maxPageBytes = 4 << 20

    /// Replay pages queued in libzmq for one client (sent, not yet written to its connection)
    /// before its next replay request is answered `busy`: the page it reads and the one it asked
    /// for ahead.
    package static let maxQueuedPages = 2

    /// A client's share of the pages, with `clients` control clients connected: the half of
    /// `budget` (`--control-memory`) that holds pages within their share, divided so that each
    /// client's ``maxQueuedPages`` fit; at most ``maxPageBytes``, at least 4 KiB. A page holds
    /// one record at least: a record larger than the share is a page of its own, counted against
    /// the other half (``QueuedReplies``).
    package static func pageBytes(budget: Int, clients: Int) -> Int {
        max(4096, min(maxPageBytes, budget / 2 / (max(1, clients) * maxQueuedPages)))
    }

    /// A request's `req`, as written, at most this long: every reply repeats it.
    package static let maxRequestIDBytes = 64

    /// A status frame longer than this (a `stats` reply lists every reported subscriber: ~400 KB
    /// with 1,024 of them) is counted in the replies' budget as a page is.
    package static let countedReplyBytes = 4096

    /// `--control-memory`: what all control clients' queued replies may hold together.
    package var replyBudget = 256 << 20
    /// `stats` requests waiting for a snapshot at once; more are answered `busy`.
    package static let maxPendingStats = 1024
    /// How long a `stats` request waits for the pipeline's snapshot before the last one answers it.
    package static let statsWaitNanoseconds: UInt64 = 1_000_000_000

    /// A `stats` request waiting for a snapshot newer than `generation`.
    private struct PendingStats {
        /// The client's routing frames, to put before the reply.
        var envelope: [[UInt8]]
        var req: [UInt8]?
        var generation: UInt64
        var arrivedAt: UInt64
    }

    package let reader: JournalReader
    package let shard: ShardMap
    package let exchange: SnapshotExchange
    package let reports: SubscriberReportBook
    package let counters: ServiceCounters
    /// The journal's identity and the run's start, in every replay reply (`journal_id`,
    /// `started_at`): a subscriber checks them against its publish endpoint's heartbeats.
    package var run: DaemonRun?
    private let request = JSONDocument()
    private var pendingStats: [PendingStats] = []
    /// The last page sent, emptied: the next replay fills its buffers again (a page may be megabytes).
    private var sentPage = ReplayPage()
    /// The pages queued for each client that was sent one, by its routing id; those with none
    /// queued are forgotten as the table grows (``queue(for:)``).
    private var clientQueues: [[UInt8]: ClientQueue] = [:]
    private var clientQueuesPruned = 0

    package init(reader: JournalReader, shard: ShardMap, exchange: SnapshotExchange, reports: SubscriberReportBook,
         counters: ServiceCounters) {
        self.reader = reader
        self.shard = shard
        self.exchange = exchange
        self.reports = reports
        self.counters = counters
        request.maxDepth = 8
    }

    /// The page size now: the reply budget shared among the control clients connected.
    private func pageBytes() -> Int {
        let f = counters.figures
        let socket = ServiceCounters.Socket.control.rawValue
        return ControlService.pageBytes(budget: replyBudget, clients: Int(f.accepted[socket]) - Int(f.disconnected[socket]))
    }

    /// Whether `stats` requests wait for a snapshot.
    package var hasPendingStats: Bool { !pendingStats.isEmpty }

    /// Answers up to `limit` queued requests without blocking; `stats` requests wait for a snapshot.
    package func serve(_ socket: ZMQSocket, limit: Int) throws {
        var n = 0
        while n < limit, let frames = try socket.receiveMultipart(dontWait: true) {
            n += 1
            guard frames.count >= 2 else { continue }
            counters.update { $0.controlRequests += 1 }
            let delimiter = frames.count >= 3 && frames[1].isEmpty
            let body = frames[delimiter ? 2 : 1]
            let routing = Array(frames.prefix(delimiter ? 2 : 1))
            switch handle(body, client: routing[0]) {
            case .reply(let reply):
                try send(reply, to: routing, on: socket)
            case .waitForSnapshot(let stats):
                guard pendingStats.count < ControlService.maxPendingStats else {
                    let detail = "\(ControlService.maxPendingStats) stats requests are waiting; retry"
                    try send(Reply(ControlReplyWire.busy(detail, req: stats.req)),
                             to: routing, on: socket)
                    continue
                }
                let generation = exchange.latest.generation
                pendingStats.append(PendingStats(envelope: routing, req: stats.req, generation: generation,
                                                 arrivedAt: BusClock.monotonicNanoseconds()))
                exchange.request()
            }
        }
    }

    /// Answers the waiting `stats` requests that a snapshot taken after them can answer, and
    /// those that waited too long (from the last snapshot, whatever its age).
    package func answerPendingStats(_ socket: ZMQSocket) throws {
        guard !pendingStats.isEmpty else { return }
        let (snapshot, generation) = exchange.latest
        let now = BusClock.monotonicNanoseconds()
        var waiting: [PendingStats] = []
        for p in pendingStats {
            if generation > p.generation || now - p.arrivedAt > ControlService.statsWaitNanoseconds {
                var reply = Reply(snapshot.map { stats($0, req: p.req, now: now) }
                    ?? ControlReplyWire.busy("the pipeline has not answered yet; retry", req: p.req))
                if reply.status.count > ControlService.countedReplyBytes {
                    // Admitted as a page is, or answered busy.
                    let pages = clientQueues[p.envelope[0]]?.pages.load(ordering: .relaxed) ?? 0
                    let queued = counters.queuedReplies
                    if pages >= ControlService.maxQueuedPages {
                        reply = ownRepliesQueued(pages, req: p.req)
                    } else if let oversize = admission(reply.status.count, pages: pages, share: pageBytes()) {
                        reply.countStatus = true
                        reply.oversize = oversize
                    } else {
                        reply = busy(queuedDetail(queued), req: p.req)
                    }
                }
                try send(reply, to: p.envelope, on: socket)
            } else {
                waiting.append(p)
            }
        }
        pendingStats = waiting
    }

    /// Sends one reply without waiting: a client whose queue is full (it sends and does not read)
    /// or that has gone loses the reply, counted, and never holds up the others. A replay page's
    /// records follow the status frame, copied once from the page's buffer (which the next page
    /// reuses) into a ``LentPage`` that libzmq gives back when it is done with them.
    private func send(_ reply: consuming Reply, to routing: [[UInt8]], on socket: ZMQSocket) throws {
        // Moved out, not copied: emptying a page still shared would allocate its buffers anew.
        var page = ReplayPage()
        swap(&page, &reply.page)
        defer { recycle(page) }
        // Counted from here: a page not sent is given back (and uncounted) as this call ends.
        let lent = page.count > 0
            ? LentPage(byteCount: page.byteCount, oversize: reply.oversize, client: queue(for: routing[0]),
                       counter: counters.queuedReplies)
            : nil
        let lentStatus = reply.countStatus
            ? LentPage(byteCount: reply.status.count, oversize: reply.oversize, client: queue(for: routing[0]),
                       counter: counters.queuedReplies)
            : nil
        var sent = false
        do {
            sent = try socket.send(routing[0], more: true, dontWait: true)
        } catch let e as ZMQError where e.code == EHOSTUNREACH {
            sent = false
        }
        guard sent else {
            counters.update { $0.controlRepliesDropped += 1 }
            return
        }
        for frame in routing.dropFirst() { _ = try socket.send(frame, more: true) }
        if let lentStatus {
            reply.status.withUnsafeBytes { lentStatus.memory.copyMemory(from: $0) }
            _ = try lentStatus.send(UnsafeRawBufferPointer(lentStatus.memory), on: socket, more: page.count > 0)
        } else {
            _ = try socket.send(reply.status, more: page.count > 0)
        }
        guard let lent else { return }
        try page.forEachRecord(copiedTo: lent.memory) { n, topic, envelope in
            _ = try lent.send(topic, on: socket, more: true)
            _ = try lent.send(envelope, on: socket, more: n < page.count - 1)
        }
    }

    /// The count of pages queued for the client `routing` names, made when first needed. The table
    /// keeps only clients with pages queued once it has grown past twice what it held after the
    /// last pruning (and 64): a client that left is forgotten once libzmq has dropped its pages.
    private func queue(for routing: [UInt8]) -> ClientQueue {
        if let queue = clientQueues[routing] { return queue }
        if clientQueues.count >= max(64, 2 * clientQueuesPruned) {
            clientQueues = clientQueues.filter { $0.value.pages.load(ordering: .relaxed) > 0 }
            clientQueuesPruned = clientQueues.count
        }
        let queue = ClientQueue()
        clientQueues[routing] = queue
        return queue
    }

    /// Keeps a replay page's buffers, emptied, for the next page (a reply without records has none
    /// worth keeping).
    private func recycle(_ page: consuming ReplayPage) {
        guard page.byteCapacity > sentPage.byteCapacity else { return }
        page.removeAll()
        sentPage = page
    }

    /// What a request is answered with: its status frame and, for a replay, the page of records
    /// (topic and envelope frames) that follows it.
    package struct Reply {
        package var status: [UInt8]
        package var page: ReplayPage
        /// The page is one record larger than its client's share (``QueuedReplies``).
        var oversize: Bool
        /// The status frame is counted in the replies' budget as a page is (a large `stats` reply).
        var countStatus = false

        init(_ status: [UInt8], page: ReplayPage = ReplayPage(), oversize: Bool = false) {
            self.status = status
            self.page = page
            self.oversize = oversize
        }
    }

    /// What ``handle(_:)`` makes of a request: a reply now, or a `stats` request that waits for a snapshot.
    package enum Answer {
        case reply(Reply)
        case waitForSnapshot(StatsRequest)
    }

    /// A `stats` request, answered once a snapshot comes.
    package struct StatsRequest {
        var req: [UInt8]?
    }

    /// The reply to one request, or the `stats` request that must wait for a snapshot.
    /// - Parameter client: the routing id of the client that asked (its queued pages bound its replays).
    package func handle(_ body: [UInt8], client: [UInt8] = []) -> Answer {
        let parseError = body.withUnsafeBytes { b -> JSONParseError? in
            do throws(JSONParseError) {
                try request.parse(b)
                return nil
            } catch {
                return error
            }
        }
        if let parseError {
            return .reply(Reply(badRequest("request is not JSON: \(parseError.reason.name) at byte \(parseError.offset)", req: nil)))
        }
        let root = request.root
        guard request.kind(root) == .object else {
            return .reply(Reply(badRequest("request must be a JSON object", req: nil)))
        }
        let req = request.member(root, "req").map { Array(request.raw($0)) }
        // Every reply repeats `req`: a long one would make each reply, `busy` included, as long.
        if let req, req.count > ControlService.maxRequestIDBytes {
            let limit = ControlService.maxRequestIDBytes
            let detail = "\"req\" must be at most \(limit) bytes as written (a number or a short string)"
            return .reply(Reply(badRequest(detail, req: nil)))
        }
        switch request.member(root, "op").flatMap({ request.string($0) }) {
        case "replay": return .reply(replay(req: req, client: client))
        case "stats": return .waitForSnapshot(StatsRequest(req: req))
        case "report": return .reply(Reply(report(req: req)))
        case "forget": return .reply(Reply(forget(req: req)))
        case "seek": return .reply(Reply(seek(req: req)))
        case let op?:
            // Named back cut short: a request may be 64 KiB, and the reply would be as long.
            let named = op.utf8.count <= 32 ? op : String(decoding: op.utf8.prefix(32), as: UTF8.self) + "…"
            return .reply(Reply(badRequest("unknown op \(named); use replay, stats, report, forget or seek", req: req)))
        case nil: return .reply(Reply(badRequest("missing op", req: req)))
        }
    }

    private func begin(_ op: StaticString, ok: Bool, req: [UInt8]?) -> JSONWriter {
        ControlReplyWire.begin(op, ok: ok, shard: shard.index, shards: shard.count, req: req)
    }

    private func badRequest(_ detail: String, req: [UInt8]?) -> [UInt8] { ControlReplyWire.badRequest(detail, req: req) }

    // MARK: replay

    /// The reply to a `replay`: its status and, when it succeeded, its page; `busy` when the client
    /// has ``maxQueuedPages`` queued or the page would pass the replies' budget (``QueuedReplies``).
    private func replay(req: [UInt8]?, client: [UInt8]) -> Reply {
        // A test seam (docs/durability.md, "Failpoints"): kill -9 with this request read and unanswered.
        _ = Failpoints.hit("control.replay")
        let root = request.root
        guard let fromToken = request.member(root, "from"), let from = request.int64(fromToken), from >= 0 else {
            return Reply(badRequest("replay needs \"from\": a seq (integer ≥ 0)", req: req))
        }
        var limit = ControlService.defaultPage
        if let t = request.member(root, "limit") {
            guard let l = request.int64(t), l >= 1 else {
                return Reply(badRequest("\"limit\" must be an integer ≥ 1", req: req))
            }
            limit = Int(min(l, Int64(ControlService.maxPage)))
        }
        var prefixes: [[UInt8]] = []
        if let t = request.member(root, "prefix") {
            switch request.kind(t) {
            case .string: prefixes = [request.unescapedBytes(t)]
            case .array:
                var bad = false
                request.forEachElement(t) { e in
                    if request.kind(e) == .string { prefixes.append(request.unescapedBytes(e)) } else { bad = true }
                }
                if bad {
                    return Reply(badRequest("\"prefix\" must be a string or an array of strings", req: req))
                }
            case .null: break
            default:
                return Reply(badRequest("\"prefix\" must be a string or an array of strings", req: req))
            }
        }
        // Each record is matched against every prefix: their number and length are bounded so a
        // page costs at most maxExamined × maxReplayPrefixes short comparisons.
        guard prefixes.count <= TopicLimits.maxReplayPrefixes,
            prefixes.allSatisfy({ $0.count <= TopicLimits.maxPrefixBytes })
        else {
            return Reply(badRequest("\"prefix\" takes at most \(TopicLimits.maxReplayPrefixes) prefixes of at most \(TopicLimits.maxPrefixBytes) bytes",
                                     req: req))
        }
        if prefixes.contains(where: { $0.isEmpty }) { prefixes = [] }
        // `checkout_id`: only envelopes whose top-level checkout_id is that id (`checkoutbus trace`).
        var checkoutNeedle: [UInt8]?
        if let t = request.member(root, "checkout_id"), request.kind(t) != .null {
            guard request.kind(t) == .string else {
                return Reply(badRequest("\"checkout_id\" must be a string", req: req))
            }
            var w = JSONWriter(capacity: 128)
            request.unescapedBytes(t).withUnsafeBytes { w.appendString(utf8: $0) }
            checkoutNeedle = w.bytes
        }
        let queued = counters.queuedReplies
        let pages = clientQueues[client]?.pages.load(ordering: .relaxed) ?? 0
        if pages >= ControlService.maxQueuedPages { return ownRepliesQueued(pages, req: req) }
        let share = pageBytes()
        // With a page of its own queued, the client's next needs room in a half: both full, not worth reading.
        if pages > 0 && queued.shareBytes.load(ordering: .relaxed) >= replyHalf
            && queued.oversizeBytes.load(ordering: .relaxed) >= replyHalf
        {
            return busy(queuedDetail(queued), req: req)
        }
        // The buffers of the page sent last, emptied.
        var page = ReplayPage()
        swap(&page, &sentPage)
        let result: (next: UInt64, count: Int)
        do {
            result = try reader.read(from: UInt64(from), prefixes: prefixes, limit: limit,
                                     maxExamined: ControlService.maxExamined, maxBytes: share,
                                     deadline: BusClock.monotonicNanoseconds() + ControlService.pageTimeBudget) {
                _, topic, envelope in
                if let checkoutNeedle, !ControlService.names(envelope, checkout: checkoutNeedle) { return }
                page.append(topic: topic, envelope: envelope)
            }
        } catch Journal.ReplayError.notRetained(let first) {
            recycle(page)
            return Reply(ControlReplyWire.notRetained(first: first, last: reader.bounds.last, shard: shard.index,
                                                      shards: shard.count, run: run, req: req))
        } catch let error as JournalError where error.code == .notReadable {
            recycle(page)
            // A segment that cannot be opened or read: a refusal that says so, never an empty page
            // (which a client pages on for ever) nor damage (whose seqs it would count as lost).
            let bounds = reader.bounds
            return Reply(ControlReplyWire.journalUnreadable(detail: error.description, from: from, first: bounds.first,
                                                            last: bounds.last, shard: shard.index, shards: shard.count,
                                                            run: run, req: req))
        } catch {
            recycle(page)
            return Reply(badRequest("replay failed: \(error)", req: req))
        }
        // A page within the share goes to a client with none queued, whatever the others hold (so
        // their unread pages never hold up a reader), else it fits its half; one record larger than
        // the share fits the other half, or is the only such page queued.
        guard let oversize = admission(page.byteCount, pages: pages, share: share) else {
            recycle(page)
            return busy(queuedDetail(queued), req: req)
        }
        counters.update { c in
            c.replayPages += 1
            c.replayRecords += UInt64(page.count)
            c.replayBytes += UInt64(page.byteCount)
        }
        let bounds = reader.bounds
        return Reply(ControlReplyWire.replayPage(from: from, next: result.next, count: page.count, first: bounds.first,
                                                 last: bounds.last, shard: shard.index, shards: shard.count,
                                                 run: run, req: req),
                     page: page, oversize: oversize)
    }

    /// Whether a reply of `bytes` may be queued now for a client with `pages` of its own queued,
    /// and if so whether it counts against the half for pages larger than `share` (``QueuedReplies``):
    /// nil when it may not.
    private func admission(_ bytes: Int, pages: Int, share: Int) -> Bool? {
        let queued = counters.queuedReplies
        if bytes > share {
            let held = queued.oversizeBytes.load(ordering: .relaxed)
            return held == 0 || held + bytes <= replyHalf ? true : nil
        }
        return pages == 0 || queued.shareBytes.load(ordering: .relaxed) + bytes <= replyHalf ? false : nil
    }

    /// Each half of `--control-memory`: one for pages within a client's share, one for larger pages.
    private var replyHalf: Int { replyBudget / 2 }

    /// A replay or `stats` request answered `busy` by the replies' bounds, counted.
    private func busy(_ detail: String, req: [UInt8]?) -> Reply {
        counters.queuedReplies.busy.wrappingAdd(1, ordering: .relaxed)
        return Reply(ControlReplyWire.busy(detail, req: req))
    }

    /// `busy` for a client with ``maxQueuedPages`` of its own replies queued unread.
    private func ownRepliesQueued(_ pages: Int, req: [UInt8]?) -> Reply {
        busy("this client has \(pages) replies queued that it has not read; retry once it reads them", req: req)
    }

    private func queuedDetail(_ queued: QueuedReplies) -> String {
        "replay pages for clients that have not read them hold the control replies' memory (\(queued.bytes) bytes "
            + "queued, --control-memory \(replyBudget)); retry"
    }

    // MARK: seek

    /// `{"op":"seek","time_ms":T}`: the first seq whose envelope was received at or after `T`
    /// (milliseconds since the epoch), by a binary search over the retained journal on each probe's
    /// `received_at`; the last seq + 1 when none was, the first retained seq when every retained one
    /// was (`"before_retention":true` then, when `T` is before it). docs/durability.md, "`seek`".
    private func seek(req: [UInt8]?) -> [UInt8] {
        guard let t = request.member(request.root, "time_ms"), let target = request.int64(t) else {
            return badRequest("seek needs \"time_ms\": milliseconds since the epoch (an integer)", req: req)
        }
        let started = BusClock.monotonicNanoseconds()
        var bounds = reader.bounds
        var lo = bounds.first, hi = bounds.last + 1
        let hi0 = hi
        var probes = 0
        var firstAt: Int64?
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            var found: (seq: UInt64, at: Int64?)?
            var from = mid
            probing: while true {
                probes += 1
                do {
                    _ = try reader.read(from: from, prefixes: [], limit: 1) { seq, _, envelope in
                        found = (seq, ControlService.receivedAt(envelope))
                    }
                    break probing
                } catch Journal.ReplayError.notRetained(let first) {
                    // `from` lies in seqs the journal does not hold (retention passed them, or a
                    // recovery's gap): the first record after them stands for this probe.
                    guard first > from, first < hi else { break probing }
                    from = first
                } catch {
                    return badRequest("seek failed: \(error)", req: req)
                }
            }
            guard let found, found.seq < hi else {
                hi = mid
                continue
            }
            if found.seq == bounds.first { firstAt = found.at }
            // An envelope without a readable time (none is written so) counts as before the target.
            if let at = found.at, at >= target { hi = mid } else { lo = found.seq + 1 }
        }
        // A seq in seqs the journal does not hold (a recovery's gap): the first record after them.
        if lo < hi0 {
            do {
                _ = try reader.read(from: lo, prefixes: [], limit: 1) { _, _, _ in }
            } catch Journal.ReplayError.notRetained(let first) {
                lo = max(lo, first)
            } catch {
                return badRequest("seek failed: \(error)", req: req)
            }
        }
        bounds = reader.bounds
        let sought = ControlReplyWire.Sought(
            timeMilliseconds: target, seq: Int64(max(lo, bounds.first)),
            // Only when retention has deleted something: a time before the first envelope ever is not.
            beforeRetention: bounds.first > 1 && lo <= bounds.first && (firstAt.map { target < $0 } ?? false),
            probes: probes, tookMicroseconds: Int64((BusClock.monotonicNanoseconds() - started) / 1000))
        return ControlReplyWire.seek(sought, first: bounds.first, last: bounds.last, shard: shard.index, shards: shard.count,
                                     req: req)
    }

    private static let receivedAtKey = Array(#""received_at":""#.utf8)

    /// The envelope's `received_at` in ms since the epoch: the first `"received_at":"` key, which
    /// the writer puts in the envelope's head (no string before it can hold an unescaped quote), so
    /// the search stops within the head whatever the ids' lengths.
    static func receivedAt(_ envelope: UnsafeRawBufferPointer) -> Int64? {
        guard let at = offset(after: receivedAtKey, in: envelope, room: 24) else { return nil }
        return Timestamp(rfc3339: UnsafeRawBufferPointer(rebasing: envelope[at..<(at + 24)]))?.milliseconds
    }

    /// `,"first_seq":F,"last_seq":L`: what the journal holds now.
    private func appendBounds(to w: inout JSONWriter) {
        let bounds = reader.bounds
        ControlReplyWire.appendBounds(first: bounds.first, last: bounds.last, to: &w)
    }


    /// Whether an envelope's top-level `checkout_id` is `quoted` (the id as a JSON string, as the
    /// envelope writer spells it): the `checkout_id` filter of a replay. The first `"checkout_id":`
    /// outside a string is the top-level member: the envelope writer puts it before any snapshot
    /// or raw bytes, and quotes inside string values are escaped.
    private static func names(_ envelope: UnsafeRawBufferPointer, checkout quoted: [UInt8]) -> Bool {
        guard let at = offset(after: EnvelopeHead.checkoutIDKey, in: envelope, room: quoted.count), let base = envelope.baseAddress else { return false }
        return quoted.withUnsafeBytes { memcmp(base + at, $0.baseAddress!, quoted.count) == 0 }
    }

    /// Where the value after the first `key` in `envelope` starts, when `room` bytes follow it: the
    /// key of the envelope's head (no string before it holds an unescaped quote). nil without one.
    static func offset(after key: [UInt8], in envelope: UnsafeRawBufferPointer, room: Int) -> Int? {
        key.withUnsafeBytes { k -> Int? in
            guard let base = envelope.baseAddress, let keyBase = k.baseAddress else { return nil }
            let last = envelope.count - key.count - room
            var i = 0
            while i <= last {
                guard let found = memchr(base + i, Int32(UInt8(ascii: "\"")), last - i + 1) else { return nil }
                let at = base.distance(to: UnsafeRawPointer(found))
                if memcmp(found, keyBase, key.count) == 0 { return at + key.count }
                i = at + 1
            }
            return nil
        }
    }

    // MARK: stats

    private func stats(_ snap: DaemonSnapshot, req: [UInt8]?, now: UInt64) -> [UInt8] {
        var reply = ControlService.statsReply(snap, connections: counters.figures, subscribers: reports.entries(), now: now,
                                              shard: shard.index, shards: shard.count)
        reply.daemon.journalID = run?.journal
        return reply.write(req: req)
    }

    /// The `stats` reply (``StatsReply``) for a snapshot of the pipeline's figures, the sockets'
    /// connections and the subscribers' reports.
    static func statsReply(_ snap: DaemonSnapshot, connections f: ServiceCounters.Figures,
                           subscribers: [SubscriberReportBook.Entry], now: UInt64, shard: Int, shards: Int) -> StatsReply {
        var r = StatsReply()
        r.shard = shard
        r.shards = shards
        r.lastSeq = Int64(snap.lastSeq)
        r.durableSeq = Int64(snap.durableSeq)
        r.firstSeq = Int64(snap.firstSeq)
        r.snapshotAgeMilliseconds = Int64((now - min(now, snap.takenAt)) / 1_000_000)
        r.publishHighWaterMark = Int64(snap.publishHighWaterMark)
        // Who answers: the build, whether it speaks CURVE, and its endpoints as bound (`checkoutbus ping`).
        r.daemon = StatsReply.Daemon(version: CheckoutBusVersion.current, revision: CheckoutBusVersion.revision)
        if let e = snap.endpoints {
            r.daemon.curve = e.curvePublicKey != nil
            r.daemon.endpoints = StatsReply.Endpoints(ingest: e.ingest, ingestAcked: e.ingestAcked, publish: e.publish,
                                                      control: e.control, metrics: e.metrics)
        }
        r.kindSeqs = snap.kindSeqs
        let c = snap.counters
        r.counters.received = Int64(c.received)
        r.counters.publishedByKind = c.publishedByKind.map { Int64($0) }
        r.counters.receivedByFamily = c.receivedByFormat.map { Int64($0) }
        r.counters.failedByCode = c.failedByCode.map { Int64($0) }
        r.counters.unknownRawCodes = c.unknownRawCodes.mapValues { Int64($0) }
        r.counters.unknownRawCodesOther = Int64(c.unknownRawCodesOther)
        r.counters.repeatedFailures = Int64(c.repeatedFailures)
        r.counters.suppressed = Int64(c.suppressed)
        r.counters.duplicates = Int64(c.duplicates)
        r.counters.deadLettered = c.deadLettered
        r.counters.trackedCheckouts = Int64(snap.trackedCheckouts)
        r.counters.evictedCheckouts = Int64(snap.evictedCheckouts)
        r.counters.expiredCheckouts = Int64(snap.expiredCheckouts)
        r.journal.segments = Int64(snap.journalSegments)
        r.journal.bytes = Int64(snap.journalBytes)
        r.journal.fsyncs = Int64(snap.fsyncs)
        r.journal.fsyncMaxMicros = Int64(snap.fsyncMaxMicros)
        // A bucket's upper bound, never above the slowest fsync seen (which it would overstate).
        r.journal.fsyncP99Micros = min(Int64(snap.fsyncHistogram.upperBoundNanoseconds(quantile: 0.99) / 1000),
                                       Int64(snap.fsyncMaxMicros))
        r.journal.writesDirect = snap.writesDirect
        r.journal.writable = snap.journalWritable
        r.journal.fenceRecovered = snap.recoveredFence.map {
            StatsReply.Fence(durableSeq: Int64($0.durableSeq), reason: $0.reason, at: $0.at)
        }
        let t = snap.stages
        r.stages.timed = Int64(t.samples)
        r.stages.discarded = Int64(t.discarded)
        r.stages.receive = Int64(t.receive)
        r.stages.decode = Int64(t.decode)
        r.stages.rules = Int64(t.rules)
        r.stages.envelope = Int64(t.envelope)
        r.stages.journalAppend = Int64(t.journalAppend)
        r.stages.publishTimed = Int64(t.publishSamples)
        r.stages.publish = Int64(t.publish)
        r.stages.parallelBatches = Int64(t.parallelBatches)
        r.stages.parallelMessages = Int64(t.parallelMessages)
        r.connections.sockets = ServiceCounters.Socket.allCases.map { s in
            StatsReply.SocketConnections(
                name: s.name, accepted: Int64(f.accepted[s.rawValue]), disconnected: Int64(f.disconnected[s.rawValue]),
                handshakesFailed: Int64(f.handshakesFailed[s.rawValue]), refused: Int64(f.refused[s.rawValue]))
        }
        r.connections.http.accepted = Int64(f.httpAccepted)
        r.connections.http.open = Int64(f.httpOpen)
        r.connections.http.refused = Int64(f.httpRefused)
        r.connections.http.evicted = Int64(f.httpEvicted)
        r.connections.http.timedOut = Int64(f.httpTimedOut)
        r.connections.http.aborted = Int64(f.httpAborted)
        r.connections.http.requests = Int64(f.httpRequests)
        r.connections.controlRepliesDropped = Int64(f.controlRepliesDropped)
        r.connections.replayPages = Int64(f.replayPages)
        r.subscribers = subscribers.map { StatsReply.Subscriber(name: $0.name, row: subscriberRow($0, lastSeq: r.lastSeq)) }
        return r
    }

    /// One subscriber of `stats` → `subscribers` (``ControlReplyWire/Subscriber``), its lag from
    /// the daemon's `lastSeq`.
    static func subscriberRow(_ e: SubscriberReportBook.Entry, lastSeq: Int64) -> ControlReplyWire.Subscriber {
        let r = e.report
        return ControlReplyWire.Subscriber(
            state: e.state.rawValue, goneReason: e.goneReason?.rawValue, ageMilliseconds: e.ageMilliseconds,
            lastSeq: r.lastSeq, throughSeq: r.throughSeq, lag: max(0, lastSeq - r.position), missed: r.missed,
            recovered: r.recovered, gaps: r.gaps, rejected: r.rejected, durable: r.durable, reportedAt: r.reportedAt)
    }

    // MARK: report

    /// The subscriber's name of a `report` or `forget`, if the request has a good one.
    private func subscriberName() -> String? {
        guard let t = request.member(request.root, "subscriber"), let name = request.string(t), !name.isEmpty, name.utf8.count <= 200
        else { return nil }
        return name
    }

    private func report(req: [UInt8]?) -> [UInt8] {
        let root = request.root
        guard let name = subscriberName() else { return badRequest("report needs \"subscriber\": a name of 1 to 200 bytes", req: req) }
        func field(_ key: StaticString) -> Int64? { request.member(root, key).flatMap { request.int64($0) } }
        func flag(_ key: StaticString) -> Bool? { request.member(root, key).flatMap { request.bool($0) } }
        // Seqs and counts are 0 or more: a negative one (or one that is not an integer) would show in
        // stats and /metrics as a subscriber's figure, and a lag past the journal's end.
        for key: StaticString in ["last_seq", "through_seq", "missed", "recovered", "gaps", "rejected"] {
            guard request.member(root, key) != nil else { continue }
            if (field(key) ?? -1) < 0 {
                return badRequest("report's \"\(key)\" must be an integer, 0 or more", req: req)
            }
        }
        reports.record(name, lastSeq: field("last_seq"), throughSeq: field("through_seq"), missed: field("missed"),
                       recovered: field("recovered"), gaps: field("gaps"), rejected: field("rejected"),
                       durable: flag("durable"), final: flag("final") ?? false,
                       at: Timestamp(milliseconds: BusClock.wallMilliseconds()))
        return ControlReplyWire.report(shard: shard.index, shards: shard.count, req: req)
    }

    /// `{"op":"forget","subscriber":NAME}`: drops the subscriber from `stats` and `/metrics` now.
    /// The reply says whether it was known and in which state (a live one comes back with its next
    /// report).
    private func forget(req: [UInt8]?) -> [UInt8] {
        guard let name = subscriberName() else { return badRequest("forget needs \"subscriber\": a name of 1 to 200 bytes", req: req) }
        let entry = reports.forget(name)
        return ControlReplyWire.forget(.init(subscriber: name, known: entry != nil, state: entry?.state.rawValue),
                                       shard: shard.index, shards: shard.count, req: req)
    }
}

