import CSQLite

/// One SQLite connection (Debian's libsqlite3), closed in `deinit`.
///
/// Not `Sendable`: a connection is used from the thread that opened it (SQLite's default
/// serialized mode would allow more; CheckoutBus never needs it).
package final class SQLiteDatabase {
    let handle: OpaquePointer

    /// Opens (creating if needed) the database file at `path`.
    /// - Throws: ``SQLiteError`` when the file cannot be opened.
    package init(path: String) throws {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close(db) }
            throw SQLiteError(code: rc, message: "cannot open \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs one or more statements that return no rows.
    package func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw SQLiteError(code: rc, message: message)
        }
    }

    /// Switches the database to write-ahead logging, and checks that it took: SQLite answers the
    /// pragma with the mode now in force, and stays in its rollback journal without an error when
    /// WAL cannot be used (a file system without shared memory, say) — where `synchronous=NORMAL`
    /// would no longer mean what it was chosen for.
    /// - Throws: ``SQLiteError`` when the pragma fails or another mode is in force.
    package func enableWriteAheadLog() throws {
        let pragma = try prepare("PRAGMA journal_mode=WAL")
        guard try pragma.step(), let mode = pragma.text(0) else {
            throw SQLiteError(code: SQLITE_ERROR, message: "PRAGMA journal_mode=WAL returned no mode")
        }
        pragma.reset()
        guard mode.lowercased() == "wal" else {
            throw SQLiteError(code: SQLITE_ERROR,
                              message: "write-ahead logging is not available here (journal mode \(mode))")
        }
    }

    /// Compiles one statement.
    package func prepare(_ sql: String) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw lastError(rc) }
        return SQLiteStatement(statement, database: self)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    package func transaction<R>(_ body: () throws -> R) throws -> R {
        try execute("BEGIN IMMEDIATE")
        do {
            let r = try body()
            try execute("COMMIT")
            return r
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    func lastError(_ rc: Int32) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)))
    }
}

