#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusClient
import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusDaemon
import CheckoutBusRuntime
import ZeroMQ
import CheckoutBusProtocol

/// `checkoutbus trace CHECKOUT_ID`: everything the journal holds about one checkout, in `seq`
/// order, and a one-line verdict.
///
/// It pages through the owning shard's journal over the control socket (`replay` from the first
/// retained `seq`, topics `checkout.` and `bus.deadletter`, `checkout_id`: the daemon sends only
/// that checkout's envelopes) and checks each one names the checkout (an older daemon sends all);
/// with several shards only the owner (``ShardMap/owner(of:count:)``) is asked. With
/// `--data-dir` it also reads the suppressed-id log there, to count the identical updates
/// suppressed between published envelopes. Not `Sendable`; runs on the calling thread.
package struct TraceCommand {
    static let control = BusOptions.controlShards.described(
        "the daemon's --control endpoint; for several shards, every shard's, comma-separated, in shard order: "
            + "only the shard owning the checkout is asked")
    static let format = BusOptions.format(
        "pretty: one line per envelope and a verdict; json: one JSON object {\"checkout_id\",…,\"events\":[…],\"verdict\":…}")
    static let timeout = BusOptions.timeout(10, "give up when the daemon does not answer a page")
    static let dataDirectory = CommandOption(
        "data-dir", "DIR",
        help: "the daemon's data directory, when on its host: also count the identical updates suppressed between "
            + "envelopes (from DIR/suppressed.log; updates with an event id)")

    package static let spec = CommandSpec(
        "checkoutbus trace", summary: "everything the bus's journal holds about one checkout, in order, and a verdict.",
        operands: "CHECKOUT_ID",
        operandHelp: [.init("CHECKOUT_ID", "the checkout_id as published (e.g. gid://shopify/Checkout/abc)")],
        options: [control, format, timeout, dataDirectory] + CurveClientKeys.options,
        notes: """
            Every published envelope of the checkout is shown (seq, received_at, kind, summary, stable code,
            repeat, after_complete) and the dead letters that named it. A producer's retry of an event id is
            absorbed by the daemon and is not in the journal. Reads the whole retained journal: see
            docs/commands.md for its cost.

            Exit status: 0 when the journal holds something about the checkout, 1 when it holds nothing,
            2 for a usage error, 3 when the journal could not be read (no answer, wrong shard, an error).
            """)
    package static var help: String { spec.help }

    package enum Format: Sendable { case pretty, json }

    package var checkoutID: String
    package var controls: [String]
    package var format: Format
    package var timeoutSeconds: Int
    package var dataDirectory: String?
    package var curve: CurveClientKeys?

    package init(arguments: [String]) throws(CommandLineArguments.UsageError) {
        let args = try Self.spec.parse(arguments)
        curve = try CurveClientKeys.parse(args)
        guard args.positionals.count == 1, !args.positionals[0].isEmpty else {
            throw .init("trace needs exactly one CHECKOUT_ID")
        }
        checkoutID = args.positionals[0]
        // The daemon's control socket takes requests of at most 64 KiB and drops a larger one
        // unanswered: refused here, rather than a 10 s wait for "no answer".
        guard TraceCommand.replayRequest(from: 1, checkoutID: checkoutID).count <= ControlServer.maxRequestBytes else {
            throw .init("the checkout id is \(checkoutID.utf8.count) bytes: a request for it would pass the control "
                        + "socket's 64 KiB limit")
        }
        controls = try BusOptions.endpoints(args, Self.control)
        format = try args.choice(Self.format, ["pretty": .pretty, "json": .json])
        timeoutSeconds = try args.int(Self.timeout, in: 1...3600)
        dataDirectory = args.value(Self.dataDirectory)
    }

    /// The request for a page of the checkout's envelopes and dead letters from `from`.
    static func replayRequest(from: Int64, checkoutID: String) -> [UInt8] {
        ControlRequestWire.replay(from: from, prefixes: ["checkout.", "bus.deadletter"], limit: 10000,
                                  checkoutID: checkoutID)
    }

    /// What went wrong reading the journal (exit status 3).
    package struct TraceError: Error, CustomStringConvertible {
        package var description: String
    }

    /// - Returns: the process exit code.
    package func run() -> Int32 {
        let shard = ShardMap.owner(of: checkoutID, count: controls.count)
        let story: CheckoutStory
        do {
            story = try read(shard: shard)
        } catch {
            FileHandleWriter.standardError("checkoutbus trace: \(error)\n")
            return 3
        }
        switch format {
        case .pretty: FileHandleWriter.standardOutput(story.pretty())
        case .json: FileHandleWriter.standardOutput(story.json() + "\n")
        }
        return story.entries.isEmpty ? 1 : 0
    }

    /// Pages through the shard's journal and keeps what names the checkout.
    package func read(shard: Int) throws -> CheckoutStory {
        let context = try ZMQContext()
        let dealer = try ZMQSocket(context: context, type: .dealer)
        try dealer.setLinger(milliseconds: 0)
        try dealer.setOption(.receiveTimeout, Int32(timeoutSeconds * 1000))
        try curve?.apply(to: dealer)
        try dealer.connect(controls[shard])

        var story = CheckoutStory(checkoutID: checkoutID, shard: shard, shards: controls.count)
        let doc = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)
        let needle = TraceCommand.literal(checkoutID)
        var from: Int64 = 1
        // Pages answered `busy` in a row (docs/durability.md: the daemon's control replies at their
        // bound), and since when: asked again after 20 ms, doubling to 1 s, for up to --timeout.
        var busy = 0
        var busySince: UInt64 = 0
        while true {
            _ = try dealer.send(TraceCommand.replayRequest(from: from, checkoutID: checkoutID))
            guard let frames = try dealer.receiveMultipart(), let head = frames.first else {
                let why = curve == nil ? "" : CurveClientKeys.refusalHint
                throw TraceError(description: "no answer from \(controls[shard]) within \(timeoutSeconds)s\(why)")
            }
            let page = try TraceCommand.pageHead(head, doc: doc)
            if let error = page.error {
                if error == "not_retained", let first = page.firstSeq, first > from {
                    from = first
                    continue
                }
                if error == "busy" {
                    let now = BusClock.monotonicNanoseconds()
                    if busy == 0 { busySince = now }
                    if now - busySince < UInt64(timeoutSeconds * 1_000_000_000) {
                        usleep(UInt32(min(1_000_000, 20_000 << min(busy, 6))))
                        busy += 1
                        continue
                    }
                }
                throw TraceError(description: "\(controls[shard]) answered \(String(decoding: head, as: UTF8.self))")
            }
            busy = 0
            guard page.shard == shard, page.shards == controls.count else {
                throw TraceError(description: "\(controls[shard]) is shard \(page.shard)/\(page.shards), "
                                 + "not \(shard)/\(controls.count): "
                                 + "list every shard's control endpoint, in shard order")
            }
            if story.firstSeq == nil { story.firstSeq = page.firstSeq ?? from }
            story.lastSeq = page.lastSeq
            var i = 1
            while i + 1 < frames.count {
                let envelope = frames[i + 1]
                if TraceCommand.contains(envelope, needle),
                    let entry = TraceEntry(envelope: envelope, checkoutID: checkoutID, doc: doc) {
                    story.entries.append(entry)
                }
                i += 2
            }
            if page.next > page.lastSeq { break }
            // A page that does not move on would be asked for again for ever.
            guard page.next > from else {
                throw TraceError(description: "\(controls[shard]) answered a replay from \(from) that made no progress "
                                 + "(next \(page.next), last_seq \(page.lastSeq))")
            }
            from = page.next
        }
        if let dataDirectory {
            story.suppressedSeqs = try TraceCommand.suppressedSeqs(checkoutID: checkoutID, dataDirectory: dataDirectory)
        }
        return story
    }

    /// The fields of a replay reply's first frame that paging needs.
    package struct PageHead {
        var error: String?
        var shard = 0
        var shards = 1
        var next: Int64 = 0
        var firstSeq: Int64?
        var lastSeq: Int64 = 0
    }

    package static func pageHead(_ head: [UInt8], doc: JSONDocument) throws -> PageHead {
        try head.withUnsafeBytes { buf throws -> PageHead in
            do throws(JSONParseError) { try doc.parse(buf) } catch {
                throw TraceError(description: "the daemon's reply is not JSON: \(error)")
            }
            let r = doc.root
            var page = PageHead()
            func int(_ key: StaticString) -> Int64? { doc.member(r, key).flatMap { doc.int64($0) } }
            if let ok = doc.member(r, "ok"), doc.bool(ok) != true {
                page.error = doc.member(r, "error").flatMap { doc.string($0) } ?? "error"
            }
            page.shard = Int(int("shard") ?? 0)
            page.shards = Int(int("shards") ?? 1)
            page.next = int("next") ?? 0
            page.firstSeq = int("first_seq")
            page.lastSeq = int("last_seq") ?? 0
            return page
        }
    }

    /// The checkout id as it appears inside a JSON string: its bytes, or nil (no quick check) when
    /// it holds a character JSON may escape.
    package static func literal(_ id: String) -> [UInt8]? {
        let bytes = Array(id.utf8)
        let escaped = bytes.contains { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        return escaped ? nil : bytes
    }

    /// A cheap filter before parsing: whether the envelope holds the id's bytes at all.
    package static func contains(_ envelope: [UInt8], _ needle: [UInt8]?) -> Bool {
        guard let needle, !needle.isEmpty else { return true }
        return envelope.withUnsafeBytes { hay -> Bool in
            needle.withUnsafeBytes { n -> Bool in
                guard let base = hay.baseAddress, let pattern = n.baseAddress, hay.count >= n.count else {
                    return false
                }
                let last = hay.count - n.count
                var i = 0
                while i <= last {
                    guard let found = memchr(base + i, Int32(n[0]), last - i + 1) else { return false }
                    if memcmp(found, pattern, n.count) == 0 { return true }
                    i = base.distance(to: UnsafeRawPointer(found)) + 1
                }
                return false
            }
        }
    }

    /// The journal seq each suppressed update of the checkout followed, from the data directory's
    /// suppressed-id log (`suppressed.log.1`, then `suppressed.log`).
    /// - Throws: ``TraceError`` when a log file exists and cannot be read (asked for with
    ///   `--data-dir`, counts from part of it would be wrong, not missing).
    package static func suppressedSeqs(checkoutID: String, dataDirectory: String) throws -> [Int64] {
        let path = dataDirectory + "/suppressed.log"
        var seqs: [Int64] = []
        for file in [path + ".1", path] {
            let contents: SuppressedLog.Contents
            do { contents = try SuppressedLog.readFile(file) } catch { throw TraceError(description: error.description) }
            for entry in contents.entries where entry.checkoutID == checkoutID {
                seqs.append(Int64(entry.seq))
            }
        }
        return seqs
    }
}
