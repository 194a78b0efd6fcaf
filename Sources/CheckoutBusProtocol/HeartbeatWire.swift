import CheckoutBusJSON

/// `bus.heartbeat`, declared once: the daemon writes it (`EnvelopeWriter.writeHeartbeat` calls
/// ``write(_:to:)``), every Swift subscriber reads it (``read(_:)``), and the Python client's
/// `wire.heartbeat` reads the same bytes — both checked against `Tests/Golden/control-replies.tsv`
/// (docs/envelope.md, "Heartbeats").
package enum HeartbeatWire {
    /// Everything a heartbeat carries.
    package struct Contents {
        package var seq: UInt64
        package var shard: Int
        package var shards: Int
        /// Each kind's last `kind_seq`, in ``JournaledKind`` order (dead letters last).
        package var kindSeqs: [UInt64]
        package var sentAt: Timestamp
        /// When the daemon's run started.
        package var startedAt: Timestamp?
        /// The journal's identity (`<data-dir>/journal-id`).
        package var journal: String?
        package var trackedCheckouts: Int
        package var received: UInt64
        package var suppressed: UInt64
        /// Dead letters by reason.
        package var deadLettered: [String: UInt64]
        package var evictedCheckouts: UInt64
        package var expiredCheckouts: UInt64

        package init(seq: UInt64, shard: Int, shards: Int, kindSeqs: [UInt64], sentAt: Timestamp, startedAt: Timestamp?,
                     trackedCheckouts: Int, received: UInt64, suppressed: UInt64, deadLettered: [String: UInt64],
                     evictedCheckouts: UInt64, expiredCheckouts: UInt64) {
            self.seq = seq
            self.shard = shard
            self.shards = shards
            self.kindSeqs = kindSeqs
            self.sentAt = sentAt
            self.startedAt = startedAt
            self.trackedCheckouts = trackedCheckouts
            self.received = received
            self.suppressed = suppressed
            self.deadLettered = deadLettered
            self.evictedCheckouts = evictedCheckouts
            self.expiredCheckouts = expiredCheckouts
        }
    }

    /// What a subscriber reads of a heartbeat: the shard's last `seq`, each kind's `kind_seq`, which
    /// shard it is and when the daemon's run started.
    package struct Fields: Equatable {
        package var seq: Int64
        /// Indexed by ``JournaledKind/rawValue``.
        package var kindSeqs: [Int64]
        /// `shard` and `shards` (0 and 1 from a daemon without shards).
        package var shard = 0
        package var shards = 1
        /// When the daemon's run started (`started_at`); nil from a daemon that does not say.
        package var startedAt: String?
        /// The journal's identity (`journal_id`); nil from a daemon that does not say.
        package var journal: String?
        /// When it was sent (`sent_at`).
        package var sentAt: String?

        package init(seq: Int64, kindSeqs: [Int64], shard: Int = 0, shards: Int = 1) {
            self.seq = seq
            self.kindSeqs = kindSeqs
            self.shard = shard
            self.shards = shards
        }
    }

    /// Writes a heartbeat's envelope.
    package static func write(_ h: Contents, to w: inout JSONWriter) {
        EnvelopeHead.writeHeartbeat(seq: h.seq, shard: h.shard, shards: h.shards, to: &w)
        w.append(",\"kind_seqs\":")
        writeKindSeqs(h.kindSeqs, to: &w)
        w.append(",\"sent_at\":")
        h.sentAt.write(to: &w)
        if let startedAt = h.startedAt {
            w.append(",\"started_at\":")
            startedAt.write(to: &w)
        }
        if let journal = h.journal {
            w.append(",\"journal_id\":")
            w.appendString(journal)
        }
        w.append(",\"tracked_checkouts\":")
        w.append(int: h.trackedCheckouts)
        w.append(",\"counters\":{\"received\":")
        w.append(int: Int64(bitPattern: h.received))
        w.append(",\"suppressed\":")
        w.append(int: Int64(bitPattern: h.suppressed))
        w.append(",\"deadlettered\":")
        writeDeadLetterCounts(h.deadLettered, to: &w)
        w.append(",\"evicted_checkouts\":")
        w.append(int: Int64(bitPattern: h.evictedCheckouts))
        w.append(",\"expired_checkouts\":")
        w.append(int: Int64(bitPattern: h.expiredCheckouts))
        w.append("}}")
    }

    /// Reads what a subscriber needs of a heartbeat parsed into `document`; nil without `seq` or `kind_seqs`.
    package static func read(_ document: JSONDocument) -> Fields? {
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
        var fields = Fields(seq: seq, kindSeqs: kindSeqs)
        if let i = document.member(root, "shard").flatMap({ document.int64($0) }) { fields.shard = Int(i) }
        if let n = document.member(root, "shards").flatMap({ document.int64($0) }) { fields.shards = Int(n) }
        fields.startedAt = document.member(root, "started_at").flatMap { document.string($0) }
        fields.journal = document.member(root, "journal_id").flatMap { document.string($0) }
        fields.sentAt = document.member(root, "sent_at").flatMap { document.string($0) }
        return fields
    }

    /// Writes `seqs` (each kind's last `kind_seq`, dead letters last) as a JSON object:
    /// `{"start":…,"update":…,"complete":…,"fail":…,"dismiss":…,"deadletter":…}` (heartbeats, stats).
    package static func writeKindSeqs(_ seqs: [UInt64], to w: inout JSONWriter) {
        w.append("{")
        for k in JournaledKind.allCases {
            if k.rawValue > 0 { w.append(",") }
            w.append("\"")
            w.append(k.staticName)
            w.append("\":")
            w.append(int: Int64(bitPattern: k.rawValue < seqs.count ? seqs[k.rawValue] : 0))
        }
        w.append("}")
    }

    /// Writes dead-letter counts by reason as a JSON object, reasons sorted (heartbeats, stats).
    package static func writeDeadLetterCounts(_ counts: [String: UInt64], to w: inout JSONWriter) {
        w.append("{")
        for (i, reason) in counts.keys.sorted().enumerated() {
            if i > 0 { w.append(",") }
            w.appendString(reason)
            w.append(":")
            w.append(int: Int64(bitPattern: counts[reason] ?? 0))
        }
        w.append("}")
    }
}
