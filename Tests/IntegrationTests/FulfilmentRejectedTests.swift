import CheckoutBusDaemon
import CheckoutBusProtocol
import CheckoutBusRuntime
import Foundation
import SQLite
import Testing

/// `checkoutbus-fulfil` against a real daemon whose journal holds envelopes the worker cannot apply.
///
/// The daemon always writes `idempotency_key` and `checkout_id`, so such envelopes are appended to
/// a stopped daemon's journal with the journal's own writer, and the daemon is started again on it:
/// the worker then receives them from the journal like any other.
@Suite("fulfilment worker: rejected envelopes", .serialized, .timeLimit(.minutes(4)))
struct FulfilmentRejectedTests {
    static func complete(_ id: String) -> String {
        #"{"event_id":"\#(id)-e","checkout_id":"\#(id)","platform":"ios","sdk":"shopify","payload":{"event":"onComplete","checkout":{"id":"\#(id)","currency":"EUR","order":{"id":"gid://shopify/Order/\#(id)"},"line_items":[{"id":"l1","quantity":1}]}}}"#
    }

    /// Appends `envelopes` (seq, bytes) to the journal in `dataDirectory` as `checkout.complete` records.
    static func appendCompletes(_ envelopes: [(UInt64, [UInt8])], to dataDirectory: URL) throws {
        let logger = BusLogger(label: "test", level: .error)
        var options = Journal.Options()
        options.cacheBytes = nil
        let journal = try Journal(directory: dataDirectory.appendingPathComponent("journal").path, options: options,
                                  logger: logger)
        let batch = JournalBatch(journal: journal, measuresLatency: false, logger: logger)
        let topic = Array("checkout.complete".utf8)
        for (seq, bytes) in envelopes {
            topic.withUnsafeBytes { t in
                bytes.withUnsafeBytes { e in
                    batch.append(seq: seq, kindSeq: seq, kind: UInt8(JournaledKind.complete.rawValue), topic: t,
                                 envelope: e, arrival: 0)
                }
            }
        }
        try batch.flush()
        batch.close()
    }

    @Test("a complete without idempotency_key and an unreadable one are parked in rejected; the cursor passes them; orders around them are placed")
    func parkedFromTheJournal() throws {
        let first = try DaemonProcess()
        #expect(try send([Self.complete("ck-r1")], to: first.ingest).status == 0)
        #expect(try waitUntil(timeout: 20) { try ControlClient(first.control).replayAll(prefix: "checkout.complete").count == 1 })
        #expect(first.terminate() == 0)

        let keyless = #"{"v":1,"seq":2,"kind_seq":2,"shard":0,"kind":"complete","checkout_id":"ck-r2","event_id":"ck-r2-e","source":{"sdk":"shopify","platform":"ios","format":"callbacks"},"received_at":"2025-01-01T00:00:00.000Z","repeat":false,"after_complete":false,"summary":{"currency":"EUR","total":100}}"#
        // Starts as the daemon writes envelopes (the subscriber reads its positions), then breaks off.
        let unreadable = Array(#"{"v":1,"seq":3,"kind_seq":3,"shard":0,"kind":"complete","checkout_id":"ck-r3","summ"#.utf8)
        try Self.appendCompletes([(2, Array(keyless.utf8)), (3, unreadable)], to: first.dataDirectory)

        let daemon = try DaemonProcess(dataDirectory: first.dataDirectory)
        #expect(try send([Self.complete("ck-r4")], to: daemon.ingest).status == 0)
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database)
        #expect(waitUntil(20) { orderCount(database) == 2 }, "orders: \(orderCount(database))")
        // The operator sees the parked envelopes at the daemon too: stats and the metric, from the
        // worker's reports (one after every heartbeat).
        func reportedRejected() -> Int? {
            let subscribers = (try? ControlClient(daemon.control).stats())?["subscribers"] as? [String: Any]
            return (subscribers?["fulfil-test"] as? [String: Any])?["rejected"] as? Int
        }
        #expect(waitUntil(20) { reportedRejected() == 2 }, "stats: \(String(describing: reportedRejected()))")
        let metrics = try httpGet(daemon.ready["metrics"] as! String, "/metrics").body
        #expect(metrics.contains("checkoutbus_subscriber_rejected{subscriber=\"fulfil-test\"} 2\n"))
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
        // The worker may catch up from the journal before its first heartbeat (`fulfil: subscribed`),
        // so the parked lines can be among its startup lines.
        let log = (worker.startupLines + worker.stderr.readAll(timeout: 2)).joined(separator: "\n")

        #expect(try readOrders(database).map(\.checkoutID) == ["ck-r1", "ck-r4"])
        let db = try SQLiteDatabase(path: database.path)
        let q = try db.prepare("SELECT cursor_name, seq, kind, topic, reason, envelope FROM rejected ORDER BY seq")
        try q.bind([])
        var rows: [(String, Int64, String, String, String, [UInt8])] = []
        while try q.step() {
            rows.append((q.text(0) ?? "", q.int64(1) ?? 0, q.text(2) ?? "", q.text(3) ?? "", q.text(4) ?? "", q.blob(5) ?? []))
        }
        #expect(rows.map(\.1) == [2, 3])
        #expect(rows.map(\.4) == ["missing_idempotency_key", "unreadable"])
        #expect(rows.allSatisfy { $0.0 == "fulfil" && $0.2 == "complete" && $0.3 == "checkout.complete" })
        #expect(rows.map(\.5) == [Array(keyless.utf8), unreadable], "the envelopes' bytes as journaled")
        let cursor = try db.prepare("SELECT seq FROM subscriber_cursor WHERE name = 'fulfil'")
        try cursor.bind([])
        #expect(try cursor.step())
        #expect((cursor.int64(0) ?? 0) > 3, "the cursor passed the parked envelopes")

        #expect(log.contains("parked in table rejected\" seq=2 reason=missing_idempotency_key"), "\(log)")
        #expect(log.contains("parked in table rejected\" seq=3 reason=unreadable"), "\(log)")
        #expect(log.contains("msg=stopped") && log.contains("rejected=2"), "\(log)")

        // Restarted on the same store: the parked rows are announced, not applied again.
        let again = try FulfilProcess(daemon: daemon, database: database, extra: ["--log-level", "warning"])
        again.process.terminate()
        #expect(waitForExit(again.process, timeout: 20) == 0)
        let againLog = (again.startupLines + again.stderr.readAll(timeout: 2)).joined(separator: "\n")
        #expect(againLog.contains("envelopes it could not apply, in table rejected") && againLog.contains(" rejected=2"),
                "\(againLog)")
        #expect(!againLog.contains("parked in table rejected\" seq="), "nothing parked twice: \(againLog)")
    }
}
