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
}
