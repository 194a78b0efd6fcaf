import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusLoad
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import CheckoutBusCore
import Foundation
import SQLite
import Testing

/// A `checkoutbus-fulfil` process, ready once it reports its subscriptions live.
final class FulfilProcess {
    let process = Process()
    let stderr: PipeLineReader
    /// The lines on stderr before `fulfil: subscribed`.
    private(set) var startupLines: [String] = []

    convenience init(daemon: DaemonProcess, database: URL, extra: [String] = []) throws {
        try self.init(publish: daemon.publish, control: daemon.control, database: database, extra: extra)
    }

    /// `publish` and `control` may list several shards' endpoints, comma-separated. With
    /// `waitForSubscription` false it returns once started (a daemon about to die may never answer
    /// the subscription).
    init(publish: String, control: String, database: URL, extra: [String] = [], waitForSubscription: Bool = true) throws {
        process.executableURL = Products.url("checkoutbus-fulfil")
        process.arguments = ["--db", database.path, "--from", publish, "--control", control,
                             "--name", "fulfil-test"] + extra
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.start()
        stderr = PipeLineReader(err.fileHandleForReading)
        if !waitForSubscription { return }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            guard let line = stderr.readLine(timeout: max(0.01, deadline.timeIntervalSinceNow)) else { break }
            if line.hasPrefix("fulfil: subscribed") { return }
            startupLines.append(line)
        }
        process.terminate()
        throw HarnessError("checkoutbus-fulfil did not report its subscriptions")
    }

    func kill9() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        reap(process)
    }

    deinit { kill9() }
}

/// Rows of the order store, read with a connection of our own (WAL: readers do not block the worker).
struct OrderRow: Equatable {
    var key: String
    var checkoutID: String
    var firstSeen: Int64
    var lastSeen: Int64
    var total: Int64?
    var currency: String?
}

func readOrders(_ database: URL) throws -> [OrderRow] {
    let db = try SQLiteDatabase(path: database.path)
    let q = try db.prepare(
        "SELECT idempotency_key, checkout_id, first_seen_seq, last_seen_seq, total_minor, currency FROM orders ORDER BY first_seen_seq")
    try q.bind([])
    var rows: [OrderRow] = []
    while try q.step() {
        rows.append(OrderRow(key: q.text(0) ?? "", checkoutID: q.text(1) ?? "", firstSeen: q.int64(2) ?? 0,
                             lastSeen: q.int64(3) ?? 0, total: q.int64(4), currency: q.text(5)))
    }
    return rows
}

func orderCount(_ database: URL) -> Int {
    guard FileManager.default.fileExists(atPath: database.path), let rows = try? readOrders(database) else { return 0 }
    return rows.count
}

func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// A complete as an iOS callback under its wrapper: `id` names the checkout, the order and the event.
private func callbackComplete(_ id: String) -> String {
    #"{"event_id":"\#(id)-3","checkout_id":"\#(id)","platform":"ios","sdk":"shopify","payload":{"event":"onComplete","checkout":{"id":"\#(id)","currency":"EUR","order":{"id":"gid://shopify/Order/\#(id)"},"line_items":[{"id":"l1","quantity":1}]}}}"#
}

/// A complete as an ECP notification under its wrapper: `id` names the checkout and the order.
private func ecpComplete(_ id: String) -> String {
    #"{"checkout_id":"\#(id)","payload":{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":{"id":"\#(id)","status":"completed","order":{"id":"gid://shopify/Order/\#(id)"}}}}}"#
}

@Suite("fulfilment worker", .serialized, .timeLimit(.minutes(5)))
struct FulfilmentWorkerTests {
    @Test("kill -9 five times during a flood: exactly one order row per completed checkout, as generated")
    func killDuringFlood() throws {
        let checkouts = 2500
        let seed: UInt64 = 11
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        var worker: FulfilProcess? = try FulfilProcess(daemon: daemon, database: database)

        let flood = Process()
        flood.executableURL = Products.url("checkoutbus")
        flood.arguments = ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--checkouts", String(checkouts),
                           "--seed", String(seed), "--rate", "3000", "--json"]
        let floodOut = Pipe()
        flood.standardOutput = floodOut
        flood.standardError = FileHandle.nullDevice
        try flood.start()

        // Five crashes, each once the worker has visibly made progress since it (re)started.
        var kills = 0
        var killsDuringFlood = 0
        while kills < 5 {
            let before = orderCount(database)
            let progressed = waitUntil(20) { orderCount(database) > before || !flood.isRunning }
            #expect(progressed)
            if flood.isRunning { killsDuringFlood += 1 }
            worker?.kill9()
            worker = nil
            kills += 1
            worker = try FulfilProcess(daemon: daemon, database: database)
        }
        #expect(waitForExit(flood, timeout: 90) == 0, "the flood itself saw nothing lost")
        #expect(kills == 5)
        #expect(killsDuringFlood == 5, "every kill landed while the flood was running")

        // What the generator made: one order per checkout with a complete.
        let events = FloodGenerator(checkouts: checkouts, seed: seed, runID: "expected").makeEvents()
        let expectedOrders = Set(events.filter { $0.expected == .complete }.map(\.checkoutID)).count
        #expect(expectedOrders > 500)

        // What the daemon journaled: first and last complete (or fail after complete) per key.
        let control = try ControlClient(daemon.control)
        let completes = try control.replayAll(prefix: "checkout.complete")
        var firstSeen: [String: Int] = [:]
        var lastSeen: [String: Int] = [:]
        for (seq, _, envelope) in completes {
            let key = try #require(envelope["idempotency_key"] as? String)
            if firstSeen[key] == nil { firstSeen[key] = seq }
            lastSeen[key] = max(lastSeen[key] ?? 0, seq)
        }
        for (seq, _, envelope) in try control.replayAll(prefix: "checkout.fail") where envelope["after_complete"] as? Bool == true {
            let key = try #require(envelope["idempotency_key"] as? String)
            lastSeen[key] = max(lastSeen[key] ?? 0, seq)
        }
        #expect(firstSeen.count == expectedOrders)

        // The last worker catches up: every order, once.
        let caughtUp = waitUntil(60) { orderCount(database) >= expectedOrders }
        #expect(caughtUp)
        let lastJournaled = Int64(lastSeen.values.max() ?? 0)
        #expect(waitUntil(30) { ((try? readOrders(database)) ?? []).map(\.lastSeen).max() ?? 0 >= lastJournaled })
        let rows = try readOrders(database)
        #expect(rows.count == expectedOrders, "no more, no fewer")
        #expect(Set(rows.map(\.key)).count == rows.count)
        #expect(Set(rows.map(\.key)) == Set(firstSeen.keys))
        for row in rows {
            #expect(Int(row.firstSeen) == firstSeen[row.key], "first_seen_seq of \(row.key)")
            #expect(Int(row.lastSeen) == lastSeen[row.key], "last_seen_seq of \(row.key)")
        }
        worker?.process.terminate()
        #expect(waitForExit(worker!.process, timeout: 20) == 0)
    }

    @Test("repeat completes only raise last_seen_seq; a fail after complete is noted, never undone")
    func repeatAndFailAfterComplete() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database)
        let snapshot = #"{"id":"ck-f1","status":"completed","currency":"USD","totals":[{"type":"total","amount":4200}],"order":{"id":"gid://shopify/Order/77"}}"#
        let lines = [
            #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":\#(snapshot)}}"#,
            #"{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":\#(snapshot)}}"#,
            #"{"checkout_id":"ck-f1","payload":{"event":"onCheckoutFailed","error":{"code":"NETWORK_ERROR","message":"late"}}}"#,
            #"{"checkout_id":"ck-f2","payload":{"event":"onCheckoutFailed","error":{"code":"cart_expired","message":"no order"}}}"#,
        ]
        #expect(try send(lines, to: daemon.ingest).status == 0)
        #expect(waitUntil(20) { ((try? readOrders(database)) ?? []).first?.lastSeen == 3 })
        let rows = try readOrders(database)
        #expect(rows.count == 1)
        #expect(rows.first?.key == "gid://shopify/Order/77")
        #expect(rows.first?.firstSeen == 1)
        #expect(rows.first?.total == 4200)
        #expect(rows.first?.currency == "USD")
        let db = try SQLiteDatabase(path: database.path)
        let q = try db.prepare("SELECT failed_after_complete, last_fail_code FROM orders")
        try q.bind([])
        #expect(try q.step())
        #expect(q.int64(0) == 1)
        #expect(q.text(1) == "network_error")
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
    }

    /// Two bugs that lost orders without a word: text was bound to SQLite up to its first NUL (two
    /// order ids alike up to a `\u0000` were one row), and the worker read envelopes with the raw
    /// events' depth limit, so a snapshot as deep as the daemon takes, one level deeper in its
    /// envelope, was parked `unreadable`.
    @Test("order ids that differ after a NUL are two orders; a complete as deep as the daemon takes is recorded")
    func idsWithNULAndTheDeepestSnapshot() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database)
        func complete(_ checkout: String, order: String, total: Int) -> String {
            #"{"checkout_id":"\#(checkout)","payload":{"jsonrpc":"2.0","method":"ec.complete","params":{"checkout":"#
                + #"{"id":"\#(checkout)","status":"completed","currency":"USD","totals":[{"type":"total","amount":\#(total)}],"#
                + #""order":{"id":"\#(order)"}}}}}"#
        }
        // As the checkout-sheet-kit's 0.x-2.x bridge sends a `completed`: its body JSON in a string.
        let note = String(repeating: #"{\"n\":"#, count: 62) + #"\"x\""# + String(repeating: "}", count: 62)
        let deep = #"{"checkout_id":"deep-1","payload":{"name":"completed","body":"{\"orderDetails\":"#
            + #"{\"id\":\"gid://shopify/OrderIdentity/deep\",\"note\":\#(note)}}"}}"#
        let lines = [complete("nul-1", order: #"gid://shopify/Order/7\u0000A"#, total: 1111),
                     complete("nul-2", order: #"gid://shopify/Order/7\u0000B"#, total: 2222), deep]
        #expect(try send(lines, to: daemon.ingest).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 3 })
        let rows = try readOrders(database)
        #expect(rows.map(\.key) == ["gid://shopify/Order/7\u{0}A", "gid://shopify/Order/7\u{0}B",
                                     "gid://shopify/OrderIdentity/deep"])
        #expect(rows.map(\.total) == [1111, 2222, nil])
        let db = try SQLiteDatabase(path: database.path)
        let parked = try db.prepare("SELECT count(*) FROM rejected")
        try parked.bind([])
        #expect(try parked.step())
        #expect(parked.int64(0) == 0)
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
    }

    @Test("a store used with one daemon, then pointed at three shards, starts shard 0's cursor fresh")
    func storeOfAnotherShardCount() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let first = (0..<3).map { callbackComplete("one-\($0)") }
        #expect(try send(first, to: daemon.ingest).status == 0)
        let worker = try FulfilProcess(daemon: daemon, database: database)
        #expect(waitUntil(20) { orderCount(database) == 3 })
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)

        // A new generation of three shards; shard 0's journal starts at seq 1 and passes the old
        // daemon's position before the worker switches over.
        let shards = try ShardSet(count: 3)
        let ids = (0..<200).map { "three-\($0)" }.filter { ShardMap.owner(of: $0, count: 3) == 0 }.prefix(5)
        let second = ids.map(callbackComplete)
        #expect(try runSend(["--shards", shards.ingest], lines: second).status == 0)
        #expect(try waitUntil(timeout: 20) { try shards.totalLastSeq() == second.count })
        let switched = try FulfilProcess(publish: shards.publish,
                                         control: shards.daemons.map(\.control).joined(separator: ","),
                                         database: database)
        #expect(waitUntil(20) { orderCount(database) == 3 + second.count },
                "every order of shard 0, from its seq 1: \(orderCount(database))")
        switched.process.terminate()
        #expect(waitForExit(switched.process, timeout: 20) == 0)
        let db = try SQLiteDatabase(path: database.path)
        let q = try db.prepare("SELECT name, seq FROM subscriber_cursor ORDER BY name")
        try q.bind([])
        var rows: [String: Int64] = [:]
        while try q.step() { rows[q.text(0) ?? ""] = q.int64(1) }
        #expect(rows == ["fulfil": 3, "fulfil.0-of-3": Int64(second.count)], "\(rows)")
    }

    /// A daemon whose data directory was replaced numbers its journal from 1 again. A worker resuming
    /// from its old cursor took the new journal's envelopes up to the cursor for seen ones and
    /// skipped them, with one warning line: the orders among them were never created.
    @Test("a store whose cursor is ahead of a reset daemon's journal is refused, nothing skipped; moved to seq 1 it records them")
    func storeAheadOfAResetJournal() throws {
        let old = try DaemonProcess()
        let database = old.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        #expect(try send((0..<5).map { callbackComplete("old-\($0)") }, to: old.ingestAcked, arguments: ["--acked"]).status == 0)
        let worker = try FulfilProcess(daemon: old, database: database)
        #expect(waitUntil(20) { orderCount(database) == 5 })
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
        #expect(old.terminate() == 0)

        // A new data directory: its journal ends at seq 2, the store's cursor is at 5.
        let reset = try DaemonProcess()
        #expect(try send(["new-0", "new-1"].map(callbackComplete), to: reset.ingestAcked, arguments: ["--acked"]).status == 0)
        let refused = try runTool("checkoutbus-fulfil", ["--db", database.path, "--from", reset.publish,
                                                         "--control", reset.control], timeout: 20)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("the cursor is at seq 5 but the daemon's journal ends at seq 2"), "\(refused.output)")
        #expect(refused.output.contains("--to-seq 1"), "\(refused.output)")
        #expect(orderCount(database) == 5)

        let moved = try runTool("checkoutbus", ["cursor", "set", database.path, "--to-seq", "1"])
        #expect(moved.status == 0, "\(moved.output)")
        let resumed = try FulfilProcess(daemon: reset, database: database)
        #expect(waitUntil(20) { orderCount(database) == 7 }, "the new journal's orders: \(orderCount(database))")
        resumed.process.terminate()
        #expect(waitForExit(resumed.process, timeout: 20) == 0)
        #expect(try readOrders(database).map(\.key).filter { $0.contains("new-") }
                    == ["gid://shopify/Order/new-0", "gid://shopify/Order/new-1"])
    }

    /// The same with the new journal already past the store's cursor (the worker started again a
    /// second after it was refused, under `Restart=always`, or producers sent before it came back):
    /// the seqs alone look like the old journal's, and the worker skipped the new journal's
    /// envelopes up to its cursor. The store keeps the journal its cursor is in.
    @Test("a store kept in one journal is refused by a daemon with another whose seqs passed its cursor; moved, it records them all")
    func storePassedByAResetJournal() throws {
        let old = try DaemonProcess()
        let database = old.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        #expect(try send((0..<3).map { callbackComplete("before-\($0)") }, to: old.ingestAcked, arguments: ["--acked"]).status == 0)
        let worker = try FulfilProcess(daemon: old, database: database)
        #expect(waitUntil(20) { orderCount(database) == 3 })
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
        #expect(old.terminate() == 0)

        // A new data directory whose journal is at seq 8, past the store's cursor at 3.
        let reset = try DaemonProcess()
        #expect(try send((0..<8).map { callbackComplete("after-\($0)") }, to: reset.ingestAcked, arguments: ["--acked"]).status == 0)
        let refused = try runTool("checkoutbus-fulfil", ["--db", database.path, "--from", reset.publish,
                                                         "--control", reset.control], timeout: 20)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("the cursor is at seq 3 of journal") && refused.output.contains("--to-seq 1"),
                "\(refused.output)")
        #expect(orderCount(database) == 3)

        let moved = try runTool("checkoutbus", ["cursor", "set", database.path, "--to-seq", "1"])
        #expect(moved.status == 0, "\(moved.output)")
        let resumed = try FulfilProcess(daemon: reset, database: database)
        #expect(waitUntil(20) { orderCount(database) == 11 }, "the new journal's orders: \(orderCount(database)) of 11")
        resumed.process.terminate()
        #expect(waitForExit(resumed.process, timeout: 20) == 0)
        #expect(try readOrders(database).map(\.key).filter { $0.contains("after-") }.count == 8)
        // Kept again, in the new journal: a restart against it resumes.
        let again = try FulfilProcess(daemon: reset, database: database)
        #expect(try send([callbackComplete("later")], to: reset.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 12 }, "orders: \(orderCount(database)) of 12")
        again.process.terminate()
        #expect(waitForExit(again.process, timeout: 20) == 0)
    }

    @Test("SIGHUP, SIGUSR1 and SIGUSR2 do not end the worker (each ended it without a word); it records on, and SIGTERM stops it cleanly")
    func otherSignalsDoNotEndTheWorker() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database)
        for sig in [SIGHUP, SIGUSR1, SIGUSR2] { kill(worker.process.processIdentifier, sig) }
        #expect(try send([callbackComplete("after-signals")], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 1 }, "orders: \(orderCount(database))")
        #expect(worker.process.isRunning)
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
    }

    @Test("orders the journal no longer retained when the worker asked are counted in its stopped line (not_retained), not only warned")
    func notRetainedInTheStoppedLine() throws {
        let daemon = try DaemonProcess(["--segment-bytes", "8192", "--retain-bytes", "32768"])
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        #expect(try send((0..<300).map { callbackComplete("ret-\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let firstSeq = try #require(try ControlClient(daemon.control).stats()["first_seq"] as? Int)
        #expect(firstSeq > 1)
        let worker = try FulfilProcess(daemon: daemon, database: database)
        #expect(waitUntil(20) { orderCount(database) == 300 - (firstSeq - 1) }, "orders: \(orderCount(database))")
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
        let fields = stoppedFields(worker.stderr.readAll(timeout: 2).joined(separator: "\n"))
        #expect(fields["not_retained"] == String(firstSeq - 1), "\(fields)")
    }

    /// A worker that stopped on a store error used to send its final report: the daemon showed it
    /// `gone (stopped)`, a clean stop, at the seq handed to its queue — hundreds past what its
    /// store held, which sends an operator after the wrong cause ("Buyer paid, no order").
    @Test("a worker stopped by a store error is not reported stopped, and its last report is the seq its store committed")
    func storeErrorIsNotACleanStop() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database)
        #expect(try send((0..<20).map { callbackComplete("lk-\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 20 })
        // Another connection holds the store's write lock past the worker's 5 s busy timeout.
        let holder = try SQLiteDatabase(path: database.path)
        try holder.execute("BEGIN EXCLUSIVE")
        #expect(try send((20..<400).map { callbackComplete("lk-\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitForExit(worker.process, timeout: 40) == 1)
        try holder.execute("ROLLBACK")
        let q = try holder.prepare("SELECT seq FROM subscriber_cursor WHERE name = 'fulfil'")
        try q.bind([])
        let stored = try q.step() ? (q.int64(0) ?? -1) : -1
        q.reset()
        let subscribers = try #require(try ControlClient(daemon.control).stats()["subscribers"] as? [String: [String: Any]])
        let row = try #require(subscribers["fulfil-test"], "\(subscribers)")
        #expect(row["gone_reason"] as? String != "stopped", "\(row)")
        #expect((row["last_seq"] as? NSNumber)?.int64Value == stored, "store at \(stored): \(row)")
    }

    /// Two daemons both say shard 0 of 1: only their journal identities tell them apart. Before the
    /// check, the worker recorded the other daemon's orders from its journal, then skipped this
    /// daemon's envelopes up to the seqs those had moved its cursor to.
    @Test("a worker given one daemon's publish endpoint and another's control endpoint stops; nothing recorded or skipped")
    func publishAndControlOfTwoDaemons() throws {
        let here = try DaemonProcess()
        let other = try DaemonProcess()
        let database = here.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let others = (0..<4).map { callbackComplete("other-\($0)") }
        #expect(try send(others, to: other.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(try send(["here-0", "here-1"].map(callbackComplete), to: here.ingestAcked, arguments: ["--acked"]).status == 0)
        let refused = try runTool("checkoutbus-fulfil", ["--db", database.path, "--from", here.publish,
                                                         "--control", other.control], timeout: 30)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("they are two daemons"), "\(refused.output)")
        #expect(refused.output.contains(other.control) && refused.output.contains(here.publish), "\(refused.output)")
        #expect(orderCount(database) == 0)

        // Given one daemon's two endpoints, it records that daemon's orders, from seq 1.
        let worker = try FulfilProcess(daemon: here, database: database)
        #expect(waitUntil(20) { orderCount(database) == 2 }, "orders: \(orderCount(database)) of 2")
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
        #expect(try readOrders(database).map(\.key) == ["gid://shopify/Order/here-0", "gid://shopify/Order/here-1"])
    }

    /// A control endpoint that is the daemon's acknowledged ingest takes each request for an event and
    /// dead-letters it; the worker asked again every 15 s, journaling a dead letter each time.
    @Test("a worker whose --control is the daemon's acknowledged ingest stops at the first answer; its dead letters name it")
    func controlGivenTheAcknowledgedIngest() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        #expect(try send(["kept-0"].map(callbackComplete), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        let refused = try runTool("checkoutbus-fulfil", ["--db", database.path, "--from", daemon.publish,
                                                         "--control", daemon.ingestAcked], timeout: 30)
        #expect(refused.status == 1, "\(refused.output)")
        #expect(refused.output.contains("answered as an acknowledged ingest socket"), "\(refused.output)")
        #expect(orderCount(database) == 0)
        // The requests of its first round (a report on the first heartbeat, the replay), and no more:
        // not asked again, and no final report.
        let journal = try TailFilterTests.journal(of: daemon)
        let deadLetters = journal.filter { $0.string("kind") == "deadletter" }
        #expect(journal.count == 1 + deadLetters.count && (1...2).contains(deadLetters.count), "\(journal)")
        for letter in deadLetters {
            #expect(letter.string("detail")?.contains("sent to an ingest socket: control requests go to the daemon's "
                                                      + "--control endpoint") == true, "\(letter)")
            #expect(letter.string("raw")?.contains("\"final\":true") == false, "\(letter)")
        }
    }

    /// A daemon whose journal lost records it had published (a disk that dropped written pages, its
    /// data directory restored from a copy) gives their seqs to new events, and a running worker
    /// took those for envelopes it had handled and skipped them.
    @Test("a running worker stops when its daemon comes back with a journal behind what it published; moved, it records the new orders")
    func daemonBackWithAnOlderJournal() throws {
        let endpoints = DaemonProcess.restartableEndpoints()
        let first = try DaemonProcess(endpoints)
        let data = first.dataDirectory
        let database = data.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        let copy = data.deletingLastPathComponent().appendingPathComponent("data-copy")
        #expect(try send((0..<3).map { ecpComplete("early-\($0)") }, to: first.ingestAcked, arguments: ["--acked"]).status == 0)
        let worker = try FulfilProcess(daemon: first, database: database)
        #expect(waitUntil(20) { orderCount(database) == 3 })
        try FileManager.default.copyItem(at: data, to: copy)  // a copy of the journal at seq 3
        #expect(try send((0..<4).map { ecpComplete("late-\($0)") }, to: first.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 7 })
        first.kill9()
        try FileManager.default.removeItem(at: data)
        try FileManager.default.moveItem(at: copy, to: data)

        // The worker hears the new run's first heartbeat at seq 3, below seq 7 it was published.
        let restored = try DaemonProcess(endpoints, dataDirectory: data)
        #expect(waitForExit(worker.process, timeout: 30) == 1)
        let output = worker.stderr.readAll(timeout: 2).joined(separator: "\n")
        #expect(output.contains("restarted with its journal ending at seq 3, but it had published seq 7"), "\(output)")
        #expect(orderCount(database) == 7)

        // New orders take seqs 4 and 5 again; resumed after seq 3, the worker records them.
        #expect(try send(["new-0", "new-1"].map(ecpComplete), to: restored.ingestAcked, arguments: ["--acked"]).status == 0)
        let moved = try runTool("checkoutbus", ["cursor", "set", database.path, "--to-seq", "4"])
        #expect(moved.status == 0, "\(moved.output)")
        let resumed = try FulfilProcess(daemon: restored, database: database)
        #expect(waitUntil(20) { orderCount(database) == 9 }, "the new orders: \(orderCount(database)) of 9")
        resumed.process.terminate()
        #expect(waitForExit(resumed.process, timeout: 20) == 0)
        #expect(restored.terminate() == 0)
    }

    /// A store deleted under a running worker took every later order into a file nobody could open
    /// again, without a word, and a second worker could start on the path beside it.
    @Test("a store removed or replaced under the running worker stops it before its next order, saying so",
          arguments: ["removed", "replaced"])
    func storeRemovedUnderTheWorker(how: String) throws {
        let daemon = try DaemonProcess()
        let dir = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("store-\(how)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let database = dir.appendingPathComponent("orders.sqlite")
        let worker = try FulfilProcess(daemon: daemon, database: database)
        #expect(try send([ecpComplete("before")], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitUntil(20) { orderCount(database) == 1 })
        if how == "removed" {
            try FileManager.default.removeItem(at: dir)
        } else {
            let other = dir.appendingPathComponent("other.sqlite")
            try Data("not the worker's".utf8).write(to: other)
            #expect(rename(other.path, database.path) == 0)
        }
        #expect(try send([ecpComplete("after")], to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(waitForExit(worker.process, timeout: 20) == 1)
        let output = worker.stderr.readAll(timeout: 2).joined(separator: "\n")
        #expect(output.contains("the store is gone"), "\(output)")
        #expect(output.contains(how == "removed" ? "was removed" : "was replaced by another file"), "\(output)")
    }

    @Test("a store with cursor rows that do not say their shard count (fulfil.shard.I) is refused with the rows named")
    func storeOfUnknownShardCount() throws {
        let daemon = try DaemonProcess()
        let database = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("orders.sqlite")
        do {
            let db = try SQLiteDatabase(path: database.path)
            let create = try db.prepare("CREATE TABLE subscriber_cursor (name TEXT PRIMARY KEY, seq INTEGER NOT NULL)")
            try create.bind([])
            _ = try create.step()
            let insert = try db.prepare("INSERT INTO subscriber_cursor (name, seq) VALUES ('fulfil', 7), ('fulfil.shard.1', 9)")
            try insert.bind([])
            _ = try insert.step()
        }
        let refused = try runTool("checkoutbus-fulfil", ["--db", database.path, "--from", daemon.publish,
                                                         "--control", daemon.control])
        #expect(refused.status == 1)
        #expect(refused.output.contains("fulfil.shard.1"), "\(refused.output)")
        #expect(refused.output.contains("do not say for how many shards"), "\(refused.output)")
    }

    @Test("--cursor is refused with the reason; --help documents every flag")
    func flags() throws {
        let refused = try runTool("checkoutbus-fulfil", ["--cursor", "/tmp/x"])
        #expect(refused.status == 2)
        #expect(refused.output.contains("its cursor lives in --db"))
        let help = try runTool("checkoutbus-fulfil", ["--help"])
        #expect(help.status == 0)
        for flag in ["--db", "--sync", "--from", "--control", "--name", "--receive-hwm", "--log-level"] {
            #expect(help.output.contains(flag), "\(flag)")
        }
    }
}
