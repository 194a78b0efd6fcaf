#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import ZeroMQ

/// `checkoutbus tail`: subscribes to the daemon's topics and prints envelopes as they arrive.
///
/// It subscribes to `bus.heartbeat` after the requested topics; because the daemon answers every
/// new subscription with a heartbeat, the first heartbeat proves the filters are live, and tail
/// then writes `tail: subscribed …` to stderr. Scripts and tests wait for that line before sending.
/// Not `Sendable`; runs on the calling thread.
public struct TailCommand {
    public static let help = """
        checkoutbus tail — print envelopes published by a daemon, live; or replay them from its
        journal first and recover every envelope dropped on the way.

        USAGE: checkoutbus tail [--from ENDPOINT] [--topic PREFIX ...] [--count N] [--format pretty|json]
                                [--timeout SECONDS] [--receive-hwm N]
                                [--since SEQ] [--control ENDPOINT] [--record FILE] [--name NAME]
                                [--curve-key FILE --curve-server FILE]

          --from ENDPOINT      the daemon's --publish endpoint (default tcp://127.0.0.1:7702)
          --topic PREFIX       topic prefix to follow, repeatable (default: checkout. and bus.deadletter);
                               e.g. checkout.fail, checkout.fail.network_error, bus.heartbeat, or "" for all
          --count N            exit 0 after printing (or recording) N envelopes
          --format FORMAT      pretty (default): one readable line per event;
                               json: one envelope per line, exactly as published
          --timeout SECONDS    exit 1 if --count was not reached in this time
          --receive-hwm N      the subscriber socket's receive high-water mark (default 1000000; with
                               --control 100000)
        \(CurveClientKeys.help)

        Recovering (any of these turns it on; uses the daemon's journal over its control socket):
          --control ENDPOINT   the daemon's --control endpoint (default tcp://127.0.0.1:7703). Envelopes
                               dropped on the way (a full high-water mark) are noticed by their seq and
                               kind_seq, or by a heartbeat, and fetched from the journal: each envelope is
                               printed once, in seq order
          --since SEQ          first replay the journal from SEQ (1: everything retained), then follow live
          --record FILE        append each envelope to FILE, one JSON line exactly as published, instead of
                               printing it. FILE is its own cursor: a restarted tail resumes after FILE's
                               last complete line (a torn last line is cut off), so a killed recorder
                               neither loses nor repeats a line. With an empty FILE it starts at --since,
                               else live
          --name NAME          the name this tail reports its counts under (daemon `stats`)
                               (default tail-<pid>)

        Once its subscriptions are live it writes `tail: subscribed …` to stderr. When recovering, it
        ends with a summary on stderr:
          tail: summary handled=N from_journal=J missed=M recovered=R gaps=G duplicates=D last_seq=S
        """

    public enum Format: Sendable { case pretty, json }

    public var endpoint = "tcp://127.0.0.1:7702"
    public var topics: [String] = ["checkout.", "bus.deadletter"]
    public var count: Int?
    public var format = Format.pretty
    public var timeoutSeconds: Int?
    /// The SUB socket's receive high-water mark; nil: 1,000,000 live only, the subscriber's default when recovering.
    public var receiveHighWaterMark: Int32?
    /// The daemon's control endpoint; set (explicitly or by --since/--record) to recover gaps.
    public var control: String?
    /// Replay from this seq first.
    public var since: Int64?
    /// Append envelopes to this JSON Lines file, which is also the cursor.
    public var recordPath: String?
    public var name = "tail-\(getpid())"
    /// CURVE client keys for the subscriber (and control) sockets.
    public var curve: CurveClientKeys?

    public init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try CommandLineArguments(
            arguments,
            valued: Set(["from", "topic", "count", "format", "timeout", "receive-hwm", "control", "since", "record", "name"])
                .union(CurveClientKeys.flags),
            switches: [])
        curve = try CurveClientKeys.parse(args)
        if let v = args.value("from") { endpoint = v }
        if args.value("receive-hwm") != nil {
            receiveHighWaterMark = Int32(try args.int("receive-hwm", default: 0, in: 0...100_000_000))
        }
        if args.value("since") != nil { since = Int64(try args.int("since", default: 0, in: 0...Int.max)) }
        recordPath = args.value("record")
        if let v = args.value("name") { name = v }
        control = args.value("control")
        if control == nil && (since != nil || recordPath != nil) { control = "tcp://127.0.0.1:7703" }
        if !args.all("topic").isEmpty { topics = args.all("topic") }
        if args.value("count") != nil { count = try args.int("count", default: 0, in: 1...Int.max) }
        if args.value("timeout") != nil { timeoutSeconds = try args.int("timeout", default: 0, in: 1...86_400) }
        switch args.value("format") {
        case nil, "pretty": format = .pretty
        case "json": format = .json
        case let other?: throw .init("--format must be pretty or json, got \(other)")
        }
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
    }

    /// - Returns: the process exit code.
    public func run(stop: StopSignal) -> Int32 {
        if control != nil { return runRecovering(stop: stop) }
        do {
            let context = try ZMQContext()
            let sub = try ZMQSocket(context: context, type: .sub)
            try sub.setOption(.receiveHighWaterMark, receiveHighWaterMark ?? 1_000_000)
            try sub.setLinger(milliseconds: 0)
            try curve?.apply(to: sub)
            try sub.connect(endpoint)
            for t in topics { try sub.subscribe(t) }
            try sub.subscribe("bus.heartbeat")
            let showHeartbeats = topics.contains { "bus.heartbeat".hasPrefix($0) }
            let poller = ZMQPoller()
            poller.addReadable(sub)
            let deadline = timeoutSeconds.map { BusClock.monotonicNanoseconds() + UInt64($0) * 1_000_000_000 }
            var subscribed = false
            var printed = 0
            var out: [UInt8] = []
            let doc = JSONDocument()
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
                        subscribed = true
                        FileHandleWriter.standardError("tail: subscribed to \(topics.map { "\"\($0)\"" }.joined(separator: ", ")) at \(endpoint)\n")
                    }
                    if isHeartbeat && !showHeartbeats { continue }
                    guard topics.contains(where: { topic.starts(with: $0.utf8) }) else { continue }
                    switch format {
                    case .json:
                        out.append(contentsOf: frames[1])
                        out.append(0x0A)
                    case .pretty:
                        out.append(contentsOf: TailCommand.pretty(topic: topic, envelope: frames[1], doc: doc).utf8)
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

    /// One readable line: seq, topic, checkout, source, money and flags.
    static func pretty(topic: [UInt8], envelope: [UInt8], doc: JSONDocument) -> String {
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
            parts.append("#" + (text("seq") ?? "-"))
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
