#if canImport(Glibc)
import Glibc
#endif
import SQLite
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus-fulfil`: records every placed order exactly once in a SQLite file.
///
/// Subscribes to `checkout.complete` and `checkout.fail` through the async ``Subscriber`` (one or
/// several shards). Each envelope is applied in one SQLite transaction together with its shard's
/// cursor (the last handled `seq` of that shard), and committed to the subscriber only after that
/// transaction, so a crash at any point leaves the order rows and the cursors consistent: on
/// restart each shard replays from its cursor, and every order is neither lost nor doubled.
///
/// The cursors are rows of `subscriber_cursor`: ``cursorName(shard:of:)`` is `fulfil` for a
/// single daemon (as in stores made before shards) and `fulfil.I-of-N` for shard `I` of `N`.
///
/// - A first `complete` inserts a row keyed by `idempotency_key`.
/// - A repeated `complete` (or the same one replayed) only raises `last_seen_seq`.
/// - A `fail` with `after_complete` notes it on the order (`failed_after_complete`, `last_fail_code`)
///   and never undoes it; other failures are not orders and change nothing but the cursor.
/// - An envelope it cannot apply — not a JSON object, a `complete` without `idempotency_key` or
///   `checkout_id`, a `fail` with `after_complete` without `idempotency_key` — is parked in table
///   `rejected` (``RejectionReason``) in the same transaction as the cursor move, and logged as an
///   error: the cursor never passes an envelope that left no trace.
///
/// Not `Sendable`: ``run(onSubscribed:)`` uses its SQLite connection from the calling task only (the
/// subscriber's poll thread never touches it).
package final class FulfilmentWorker {
    package struct Options: Sendable {
        package var worker: WorkerOptions
        /// The SQLite file (`--db`).
        package var databasePath = "./orders.sqlite"
        /// `synchronous=FULL` (`--sync full`) instead of NORMAL. NORMAL is exactly-once already:
        /// the order and cursor roll back together and the journal replays them (docs/workers.md).
        package var fullSync = false

        package init(worker: WorkerOptions) { self.worker = worker }
    }

    /// What the worker has done since it started.
    package struct Counts: Sendable {
        package var handled = 0
        package var ordersInserted = 0
        package var repeats = 0
        package var failsAfterComplete = 0
        package var otherFails = 0
        /// Envelopes parked in table `rejected` instead of applied.
        package var rejected = 0
    }

    /// Why an envelope was parked in table `rejected` (its `reason` column). `Sendable`.
    ///
    /// A struct, so reasons can be added without breaking a `switch`: compare with the `static let`s.
    package struct RejectionReason: Hashable, Sendable, CustomStringConvertible {
        package let description: String
        private init(_ description: String) { self.description = description }

        /// Not JSON, or JSON that is not an object.
        package static let unreadable = RejectionReason("unreadable")
        /// A `complete`, or a `fail` with `after_complete`, without a non-empty string `idempotency_key`.
        package static let missingIdempotencyKey = RejectionReason("missing_idempotency_key")
        /// A `complete` without a non-empty string `checkout_id`.
        package static let missingCheckoutID = RejectionReason("missing_checkout_id")
    }

    package static let schema = """
        CREATE TABLE IF NOT EXISTS orders (
            idempotency_key       TEXT PRIMARY KEY,
            checkout_id           TEXT NOT NULL,
            order_id              TEXT,
            currency              TEXT,
            total_minor           INTEGER,
            source                TEXT NOT NULL,
            first_seen_seq        INTEGER NOT NULL,
            last_seen_seq         INTEGER NOT NULL,
            placed_at             TEXT,
            failed_after_complete INTEGER NOT NULL DEFAULT 0,
            last_fail_code        TEXT
        );
        CREATE TABLE IF NOT EXISTS subscriber_cursor (
            name TEXT PRIMARY KEY,
            seq  INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS subscriber_journal (
            name    TEXT PRIMARY KEY,
            journal TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS rejected (
            cursor_name TEXT NOT NULL,
            seq         INTEGER NOT NULL,
            kind        TEXT NOT NULL,
            topic       TEXT NOT NULL,
            reason      TEXT NOT NULL,
            envelope    BLOB NOT NULL,
            rejected_at TEXT NOT NULL,
            PRIMARY KEY (cursor_name, seq)
        );
        """

    package let options: Options
    package private(set) var counts = Counts()
    package let logger: BusLogger
    let database: SQLiteDatabase
    /// Held while the worker runs: `checkoutbus cursor set` refuses to move a position under it,
    /// and a second worker refuses the same store.
    private let storeLock: PositionLock
    let insertOrder: SQLiteStatement
    let updateSeen: SQLiteStatement
    let noteFail: SQLiteStatement
    let saveCursor: SQLiteStatement
    let insertRejected: SQLiteStatement
    private let document = JSONDocument(maxDepth: EnvelopeLimits.maxDepth)

    /// Opens (creating if needed) the order store.
    /// - Throws: ``SQLiteError`` when the file cannot be opened or migrated.
    package init(options: Options, logger: BusLogger) throws {
        self.options = options
        self.logger = logger
        do {
            storeLock = try PositionLock(path: options.databasePath, what: "the fulfilment store", waitMilliseconds: 10_000)
        } catch {
            throw FulfilmentError(error.description + (error.held ? ": another checkoutbus-fulfil, or checkoutbus cursor set" : ""))
        }
        database = try SQLiteDatabase(path: options.databasePath)
        try database.enableWriteAheadLog()
        try database.execute(options.fullSync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
        try database.execute(FulfilmentWorker.schema)
        insertOrder = try database.prepare("""
            INSERT INTO orders (idempotency_key, checkout_id, order_id, currency, total_minor, source,
                                first_seen_seq, last_seen_seq, placed_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (idempotency_key) DO NOTHING
            """)
        updateSeen = try database.prepare(
            "UPDATE orders SET last_seen_seq = max(last_seen_seq, ?) WHERE idempotency_key = ?")
        noteFail = try database.prepare("""
            UPDATE orders SET failed_after_complete = failed_after_complete + 1, last_fail_code = ?,
                              last_seen_seq = max(last_seen_seq, ?)
            WHERE idempotency_key = ?
            """)
        saveCursor = try database.prepare("""
            INSERT INTO subscriber_cursor (name, seq) VALUES (?, ?)
            ON CONFLICT (name) DO UPDATE SET seq = excluded.seq
            """)
        // The first rejection of a (cursor, seq) stands: the journal's bytes for it never change.
        insertRejected = try database.prepare("""
            INSERT INTO rejected (cursor_name, seq, kind, topic, reason, envelope, rejected_at)
            VALUES (?, ?, ?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
            ON CONFLICT (cursor_name, seq) DO NOTHING
            """)
    }

    /// The journal the position in row `name` of `subscriber_cursor` is in (`subscriber_journal`),
    /// nil when none is kept yet (a new store, one from before, or a position moved by
    /// `checkoutbus cursor set`): the daemon's is then kept at the first heartbeat.
    func storedJournal(name: String) throws -> String? {
        let q = try database.prepare("SELECT journal FROM subscriber_journal WHERE name = ?")
        try q.bind([.text(name)])
        defer { q.reset() }
        return try q.step() ? q.text(0) : nil
    }

    /// Keeps `journal` as the one row `name`'s position is in, on a connection of its own (the
    /// subscriber's thread calls it, at its first heartbeat, before anything is delivered), synced.
    static func storeJournal(databasePath path: String, name: String, journal: String) throws {
        try WorkerPositions.inSyncedTransaction(databasePath: path) { database in
            _ = try database.prepare("""
                INSERT INTO subscriber_journal (name, journal) VALUES (?, ?)
                ON CONFLICT (name) DO UPDATE SET journal = excluded.journal
                """).run([.text(name), .text(journal)])
        }
    }

    /// The position kept in row `name` of `subscriber_cursor` (0 when there is none yet).
    func storedCursor(name: String) throws -> Int64 {
        let q = try database.prepare("SELECT seq FROM subscriber_cursor WHERE name = ?")
        try q.bind([.text(name)])
        defer { q.reset() }
        return try q.step() ? (q.int64(0) ?? 0) : 0
    }

    /// The `subscriber_cursor` row of shard `shard` of `count`: `fulfil` for a single daemon (the
    /// row of stores made before shards), `fulfil.I-of-N` for shard `I` of `N > 1`.
    ///
    /// The count is part of the name because a `seq` means something only in its shard's journal,
    /// and another shard count is another generation of journals, each starting at seq 1: a
    /// position carried over from one generation to the next would skip that shard's first
    /// envelopes.
    package static func cursorName(shard: Int, of count: Int) -> String {
        count == 1 ? "fulfil" : "fulfil.\(shard)-of-\(count)"
    }

    /// Refuses a store whose cursor rows are of the first sharded layout, `fulfil.shard.I` (and
    /// `fulfil` for shard 0 of any count), which did not record the shard count: which generation
    /// they belong to cannot be told, and starting over would apply every envelope again.
    func checkCursorLayout(shardCount: Int) throws {
        let q = try database.prepare("SELECT name FROM subscriber_cursor WHERE name LIKE 'fulfil.shard.%' ORDER BY name")
        defer { q.reset() }
        var legacy: [String] = []
        while try q.step() { if let name = q.text(0) { legacy.append(name) } }
        guard legacy.isEmpty else {
            throw FulfilmentError(
                "\(options.databasePath) has cursor rows \(legacy.joined(separator: ", ")) (and fulfil for shard 0) "
                    + "that do not say for how many shards they are; if they are for these \(shardCount) shards, "
                    + "rename them to fulfil.I-of-\(shardCount) (fulfil to fulfil.0-of-\(shardCount)) in table "
                    + "subscriber_cursor, else delete them to start new cursors")
        }
    }

    /// Subscribes and records orders until the calling task is cancelled, then logs what it did.
    ///
    /// Each envelope is applied in one SQLite transaction together with its shard's cursor row
    /// (the durable write), and only then committed to the ``Subscriber``. On cancellation the
    /// envelopes already handed over are recorded before the loop ends.
    /// - Parameter onSubscribed: called once, on the subscriber's poll thread, when every shard's
    ///   subscriptions are live.
    /// - Throws: ``FulfilmentError`` for a store with cursor rows of an unknown shard count, a
    ///   ``SQLiteError`` from a transaction, or what the subscriber throws.
    package func run(onSubscribed: (@Sendable () -> Void)? = nil) async throws {
        let shardCount = options.worker.shardCount
        try checkCursorLayout(shardCount: shardCount)
        let names = (0..<shardCount).map { FulfilmentWorker.cursorName(shard: $0, of: shardCount) }
        // The rows are the cursors; the subscriber starts from them and keeps its own in memory.
        var positions = try names.map { try storedCursor(name: $0) }
        // Each kept with the journal it is in: a daemon with another is refused (the runbook's "A
        // daemon's journal was reset"); none kept yet, the first heartbeat's is stored.
        let path = options.databasePath
        var cursors: [any SubscriberCursor] = []
        for (name, seq) in zip(names, positions) {
            cursors.append(MemoryCursor(seq: seq, keepsPosition: true, journal: try storedJournal(name: name)) { journal in
                try FulfilmentWorker.storeJournal(databasePath: path, name: name, journal: journal)
            })
        }
        // Each shard's parked envelopes, reported to its daemon (stats, checkoutbus_subscriber_rejected).
        var parked = try names.map { try rejectedCount(cursorName: $0) }
        if parked.reduce(0, +) > 0 {
            logger.warning("the store holds envelopes it could not apply, in table rejected (docs/workers.md)", [
                "rejected": String(parked.reduce(0, +)),
            ])
        }
        let subscriber = Subscriber(
            shards: options.worker.shardSubscriberOptions(prefixes: ["checkout.complete", "checkout.fail"]),
            cursors: cursors, logger: logger,
            onSubscribed: onSubscribed)
        for (position, count) in parked.enumerated() { subscriber.reportRejected(count, position: position) }
        for try await envelope in subscriber.envelopes {
            do {
                try await record(envelope, subscriber: subscriber, names: names, shardCount: shardCount, parked: &parked)
            } catch {
                // Stopped by an error (the store): the daemon is told no clean stop — it shows the
                // worker gone and silent, as after a crash, at the last seq the store committed. Said
                // before the loop is left, whose end stops the subscriber's thread.
                subscriber.abandon()
                throw error
            }
            positions[shardCount == 1 ? 0 : envelope.shard] = envelope.seq
        }
        let s = subscriber.statistics
        logger.info("stopped", [
            "handled": String(counts.handled), "orders_inserted": String(counts.ordersInserted),
            "repeats": String(counts.repeats), "fails_after_complete": String(counts.failsAfterComplete),
            "rejected": String(counts.rejected), "missed": String(s.missed), "recovered": String(s.recovered),
            // Envelopes the journal no longer held when asked (their orders were never seen).
            "not_retained": String(s.notRetained),
            "last_seq": positions.map(String.init).joined(separator: ","),
        ])
    }

    /// One envelope of ``run(onSubscribed:)``'s loop: the store checked, the envelope applied or
    /// parked with its cursor row moved, then committed to the subscriber.
    private func record(_ envelope: ReceivedEnvelope, subscriber: Subscriber, names: [String], shardCount: Int,
                        parked: inout [Int]) async throws {
        // A store removed or replaced under the worker would take its orders into a file nobody
        // opens again (and a second worker could start on the path): stop before writing. Two
        // system calls per envelope, beside a transaction's dozens of microseconds.
        if let problem = storeLock.pathStillNamesLockedFile() {
            throw FulfilmentError("the store is gone: \(problem); stopping before another order goes to a file "
                + "nobody can open (started again, it makes a new store and fills it from the journal's oldest "
                + "retained envelope)")
        }
        // With one daemon its cursor is row 0, whichever shard that daemon is.
        let position = shardCount == 1 ? 0 : envelope.shard
        let rejection: RejectionReason?
        do {
            rejection = try handle(envelope.raw, cursorName: names[position])
        } catch let error as SQLiteError {
            // Rolled back: neither the order nor the cursor moved; a restart applies it again.
            let seq = envelope.seq, topic = envelope.topic, path = options.databasePath
            let why = "cannot record seq \(seq) (\(topic)) in \(path): \(error.description); "
            throw FulfilmentError(why + "nothing of it was kept, and the worker resumes at it when started again")
        }
        if rejection != nil {
            parked[position] += 1
            subscriber.reportRejected(parked[position], position: position)
        }
        try await subscriber.commit(envelope)
    }

    /// Handles one envelope: applies it, or parks it in `rejected`, in one transaction with the
    /// move of cursor row `cursorName` to its `seq`. What ``run(onSubscribed:)`` does with each
    /// envelope before committing it to the subscriber.
    /// - Throws: a ``SQLiteError`` (the transaction is rolled back: neither the order nor the cursor moved).
    /// - Returns: why it was parked, or nil once applied.
    @discardableResult
    func handle(_ envelope: BusEnvelope, cursorName: String) throws -> RejectionReason? {
        let rejection = try database.transaction { () throws -> RejectionReason? in
            let rejection = try apply(envelope)
            if let rejection {
                try insertRejected.run([
                    .text(cursorName), .integer(envelope.seq), .text(envelope.kind.name), .text(envelope.topicString),
                    .text(rejection.description), .blob(envelope.bytes),
                ])
            }
            try saveCursor.run([.text(cursorName), .integer(envelope.seq)])
            return rejection
        }
        counts.handled += 1
        if let rejection {
            counts.rejected += 1
            logger.error("envelope not applied; parked in table rejected", [
                "seq": String(envelope.seq), "reason": rejection.description, "cursor": cursorName,
                "topic": envelope.topicString,
            ])
        }
        return rejection
    }

    /// Rows of table `rejected` (of cursor row `cursorName` only, when given): envelopes parked and
    /// not yet handled by an operator.
    func rejectedCount(cursorName: String? = nil) throws -> Int {
        let q = try database.prepare("SELECT count(*) FROM rejected WHERE ?1 IS NULL OR cursor_name = ?1")
        try q.bind([.optional(cursorName)])
        defer { q.reset() }
        return try q.step() ? Int(q.int64(0) ?? 0) : 0
    }

    /// Applies one envelope to the order store (inside the caller's transaction).
    /// - Returns: why it could not be applied (the caller parks it), or nil once applied.
    func apply(_ envelope: BusEnvelope) throws -> RejectionReason? {
        let parsed = envelope.bytes.withUnsafeBytes { bytes in (try? document.parse(bytes)) != nil }
        guard parsed, document.kind(document.root) == .object else { return .unreadable }
        let root = document.root
        func string(_ key: StaticString) -> String? {
            document.member(root, key).flatMap { document.string($0) }.flatMap { $0.isEmpty ? nil : $0 }
        }
        switch envelope.kind {
        case .complete:
            guard let key = string("idempotency_key") else { return .missingIdempotencyKey }
            guard let checkoutID = string("checkout_id") else { return .missingCheckoutID }
            let summary = document.member(root, "summary")
            func summaryString(_ k: StaticString) -> String? { summary.flatMap { document.member($0, k) }.flatMap { document.string($0) } }
            let total = summary.flatMap { document.member($0, "total") }.flatMap { document.int64($0) }
            let source = document.member(root, "source")
            func sourceField(_ k: StaticString) -> String { source.flatMap { document.member($0, k) }.flatMap { document.string($0) } ?? "-" }
            let inserted = try insertOrder.run([
                .text(key), .text(checkoutID), .optional(summaryString("order_id")), .optional(summaryString("currency")),
                .optional(total), .text("\(sourceField("sdk"))/\(sourceField("platform"))/\(sourceField("format"))"),
                .integer(envelope.seq), .integer(envelope.seq), .optional(string("received_at")),
            ])
            // A key the store already holds is a repeat, flagged by the daemon or not (another
            // checkout with the same order id, an envelope applied again after `cursor set`): it
            // only raises last_seen_seq.
            if inserted == 1 {
                counts.ordersInserted += 1
            } else {
                try updateSeen.run([.integer(envelope.seq), .text(key)])
                counts.repeats += 1
            }
        case .fail:
            let afterComplete = document.member(root, "after_complete").map { document.kind($0) == .true } ?? false
            // A failure before any complete is no order: nothing to apply, with or without a key.
            guard afterComplete else {
                counts.otherFails += 1
                return nil
            }
            guard let key = string("idempotency_key") else { return .missingIdempotencyKey }
            let code = document.member(root, "error").flatMap { document.member($0, "code") }.flatMap { document.string($0) }
            try noteFail.run([.optional(code), .integer(envelope.seq), .text(key)])
            counts.failsAfterComplete += 1
        default:
            break
        }
        return nil
    }

    static let database = CommandOption(
        "db", "PATH",
        help: "the order store, created if missing: table `orders` (one row per idempotency_key), the worker's "
            + "cursors (one row per shard: fulfil for a single daemon, fulfil.I-of-N for shard I of N) and `rejected`: "
            + "envelopes it could not apply (unreadable, no idempotency_key or checkout_id), parked with their bytes "
            + "and reason as the cursor passes them; re-drive or DELETE them (docs/workers.md)",
        default: Options(worker: WorkerOptions(name: "")).databasePath)
    static let sync = CommandOption(
        "sync", "normal|full",
        help: "SQLite's synchronous setting. normal is exactly-once already (the cursor rolls back with the orders and "
            + "the journal replays them); full also makes each order durable on its own", default: "normal")
    static let cursor = CommandOption(
        "cursor", "PATH", help: "not taken: the worker's cursor lives in --db, committed with each order (refused)")

    package static let spec = CommandSpec(
        "checkoutbus-fulfil", summary: "record every placed order exactly once in SQLite.",
        groups: [.init(nil, [database, sync, cursor])] + WorkerOptions.options(name: "fulfil-<pid>"),
        notes: """
            Subscribes to checkout.complete and checkout.fail. Each envelope and the cursor commit in one
            transaction, so kill -9 at any moment neither loses nor doubles an order; on restart the worker
            replays from its cursor. A repeated complete only raises last_seen_seq; a fail after complete is
            noted on the order (failed_after_complete, last_fail_code) and never undoes it. The cursor lives
            in --db (not in a --cursor file) because it must commit with the order.
            Prints `fulfil: subscribed` on stderr once live; SIGTERM/SIGINT stop it cleanly.
            """)
    package static var help: String { spec.help }

    /// Parses the worker's flags.
    package static func parse(_ arguments: [String]) throws(CommandLineArguments.UsageError) -> Options {
        let args = try spec.parse(arguments)
        var worker = WorkerOptions(name: "fulfil-\(getpid())")
        try WorkerOptions.parse(args, into: &worker)
        if args.value(cursor) != nil {
            throw .init("--cursor is not used by checkoutbus-fulfil: its cursor lives in --db, committed with each order")
        }
        var o = Options(worker: worker)
        o.databasePath = args.string(database)
        o.fullSync = try args.choice(sync, ["normal": false, "full": true])
        if !args.positionals.isEmpty { throw .init("unexpected argument \(args.positionals[0])") }
        return o
    }
}

/// Why the fulfilment worker cannot use its order store. `Sendable`.
package struct FulfilmentError: Error, CustomStringConvertible, Sendable {
    package let description: String
    package init(_ description: String) { self.description = description }
}
