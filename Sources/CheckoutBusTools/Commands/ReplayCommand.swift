#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusCore
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus replay FILE`: sends a recorded JSONL file to a daemon at its original pacing, ×N,
/// or flat out. Not `Sendable`; runs on the calling thread.
///
/// A line is either a raw capture (any raw shape, wrapped or not: sent as is) or an envelope as
/// `checkoutbus tail --format json` prints it, which is turned back into a raw event of its family
/// (``rawEvent(from:kind:into:)``) so the daemon decodes and applies the rules to it again. Pacing follows each line's time: an envelope's
/// `received_at`, else a wrapper's `occurred_at` (RFC 3339 or epoch milliseconds); lines without a
/// time are sent right after the previous one.
package struct ReplayCommand {
    static let to = BusOptions.to
    static let speed = CommandOption("speed", "N", help: "N times the original pacing (2 is twice as fast)", default: "1")
    static let flatOut = CommandOption("flat-out", help: "ignore the recorded times and send as fast as possible")
    static let since = CommandOption(
        "since", "POSITION",
        help: "start at a position of the recording: a SEQ (recorded envelopes with a smaller seq are skipped; raw "
            + "lines have none and are sent), a duration back from now (2h) or an RFC 3339 time (lines are skipped "
            + "until the first whose received_at, else occurred_at, is at or after it)")
    static let rewriteIDs = CommandOption(
        "rewrite-ids", "N",
        help: "send N distinct copies of every line, each with its checkout, order, payment and event ids suffixed "
            + "`~r<copy>` wherever they occur (so one capture becomes N lifecycles per recorded one, consistent within each)")
    static let loop = CommandOption(
        "loop", help: "replay the file again and again until interrupted; with --rewrite-ids every pass has copies of "
            + "its own (pass p: copies p×N … p×N+N−1)")
    static let connections = CommandOption(
        "connections", "N", help: "PUSH connections; copy k goes on connection k mod N, so each lifecycle keeps its order",
        default: "1")

    package static let spec = CommandSpec(
        "checkoutbus replay", summary: "replay a recorded JSONL file into a daemon.",
        operands: "FILE",
        operandHelp: [.init("FILE", "JSONL: raw events (a capture) or envelopes from `tail --format json`")],
        options: [to, speed, flatOut, since, rewriteIDs, loop, connections] + CurveClientKeys.options,
        notes: """
            Heartbeats and dead letters in a recording are skipped. Prints `sent=N skipped=M` on stderr
            (skipped counts recorded lines, not copies; with --since, ` before_since=K` the lines before
            it). SIGINT or SIGTERM stops a replay (exit 130).
            """)
    package static var help: String { spec.help }

    package var file: String
    package var endpoint: String
    package var speed: Double
    package var flatOut: Bool
    package var copies: Int?
    package var loop: Bool
    package var connections: Int
    package var curve: CurveClientKeys?
    /// `--since`: where in the recording to start.
    package var since: JournalPosition?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        guard args.positionals.count == 1 else { throw .init("replay needs exactly one FILE") }
        file = args.positionals[0]
        endpoint = args.string(Self.to)
        let v = args.string(Self.speed)
        guard let s = Double(v), s > 0 else { throw .init(.invalidValue, "--speed must be a positive number, got \(v)") }
        speed = s
        flatOut = args.has(Self.flatOut)
        copies = try args.optionalInt(Self.rewriteIDs, in: 1...10_000_000)
        loop = args.has(Self.loop)
        connections = try args.int(Self.connections, in: 1...256)
        if let v = args.value(Self.since) {
            do { since = try JournalPosition.parse(v, now: BusClock.wallMilliseconds()) } catch { throw .init("--since: \(error)") }
        }
    }

    /// Whether the line `doc` holds (prepared, its time `time`) is at or after `since`: by seq,
    /// each envelope on its own; by time, once one line is, every later line is (`reached`).
    private func atOrAfterSince(_ doc: JSONDocument, time: Int64?, reached: inout Bool) -> Bool {
        if reached { return true }
        switch since {
        case nil: reached = true
        case .seq(let from)?:
            // Each recorded envelope by its own seq (a recording of several shards interleaves
            // their seqs); a raw line has none and is sent.
            guard let t = doc.member(doc.root, "seq"), let seq = doc.int64(t) else { return true }
            return seq >= from
        case .time(let from)?:
            reached = (time ?? .min) >= from
        }
        return reached
    }

    package func run() -> Int32 {
        let fd = open(file, O_RDONLY)
        guard fd >= 0 else {
            FileHandleWriter.standardError("checkoutbus replay: cannot open \(file): \(String(cString: strerror(errno)))\n")
            return 1
        }
        defer { close(fd) }
        let stop = StopSignal()
        if loop { stop.trapTerminationSignals() }
        // Looping without rewriting would send the same event ids again, which the daemon drops.
        let copiesPerPass = copies ?? (loop ? 1 : 0)
        do {
            let pushers = try (0..<connections).map { _ in try IngestPusher(endpoint: endpoint, timeoutSeconds: 10, curve: curve) }
            let doc = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
            var out = JSONWriter(capacity: 4096)
            var copy: [UInt8] = []
            var sent = 0
            var skipped = 0
            var beforeSince = 0
            var pass = 0
            passes: repeat {
                guard lseek(fd, 0, SEEK_SET) == 0 else { throw ToolError("cannot read \(file) again: not a regular file") }
                let reader = LineReader(fd: fd, name: file)
                var firstTime: Int64?
                var reached = false
                let start = BusClock.monotonicNanoseconds()
                while let line = try reader.nextLine() {
                    if stop.isRaised { break passes }
                    if LineReader.isBlank(line) { continue }
                    let template = copiesPerPass > 0 ? RecordedIDRewriter.template(line) : nil
                    for c in 0..<max(1, copiesPerPass) {
                        var raw = line
                        if let template {
                            RecordedIDRewriter.render(template, copy: pass * copiesPerPass + c, into: &copy)
                            raw = copy
                        }
                        guard let (payload, time) = prepare(raw, doc: doc, out: &out) else {
                            if c == 0 { skipped += 1 }
                            break
                        }
                        // The document points into `raw`'s bytes, read again under the same borrow.
                        if c == 0 && !raw.withUnsafeBytes({ _ in atOrAfterSince(doc, time: time, reached: &reached) }) {
                            beforeSince += 1
                            break
                        }
                        if c == 0 && !flatOut, let t = time {
                            if let t0 = firstTime {
                                let due = start + UInt64(max(0, Double(t - t0) * 1_000_000 / speed))
                                let now = BusClock.monotonicNanoseconds()
                                if due > now { usleep(UInt32(min((due - now) / 1000, 60_000_000))) }
                            } else {
                                firstTime = t
                            }
                        }
                        let pusher = pushers[c % pushers.count]
                        guard try pusher.send(payload) else {
                            FileHandleWriter.standardError(pusher.unreachable(command: "replay", sent: sent))
                            return 1
                        }
                        sent += 1
                    }
                }
                pass += 1
            } while loop && !stop.isRaised
            FileHandleWriter.standardError("sent=\(sent) skipped=\(skipped)" + (since == nil ? "" : " before_since=\(beforeSince)") + "\n")
            return stop.isRaised ? ToolExit.interrupted : 0
        } catch {
            FileHandleWriter.standardError("checkoutbus replay: \(error)\n")
            return 1
        }
    }

    /// What to send for one recorded line and its time (ms since the epoch, when it has one), or
    /// nil for a line to skip (a heartbeat or dead letter in a recording of envelopes).
    private func prepare(_ line: [UInt8], doc: JSONDocument, out: inout JSONWriter) -> ([UInt8], Int64?)? {
        let parsed: Bool = line.withUnsafeBytes { buf in
            guard (try? doc.parse(buf)) != nil, doc.kind(doc.root) == .object else { return false }
            return true
        }
        guard parsed else { return (line, nil) }
        let isEnvelope = line.withUnsafeBytes { _ in doc.member(doc.root, "seq") != nil && doc.member(doc.root, "v") != nil }
        if isEnvelope {
            let kind = doc.member(doc.root, "kind").flatMap { doc.string($0) } ?? ""
            guard LifecycleKind.allCases.contains(where: { String(describing: $0.name) == kind }) else { return nil }
            let time = doc.member(doc.root, "received_at").flatMap { ReplayCommand.milliseconds(doc, $0) }
            line.withUnsafeBytes { _ in ReplayCommand.rawEvent(from: doc, kind: kind, into: &out) }
            return (out.bytes, time)
        }
        return (line, doc.member(doc.root, anyOf: "occurred_at", "occurredAt").flatMap { ReplayCommand.milliseconds(doc, $0) })
    }

    /// An envelope turned back into a raw event of the family it came in (`source.format`), with
    /// its platform's own event names, so a replayed flood exercises the decoders real traffic
    /// does (docs/commands.md, "replay"):
    /// - `ecp`: a JSON-RPC `ec.start`, `ec.update`, `ec.complete` (`params.checkout`) or `ec.error`
    ///   (`params.error`);
    /// - `sheet_bridge`: `{"name":"started"|"completed","body":"<the snapshot as a JSON string>"}`,
    ///   `{"name":"error","body":"[<the error>]"}`, `{"name":"close","body":""}`;
    /// - `primer`: the platform's callback names (`primerDidCompleteCheckoutWithData`, `onFailed`,
    ///   `success`, …) with `paymentResult` / `error` (`errorId`, `description`);
    /// - `callback`: the platform's names (`checkoutDidComplete` on iOS, `onCheckoutCompleted` on
    ///   Android, `onComplete` in React Native) with `checkout` / `error`.
    /// A kind a family has no form for (an update on the bridge, a dismissal in ECP) goes as a
    /// callback of the same platform. Which of a platform's several spellings the original used is
    /// not in the envelope; the first is taken.
    package static func rawEvent(from doc: JSONDocument, kind: String, into w: inout JSONWriter) {
        let r = doc.root
        w.reset()
        w.append("{\"replayed\":true")
        func copy(_ name: StaticString, _ value: Int?) {
            guard let value, doc.kind(value) != .null else { return }
            w.append(",\"")
            w.append(name)
            w.append("\":")
            w.appendRaw(doc.raw(value))
        }
        copy("checkout_id", doc.member(r, "checkout_id"))
        copy("event_id", doc.member(r, "event_id"))
        copy("occurred_at", doc.member(r, "occurred_at"))
        let source = doc.object(r, "source")
        copy("sdk", source.flatMap { doc.member($0, "sdk") })
        copy("platform", source.flatMap { doc.member($0, "platform") })
        let format = source.flatMap { doc.member($0, "format") }.flatMap { doc.string($0) } ?? "callback"
        // No platform in the original: names that imply none (`onStart`, Primer's `success`).
        let platform = source.flatMap { doc.member($0, "platform") }.flatMap { doc.string($0) }
        // Primer's own callback shapes only for the Primer family: a wrapper's callback event of a
        // Primer checkout (Banxa's `completed`) stays a callback.
        let isPrimer = format == "primer"
        let checkout = doc.member(r, "checkout").flatMap { doc.kind($0) == .object ? $0 : nil }
        let error = doc.object(r, "error")
        /// The envelope's error as the family writes one, so that it decodes to the same stable code,
        /// raw code, status, continue URL and terminal-ness: the raw code under `codeKey` (none when
        /// the original had none), and the stable code as a `group` when the raw code alone would not
        /// give it (an SDK group, an operator's mapping, a message that named the cause).
        func writeError(codeKey: StaticString, messageKey: StaticString) {
            guard let e = error else { w.append("{}"); return }
            let raw = doc.member(e, "raw_code").flatMap { doc.kind($0) == .string ? doc.string($0) : nil }
            let stable = doc.member(e, "code").flatMap { doc.string($0) } ?? "unknown"
            let status = doc.member(e, "http_status").flatMap { doc.kind($0) == .null ? nil : doc.int64($0) }.map { Int($0) }
            var first = true
            func key(_ k: StaticString) {
                w.append(first ? "{\"" : ",\"")
                first = false
                w.append(k)
                w.append("\":")
            }
            if let raw {
                key(codeKey)
                w.appendString(raw)
            }
            // Without a raw code the original's code came from its message (written below, read
            // again the same way) or from a group: a group then, only when there is no message.
            let message = doc.member(e, "message").flatMap { doc.kind($0) == .null ? nil : $0 }
            if stable != "unknown", raw != nil || message == nil,
                ErrorCodeNormalizer.normalize(rawCode: raw, httpStatus: status).rawValue != stable
            {
                key("group")
                w.appendString(stable)
            }
            if let m = doc.member(e, "message"), doc.kind(m) != .null {
                key(messageKey)
                w.appendRaw(doc.raw(m))
            }
            if let status {
                key("http_status")
                w.append(int: status)
            }
            if let u = doc.member(e, "continue_url"), doc.kind(u) != .null {
                key("continue_url")
                w.appendRaw(doc.raw(u))
            }
            if let t = doc.member(e, "terminal"), doc.kind(t) == .false {
                key("recoverable")
                w.append("true")
            }
            if first { w.append("{") }
            w.append("}")
        }
        let terminal = error.flatMap { doc.member($0, "terminal") }.map { doc.kind($0) == .true } ?? false
        w.append(",\"payload\":")
        switch (format, kind) {
        case ("ecp", "start"), ("ecp", "update"), ("ecp", "complete"):
            w.append("{\"jsonrpc\":\"2.0\",\"method\":")
            w.appendString(kind == "start" ? "ec.start" : kind == "update" ? "ec.update" : "ec.complete")
            w.append(",\"params\":{")
            if let checkout {
                w.append("\"checkout\":")
                w.appendRaw(doc.raw(checkout))
            }
            w.append("}}}")
            return
        case ("ecp", "fail"):
            w.append("{\"jsonrpc\":\"2.0\",\"method\":\"ec.error\",\"params\":{\"error\":")
            writeError(codeKey: "code", messageKey: "message")
            if let checkout {
                w.append(",\"checkout\":")
                w.appendRaw(doc.raw(checkout))
            }
            w.append("}}}")
            return
        case ("sheet_bridge", "start") where checkout == nil, ("sheet_bridge", "complete") where checkout == nil:
            // No snapshot (a bridge message whose body the kit could not read): the kit's JSON-RPC
            // form carries none, where `"body":"{}"` would come back as an empty snapshot.
            w.append("{\"jsonrpc\":\"2.0\",\"method\":")
            w.appendString(kind == "start" ? "checkout.start" : "checkout.complete")
            w.append(",\"params\":{}}}")
            return
        case ("sheet_bridge", "start"), ("sheet_bridge", "complete"):
            w.append("{\"name\":")
            w.appendString(kind == "start" ? "started" : "completed")
            w.append(",\"body\":")
            // The snapshot as a JSON string, as the bridge's web side posts it.
            w.appendString(utf8: doc.raw(checkout!))
            w.append("}}")
            return
        case ("sheet_bridge", "fail") where error.map({ e in
            doc.member(e, "raw_code").map { doc.kind($0) == .null } ?? true
                && doc.member(e, "message").map { doc.kind($0) == .null } ?? true
                && doc.member(e, "code").map { doc.stringEquals($0, "cart_expired") } ?? false
        }) ?? false:
            // The bridge's bare `error` (no body): the kit reads it as an expired checkout.
            w.append("{\"name\":\"error\"}}")
            return
        case ("sheet_bridge", "fail"):
            var inner = JSONWriter(capacity: 256)
            swap(&w, &inner)
            w.append("[")
            writeError(codeKey: "code", messageKey: "message")
            w.append("]")
            swap(&w, &inner)
            w.append("{\"name\":\"error\",\"body\":")
            inner.bytes.withUnsafeBytes { w.appendString(utf8: $0) }
            w.append("}}")
            return
        case ("sheet_bridge", "dismiss"):
            w.append("{\"name\":\"close\",\"body\":\"\"}}")
            return
        default:
            break
        }
        w.append("{\"event\":")
        if isPrimer, kind != "start", kind != "update" {
            let names = platform.flatMap { RawSpellings.primerNames[$0] } ?? RawSpellings.primerNames["react_native"]!
            w.appendString(kind == "complete" ? names.complete : kind == "fail" ? names.fail : names.dismiss)
        } else {
            let neutral = ["onStart", "onUpdate", "onComplete", "onFail", "onDismiss"]
            let names = platform.flatMap { p in RawSpellings.callbackSpellings.first { $0.platform == p }?.names } ?? neutral
            let index = ["start": 0, "update": 1, "complete": 2, "fail": 3, "dismiss": 4][kind] ?? 1
            w.appendString(names[index])
        }
        if let checkout {
            w.append(",\"checkout\":")
            w.appendRaw(doc.raw(checkout))
        }
        if let p = doc.member(r, "payment"), doc.kind(p) == .object {
            w.append(",\"paymentResult\":")
            w.appendRaw(doc.raw(p))
        }
        // An order id the original carried beside its snapshot (a wrapper's `orderId`, `data.orderId`,
        // a printed Primer failure's `orderId:`).
        if kind == "complete" || kind == "fail", checkout == nil, let summary = doc.object(r, "summary"),
            let order = doc.member(summary, "order_id"), doc.kind(order) == .string
        {
            w.append(",\"orderId\":")
            w.appendRaw(doc.raw(order))
        }
        if let e = error {
            w.append(",\"error\":")
            let rawCode = doc.member(e, "raw_code").flatMap { doc.kind($0) == .string ? doc.string($0) : nil }
            let message = doc.member(e, "message").flatMap { doc.kind($0) == .string ? $0 : nil }
            if isPrimer, rawCode == nil, let message {
                // A Primer error read from its text alone (a printed `PrimerError` case): the text
                // again, as the bare string it is read from.
                w.appendRaw(doc.raw(message))
            } else if isPrimer {
                writeError(codeKey: "errorId", messageKey: "description")
            } else {
                writeError(codeKey: "code", messageKey: "message")
            }
            // Primer says a failure ends the payment on the event, not in its error.
            if isPrimer && terminal { w.append(",\"terminal\":true") }
        }
        w.append("}}")
    }

    /// Milliseconds since the epoch from RFC 3339 text (`2026-12-02T11:50:08.948Z`, offsets allowed)
    /// or a number of epoch milliseconds.
    package static func milliseconds(_ doc: JSONDocument, _ t: Int) -> Int64? {
        if doc.kind(t) == .number { return doc.int64(t) }
        guard let s = doc.string(t) else { return nil }
        // Without a zone, UTC (as the recordings of older tools wrote it).
        return JournalPosition.milliseconds(rfc3339: s) ?? JournalPosition.milliseconds(rfc3339: s + "Z")
    }
}
