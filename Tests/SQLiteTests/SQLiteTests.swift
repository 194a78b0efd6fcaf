import Foundation
import Testing

import SQLite

/// The SQLite owner on a real database file: statements, bindings, transactions, constraint errors.
@Suite("SQLite")
struct SQLiteTests {
    static func path() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("cb-sqlite-\(UUID().uuidString).db").path
    }

    @Test("rows written in a transaction are read back after the database is opened again")
    func roundTrip() throws {
        let path = Self.path()
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let db = try SQLiteDatabase(path: path)
            try db.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER, currency TEXT)")
            let insert = try db.prepare("INSERT INTO orders (id, total, currency) VALUES (?, ?, ?)")
            let changed = try db.transaction { () throws -> Int in
                let first = try insert.run([.text("o-1"), .integer(4200), .text("USD")])
                insert.reset()
                return first + (try insert.run([.text("o-2"), .optional(nil as Int64?), .optional(nil as String?)]))
            }
            #expect(changed == 2)
        }
        let db = try SQLiteDatabase(path: path)
        let select = try db.prepare("SELECT id, total, currency FROM orders ORDER BY id")
        #expect(try select.step())
        #expect(select.text(0) == "o-1" && select.int64(1) == 4200 && select.text(2) == "USD")
        #expect(try select.step())
        #expect(select.text(0) == "o-2" && select.int64(1) == nil && select.text(2) == nil)
        #expect(try !select.step())
    }

    @Test("a constraint violation throws with SQLite's code, and a failed transaction leaves nothing")
    func constraint() throws {
        let path = Self.path()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try SQLiteDatabase(path: path)
        try db.execute("CREATE TABLE orders (id TEXT PRIMARY KEY)")
        let insert = try db.prepare("INSERT INTO orders (id) VALUES (?)")
        #expect(throws: SQLiteError.self) {
            try db.transaction {
                _ = try insert.run([.text("o-1")])
                insert.reset()
                _ = try insert.run([.text("o-1")])
            }
        }
        insert.reset()
        let count = try db.prepare("SELECT count(*) FROM orders")
        #expect(try count.step())
        #expect(count.int64(0) == 0)
    }

    @Test("bytes bind as a blob and read back as they were, not UTF-8 included; empty bytes are not NULL")
    func blobs() throws {
        let path = Self.path()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try SQLiteDatabase(path: path)
        try db.execute("CREATE TABLE raw (id INTEGER PRIMARY KEY, bytes BLOB)")
        let insert = try db.prepare("INSERT INTO raw (id, bytes) VALUES (?, ?)")
        let values: [[UInt8]] = [[0x7B, 0xFF, 0x00, 0xFE], []]
        for (i, v) in values.enumerated() { try insert.run([.integer(Int64(i)), .blob(v)]) }
        let select = try db.prepare("SELECT bytes, bytes IS NULL, typeof(bytes) FROM raw ORDER BY id")
        for v in values {
            #expect(try select.step())
            #expect(select.blob(0) == v)
            #expect(select.int64(1) == 0)
            #expect(select.text(2) == "blob")
        }
        #expect(try !select.step())
    }

    /// Text was bound up to its first NUL: two order ids alike up to a `\u0000` were one key, and the
    /// fulfilment worker's upsert made two orders one row.
    @Test("text binds and reads back whole, a NUL inside included; keys that differ after a NUL stay two")
    func textWithNUL() throws {
        let path = Self.path()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let db = try SQLiteDatabase(path: path)
        try db.execute("CREATE TABLE orders (key TEXT PRIMARY KEY, total INTEGER)")
        let upsert = try db.prepare("INSERT INTO orders (key, total) VALUES (?, ?) ON CONFLICT(key) DO NOTHING")
        let keys = ["gid://shopify/Order/7\u{0}A", "gid://shopify/Order/7\u{0}B", "gid://shopify/Order/7", "", "café"]
        for (i, k) in keys.enumerated() { try upsert.run([.text(k), .integer(Int64(i))]) }
        let select = try db.prepare("SELECT key, length(CAST(key AS BLOB)), typeof(key) FROM orders ORDER BY total")
        for k in keys {
            #expect(try select.step())
            #expect(select.text(0) == k)
            #expect(select.int64(1) == Int64(k.utf8.count))
            #expect(select.text(2) == "text")
        }
        #expect(try !select.step())
    }

    @Test("write-ahead logging is switched on and checked: a file database takes it, one that cannot is refused")
    func writeAheadLog() throws {
        let path = Self.path()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let db = try SQLiteDatabase(path: path)
        try db.enableWriteAheadLog()
        let mode = try db.prepare("PRAGMA journal_mode")
        #expect(try mode.step())
        #expect(mode.text(0) == "wal")
        // An in-memory database answers the pragma with `memory`, without an error: refused.
        let memory = try SQLiteDatabase(path: ":memory:")
        #expect(throws: SQLiteError.self) { try memory.enableWriteAheadLog() }
    }
}
