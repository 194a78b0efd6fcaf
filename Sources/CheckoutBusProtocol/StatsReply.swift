import CheckoutBusJSON

/// The control socket's `stats` reply, declared once: every member the daemon writes, with the
/// writer ``write(shard:shards:req:)`` the daemon uses and the reader ``read(_:)`` that `checkoutbus
/// stats`, `top`, `ping` and the benchmarks use; its bytes are in `Tests/Golden/control-replies.tsv`
/// (`StatsReplyTests`). What each figure means: docs/observability.md and docs/durability.md.
/// A value, `Sendable`.
package struct StatsReply: Equatable, Sendable {
    /// The build that answers, whether it speaks CURVE, and its endpoints as bound.
    package struct Daemon: Equatable, Sendable {
        package var version: String
        package var revision: String
        /// Nil from a daemon that did not say (before its endpoints were bound).
        package var curve: Bool?
        package var endpoints: Endpoints?
        /// Its journal's identity (`<data-dir>/journal-id`, as heartbeats and replay replies carry it);
        /// nil from a daemon without one.
        package var journalID: String?

        package init(version: String, revision: String, curve: Bool? = nil, endpoints: Endpoints? = nil) {
            self.version = version
            self.revision = revision
            self.curve = curve
            self.endpoints = endpoints
        }
    }

    package struct Endpoints: Equatable, Sendable {
        package var ingest: String
        package var ingestAcked: String
        package var publish: String
        package var control: String
        package var metrics: String?

        package init(ingest: String, ingestAcked: String, publish: String, control: String, metrics: String?) {
            self.ingest = ingest
            self.ingestAcked = ingestAcked
            self.publish = publish
            self.control = control
            self.metrics = metrics
        }
    }

    package struct Counters: Equatable, Sendable {
        package var received: Int64 = 0
        /// In ``LifecycleKind`` order.
        package var publishedByKind = [Int64](repeating: 0, count: LifecycleKind.allCases.count)
        /// In ``RawFormat/labels`` order.
        package var receivedByFamily = [Int64](repeating: 0, count: RawFormat.labels.count)
        /// In ``StableErrorCode`` order.
        package var failedByCode = [Int64](repeating: 0, count: StableErrorCode.allCases.count)
        /// Raw codes the error map does not know, each counted (written in name order).
        package var unknownRawCodes: [String: Int64] = [:]
        package var unknownRawCodesOther: Int64 = 0
        package var repeatedFailures: Int64 = 0
        package var suppressed: Int64 = 0
        package var duplicates: Int64 = 0
        /// By dead-letter reason.
        package var deadLettered: [String: UInt64] = [:]
        package var trackedCheckouts: Int64 = 0
        package var evictedCheckouts: Int64 = 0
        package var expiredCheckouts: Int64 = 0

        package init() {}

        /// Lifecycle envelopes published, all kinds.
        package var published: Int64 { publishedByKind.reduce(0, +) }
    }

    package struct Journal: Equatable, Sendable {
        package var segments: Int64 = 0
        package var bytes: Int64 = 0
        package var fsyncs: Int64 = 0
        package var fsyncMaxMicros: Int64 = 0
        /// A histogram bucket's upper bound, never above ``fsyncMaxMicros``.
        package var fsyncP99Micros: Int64 = 0
        /// `direct` (O_DIRECT for long runs) or `page_cache`.
        package var writesDirect = false
        package var writable = true
        /// The fence a start recovered from (docs/durability.md, "Fence"), if any.
        package var fenceRecovered: Fence?

        package init() {}
    }

    package struct Fence: Equatable, Sendable {
        package var durableSeq: Int64
        package var reason: String
        package var at: String

        package init(durableSeq: Int64, reason: String, at: String) {
            self.durableSeq = durableSeq
            self.reason = reason
            self.at = at
        }

        /// `{"durable_seq":D,"reason":…,"at":…}`: also the fence's marker file.
        package func write(to w: inout JSONWriter) {
            w.append("{\"durable_seq\":")
            w.append(int: durableSeq)
            w.append(",\"reason\":")
            w.appendString(reason)
            w.append(",\"at\":")
            w.appendString(at)
            w.append("}")
        }
    }

    /// The pipeline thread's time by stage over the events it timed: sums in ns.
    package struct Stages: Equatable, Sendable {
        package var timed: Int64 = 0
        package var discarded: Int64 = 0
        package var receive: Int64 = 0
        package var decode: Int64 = 0
        package var rules: Int64 = 0
        package var envelope: Int64 = 0
        package var journalAppend: Int64 = 0
        package var publishTimed: Int64 = 0
        package var publish: Int64 = 0
        package var parallelBatches: Int64 = 0
        package var parallelMessages: Int64 = 0

        package init() {}

        /// Each figure by its member name in the reply (`timed`, `receive_ns`, …).
        package var byName: [String: Int64] {
            ["timed": timed, "discarded": discarded, "receive_ns": receive, "decode_ns": decode, "rules_ns": rules,
             "envelope_ns": envelope, "journal_append_ns": journalAppend, "publish_timed": publishTimed,
             "publish_ns": publish, "parallel_batches": parallelBatches, "parallel_messages": parallelMessages]
        }
    }

    /// One socket's connections.
    package struct SocketConnections: Equatable, Sendable {
        package var name: String
        package var accepted: Int64
        package var disconnected: Int64
        package var handshakesFailed: Int64
        package var refused: Int64

        package init(name: String, accepted: Int64, disconnected: Int64, handshakesFailed: Int64, refused: Int64) {
            self.name = name
            self.accepted = accepted
            self.disconnected = disconnected
            self.handshakesFailed = handshakesFailed
            self.refused = refused
        }

        package var open: Int64 { accepted - disconnected }
    }

    package struct HTTPConnections: Equatable, Sendable {
        package var accepted: Int64 = 0
        package var open: Int64 = 0
        package var refused: Int64 = 0
        package var evicted: Int64 = 0
        package var timedOut: Int64 = 0
        package var aborted: Int64 = 0
        package var requests: Int64 = 0

        package init() {}
    }

    /// docs/security.md, "What a client can do to the daemon".
    package struct Connections: Equatable, Sendable {
        package var sockets: [SocketConnections] = []
        package var http = HTTPConnections()
        package var controlRepliesDropped: Int64 = 0
        package var replayPages: Int64 = 0

        package init() {}
    }

    package var lastSeq: Int64 = 0
    package var durableSeq: Int64 = 0
    package var firstSeq: Int64 = 0
    package var snapshotAgeMilliseconds: Int64 = 0
    package var publishHighWaterMark: Int64 = 0
    package var daemon = Daemon(version: "", revision: "")
    /// Each kind's last `kind_seq`, in ``JournaledKind`` order.
    package var kindSeqs = [UInt64](repeating: 0, count: JournaledKind.allCases.count)
    package var counters = Counters()
    package var journal = Journal()
    package var stages = Stages()
    package var connections = Connections()
    /// By name, in the order written.
    package var subscribers: [Subscriber] = []
    /// The shard that answered and the bus's count (the reply's head).
    package var shard = 0
    package var shards = 1

    package struct Subscriber: Equatable, Sendable {
        package var name: String
        package var row: ControlReplyWire.Subscriber

        package init(name: String, row: ControlReplyWire.Subscriber) {
            self.name = name
            self.row = row
        }
    }

    package init() {}
}

extension StatsReply {
    /// The reply, `{"op":"stats","ok":true,…}`, as the daemon sends it.
    package func write(req: [UInt8]?) -> [UInt8] {
        var w = ControlReplyWire.begin("stats", ok: true, shard: shard, shards: shards, req: req)
        w.append(",\"last_seq\":")
        w.append(int: lastSeq)
        w.append(",\"durable_seq\":")
        w.append(int: durableSeq)
        w.append(",\"first_seq\":")
        w.append(int: firstSeq)
        w.append(",\"snapshot_age_ms\":")
        w.append(int: snapshotAgeMilliseconds)
        w.append(",\"publish_hwm\":")
        w.append(int: publishHighWaterMark)
        w.append(",\"daemon\":{\"version\":")
        w.appendString(daemon.version)
        w.append(",\"revision\":")
        w.appendString(daemon.revision)
        if let journalID = daemon.journalID {
            w.append(",\"journal_id\":")
            w.appendString(journalID)
        }
        if let curve = daemon.curve {
            w.append(",\"curve\":")
            w.append(bool: curve)
        }
        if let e = daemon.endpoints {
            w.append(",\"endpoints\":{\"ingest\":")
            w.appendString(e.ingest)
            w.append(",\"ingest_acked\":")
            w.appendString(e.ingestAcked)
            w.append(",\"publish\":")
            w.appendString(e.publish)
            w.append(",\"control\":")
            w.appendString(e.control)
            w.append(",\"metrics\":")
            if let m = e.metrics { w.appendString(m) } else { w.append("null") }
            w.append("}")
        }
        w.append("}")
        w.append(",\"kind_seqs\":")
        HeartbeatWire.writeKindSeqs(kindSeqs, to: &w)
        let c = counters
        w.append(",\"counters\":{\"received\":")
        w.append(int: c.received)
        w.append(",\"published\":{")
        for (i, k) in LifecycleKind.allCases.enumerated() {
            if i > 0 { w.append(",") }
            w.append("\"")
            w.append(k.name)
            w.append("\":")
            w.append(int: c.publishedByKind[i])
        }
        w.append("},\"received_by_family\":{")
        for (i, family) in RawFormat.labels.enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(family)
            w.append(":")
            w.append(int: c.receivedByFamily[i])
        }
        w.append("},\"failed_by_code\":{")
        for (i, code) in StableErrorCode.allCases.enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(code.rawValue)
            w.append(":")
            w.append(int: c.failedByCode[i])
        }
        w.append("},\"unknown_raw_codes\":{")
        for (i, raw) in c.unknownRawCodes.keys.sorted().enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(raw)
            w.append(":")
            w.append(int: c.unknownRawCodes[raw] ?? 0)
        }
        w.append("},\"unknown_raw_codes_other\":")
        w.append(int: c.unknownRawCodesOther)
        w.append(",\"repeated_failures\":")
        w.append(int: c.repeatedFailures)
        w.append(",\"suppressed\":")
        w.append(int: c.suppressed)
        w.append(",\"duplicates\":")
        w.append(int: c.duplicates)
        w.append(",\"deadlettered\":")
        HeartbeatWire.writeDeadLetterCounts(c.deadLettered, to: &w)
        w.append(",\"tracked_checkouts\":")
        w.append(int: c.trackedCheckouts)
        w.append(",\"evicted_checkouts\":")
        w.append(int: c.evictedCheckouts)
        w.append(",\"expired_checkouts\":")
        w.append(int: c.expiredCheckouts)
        let j = journal
        w.append("},\"journal\":{\"segments\":")
        w.append(int: j.segments)
        w.append(",\"bytes\":")
        w.append(int: j.bytes)
        w.append(",\"fsyncs\":")
        w.append(int: j.fsyncs)
        w.append(",\"fsync_max_us\":")
        w.append(int: j.fsyncMaxMicros)
        w.append(",\"fsync_p99_us\":")
        w.append(int: j.fsyncP99Micros)
        w.append(j.writesDirect ? ",\"writes\":\"direct\"" : ",\"writes\":\"page_cache\"")
        w.append(",\"writable\":")
        w.append(bool: j.writable)
        w.append(",\"fence_recovered\":")
        if let fence = j.fenceRecovered { fence.write(to: &w) } else { w.append("null") }
        let s = stages
        w.append("},\"stages\":")
        Self.writeObject([
            ("timed", s.timed), ("discarded", s.discarded), ("receive_ns", s.receive), ("decode_ns", s.decode),
            ("rules_ns", s.rules), ("envelope_ns", s.envelope), ("journal_append_ns", s.journalAppend),
            ("publish_timed", s.publishTimed), ("publish_ns", s.publish), ("parallel_batches", s.parallelBatches),
            ("parallel_messages", s.parallelMessages),
        ], to: &w)
        w.append(",\"connections\":{")
        for socket in connections.sockets {
            w.appendString(socket.name)
            w.append(":")
            Self.writeObject([
                ("accepted", socket.accepted), ("disconnected", socket.disconnected), ("open", socket.open),
                ("handshakes_failed", socket.handshakesFailed), ("refused", socket.refused),
            ], to: &w)
            w.append(",")
        }
        let h = connections.http
        w.append("\"http\":")
        Self.writeObject([
            ("accepted", h.accepted), ("open", h.open), ("refused", h.refused), ("evicted", h.evicted),
            ("timed_out", h.timedOut), ("aborted", h.aborted), ("requests", h.requests),
        ], to: &w)
        w.append(",\"control_replies_dropped\":")
        w.append(int: connections.controlRepliesDropped)
        w.append(",\"replay_pages\":")
        w.append(int: connections.replayPages)
        w.append("},\"subscribers\":{")
        for (i, s) in subscribers.enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(s.name)
            w.append(":")
            s.row.write(to: &w)
        }
        w.append("}}")
        return w.bytes
    }

    /// Writes `{"name":value,…}`.
    private static func writeObject(_ members: [(StaticString, Int64)], to w: inout JSONWriter) {
        w.append("{")
        for (i, (name, value)) in members.enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(name)
            w.append(":")
            w.append(int: value)
        }
        w.append("}")
    }

    /// Reads a `stats` reply parsed into `d`; nil when it is not one that succeeded. A member it
    /// lacks (an older daemon's) reads as 0, empty or nil.
    package static func read(_ d: JSONDocument) -> StatsReply? {
        let root = d.root
        let head = ControlReplyWire.read(d)
        guard d.kind(root) == .object, head.ok, head.op == "stats" || head.op == nil else { return nil }
        func int(_ object: Int?, _ key: StaticString) -> Int64 {
            object.flatMap { d.member($0, key) }.flatMap { d.int64($0) } ?? 0
        }
        func string(_ object: Int?, _ key: StaticString) -> String? {
            object.flatMap { d.member($0, key) }.flatMap { d.string($0) }
        }
        /// An object's integer members by name.
        func counts(_ object: Int?) -> [String: Int64] {
            var out: [String: Int64] = [:]
            guard let object, d.kind(object) == .object else { return out }
            d.forEachMember(object) { k, v in
                if let name = d.string(k), let n = d.int64(v) { out[name] = n }
            }
            return out
        }
        var r = StatsReply()
        r.shard = head.shard ?? 0
        r.shards = head.shards ?? 1
        r.lastSeq = int(root, "last_seq")
        r.durableSeq = int(root, "durable_seq")
        r.firstSeq = int(root, "first_seq")
        r.snapshotAgeMilliseconds = int(root, "snapshot_age_ms")
        r.publishHighWaterMark = int(root, "publish_hwm")
        let daemon = d.object(root, "daemon")
        r.daemon = Daemon(version: string(daemon, "version") ?? "", revision: string(daemon, "revision") ?? "",
                          curve: daemon.flatMap { d.member($0, "curve") }.flatMap { d.bool($0) })
        r.daemon.journalID = string(daemon, "journal_id")
        if let e = daemon.flatMap({ d.object($0, "endpoints") }) {
            r.daemon.endpoints = Endpoints(ingest: string(e, "ingest") ?? "", ingestAcked: string(e, "ingest_acked") ?? "",
                                           publish: string(e, "publish") ?? "", control: string(e, "control") ?? "",
                                           metrics: string(e, "metrics"))
        }
        let kindSeqs = counts(d.object(root, "kind_seqs"))
        r.kindSeqs = JournaledKind.allCases.map { UInt64(max(0, kindSeqs[String(describing: $0.staticName)] ?? 0)) }
        let c = d.object(root, "counters")
        r.counters.received = int(c, "received")
        let published = counts(c.flatMap { d.object($0, "published") })
        r.counters.publishedByKind = LifecycleKind.allCases.map { published[String(describing: $0.name)] ?? 0 }
        let families = counts(c.flatMap { d.object($0, "received_by_family") })
        r.counters.receivedByFamily = RawFormat.labels.map { families[$0] ?? 0 }
        let codes = counts(c.flatMap { d.object($0, "failed_by_code") })
        r.counters.failedByCode = StableErrorCode.allCases.map { codes[$0.rawValue] ?? 0 }
        r.counters.unknownRawCodes = counts(c.flatMap { d.object($0, "unknown_raw_codes") })
        r.counters.unknownRawCodesOther = int(c, "unknown_raw_codes_other")
        r.counters.repeatedFailures = int(c, "repeated_failures")
        r.counters.suppressed = int(c, "suppressed")
        r.counters.duplicates = int(c, "duplicates")
        r.counters.deadLettered = counts(c.flatMap { d.object($0, "deadlettered") }).mapValues { UInt64(max(0, $0)) }
        r.counters.trackedCheckouts = int(c, "tracked_checkouts")
        r.counters.evictedCheckouts = int(c, "evicted_checkouts")
        r.counters.expiredCheckouts = int(c, "expired_checkouts")
        let j = d.object(root, "journal")
        r.journal.segments = int(j, "segments")
        r.journal.bytes = int(j, "bytes")
        r.journal.fsyncs = int(j, "fsyncs")
        r.journal.fsyncMaxMicros = int(j, "fsync_max_us")
        r.journal.fsyncP99Micros = int(j, "fsync_p99_us")
        r.journal.writesDirect = string(j, "writes") == "direct"
        r.journal.writable = j.flatMap { d.member($0, "writable") }.flatMap { d.bool($0) } ?? true
        if let f = j.flatMap({ d.object($0, "fence_recovered") }) {
            r.journal.fenceRecovered = Fence(durableSeq: int(f, "durable_seq"), reason: string(f, "reason") ?? "",
                                             at: string(f, "at") ?? "")
        }
        let s = d.object(root, "stages")
        r.stages.timed = int(s, "timed")
        r.stages.discarded = int(s, "discarded")
        r.stages.receive = int(s, "receive_ns")
        r.stages.decode = int(s, "decode_ns")
        r.stages.rules = int(s, "rules_ns")
        r.stages.envelope = int(s, "envelope_ns")
        r.stages.journalAppend = int(s, "journal_append_ns")
        r.stages.publishTimed = int(s, "publish_timed")
        r.stages.publish = int(s, "publish_ns")
        r.stages.parallelBatches = int(s, "parallel_batches")
        r.stages.parallelMessages = int(s, "parallel_messages")
        if let connections = d.object(root, "connections") {
            d.forEachMember(connections) { k, v in
                guard let name = d.string(k), d.kind(v) == .object else { return }
                if name == "http" {
                    r.connections.http = HTTPConnections()
                    r.connections.http.accepted = int(v, "accepted")
                    r.connections.http.open = int(v, "open")
                    r.connections.http.refused = int(v, "refused")
                    r.connections.http.evicted = int(v, "evicted")
                    r.connections.http.timedOut = int(v, "timed_out")
                    r.connections.http.aborted = int(v, "aborted")
                    r.connections.http.requests = int(v, "requests")
                } else {
                    r.connections.sockets.append(SocketConnections(
                        name: name, accepted: int(v, "accepted"), disconnected: int(v, "disconnected"),
                        handshakesFailed: int(v, "handshakes_failed"), refused: int(v, "refused")))
                }
            }
            r.connections.controlRepliesDropped = int(connections, "control_replies_dropped")
            r.connections.replayPages = int(connections, "replay_pages")
        }
        r.subscribers = ControlReplyWire.subscribers(d).map { Subscriber(name: $0.name, row: $0.subscriber) }
        return r
    }

    /// Reads a `stats` reply's bytes; nil when they are not JSON or not a `stats` that succeeded.
    package static func read(_ bytes: [UInt8]) -> StatsReply? {
        let d = JSONDocument()
        return ControlReplyWire.parse(bytes, into: d) ? read(d) : nil
    }
}
