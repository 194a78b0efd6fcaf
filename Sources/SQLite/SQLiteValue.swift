import CSQLite

/// A value bound to a statement parameter. `Sendable`.
package enum SQLiteValue: Sendable {
    case integer(Int64)
    case text(String)
    /// Bytes as they are (a `BLOB`): what may not be UTF-8 text.
    case blob([UInt8])
    case null

    package static func optional(_ s: String?) -> SQLiteValue { s.map { .text($0) } ?? .null }
    package static func optional(_ v: Int64?) -> SQLiteValue { v.map { .integer($0) } ?? .null }
}
