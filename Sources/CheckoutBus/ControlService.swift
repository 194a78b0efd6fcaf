#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ

/// The control socket's requests (`replay`, `stats`, `report`; protocol in `docs/durability.md`).
///
/// Not `Sendable`: runs on the pipeline thread, which owns the journal and the processor it reads.
final class ControlService {
    /// The latest report of one subscriber.
    struct SubscriberReport {
        var lastSeq: Int64 = 0
        var missed: Int64 = 0
        var recovered: Int64 = 0
        var gaps: Int64 = 0
        var reportedAt = Timestamp(milliseconds: 0)
        var order: UInt64 = 0
    }

    static let maxPage = 10_000
    static let defaultPage = 1000
    /// Records one replay request reads at most, matched or not: bounds the pipeline's pause.
    static let maxExamined = 100_000
    static let maxSubscribers = 1024

    let journal: Journal
    let processor: EventProcessor
    private let request = JSONDocument()
    private var subscribers: [String: SubscriberReport] = [:]
    private var reportOrder: UInt64 = 0
    /// Replay pages are gathered here (topic and envelope of each match) before the reply is sent.
    private var page: [UInt8] = []
    private var pageFrames: [(Int, Int, Int)] = []

    init(journal: Journal, processor: EventProcessor) {
        self.journal = journal
        self.processor = processor
        request.maxDepth = 8
    }

    /// Answers up to `limit` queued requests without blocking.
    func serve(_ socket: ZMQSocket, limit: Int) throws {
        var n = 0
        while n < limit, let frames = try socket.receiveMultipart(dontWait: true) {
            n += 1
            guard frames.count >= 2 else { continue }
            let delimiter = frames.count >= 3 && frames[1].isEmpty
            let body = frames[delimiter ? 2 : 1]
            var replyFrames: [[UInt8]] = [frames[0]]
            if delimiter { replyFrames.append([]) }
            pageFrames.removeAll(keepingCapacity: true)
            handle(body, into: &replyFrames)
            // A replay page's records follow the status frame, sent from the page buffer.
            let last = replyFrames.count - 1
            for (i, frame) in replyFrames.enumerated() {
                _ = try socket.send(frame, more: i < last || !pageFrames.isEmpty)
            }
            try page.withUnsafeBytes { all in
                for (n, (start, t, e)) in pageFrames.enumerated() {
                    _ = try socket.send(UnsafeRawBufferPointer(rebasing: all[start..<(start + t)]), more: true)
                    _ = try socket.send(UnsafeRawBufferPointer(rebasing: all[(start + t)..<(start + t + e)]),
                                        more: n < pageFrames.count - 1)
                }
            }
        }
    }

    func handle(_ body: [UInt8], into frames: inout [[UInt8]]) {
        let parseError = body.withUnsafeBytes { b -> JSONParseError? in
            do throws(JSONParseError) {
                try request.parse(b)
                return nil
            } catch {
                return error
            }
        }
        if let parseError {
            frames.append(badRequest("request is not JSON: \(parseError.reason.name) at byte \(parseError.offset)", req: nil))
            return
        }
        let root = request.root
        guard request.kind(root) == .object else {
            frames.append(badRequest("request must be a JSON object", req: nil))
            return
        }
        let req = request.member(root, "req").map { Array(request.raw($0)) }
        switch request.member(root, "op").flatMap({ request.string($0) }) {
        case "replay": replay(req: req, into: &frames)
        case "stats": frames.append(stats(req: req))
        case "report": frames.append(report(req: req))
        case let op?: frames.append(badRequest("unknown op \(op); use replay, stats or report", req: req))
        case nil: frames.append(badRequest("missing op", req: req))
        }
    }

    private func begin(_ op: StaticString, ok: Bool, req: [UInt8]?) -> JSONWriter {
        var w = JSONWriter(capacity: 256)
        w.append("{\"op\":\"")
        w.append(op)
        w.append(ok ? "\",\"ok\":true" : "\",\"ok\":false")
        // Which shard answers: a subscriber of several shards checks it against its list's order.
        w.append(",\"shard\":")
        w.append(int: processor.options.shard.index)
        w.append(",\"shards\":")
        w.append(int: processor.options.shard.count)
        if let req {
            w.append(",\"req\":")
            req.withUnsafeBytes { w.appendRaw($0) }
        }
        return w
    }

    private func badRequest(_ detail: String, req: [UInt8]?) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.append("{\"ok\":false,\"error\":\"bad_request\",\"detail\":")
        w.appendString(detail)
        if let req {
            w.append(",\"req\":")
            req.withUnsafeBytes { w.appendRaw($0) }
        }
        w.append("}")
        return w.bytes
    }

    // MARK: replay

    private func replay(req: [UInt8]?, into frames: inout [[UInt8]]) {
        let root = request.root
        guard let fromToken = request.member(root, "from"), let from = request.int64(fromToken), from >= 0 else {
            frames.append(badRequest("replay needs \"from\": a seq (integer ≥ 0)", req: req))
            return
        }
        var limit = ControlService.defaultPage
        if let t = request.member(root, "limit") {
            guard let l = request.int64(t), l >= 1 else {
                frames.append(badRequest("\"limit\" must be an integer ≥ 1", req: req))
                return
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
                    frames.append(badRequest("\"prefix\" must be a string or an array of strings", req: req))
                    return
                }
            case .null: break
            default:
                frames.append(badRequest("\"prefix\" must be a string or an array of strings", req: req))
                return
            }
        }
        if prefixes.contains(where: { $0.isEmpty }) { prefixes = [] }
        page.removeAll(keepingCapacity: true)
        pageFrames.removeAll(keepingCapacity: true)
        let result: (next: UInt64, count: Int)
        do {
            result = try journal.read(from: UInt64(from), prefixes: prefixes, limit: limit,
                                      maxExamined: ControlService.maxExamined) { _, topic, envelope in
                let start = page.count
                page.append(contentsOf: topic)
                page.append(contentsOf: envelope)
                pageFrames.append((start, topic.count, envelope.count))
            }
        } catch Journal.ReplayError.notRetained(let first) {
            pageFrames.removeAll()
            var w = begin("replay", ok: false, req: req)
            w.append(",\"error\":\"not_retained\",\"first_seq\":")
            w.append(int: Int64(first))
            w.append(",\"last_seq\":")
            w.append(int: Int64(journal.lastSeq))
            w.append("}")
            frames.append(w.bytes)
            return
        } catch {
            pageFrames.removeAll()
            frames.append(badRequest("replay failed: \(error)", req: req))
            return
        }
        var w = begin("replay", ok: true, req: req)
        w.append(",\"from\":")
        w.append(int: from)
        w.append(",\"next\":")
        w.append(int: Int64(result.next))
        w.append(",\"count\":")
        w.append(int: result.count)
        w.append(",\"first_seq\":")
        w.append(int: Int64(journal.firstSeq))
        w.append(",\"last_seq\":")
        w.append(int: Int64(journal.lastSeq))
        w.append("}")
        frames.append(w.bytes)
    }

    // MARK: stats

    private func stats(req: [UInt8]?) -> [UInt8] {
        var w = begin("stats", ok: true, req: req)
        let c = processor.counters
        w.append(",\"last_seq\":")
        w.append(int: Int64(journal.lastSeq))
        w.append(",\"durable_seq\":")
        w.append(int: Int64(journal.durableSeq))
        w.append(",\"first_seq\":")
        w.append(int: Int64(journal.firstSeq))
        w.append(",\"kind_seqs\":")
        processor.writeKindSeqs(to: &w)
        w.append(",\"counters\":{\"received\":")
        w.append(int: Int64(c.received))
        w.append(",\"published\":{")
        for (i, k) in LifecycleKind.allCases.enumerated() {
            if i > 0 { w.append(",") }
            w.append("\"")
            w.append(k.name)
            w.append("\":")
            w.append(int: Int64(c.publishedByKind[i]))
        }
        w.append("},\"suppressed\":")
        w.append(int: Int64(c.suppressed))
        w.append(",\"duplicates\":")
        w.append(int: Int64(c.duplicates))
        w.append(",\"deadlettered\":")
        processor.writeDeadLetterCounts(to: &w)
        w.append(",\"tracked_checkouts\":")
        w.append(int: processor.state.count)
        w.append(",\"evicted_checkouts\":")
        w.append(int: Int64(processor.state.evicted))
        w.append(",\"expired_checkouts\":")
        w.append(int: Int64(processor.state.expired))
        w.append("},\"journal\":{\"segments\":")
        w.append(int: journal.segmentCount)
        w.append(",\"bytes\":")
        w.append(int: journal.totalBytes)
        w.append(",\"fsyncs\":")
        w.append(int: Int64(journal.fsyncCount))
        w.append(",\"fsync_max_us\":")
        w.append(int: Int64(journal.fsyncMaxMicros))
        w.append(journal.writesDirect ? ",\"writes\":\"direct\"" : ",\"writes\":\"page_cache\"")
        w.append("},\"subscribers\":{")
        for (i, name) in subscribers.keys.sorted().enumerated() {
            let r = subscribers[name]!
            if i > 0 { w.append(",") }
            w.appendString(name)
            w.append(":{\"last_seq\":")
            w.append(int: r.lastSeq)
            w.append(",\"missed\":")
            w.append(int: r.missed)
            w.append(",\"recovered\":")
            w.append(int: r.recovered)
            w.append(",\"gaps\":")
            w.append(int: r.gaps)
            w.append(",\"reported_at\":")
            r.reportedAt.write(to: &w)
            w.append("}")
        }
        w.append("}}")
        return w.bytes
    }

    /// The latest report of every subscriber, for metrics.
    func reportSummaries() -> [(name: String, missed: Int64, recovered: Int64, gaps: Int64)] {
        subscribers.keys.sorted().map { name in
            let r = subscribers[name]!
            return (name, r.missed, r.recovered, r.gaps)
        }
    }

    // MARK: report

    private func report(req: [UInt8]?) -> [UInt8] {
        let root = request.root
        guard let t = request.member(root, "subscriber"), let name = request.string(t), !name.isEmpty, name.utf8.count <= 200
        else { return badRequest("report needs \"subscriber\": a name of 1 to 200 bytes", req: req) }
        var r = subscribers[name] ?? SubscriberReport()
        func field(_ key: StaticString) -> Int64? { request.member(root, key).flatMap { request.int64($0) } }
        r.lastSeq = field("last_seq") ?? r.lastSeq
        r.missed = field("missed") ?? r.missed
        r.recovered = field("recovered") ?? r.recovered
        r.gaps = field("gaps") ?? r.gaps
        r.reportedAt = BusClock.wallClock()
        reportOrder += 1
        r.order = reportOrder
        subscribers[name] = r
        if subscribers.count > ControlService.maxSubscribers,
            let stalest = subscribers.min(by: { $0.value.order < $1.value.order })?.key
        {
            subscribers[stalest] = nil
        }
        var w = begin("report", ok: true, req: req)
        w.append("}")
        return w.bytes
    }
}
