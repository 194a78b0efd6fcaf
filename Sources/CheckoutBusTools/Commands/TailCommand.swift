#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus tail`: subscribes to the daemon's topics and prints envelopes as they arrive.
///
/// It subscribes to `bus.heartbeat` after the requested topics; because the daemon answers every
/// new subscription with a heartbeat, the first heartbeat proves the filters are live, and tail
/// then writes `tail: subscribed …` to stderr. Scripts and tests wait for that line before sending.
/// Not `Sendable`; runs on the calling thread.
package struct TailCommand {
    static let from = BusOptions.from
    static let topic = CommandOption(
        "topic", "PREFIX",
        help: "topic prefix to follow, repeatable; e.g. checkout.fail, checkout.fail.network_error, bus.heartbeat, "
            + "or \"\" for all", defaultNote: "checkout. and bus.deadletter", repeatable: true)
    static let count = CommandOption("count", "N", help: "exit 0 after printing (or recording) N envelopes")
    static let format = BusOptions.format(
        "pretty: one readable line per event; json: one envelope per line, exactly as published")
    static let timeout = CommandOption("timeout", "SECONDS", help: "exit 1 if --count was not reached in this time")
    static let receiveHWM = CommandOption(
        "receive-hwm", "N", help: "the subscriber socket's receive high-water mark", defaultNote: "1000000; with --control 100000")
    static let control = BusOptions.controlShards.described(
        "the daemon's --control endpoint; for several shards, every shard's, comma-separated, in the same order as "
            + "--from. Envelopes dropped on the way (a full high-water mark) are noticed by their seq and kind_seq, or "
            + "by a heartbeat, and fetched from the journal: each envelope is printed once, in seq order (per shard: "
            + "shards interleave)")
    static let since = CommandOption(
        "since", "POSITION",
        help: "first replay the journal from POSITION, then follow live: a SEQ (1: everything retained), a duration "
            + "back from now (90s, 10m, 2h, 1d) or an RFC 3339 time (2026-12-05T14:00:00Z), which each shard's daemon "
            + "turns into its first seq received at or after it; with several shards a SEQ applies to each, or give "
            + "I:SEQ,… per shard (a shard not named follows live)")
    static let record = CommandOption(
        "record", "FILE",
        help: "append each envelope to FILE, one JSON line exactly as published, instead of printing it. FILE is its "
            + "own cursor: a restarted tail resumes after FILE's last complete line (a torn last line is cut off), so a "
            + "killed recorder neither loses nor repeats a line. With an empty FILE it starts at --since, else live. "
            + "With several shards, FILE interleaves them and each shard resumes after its own last line (one without "
            + "a line: --since, else live). FILE.shards records the number of shards; FILE is refused for another "
            + "number (another shard count starts new journals: record into a new file)")
    static let name = CommandOption(
        "name", "NAME", help: "the name this tail reports its counts under (daemon `stats`)", defaultNote: "tail-<pid>")
    static let receiveBuffer = CommandOption(
        "receive-buffer", "BYTES",
        help: "the kernel receive buffer of each subscription (SO_RCVBUF): smaller, a tail that falls behind is "
            + "dropped for sooner and recovers from the journal", defaultNote: "the OS's, which grows to many MB")

    package static let spec = CommandSpec(
        "checkoutbus tail",
        summary: "print envelopes published by a daemon, live; or replay them from its journal first and recover "
            + "every envelope dropped on the way.",
        groups: [
            .init(nil, [from, topic, count, format, timeout, receiveHWM]),
            EnvelopeFilter.options,
            .init(nil, CurveClientKeys.options),
            .init("Recovering (any of these turns it on; uses the daemon's journal over its control socket):",
                  [control, since, record, name, receiveBuffer]),
        ],
        notes: """
            With several shards, --from and --control must list every shard in shard order (0/N first): each
            shard's heartbeat is checked and a wrong or incomplete list is refused. Pretty lines then show
            #SHARD:SEQ.

            Once its subscriptions are live (on every shard) it writes `tail: subscribed …` to stderr. When
            recovering, it ends with a summary on stderr:
              tail: summary handled=N from_journal=J missed=M recovered=R gaps=G duplicates=D
                            not_retained=X replay_requests=Q replay_busy=B last_seq=S
            (with several shards the counts are totals, and last_seqs=0:S0,1:S1,… replaces last_seq)
            """)
    package static var help: String { spec.help }

    package enum Format: Sendable { case pretty, json }

    /// The publish endpoints, one per shard in shard order (`--from A,B,C`).
    package var endpoints: [String]
    /// The first (with one shard, the only) publish endpoint.
    package var endpoint: String {
        get { endpoints[0] }
        set { endpoints = [newValue] }
    }
    package var topics: [String] = ["checkout.", "bus.deadletter"]
    package var count: Int?
    package var format: Format
    package var timeoutSeconds: Int?
    /// The SUB socket's receive high-water mark; nil: 1,000,000 live only, the subscriber's default when recovering.
    package var receiveHighWaterMark: Int32?
    /// The control endpoints, one per shard in the order of ``endpoints``; set (explicitly or by
    /// --since/--record) to recover gaps.
    package var controls: [String]?
    /// The first (with one shard, the only) control endpoint.
    package var control: String? {
        get { controls?.first }
        set { controls = newValue.map { [$0] } }
    }
    /// The subscriptions' kernel receive buffer (`--receive-buffer`); nil: the OS default.
    package var receiveBufferBytes: Int32?
    /// Replay from this seq first (every shard).
    package var since: Int64?
    /// `--since` a time or a duration back (ms since the epoch): each shard's daemon finds its
    /// first seq received at or after it (`seek`) when the tail starts.
    package var sinceTime: Int64?
    /// Per shard, replay from this seq first (`--since I:SEQ,…`); a shard not in it follows live.
    package var sinceByShard: [Int: Int64]?
    /// Append envelopes to this JSON Lines file, which is also the cursor.
    package var recordPath: String?
    package var name = "tail-\(getpid())"
    /// CURVE client keys for the subscriber (and control) sockets.
    package var curve: CurveClientKeys?
    /// `--checkout`, `--code`, `--platform`, `--sdk`, `--source`: checked on this side, per envelope.
    package var filter = EnvelopeFilter()

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        filter = EnvelopeFilter(args)
        endpoints = try BusOptions.endpoints(args, Self.from)
        format = try args.choice(Self.format, ["pretty": .pretty, "json": .json])
        receiveHighWaterMark = try args.optionalInt(Self.receiveHWM, in: 0...100_000_000).map(Int32.init)
        receiveBufferBytes = try args.optionalInt(Self.receiveBuffer, in: 1024...(1 << 30)).map(Int32.init)
        if let v = args.value(Self.since) {
            switch try? JournalPosition.parse(v, now: BusClock.wallMilliseconds()) {
            case .time(let ms)?: sinceTime = ms
            case .seq(let seq)?: since = seq
            case nil:
                guard v.contains(":") else {
                    do { _ = try JournalPosition.parse(v, now: 0) } catch { throw .init("--since: \(error)") }
                    throw .init("--since: `\(v)` is not a position")
                }
                sinceByShard = try TailCommand.sinceList(v, shards: endpoints.count)
            }
        }
        recordPath = args.value(Self.record)
        if let v = args.value(Self.name) { name = v }
        if let v = args.value(Self.control.name) {
            controls = try BusOptions.endpoints(v, flag: Self.control.name)
            if controls!.count != endpoints.count {
                throw .init("--control lists \(controls!.count) endpoints but --from lists \(endpoints.count): give one of each per shard, in shard order")
            }
        }
        if controls == nil && (since != nil || sinceTime != nil || sinceByShard != nil || recordPath != nil) {
            guard endpoints.count == 1 else {
                throw .init("with several shards in --from, --control must list each shard's control endpoint, in the same order")
            }
            control = Self.control.defaultValue
        }
        if !args.all(Self.topic).isEmpty { topics = args.all(Self.topic) }
        do {
            try BusSubscriber.checkPrefixes(topics)
        } catch {
            throw .init("--topic: \(error)")
        }
        count = try args.optionalInt(Self.count, in: 1...Int.max)
        timeoutSeconds = try args.optionalInt(Self.timeout, in: 1...86_400)
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
    }

    /// - Returns: the process exit code.
    package func run(stop: StopSignal) -> Int32 {
        if control != nil { return runRecovering(stop: stop) }
        do {
            let context = try ZMQContext()
            let sub = try ZMQSocket(context: context, type: .sub)
            try sub.setOption(.receiveHighWaterMark, receiveHighWaterMark ?? 1_000_000)
            if let receiveBufferBytes { try sub.setOption(.receiveBuffer, receiveBufferBytes) }
            try sub.setLinger(milliseconds: 0)
            try curve?.apply(to: sub)
            // One SUB connects to every shard; the heartbeats say which shards are live.
            for endpoint in endpoints { try sub.connect(endpoint) }
            for t in topics { try sub.subscribe(t) }
            try sub.subscribe("bus.heartbeat")
            let showHeartbeats = topics.contains { "bus.heartbeat".hasPrefix($0) }
            let poller = ZMQPoller()
            poller.addReadable(sub)
            let deadline = timeoutSeconds.map { BusClock.monotonicNanoseconds() + UInt64($0) * 1_000_000_000 }
            var subscribed = false
            var shardsLive = Set<Int>()
            var printed = 0
            var out: [UInt8] = []
            let doc = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
            while !stop.isRaised {
                if let deadline, BusClock.monotonicNanoseconds() >= deadline {
                    FileHandleWriter.standardError("tail: timed out after \(printed) envelopes\n")
                    return 1
                }
                guard try poller.poll(timeoutMilliseconds: 200) > 0 else { continue }
                while let frames = try sub.receiveMultipart(dontWait: true) {
                    guard frames.count >= 2 else { continue }
                    let topic = frames[0]
                    let isHeartbeat = topic.elementsEqual("bus.heartbeat".utf8)
                    if isHeartbeat && !subscribed {
                        if endpoints.count > 1 {
                            let (shard, shards) = TailCommand.heartbeatShard(frames[1], doc: doc)
                            guard shards == endpoints.count else {
                                throw SubscriberError(.wrongShard,
                                    "--from lists \(endpoints.count) endpoints but a daemon there is shard \(shard)/\(shards): "
                                        + "list every shard's endpoint, in shard order")
                            }
                            shardsLive.insert(shard)
                        }
                        if endpoints.count == 1 || shardsLive.count == endpoints.count {
                            subscribed = true
                            FileHandleWriter.standardError(
                                "tail: subscribed to \(topics.map { "\"\($0)\"" }.joined(separator: ", ")) at \(endpoints.joined(separator: ","))\n")
                        }
                    }
                    if isHeartbeat && !showHeartbeats { continue }
                    guard topics.contains(where: { topic.starts(with: $0.utf8) }) else { continue }
                    guard filter.matches(topic: topic, envelope: frames[1], doc: doc) else { continue }
                    switch format {
                    case .json:
                        out.append(contentsOf: frames[1])
                        out.append(0x0A)
                    case .pretty:
                        out.append(contentsOf: TailCommand.pretty(topic: topic, envelope: frames[1], doc: doc,
                                                                  showShard: endpoints.count > 1).utf8)
                        out.append(0x0A)
                    }
                    printed += 1
                    if let count, printed >= count { break }
                }
                FileHandleWriter.writeAll(1, &out)
                out.removeAll(keepingCapacity: true)
                if let count, printed >= count { return 0 }
            }
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus tail: \(error)\n")
            return 1
        }
    }

    /// `--since I:SEQ,…`: each shard at most once, each below the shard count.
    package static func sinceList(_ value: String, shards: Int) throws(CommandLineArguments.UsageError) -> [Int: Int64] {
        var out: [Int: Int64] = [:]
        for item in value.split(separator: ",") {
            let parts = item.split(separator: ":")
            guard parts.count == 2, let shard = Int(parts[0]), let seq = Int64(parts[1]), seq >= 0 else {
                throw .init("--since takes SEQ or SHARD:SEQ,…, got \(value)")
            }
            guard shard >= 0 && shard < shards else {
                throw .init("--since names shard \(shard), but --from lists \(shards) shards (0…\(shards - 1))")
            }
            guard out.updateValue(seq, forKey: shard) == nil else { throw .init("--since names shard \(shard) twice") }
        }
        return out
    }

    /// A heartbeat's `shard` and `shards` (0 and 1 from a daemon without shards).
    package static func heartbeatShard(_ envelope: [UInt8], doc: JSONDocument) -> (shard: Int, shards: Int) {
        envelope.withUnsafeBytes { buf -> (Int, Int) in
            do throws(JSONParseError) { try doc.parse(buf) } catch { return (0, 1) }
            let shard = doc.member(doc.root, "shard").flatMap { doc.int64($0) } ?? 0
            let shards = doc.member(doc.root, "shards").flatMap { doc.int64($0) } ?? 1
            return (Int(shard), Int(shards))
        }
    }

    /// One readable line: seq (`#SHARD:SEQ` with `showShard`), topic, checkout, source, money and flags.
    package static func pretty(topic: [UInt8], envelope: [UInt8], doc: JSONDocument, showShard: Bool = false) -> String {
        let topicText = String(decoding: topic, as: UTF8.self)
        return envelope.withUnsafeBytes { buf -> String in
            do throws(JSONParseError) {
                try doc.parse(buf)
            } catch {
                return "\(topicText) \(String(decoding: envelope, as: UTF8.self))"
            }
            let r = doc.root
            func text(_ key: StaticString) -> String? {
                guard let v = doc.member(r, key) else { return nil }
                return doc.kind(v) == .string ? doc.string(v) : doc.kind(v) == .null ? nil : String(decoding: doc.raw(v), as: UTF8.self)
            }
            var parts: [String] = []
            parts.append("#" + (showShard ? (text("shard") ?? "0") + ":" : "") + (text("seq") ?? "-"))
            parts.append(topicText)
            if topicText == "bus.deadletter" {
                parts.append("reason=" + (text("reason") ?? "?"))
                if let d = text("detail") { parts.append("detail=\"\(d)\"") }
                return parts.joined(separator: " ")
            }
            if let c = text("checkout_id") { parts.append(c) }
            if let source = doc.object(r, "source") {
                let sdk = doc.member(source, "sdk").flatMap { doc.string($0) } ?? "?"
                let platform = doc.member(source, "platform").flatMap { doc.string($0) }
                let format = doc.member(source, "format").flatMap { doc.string($0) } ?? "?"
                parts.append("\(sdk)/\(platform ?? "-")/\(format)")
            }
            if let s = doc.object(r, "summary") {
                if let t = doc.member(s, "total"), let v = doc.int64(t) {
                    let cur = doc.member(s, "currency").flatMap { doc.string($0) } ?? ""
                    parts.append("total=\(v) \(cur)".trimmingSuffixSpace())
                }
                if let o = doc.member(s, "order_id"), let v = doc.string(o) { parts.append("order=\(v)") }
            }
            if let e = doc.object(r, "error"), let c = doc.member(e, "code"), let code = doc.string(c) {
                let raw = doc.member(e, "raw_code").flatMap { doc.string($0) }
                parts.append("error=\(code)" + (raw.map { " (\($0))" } ?? ""))
            }
            if let v = doc.member(r, "repeat"), doc.bool(v) == true { parts.append("[repeat]") }
            if let v = doc.member(r, "after_complete"), doc.bool(v) == true { parts.append("[after_complete]") }
            return parts.joined(separator: " ")
        }
    }
}

extension String {
    fileprivate func trimmingSuffixSpace() -> String {
        var s = self
        while s.hasSuffix(" ") { s.removeLast() }
        return s
    }
}
