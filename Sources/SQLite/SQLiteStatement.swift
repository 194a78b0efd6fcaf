import CSQLite

/// A compiled statement, finalized in `deinit`. Not `Sendable`; used with its database.
package final class SQLiteStatement {
    let handle: OpaquePointer
    let database: SQLiteDatabase

    init(_ handle: OpaquePointer, database: SQLiteDatabase) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLite copies bound text and blobs (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Binds parameters 1, 2, … in order: `Int64`, `String`, bytes, `nil`.
    package func bind(_ values: [SQLiteValue]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        for (i, value) in values.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch value {
            case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
            // By its UTF-8's length, never up to a NUL: an id with `\u0000` in it is all of it, or two
            // ids alike up to their NUL would be one key (two orders, one row).
            case .text(let s) where s.isEmpty: rc = sqlite3_bind_text(handle, index, "", 0, SQLiteStatement.transient)
            case .text(var s):
                rc = s.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) {
                        sqlite3_bind_text64(handle, index, $0.baseAddress, UInt64($0.count), SQLiteStatement.transient,
                                            UInt8(SQLITE_UTF8))
                    }
                }
            // Empty bytes bind an empty blob, not NULL (which a nil pointer would).
            case .blob(let b) where b.isEmpty: rc = sqlite3_bind_zeroblob(handle, index, 0)
            case .blob(let b):
                rc = b.withUnsafeBytes {
                    sqlite3_bind_blob64(handle, index, $0.baseAddress, UInt64($0.count), SQLiteStatement.transient)
                }
            case .null: rc = sqlite3_bind_null(handle, index)
            }
            guard rc == SQLITE_OK else { throw database.lastError(rc) }
        }
    }

    /// Steps once. - Returns: `true` when a row is available, `false` when done.
    @discardableResult
    package func step() throws -> Bool {
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
    package func run(_ values: [SQLiteValue] = []) throws -> Int {
        try bind(values)
        while try step() {}
        return Int(sqlite3_changes(database.handle))
    }

    package func int64(_ column: Int32) -> Int64? {
        sqlite3_column_type(handle, column) == SQLITE_NULL ? nil : sqlite3_column_int64(handle, column)
    }

    /// The column's text, all of it (a NUL inside included).
    package func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self)
    }

    /// The column's bytes as stored (a blob's, or a text's UTF-8); nil for NULL.
    package func blob(_ column: Int32) -> [UInt8]? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let p = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }

    /// Ends a query early (the next ``bind(_:)`` also does).
    package func reset() { sqlite3_reset(handle) }
}
