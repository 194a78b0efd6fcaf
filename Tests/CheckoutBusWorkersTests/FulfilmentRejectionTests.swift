import Foundation
import Testing

import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusRuntime
@testable import CheckoutBusWorkers
import SQLite

/// The fulfilment worker's handling of one envelope (``FulfilmentWorker/handle(_:cursorName:)``, the
/// body of its `run` loop) on a real SQLite file: an envelope it cannot apply is parked in table
/// `rejected` in the same transaction as the cursor move, never skipped.
@Suite("fulfilment worker: envelopes it cannot apply are parked, not skipped")
struct FulfilmentRejectionTests {
    static func scratch() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cb-fulfil-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func worker(_ database: URL) throws -> FulfilmentWorker {
        var options = FulfilmentWorker.Options(worker: WorkerOptions(name: "fulfil-test"))
        options.databasePath = database.path
        return try FulfilmentWorker(options: options, logger: BusLogger(label: "test", level: .error))
    }

    /// An envelope as the subscriber hands it over: a complete on `checkout.complete`, a fail on
    /// `checkout.fail.<code>`.
    static func envelope(_ seq: Int64, _ kind: JournaledKind, _ json: String) -> BusEnvelope {
        let topic = kind == .fail ? "checkout.fail.network_error" : "checkout.complete"
        return BusEnvelope(seq: seq, kindSeq: seq, kind: kind, topic: Array(topic.utf8), bytes: Array(json.utf8),
                           origin: .journal)
    }

    static func complete(_ seq: Int64, key: String?, checkoutID: String?) -> String {
        var fields = [#""v":1"#, #""seq":\#(seq)"#, #""kind_seq":\#(seq)"#, #""kind":"complete""#]
        if let checkoutID { fields.append(#""checkout_id":"\#(checkoutID)""#) }
        if let key { fields.append(#""idempotency_key":"\#(key)""#) }
        fields += [#""source":{"sdk":"shopify","platform":"ios","format":"ecp"}"#,
                   #""received_at":"2025-01-01T00:00:00.000Z""#, #""repeat":false"#, #""after_complete":false"#,
                   #""summary":{"currency":"EUR","total":4200,"order_id":"\#(key ?? "-")"}"#]
        return "{" + fields.joined(separator: ",") + "}"
    }

    struct RejectedRow: Equatable {
        var cursor: String
        var seq: Int64
        var kind: String
        var topic: String
        var reason: String
        var envelope: [UInt8]
    }

    static func rejected(_ database: URL) throws -> [RejectedRow] {
        let db = try SQLiteDatabase(path: database.path)
        let q = try db.prepare(
            "SELECT cursor_name, seq, kind, topic, reason, envelope, rejected_at FROM rejected ORDER BY cursor_name, seq")
        try q.bind([])
        var rows: [RejectedRow] = []
        while try q.step() {
            #expect(q.text(6)?.hasSuffix("Z") == true, "rejected_at is a UTC time: \(q.text(6) ?? "NULL")")
            rows.append(RejectedRow(cursor: q.text(0) ?? "", seq: q.int64(1) ?? 0, kind: q.text(2) ?? "",
                                    topic: q.text(3) ?? "", reason: q.text(4) ?? "", envelope: q.blob(5) ?? []))
        }
        return rows
    }

    static func cursor(_ database: URL, _ name: String) throws -> Int64? {
        let db = try SQLiteDatabase(path: database.path)
        let q = try db.prepare("SELECT seq FROM subscriber_cursor WHERE name = ?")
        try q.bind([.text(name)])
        return try q.step() ? q.int64(0) : nil
    }

    static func orderKeys(_ database: URL) throws -> [String] {
        let db = try SQLiteDatabase(path: database.path)
        let q = try db.prepare("SELECT idempotency_key FROM orders ORDER BY first_seen_seq")
        try q.bind([])
        var keys: [String] = []
        while try q.step() { keys.append(q.text(0) ?? "") }
        return keys
    }

    @Test("a keyless complete and a non-JSON envelope are parked with their reason and bytes; the cursor moves past them; good completes still place orders")
    func parkedAndApplied() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("orders.sqlite")
        let worker = try Self.worker(database)
        let notJSON: [UInt8] = Array(#"{"v":1,"seq":3,"kind_seq":3,"kind":"complete","checkout_id":"#.utf8) + [0xFF, 0xFE]
        let envelopes = [
            Self.envelope(1, .complete, Self.complete(1, key: "order-1", checkoutID: "ck-1")),
            Self.envelope(2, .complete, Self.complete(2, key: nil, checkoutID: "ck-2")),
            BusEnvelope(seq: 3, kindSeq: 3, kind: .complete, topic: Array("checkout.complete".utf8), bytes: notJSON,
                        origin: .live),
            Self.envelope(4, .complete, Self.complete(4, key: "order-4", checkoutID: nil)),
            Self.envelope(5, .complete, "[1,2,3]"),
            Self.envelope(6, .complete, Self.complete(6, key: "", checkoutID: "ck-6")),
            Self.envelope(7, .complete, Self.complete(7, key: "order-7", checkoutID: "ck-7")),
        ]
        for e in envelopes.prefix(3) { try worker.handle(e, cursorName: "fulfil") }
        #expect(try Self.cursor(database, "fulfil") == 3, "the cursor moved past both parked envelopes")
        for e in envelopes.dropFirst(3) { try worker.handle(e, cursorName: "fulfil.1-of-3") }
        #expect(try Self.cursor(database, "fulfil.1-of-3") == 7)

        #expect(try Self.orderKeys(database) == ["order-1", "order-7"])
        let rows = try Self.rejected(database)
        #expect(rows.map(\.seq) == [2, 3, 4, 5, 6])
        #expect(rows.map(\.reason) == ["missing_idempotency_key", "unreadable", "missing_checkout_id", "unreadable",
                                       "missing_idempotency_key"])
        #expect(rows.map(\.cursor) == ["fulfil", "fulfil", "fulfil.1-of-3", "fulfil.1-of-3", "fulfil.1-of-3"])
        #expect(rows.allSatisfy { $0.kind == "complete" && $0.topic == "checkout.complete" })
        #expect(rows[0].envelope == envelopes[1].bytes, "the envelope's bytes, as received")
        #expect(rows[1].envelope == notJSON, "bytes that are not UTF-8 are kept as they are")
        #expect(worker.counts.rejected == 5)
        #expect(worker.counts.handled == 7)
        #expect(worker.counts.ordersInserted == 2)
        #expect(try worker.rejectedCount() == 5)
    }

    /// The upsert changes one row whether it inserts or not; `orders_inserted` counted every
    /// complete the daemon had not flagged `repeat`, a second checkout with the same order id included.
    @Test("orders_inserted counts rows made; a complete of a key the store holds, flagged or not, is a repeat")
    func insertedAndRepeatCounts() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("orders.sqlite")
        let worker = try Self.worker(database)
        try worker.handle(Self.envelope(1, .complete, Self.complete(1, key: "order-1", checkoutID: "ck-1")), cursorName: "fulfil")
        try worker.handle(Self.envelope(2, .complete, Self.complete(2, key: "order-1", checkoutID: "ck-2")), cursorName: "fulfil")
        let flagged = Self.complete(3, key: "order-1", checkoutID: "ck-1").replacingOccurrences(
            of: #""repeat":false"#, with: #""repeat":true"#)
        try worker.handle(Self.envelope(3, .complete, flagged), cursorName: "fulfil")
        try worker.handle(Self.envelope(4, .complete, Self.complete(4, key: "order-4", checkoutID: "ck-4")), cursorName: "fulfil")
        // The same envelope applied again (its position moved back with `cursor set`): a repeat.
        try worker.handle(Self.envelope(1, .complete, Self.complete(1, key: "order-1", checkoutID: "ck-1")), cursorName: "fulfil")
        #expect(worker.counts.ordersInserted == 2)
        #expect(worker.counts.repeats == 3)
        #expect(try Self.orderKeys(database) == ["order-1", "order-4"])
    }

    @Test("a fail after complete without a key is parked; a plain fail without one is no order and is not")
    func fails() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("orders.sqlite")
        let worker = try Self.worker(database)
        let after = #"{"v":1,"seq":1,"kind_seq":1,"kind":"fail","checkout_id":"ck-1","after_complete":true,"error":{"code":"network_error"}}"#
        let plain = #"{"v":1,"seq":2,"kind_seq":2,"kind":"fail","checkout_id":"ck-2","after_complete":false,"error":{"code":"cart_expired"}}"#
        try worker.handle(Self.envelope(1, .fail, after), cursorName: "fulfil")
        try worker.handle(Self.envelope(2, .fail, plain), cursorName: "fulfil")
        let rows = try Self.rejected(database)
        #expect(rows.map(\.seq) == [1])
        #expect(rows.first?.reason == "missing_idempotency_key")
        #expect(rows.first?.kind == "fail")
        #expect(worker.counts.otherFails == 1)
        #expect(try Self.cursor(database, "fulfil") == 2)
    }

    @Test("a store made before table rejected gains it on open and keeps its orders and cursor")
    func upgrade() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let database = dir.appendingPathComponent("orders.sqlite")
        do {
            let old = try SQLiteDatabase(path: database.path)
            try old.execute("""
                CREATE TABLE orders (idempotency_key TEXT PRIMARY KEY, checkout_id TEXT NOT NULL, order_id TEXT,
                    currency TEXT, total_minor INTEGER, source TEXT NOT NULL, first_seen_seq INTEGER NOT NULL,
                    last_seen_seq INTEGER NOT NULL, placed_at TEXT, failed_after_complete INTEGER NOT NULL DEFAULT 0,
                    last_fail_code TEXT);
                CREATE TABLE subscriber_cursor (name TEXT PRIMARY KEY, seq INTEGER NOT NULL);
                INSERT INTO orders (idempotency_key, checkout_id, source, first_seen_seq, last_seen_seq)
                    VALUES ('order-old', 'ck-old', 'shopify/ios/ecp', 9, 9);
                INSERT INTO subscriber_cursor (name, seq) VALUES ('fulfil', 9);
                """)
        }
        let worker = try Self.worker(database)
        #expect(try worker.storedCursor(name: "fulfil") == 9)
        try worker.handle(Self.envelope(10, .complete, "not json"), cursorName: "fulfil")
        #expect(try Self.rejected(database).map(\.seq) == [10])
        #expect(try Self.orderKeys(database) == ["order-old"])
        #expect(try Self.cursor(database, "fulfil") == 10)
    }
}
