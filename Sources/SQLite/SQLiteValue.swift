import CSQLite

/// A value bound to a statement parameter. `Sendable`.
public enum SQLiteValue: Sendable {
    case integer(Int64)
    case text(String)
    case null

    public static func optional(_ s: String?) -> SQLiteValue { s.map { .text($0) } ?? .null }
    public static func optional(_ v: Int64?) -> SQLiteValue { v.map { .integer($0) } ?? .null }
}
