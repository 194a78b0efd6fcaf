import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import SQLite

/// The analytics worker's flags: the shared ``WorkerOptions`` and its own. `Sendable`.
package struct AnalyticsOptions: Sendable {
    package var worker = WorkerOptions(name: "checkoutbus-analytics")
    /// The checkpoint file: the funnel and its `seq` (`--cursor`). Without it the worker counts the
    /// whole retained journal and then live, in memory only.
    package var cursorPath: String?
    /// Where the JSON report is written on every interval and on exit (`--report`).
    package var reportPath: String?
    /// Seconds between summaries, reports and checkpoints (`--interval`).
    package var intervalSeconds = 10
    /// A checkpoint after at most this many envelopes as well (`--checkpoint-events`).
    package var checkpointEvents = 10_000
    /// Checkouts remembered for abandonment and time to complete (`--max-checkouts`).
    package var maxCheckouts = 100_000

    package init() {}

    static let cursor = CommandOption(
        "cursor", "PATH",
        help: "checkpoint file: the whole funnel and the seq it matches, replaced atomically; restarted (even after "
            + "kill -9) the worker resumes from it and counts each envelope exactly once. Without it: counts the whole "
            + "retained journal, then live, in memory")
    static let report = CommandOption("report", "PATH", help: "write the funnel as JSON here every interval and on exit")
    static let interval = CommandOption(
        "interval", "SECONDS", help: "summary on stderr, report and checkpoint this often",
        default: String(AnalyticsOptions().intervalSeconds))
    static let checkpointEvents = CommandOption(
        "checkpoint-events", "N", help: "checkpoint after at most N envelopes as well",
        default: String(AnalyticsOptions().checkpointEvents))
    static let maxCheckouts = CommandOption(
        "max-checkouts", "N", help: "checkouts remembered for abandonment and time to complete, least recently seen forgotten first",
        default: String(AnalyticsOptions().maxCheckouts))

    package static let spec = CommandSpec(
        "checkoutbus-analytics", summary: "the checkout funnel, failures by code and revenue by currency, from the bus.",
        groups: [.init(nil, [cursor, report, interval, checkpointEvents, maxCheckouts])]
            + WorkerOptions.options(name: AnalyticsOptions().worker.name),
        notes: """
            Prints `analytics: subscribed` on stderr once its subscriptions are live, a summary line every
            interval and on exit. SIGTERM/SIGINT: checkpoint, report, summary, exit 0.
            """)
    package static var help: String { spec.help }

    /// Parses the command line (without the program name).
    /// - Throws: a usage error naming the bad flag.
    package static func parse(_ arguments: [String]) throws(CommandLineArguments.UsageError) -> AnalyticsOptions {
        let args = try spec.parse(arguments)
        guard args.positionals.isEmpty else { throw .init("unexpected argument \(args.positionals[0])") }
        var o = AnalyticsOptions()
        try WorkerOptions.parse(args, into: &o.worker)
        if let v = args.value(cursor) {
            guard !v.isEmpty else { throw .init("--cursor needs a path") }
            // Its links resolved: a link to a checkpoint is that checkpoint, under one lock (two
            // workers on the two names both ran), and stays a link when the checkpoint is rewritten.
            o.cursorPath = AtomicFile.resolved(v)
        }
        if let v = args.value(report) {
            guard !v.isEmpty else { throw .init("--report needs a path") }
            o.reportPath = v
        }
        o.intervalSeconds = try args.int(interval, in: 1...86_400)
        o.checkpointEvents = try args.int(checkpointEvents, in: 1...100_000_000)
        o.maxCheckouts = try args.int(maxCheckouts, in: 1...50_000_000)
        return o
    }

}

/// The analytics worker: the async ``Subscriber`` (one daemon, or every shard) on every lifecycle
/// kind and dead letters, feeding an ``AnalyticsFunnel``, checkpointed with its `seq` per shard
/// (``AnalyticsCheckpoint``) so that every envelope is counted exactly once across restarts and
/// `kill -9`.
///
/// **Exactly once.** The funnel holds each shard's `seq` with its counts; the checkpoint file holds
/// both together. Each envelope is applied to the funnel, a checkpoint is written when one is due
/// (the durable write), and only then is the envelope committed to the subscriber, whose cursors
/// live in memory and start from the checkpoint's positions. Restarted, the worker loads the
/// checkpoint and the subscriber replays from `seq + 1`: what was counted after the last
/// checkpoint was lost with the process, and is counted again — once.
///
/// Summaries, reports and time-based checkpoints come due by time: a ticker task looks four times
/// a second (a quiet bus still gets its summary), and each handled envelope looks too.
///
/// `Sendable` (an actor): the funnel is touched only on the actor, by the loop over the envelopes
/// and by the ticker, never at once.
package actor AnalyticsWorker {
    package let options: AnalyticsOptions
    package let logger: BusLogger
    package private(set) var funnel: AnalyticsFunnel

    private var lastCheckpointSeqs: [Int64] = []
    private var eventsSinceCheckpoint = 0
    private var nextTick: UInt64 = 0

    package init(options: AnalyticsOptions, logger: BusLogger) {
        self.options = options
        self.logger = logger
        funnel = AnalyticsFunnel(maxCheckouts: options.maxCheckouts, shards: options.worker.shardCount)
    }

    /// Loads the checkpoint, follows the bus until the calling task is cancelled, then checkpoints,
    /// reports and prints the summary.
    /// - Throws: ``AnalyticsError`` for an unreadable checkpoint or a failed last write, or what the
    ///   subscriber throws (a refused replay, a libzmq error).
    package func run() async throws {
        let shardCount = options.worker.shardCount
        // Held while the worker runs (PATH.lock): checkoutbus cursor set refuses to move the
        // checkpoint's positions under it, and a second worker refuses the same checkpoint.
        var checkpointLock: PositionLock?
        if let path = options.cursorPath {
            do {
                checkpointLock = try PositionLock(path: AnalyticsCheckpoint.lockPath(path), what: "the analytics checkpoint", waitMilliseconds: 10_000)
            } catch {
                throw AnalyticsError(error.description + (error.held ? ": another checkoutbus-analytics, or checkoutbus cursor set" : ""))
            }
        }
        defer { withExtendedLifetime(checkpointLock) {} }
        if let path = options.cursorPath, let loaded = try AnalyticsCheckpoint.load(path: path, maxCheckouts: options.maxCheckouts) {
            // A position means something only in its shard's journal, and another shard count is
            // another generation of journals, each from seq 1: one daemon's checkpoint (or one from
            // before shards) is not shard 0's of N.
            guard loaded.shardSeqs.count == shardCount else {
                let held = loaded.shardSeqs.count
                throw AnalyticsError("this checkpoint is for \(held) shard\(held == 1 ? "" : "s") (\(path)) but --from lists "
                                     + "\(shardCount): its positions belong to another generation's journals; "
                                     + "start a new cursor (another --cursor path, or move this one away)")
            }
            funnel = loaded
            lastCheckpointSeqs = loaded.shardSeqs
            logger.info("resuming from checkpoint", ["path": path, "seq": loaded.shardSeqs.map(String.init).joined(separator: ","),
                                                     "events": String(loaded.counters.events)])
        }
        let subscriber = Subscriber(
            shards: options.worker.shardSubscriberOptions(prefixes: ["checkout.", "bus.deadletter"]),
            cursors: funnel.shardSeqs.map { MemoryCursor(seq: $0, keepsPosition: true) as any SubscriberCursor },
            logger: BusLogger(label: "analytics-subscriber", level: options.worker.logLevel),
            onSubscribed: { FileHandleWriter.standardError("analytics: subscribed\n") })
        nextTick = BusClock.monotonicNanoseconds() + intervalNanoseconds
        let ticker = Task { [weak self] in
            while (try? await Task.sleep(for: .milliseconds(250))) != nil { await self?.tickIfDue() }
        }
        var failure: (any Error)?
        do {
            for try await envelope in subscriber.envelopes {
                // With one daemon every envelope advances position 0, whichever shard that daemon is.
                funnel.apply(envelope.raw, shard: shardCount == 1 ? 0 : envelope.shard)
                counted()
                do {
                    try await subscriber.commit(envelope)
                } catch {
                    // Not a clean stop: the daemon shows it as a crash (docs/observability.md). Said
                    // before the loop is left, whose end stops the subscriber's thread.
                    subscriber.abandon()
                    throw error
                }
            }
        } catch {
            failure = error
        }
        ticker.cancel()
        await ticker.value
        if let failure { logger.error("subscriber stopped", ["error": "\(failure)"]) }
        // What was counted matches funnel.shardSeqs (applying never throws), so it is kept either way.
        try finish()
        let s = subscriber.statistics
        logger.info("stopped", ["handled": String(s.handled), "from_journal": String(s.fromJournal),
                                "missed": String(s.missed), "recovered": String(s.recovered), "not_retained": String(s.notRetained),
                                "last_seq": funnel.shardSeqs.map(String.init).joined(separator: ",")])
        if let failure { throw failure }
    }

    private var intervalNanoseconds: UInt64 { UInt64(options.intervalSeconds) * 1_000_000_000 }

    /// After each envelope applied to the funnel: a checkpoint every N envelopes, and the interval's.
    private func counted() {
        eventsSinceCheckpoint += 1
        if eventsSinceCheckpoint >= options.checkpointEvents {
            do { try checkpoint() } catch { logger.error("checkpoint failed; counting on, retrying later", ["error": "\(error)"]) }
        }
        tickIfDue()
    }

    /// The summary, checkpoint and report, once per interval. A failed write (a full disk) is
    /// logged and retried at the next one: the checkpoint on disk stays the previous complete one,
    /// so a crash meanwhile only means more to replay. Only the last one, on exit, throws.
    private func tickIfDue() {
        let now = BusClock.monotonicNanoseconds()
        guard now >= nextTick else { return }
        nextTick = now + intervalNanoseconds
        FileHandleWriter.standardError(AnalyticsReport.summaryLine(funnel) + "\n")
        do {
            try checkpoint()
            try writeReport()
        } catch {
            logger.error("checkpoint or report failed; retrying at the next interval", ["error": "\(error)"])
        }
    }

    private func finish() throws {
        var failure: (any Error)?
        do { try checkpoint() } catch { failure = error }
        do { try writeReport() } catch { failure = failure ?? error }
        FileHandleWriter.standardError(AnalyticsReport.summaryLine(funnel) + "\n")
        if let failure { throw failure }
    }

    private func checkpoint() throws {
        eventsSinceCheckpoint = 0
        guard let path = options.cursorPath, funnel.shardSeqs != lastCheckpointSeqs else { return }
        // Nothing counted and no checkpoint yet (a refused shard list, say): no file, so the
        // corrected command starts clean instead of meeting a checkpoint for the wrong shards.
        if lastCheckpointSeqs.isEmpty && funnel.shardSeqs.allSatisfy({ $0 == 0 }) { return }
        try AnalyticsCheckpoint.save(funnel, to: path)
        lastCheckpointSeqs = funnel.shardSeqs
    }

    private func writeReport() throws {
        guard let path = options.reportPath else { return }
        do {
            try AtomicFile.write(AnalyticsReport.encode(funnel, generatedAt: Timestamp(milliseconds: BusClock.wallMilliseconds())), to: path, durable: false)
        } catch {
            throw AnalyticsError(error.description)
        }
    }
}
