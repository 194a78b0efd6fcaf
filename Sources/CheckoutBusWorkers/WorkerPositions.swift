import SQLite

/// The workers' positions where they keep them, for `checkoutbus cursor show|set`: the fulfilment
/// store's `subscriber_cursor` rows and the analytics checkpoint's per-shard seqs. Moving one
/// takes the store's ``PositionLock`` first (the caller's job), so never under a running worker.
/// `Sendable` (no state).
package enum WorkerPositions {
    /// Every `subscriber_cursor` row of the fulfilment store at `path` (`fulfil`, `fulfil.I-of-N`).
    /// - Throws: ``SQLiteError`` when the store cannot be read (not a store: no such table).
    package static func fulfilment(databasePath path: String) throws -> [(name: String, seq: Int64)] {
        let database = try SQLiteDatabase(path: path)
        let q = try database.prepare("SELECT name, seq FROM subscriber_cursor ORDER BY name")
        defer { q.reset() }
        var rows: [(String, Int64)] = []
        while try q.step() { rows.append((q.text(0) ?? "", q.int64(1) ?? 0)) }
        return rows
    }

    /// Sets row `name` of the store's `subscriber_cursor` to `seq` (created if missing), in one
    /// transaction, synced (`synchronous=FULL`), and forgets the journal it was in (the worker keeps
    /// the daemon's at its first heartbeat: a position is moved after a journal was reset).
    package static func setFulfilment(databasePath path: String, name: String, seq: Int64) throws {
        try inSyncedTransaction(databasePath: path) { database in
            _ = try database.prepare("""
                INSERT INTO subscriber_cursor (name, seq) VALUES (?, ?)
                ON CONFLICT (name) DO UPDATE SET seq = excluded.seq
                """).run([.text(name), .integer(seq)])
            // (A store from before `subscriber_journal` gets it, as the worker's start would make it.)
            try database.execute(FulfilmentWorker.schema)
            _ = try database.prepare("DELETE FROM subscriber_journal WHERE name = ?").run([.text(name)])
        }
    }

    /// Runs `body` in one transaction on a connection of its own to the fulfilment store at `path`,
    /// synced (`synchronous=FULL`): what moves a position moves it durably.
    static func inSyncedTransaction(databasePath path: String, _ body: (SQLiteDatabase) throws -> Void) throws {
        let database = try SQLiteDatabase(path: path)
        try database.execute("PRAGMA synchronous=FULL")
        try database.transaction { try body(database) }
    }

    /// The per-shard positions of the analytics checkpoint at `path`, or nil when there is none.
    package static func analytics(checkpointPath path: String) throws(AnalyticsError) -> [Int64]? {
        try AnalyticsCheckpoint.load(path: path, maxCheckouts: Int.max)?.shardSeqs
    }

    /// Rewrites the analytics checkpoint at `path` with these per-shard positions, its counts
    /// unchanged (replaced atomically and durably, as the worker writes it).
    package static func setAnalytics(checkpointPath path: String, shardSeqs: [Int64]) throws(AnalyticsError) {
        guard let funnel = try AnalyticsCheckpoint.load(path: path, maxCheckouts: Int.max) else {
            throw AnalyticsError("no analytics checkpoint at \(path)")
        }
        guard funnel.shardSeqs.count == shardSeqs.count else {
            throw AnalyticsError("the checkpoint \(path) holds \(funnel.shardSeqs.count) shard positions, not \(shardSeqs.count)")
        }
        funnel.shardSeqs = shardSeqs
        try AnalyticsCheckpoint.save(funnel, to: path)
    }
}
