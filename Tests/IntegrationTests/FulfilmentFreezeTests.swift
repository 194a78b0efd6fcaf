import CheckoutBusProtocol
import CheckoutBusLoad
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
        let daemon = try DaemonProcess(DaemonProcess.restartableEndpoints())
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

    /// The daemon dies at a chosen point of the worker's catch-up: `control.replay=kill@1`, holding
    /// the worker's first replay request; `@2`, holding the next page's request, sent before the
    /// first page is delivered (the prefetch); `publish.heartbeat=kill@2`, at its second heartbeat,
    /// with the worker joined and a page in flight or queued in the hand-over.
    @Test("killed mid-catch-up (first or prefetched replay request, a heartbeat), then restarted in place: every order arrives once",
          arguments: ["control.replay=kill@1", "control.replay=kill@2", "publish.heartbeat=kill@2"])
    func killedHoldingAReplayRequest(failpoint: String) throws {
        let n = failpoint.hasPrefix("control") ? Int(failpoint.suffix(1))! : 0
        let (first, orders) = try Self.journalWithOrders(checkouts: 4000, seed: 32)
        #expect(orders > 2000, "more than two replay pages of completes")
        let endpoints = first.sameEndpoints
        let data = first.dataDirectory
        #expect(first.terminate() == 0)

        let doomed = try DaemonProcess(endpoints, dataDirectory: data, failpoints: failpoint)
        let database = data.deletingLastPathComponent().appendingPathComponent("orders-\(n).sqlite")
        // Not waiting for its subscription: the daemon may die on the worker's first replay request
        // before the heartbeat that answers it.
        let worker = try FulfilProcess(publish: doomed.publish, control: doomed.control, database: database,
                                       waitForSubscription: false)
        let status = waitForExit(doomed.process, timeout: 30)
        #expect(status != 0, "the failpoint killed the daemon")
        #expect(doomed.stderrText.contains("failpoints: \(failpoint.prefix { $0 != "=" }): kill"))
        let before = orderCount(database)
        if n > 0 { #expect(before < orders, "the daemon died before the worker had every order (\(before) of \(orders))") }

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
