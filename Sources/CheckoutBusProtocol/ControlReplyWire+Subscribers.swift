import CheckoutBusJSON

/// The replies about subscribers and positions, declared once like the rest of
/// ``ControlReplyWire``: a subscriber's row in `stats`, `forget`, `report` and `seek`. The daemon
/// writes them with these, `checkoutbus subscribers` and the client's `seek` read them back, and
/// `Tests/Golden/control-replies.tsv` holds their bytes.
extension ControlReplyWire {
    /// One subscriber as `stats` lists it under `subscribers` (by name): its state, its last report
    /// and the lag the daemon works out from it (docs/observability.md, "Subscribers, live and gone").
    package struct Subscriber: Equatable, Sendable {
        /// `live` or `gone`.
        package var state: String
        /// Why a gone subscriber is gone (`stopped`, `silent`); nil while live.
        package var goneReason: String?
        /// Milliseconds since its last report.
        package var ageMilliseconds: Int64
        package var lastSeq: Int64
        /// The seq through which it has everything it follows.
        package var throughSeq: Int64
        /// The daemon's last seq minus the subscriber's position; nil from an older daemon, which
        /// did not write it (a reader works it out from `last_seq`).
        package var lag: Int64?
        package var missed: Int64
        package var recovered: Int64
        package var gaps: Int64
        package var rejected: Int64
        /// Whether its position is kept on disk (a cursor).
        package var durable: Bool
        package var reportedAt: Timestamp?

        package init(state: String, goneReason: String? = nil, ageMilliseconds: Int64 = 0, lastSeq: Int64 = 0,
                     throughSeq: Int64 = 0, lag: Int64? = 0, missed: Int64 = 0, recovered: Int64 = 0, gaps: Int64 = 0,
                     rejected: Int64 = 0, durable: Bool = false, reportedAt: Timestamp? = nil) {
            self.state = state
            self.goneReason = goneReason
            self.ageMilliseconds = ageMilliseconds
            self.lastSeq = lastSeq
            self.throughSeq = throughSeq
            self.lag = lag
            self.missed = missed
            self.recovered = recovered
            self.gaps = gaps
            self.rejected = rejected
            self.durable = durable
            self.reportedAt = reportedAt
        }

        /// `{"state":…,"gone_reason":…,"age_ms":…,"last_seq":…,"through_seq":…,"lag":…,"missed":…,
        /// "recovered":…,"gaps":…,"rejected":…,"durable":…,"reported_at":…}`.
        package func write(to w: inout JSONWriter) {
            w.append("{\"state\":")
            w.appendString(state)
            w.append(",\"gone_reason\":")
            if let goneReason { w.appendString(goneReason) } else { w.append("null") }
            w.append(",\"age_ms\":")
            w.append(int: ageMilliseconds)
            w.append(",\"last_seq\":")
            w.append(int: lastSeq)
            w.append(",\"through_seq\":")
            w.append(int: throughSeq)
            w.append(",\"lag\":")
            if let lag { w.append(int: lag) } else { w.append("null") }
            w.append(",\"missed\":")
            w.append(int: missed)
            w.append(",\"recovered\":")
            w.append(int: recovered)
            w.append(",\"gaps\":")
            w.append(int: gaps)
            w.append(",\"rejected\":")
            w.append(int: rejected)
            w.append(",\"durable\":")
            w.append(bool: durable)
            w.append(",\"reported_at\":")
            if let reportedAt { reportedAt.write(to: &w) } else { w.append("null") }
            w.append("}")
        }

        /// Reads a row written by ``write(to:)``; a member it lacks (an older daemon's) reads as 0,
        /// `live` or nil.
        package static func read(_ d: JSONDocument, _ object: Int) -> Subscriber {
            func int(_ key: StaticString) -> Int64 { d.member(object, key).flatMap { d.int64($0) } ?? 0 }
            let reportedAt = d.member(object, "reported_at").flatMap { d.string($0) }.flatMap { text in
                Array(text.utf8).withUnsafeBytes { Timestamp(rfc3339: $0) }
            }
            return Subscriber(
                state: d.member(object, "state").flatMap { d.string($0) } ?? "live",
                goneReason: d.member(object, "gone_reason").flatMap { d.string($0) },
                ageMilliseconds: int("age_ms"), lastSeq: int("last_seq"), throughSeq: int("through_seq"),
                lag: d.member(object, "lag").flatMap { d.int64($0) },
                missed: int("missed"), recovered: int("recovered"), gaps: int("gaps"), rejected: int("rejected"),
                durable: d.member(object, "durable").flatMap { d.bool($0) } ?? false, reportedAt: reportedAt)
        }
    }

    /// The `subscribers` member of a `stats` reply parsed into `d`, in the order written.
    package static func subscribers(_ d: JSONDocument) -> [(name: String, subscriber: Subscriber)] {
        guard let object = d.object(d.root, "subscribers") else { return [] }
        var rows: [(name: String, subscriber: Subscriber)] = []
        d.forEachMember(object) { key, value in
            guard let name = d.string(key), d.kind(value) == .object else { return }
            rows.append((name, Subscriber.read(d, value)))
        }
        return rows
    }

    /// `report`'s answer: the head alone, `{"op":"report","ok":true,…}`.
    package static func report(shard: Int, shards: Int, req: [UInt8]?) -> [UInt8] {
        var w = begin("report", ok: true, shard: shard, shards: shards, req: req)
        w.append("}")
        return w.bytes
    }

    /// What `forget` did: whether the daemon knew the subscriber, and its state then.
    package struct Forgotten: Equatable, Sendable {
        package var subscriber: String
        package var known: Bool
        package var state: String?

        package init(subscriber: String, known: Bool, state: String?) {
            self.subscriber = subscriber
            self.known = known
            self.state = state
        }
    }

    /// `forget`'s answer: `…,"subscriber":NAME,"known":B,"state":S|null}`.
    package static func forget(_ f: Forgotten, shard: Int, shards: Int, req: [UInt8]?) -> [UInt8] {
        var w = begin("forget", ok: true, shard: shard, shards: shards, req: req)
        w.append(",\"subscriber\":")
        w.appendString(f.subscriber)
        w.append(",\"known\":")
        w.append(bool: f.known)
        w.append(",\"state\":")
        if let state = f.state { w.appendString(state) } else { w.append("null") }
        w.append("}")
        return w.bytes
    }

    /// Reads a `forget` answer parsed into `d`; nil when it is not one that succeeded.
    package static func readForget(_ d: JSONDocument) -> Forgotten? {
        let root = d.root
        guard read(d).ok, let name = d.member(root, "subscriber").flatMap({ d.string($0) }) else { return nil }
        return Forgotten(subscriber: name, known: d.member(root, "known").flatMap { d.bool($0) } ?? false,
                         state: d.member(root, "state").flatMap { d.string($0) })
    }

    /// Where `seek` found a time: the first seq received at or after it.
    package struct Sought: Equatable, Sendable {
        package var timeMilliseconds: Int64
        package var seq: Int64
        /// The time is before what the journal still retains (retention deleted something).
        package var beforeRetention: Bool
        package var probes: Int
        package var tookMicroseconds: Int64

        package init(timeMilliseconds: Int64, seq: Int64, beforeRetention: Bool, probes: Int, tookMicroseconds: Int64) {
            self.timeMilliseconds = timeMilliseconds
            self.seq = seq
            self.beforeRetention = beforeRetention
            self.probes = probes
            self.tookMicroseconds = tookMicroseconds
        }
    }

    /// `seek`'s answer: `…,"time_ms":T,"seq":S,"before_retention":B,"probes":P,"took_us":U,
    /// "first_seq":F,"last_seq":L}`.
    package static func seek(_ s: Sought, first: UInt64, last: UInt64, shard: Int, shards: Int, req: [UInt8]?) -> [UInt8] {
        var w = begin("seek", ok: true, shard: shard, shards: shards, req: req)
        w.append(",\"time_ms\":")
        w.append(int: s.timeMilliseconds)
        w.append(",\"seq\":")
        w.append(int: s.seq)
        w.append(",\"before_retention\":")
        w.append(bool: s.beforeRetention)
        w.append(",\"probes\":")
        w.append(int: s.probes)
        w.append(",\"took_us\":")
        w.append(int: s.tookMicroseconds)
        appendBounds(first: first, last: last, to: &w)
        w.append("}")
        return w.bytes
    }

    /// Reads a `seek` answer parsed into `d`; nil when it is not one that succeeded.
    package static func readSeek(_ d: JSONDocument) -> Sought? {
        let root = d.root
        guard read(d).ok, let seq = d.member(root, "seq").flatMap({ d.int64($0) }) else { return nil }
        func int(_ key: StaticString) -> Int64 { d.member(root, key).flatMap { d.int64($0) } ?? 0 }
        return Sought(timeMilliseconds: int("time_ms"), seq: seq,
                      beforeRetention: d.member(root, "before_retention").flatMap { d.bool($0) } ?? false,
                      probes: Int(int("probes")), tookMicroseconds: int("took_us"))
    }
}
