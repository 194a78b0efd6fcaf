import CSQLite

/// A SQLite failure: the result code and SQLite's message. `Sendable`.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }
}
