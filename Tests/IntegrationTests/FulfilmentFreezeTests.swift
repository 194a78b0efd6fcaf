import CheckoutBusProtocol
import CheckoutBusTools
import Foundation
import Testing

/// The fulfilment worker that stopped creating orders after a daemon restart (issue 32), put
/// exactly where it froze instead of hoped for: the daemon is killed by a failpoint with the
/// worker's replay request read and unanswered, and a new daemon is started on the same
/// endpoints and journal. The worker must go on to record every order.
@Suite("fulfilment worker across a daemon killed mid-replay", .serialized, .timeLimit(.minutes(8)))
struct FulfilmentFreezeTests {
    /// A journal with more than two replay pages of completes and fails for the worker to catch up on.
    static func journalWithOrders(checkouts: Int, seed: UInt64) throws -> (daemon: DaemonProcess, orders: Int) {
        let daemon = try DaemonProcess()
        let flood = Process()
        flood.executableURL = Products.url("checkoutbus")
        flood.arguments = ["flood", "--to", daemon.ingest, "--from", daemon.publish, "--checkouts", String(checkouts),
                           "--seed", String(seed), "--json"]
        flood.standardOutput = FileHandle.nullDevice
        flood.standardError = FileHandle.nullDevice
        try flood.start()
        #expect(waitForExit(flood, timeout: 120) == 0, "the flood saw nothing lost")
        let events = FloodGenerator(checkouts: checkouts, seed: seed, runID: "expected").makeEvents()
        return (daemon, Set(events.filter { $0.expected == .complete }.map(\.checkoutID)).count)
    }

    /// Replay request `n` of the worker's catch-up kills the daemon before it answers: 1 is the
    /// first page, 2 the next page's request, sent before the first page is delivered (the prefetch).
    @Test("killed holding the worker's first or prefetched replay request, then restarted in place: every order arrives once",
          arguments: [1, 2])
    func killedHoldingAReplayRequest(request n: Int) throws {
        let (first, orders) = try Self.journalWithOrders(checkouts: 4000, seed: 32)
        #expect(orders > 2000, "more than two replay pages of completes")
        let endpoints = first.sameEndpoints
        let data = first.dataDirectory
        #expect(first.terminate() == 0)

        let doomed = try DaemonProcess(endpoints, dataDirectory: data, failpoints: "control.replay=kill@\(n)")
        let database = data.deletingLastPathComponent().appendingPathComponent("orders-\(n).sqlite")
        // Not waiting for its subscription: the daemon may die on the worker's first replay request
        // before the heartbeat that answers it.
        let worker = try FulfilProcess(publish: doomed.publish, control: doomed.control, database: database,
                                       waitForSubscription: false)
        let status = waitForExit(doomed.process, timeout: 30)
        #expect(status != 0, "the failpoint killed the daemon")
        #expect(doomed.stderrText.contains("failpoints: control.replay: kill"))
        let before = orderCount(database)
        #expect(before < orders, "the daemon died before the worker had every order (\(before) of \(orders))")

        // The deploy: a new daemon on the same endpoints and journal, no failpoint.
        let restarted = try DaemonProcess(endpoints, dataDirectory: data)
        let converged = waitUntil(60) { orderCount(database) >= orders }
        #expect(converged, "the worker recorded \(orderCount(database)) of \(orders) orders a minute after the restart")
        let rows = try readOrders(database)
        #expect(rows.count == orders)
        #expect(Set(rows.map(\.key)).count == rows.count)
        worker.process.terminate()
        #expect(waitForExit(worker.process, timeout: 20) == 0)
        #expect(restarted.terminate() == 0)
    }
}
