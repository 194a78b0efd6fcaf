import CSQLite

/// A SQLite failure: the result code and SQLite's message. `Sendable`.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }
}

/// One SQLite connection (Debian's libsqlite3), closed in `deinit`.
///
/// Not `Sendable`: a connection is used from the thread that opened it (SQLite's default
/// serialized mode would allow more; CheckoutBus never needs it).
public final class SQLiteDatabase {
    let handle: OpaquePointer

    /// Opens (creating if needed) the database file at `path`.
    /// - Throws: ``SQLiteError`` when the file cannot be opened.
    public init(path: String) throws {
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
    public func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw SQLiteError(code: rc, message: message)
        }
    }

    /// Compiles one statement.
    public func prepare(_ sql: String) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw lastError(rc) }
        return SQLiteStatement(statement, database: self)
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    public func transaction<R>(_ body: () throws -> R) throws -> R {
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

/// A compiled statement, finalized in `deinit`. Not `Sendable`; used with its database.
public final class SQLiteStatement {
    let handle: OpaquePointer
    let database: SQLiteDatabase

    init(_ handle: OpaquePointer, database: SQLiteDatabase) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLite copies bound text and blobs (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Binds parameters 1, 2, … in order: `Int64`, `Int`, `String`, `nil`.
    public func bind(_ values: [SQLiteValue]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch value {
            case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
            case .text(let s): rc = sqlite3_bind_text(handle, index, s, -1, SQLiteStatement.transient)
            case .null: rc = sqlite3_bind_null(handle, index)
            }
            guard rc == SQLITE_OK else { throw database.lastError(rc) }
        }
    }

    /// Steps once. - Returns: `true` when a row is available, `false` when done.
    @discardableResult
    public func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE:
            sqlite3_reset(handle)
            return false
        default:
            let error = database.lastError(rc)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// Binds `values`, runs to completion, and returns how many rows it changed.
    @discardableResult
    public func run(_ values: [SQLiteValue] = []) throws -> Int {
        try bind(values)
        while try step() {}
        return Int(sqlite3_changes(database.handle))
    }

    public func int64(_ column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    public func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: p)
    }

    /// Ends a query early (the next ``bind(_:)`` also does).
    public func reset() { sqlite3_reset(handle) }
}

/// A value bound to a statement parameter. `Sendable`.
public enum SQLiteValue: Sendable {
    case integer(Int64)
    case text(String)
    case null

    public static func optional(_ s: String?) -> SQLiteValue { s.map { .text($0) } ?? .null }
    public static func optional(_ v: Int64?) -> SQLiteValue { v.map { .integer($0) } ?? .null }
}
