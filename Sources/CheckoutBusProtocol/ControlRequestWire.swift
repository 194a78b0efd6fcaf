import CheckoutBusJSON

/// The requests of the daemon's control socket, written one way by everyone who sends them: the
/// subscribers (replay, identity, report), the tools (`trace`, `stats`, `subscribers forget`,
/// `seek` through `JournalPosition`), the benchmarks and load generators. The Python client writes
/// the same bytes, checked against `Tests/Golden/control-requests.tsv` on both sides
/// (docs/envelope.md, "The control socket"). Fields are written in one fixed order; the daemon
/// reads them by name.
public enum ControlRequestWire {
    /// Every request's `op`, as the daemon's control socket takes them (an ingest socket that
    /// receives one names the mistake in its dead letter).
    public static let ops: Set<String> = ["replay", "stats", "report", "forget", "seek"]

    /// `{"op":"replay","from":F,"prefix":[…],"limit":L,"checkout_id":C,"req":R}`: the envelopes from
    /// `from` on (of those topic prefixes; of that checkout), at most `limit` in a page. A nil
    /// field is left out (the daemon's defaults: every topic, its page limit, no checkout filter).
    public static func replay(from: Int64, prefixes: [String]? = nil, limit: Int? = nil, checkoutID: String? = nil,
                              req: Int64? = nil) -> [UInt8] {
        var w = JSONWriter(capacity: 128)
        w.append("{\"op\":\"replay\",\"from\":")
        w.append(int: from)
        if let prefixes {
            w.append(",\"prefix\":[")
            for (i, prefix) in prefixes.enumerated() {
                if i > 0 { w.append(",") }
                w.appendString(prefix)
            }
            w.append("]")
        }
        if let limit {
            w.append(",\"limit\":")
            w.append(int: limit)
        }
        if let checkoutID {
            w.append(",\"checkout_id\":")
            w.appendString(checkoutID)
        }
        return close(&w, req: req)
    }

    /// `{"op":"stats","req":R}`: the counters, journal figures and subscribers; a subscriber's
    /// identity request (which shard are you) is this.
    public static func stats(req: Int64? = nil) -> [UInt8] {
        var w = JSONWriter(capacity: 32)
        w.append("{\"op\":\"stats\"")
        return close(&w, req: req)
    }

    /// `{"op":"seek","time_ms":T,"req":R}`: the first seq received at or after `T` (Unix ms).
    public static func seek(timeMilliseconds: Int64, req: Int64? = nil) -> [UInt8] {
        var w = JSONWriter(capacity: 48)
        w.append("{\"op\":\"seek\",\"time_ms\":")
        w.append(int: timeMilliseconds)
        return close(&w, req: req)
    }

    /// `{"op":"forget","subscriber":NAME,"req":R}`: drop a subscriber's reports now.
    public static func forget(subscriber: String, req: Int64? = nil) -> [UInt8] {
        var w = JSONWriter(capacity: 64)
        w.append("{\"op\":\"forget\",\"subscriber\":")
        w.appendString(subscriber)
        return close(&w, req: req)
    }

    /// A subscriber's report of what it handled and lost (docs/observability.md).
    public struct Report: Sendable, Equatable {
        public var subscriber: String
        public var lastSeq: Int64
        public var missed: Int
        public var recovered: Int
        public var gaps: Int
        public var throughSeq: Int64
        /// Its last report: it is stopping.
        public var final: Bool
        /// Whether it keeps its position across runs; nil: not said.
        public var durable: Bool?
        /// Envelopes it holds parked, not applied; nil: not said.
        public var rejected: Int?

        public init(subscriber: String, lastSeq: Int64, missed: Int, recovered: Int, gaps: Int, throughSeq: Int64,
                    final: Bool = false, durable: Bool? = nil, rejected: Int? = nil) {
            self.subscriber = subscriber
            self.lastSeq = lastSeq
            self.missed = missed
            self.recovered = recovered
            self.gaps = gaps
            self.throughSeq = throughSeq
            self.final = final
            self.durable = durable
            self.rejected = rejected
        }
    }

    /// `{"op":"report","subscriber":…,"last_seq":…,"missed":…,"recovered":…,"gaps":…,
    /// "through_seq":…[,"final":true][,"durable":…][,"rejected":…],"req":R}`.
    public static func report(_ r: Report, req: Int64? = nil) -> [UInt8] {
        var w = JSONWriter(capacity: 256)
        w.append("{\"op\":\"report\",\"subscriber\":")
        w.appendString(r.subscriber)
        w.append(",\"last_seq\":")
        w.append(int: r.lastSeq)
        w.append(",\"missed\":")
        w.append(int: r.missed)
        w.append(",\"recovered\":")
        w.append(int: r.recovered)
        w.append(",\"gaps\":")
        w.append(int: r.gaps)
        w.append(",\"through_seq\":")
        w.append(int: r.throughSeq)
        if r.final { w.append(",\"final\":true") }
        if let durable = r.durable {
            w.append(",\"durable\":")
            w.append(bool: durable)
        }
        if let rejected = r.rejected {
            w.append(",\"rejected\":")
            w.append(int: rejected)
        }
        return close(&w, req: req)
    }

    private static func close(_ w: inout JSONWriter, req: Int64?) -> [UInt8] {
        if let req {
            w.append(",\"req\":")
            w.append(int: req)
        }
        w.append("}")
        return w.bytes
    }
}
