import CSQLite

/// A SQLite failure: the result code and SQLite's message. `Sendable`.
package struct SQLiteError: Error, CustomStringConvertible, Sendable {
    package let code: Int32
    package let message: String
    package var description: String { "SQLite error \(code): \(message)" }
}
