import CheckoutBusJSON

/// The control socket's replies, declared once: the daemon writes their head, refusals and replay
/// statuses with these (`ControlService`), every Swift subscriber reads them with ``read(_:)``, and
/// the Python client's `wire.reply` reads the same bytes — both checked against
/// `Tests/Golden/control-replies.tsv` (docs/durability.md, "The control socket"). A reply names its
/// request's `op`, whether it succeeded, the shard that answers and the request's `req`, then what
/// the op returns.
/// Which journal answers, and since when: the daemon's `<data-dir>/journal-id` and the start of its run
/// (`started_at`, RFC 3339 in milliseconds, as heartbeats write it).
package struct DaemonRun: Sendable, Equatable {
    package var journal: String
    package var startedAt: String

    package init(journal: String, startedAt: String) {
        self.journal = journal
        self.startedAt = startedAt
    }
}

package enum ControlReplyWire {
    /// What a subscriber reads of a reply.
    package struct Fields: Equatable {
        package var op: String?
        package var ok = false
        package var req: Int64?
        package var next: Int64?
        package var lastSeq: Int64?
        package var firstSeq: Int64?
        package var error: String?
        package var detail: String?
        package var shard: Int?
        package var shards: Int?
        /// The answering daemon's journal identity (replay replies); nil from a daemon that does not say.
        package var journal: String?
        /// When the answering daemon's run started (replay replies, beside ``journal``).
        package var startedAt: String?
        /// An acknowledgement of an event (`ok` and `seq`, no `op` nor `error`): the endpoint is an
        /// acknowledged ingest socket (`--ingest-acked`), which took the request for an event.
        package var isIngestAck = false

        package init(op: String? = nil, ok: Bool = false, req: Int64? = nil, next: Int64? = nil, lastSeq: Int64? = nil,
                     firstSeq: Int64? = nil, error: String? = nil, detail: String? = nil, shard: Int? = nil,
                     shards: Int? = nil, journal: String? = nil) {
            self.op = op
            self.ok = ok
            self.req = req
            self.next = next
            self.lastSeq = lastSeq
            self.firstSeq = firstSeq
            self.error = error
            self.detail = detail
            self.shard = shard
            self.shards = shards
            self.journal = journal
        }
    }

    /// A reply's head, `{"op":"OP","ok":B,"shard":I,"shards":N[,"journal_id":J,"started_at":T][,"req":R]`,
    /// left open for the op's members.
    /// - Parameters:
    ///   - run: the answering daemon's journal identity and when its run started (replay replies):
    ///     a subscriber checks that its publish and control endpoints are one journal.
    ///   - req: the request's `req`, as it was written (any JSON value).
    package static func begin(_ op: StaticString, ok: Bool, shard: Int, shards: Int, run: DaemonRun? = nil,
                              req: [UInt8]?) -> JSONWriter {
        var w = JSONWriter(capacity: 256)
        w.append("{\"op\":\"")
        w.append(op)
        w.append(ok ? "\",\"ok\":true" : "\",\"ok\":false")
        // Which shard answers: a subscriber of several shards checks it against its list's order.
        w.append(",\"shard\":")
        w.append(int: shard)
        w.append(",\"shards\":")
        w.append(int: shards)
        if let run {
            w.append(",\"journal_id\":")
            w.appendString(run.journal)
            w.append(",\"started_at\":")
            w.appendString(run.startedAt)
        }
        if let req {
            w.append(",\"req\":")
            req.withUnsafeBytes { w.appendRaw($0) }
        }
        return w
    }

    /// A request refused as malformed: `{"ok":false,"error":"bad_request","detail":D[,"req":R]}`.
    package static func badRequest(_ detail: String, req: [UInt8]?) -> [UInt8] {
        refusal("bad_request", detail, req: req)
    }

    /// A good request the daemon cannot answer now, to be sent again later:
    /// `{"ok":false,"error":"busy","detail":D[,"req":R]}`.
    package static func busy(_ detail: String, req: [UInt8]?) -> [UInt8] {
        refusal("busy", detail, req: req)
    }

    private static func refusal(_ error: StaticString, _ detail: String, req: [UInt8]?) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.append("{\"ok\":false,\"error\":\"")
        w.append(error)
        w.append("\",\"detail\":")
        w.appendString(detail)
        if let req {
            w.append(",\"req\":")
            req.withUnsafeBytes { w.appendRaw($0) }
        }
        w.append("}")
        return w.bytes
    }

    /// The journal's bounds, `,"first_seq":F,"last_seq":L`.
    package static func appendBounds(first: UInt64, last: UInt64, to w: inout JSONWriter) {
        w.append(",\"first_seq\":")
        w.append(int: Int64(bitPattern: first))
        w.append(",\"last_seq\":")
        w.append(int: Int64(bitPattern: last))
    }

    /// A replay page's status: `…,"from":F,"next":N,"count":C,"first_seq":…,"last_seq":…}`; its
    /// records follow as frames.
    package static func replayPage(from: Int64, next: UInt64, count: Int, first: UInt64, last: UInt64,
                                   shard: Int, shards: Int, run: DaemonRun? = nil, req: [UInt8]?) -> [UInt8] {
        var w = begin("replay", ok: true, shard: shard, shards: shards, run: run, req: req)
        w.append(",\"from\":")
        w.append(int: from)
        w.append(",\"next\":")
        w.append(int: Int64(bitPattern: next))
        w.append(",\"count\":")
        w.append(int: count)
        appendBounds(first: first, last: last, to: &w)
        w.append("}")
        return w.bytes
    }

    /// A replay from before what the journal retains: `…,"error":"not_retained","first_seq":F,"last_seq":L}`.
    package static func notRetained(first: UInt64, last: UInt64, shard: Int, shards: Int, run: DaemonRun? = nil,
                                    req: [UInt8]?) -> [UInt8] {
        var w = begin("replay", ok: false, shard: shard, shards: shards, run: run, req: req)
        w.append(",\"error\":\"not_retained\",\"first_seq\":")
        w.append(int: Int64(bitPattern: first))
        w.append(",\"last_seq\":")
        w.append(int: Int64(bitPattern: last))
        w.append("}")
        return w.bytes
    }

    /// A replay that reached a segment that cannot be read:
    /// `…,"error":"journal_unreadable","detail":D,"from":F,"first_seq":…,"last_seq":…}`.
    package static func journalUnreadable(detail: String, from: Int64, first: UInt64, last: UInt64,
                                          shard: Int, shards: Int, run: DaemonRun? = nil, req: [UInt8]?) -> [UInt8] {
        var w = begin("replay", ok: false, shard: shard, shards: shards, run: run, req: req)
        w.append(",\"error\":\"journal_unreadable\",\"detail\":")
        w.appendString(detail)
        w.append(",\"from\":")
        w.append(int: from)
        appendBounds(first: first, last: last, to: &w)
        w.append("}")
        return w.bytes
    }

    /// Parses a reply or heartbeat frame into `document`: true when it is JSON with an object at its
    /// root, which every reader here expects.
    package static func parse(_ frame: [UInt8], into document: JSONDocument) -> Bool {
        // Parsed from a copy the document owns: the reply is read after this returns, when the
        // caller's frame may be gone (a document parsed in place keeps pointers into its bytes).
        (try? document.parseOwned(frame)) != nil && document.kind(document.root) == .object
    }

    /// Reads what a subscriber needs of a reply parsed into `document` (a member it lacks is nil).
    package static func read(_ d: JSONDocument) -> Fields {
        let root = d.root
        var r = Fields()
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
        r.journal = d.member(root, "journal_id").flatMap { d.string($0) }
        r.startedAt = d.member(root, "started_at").flatMap { d.string($0) }
        r.isIngestAck = r.op == nil && r.error == nil && d.member(root, "ok") != nil && d.member(root, "seq") != nil
        return r
    }
}
