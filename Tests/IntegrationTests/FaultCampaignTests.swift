import Foundation
import Testing

/// A few schedules of `scripts/fault-campaign` (docs/durability.md, "The fault campaign"): the real
/// daemon, fulfilment and analytics workers and JetStream bridge under an acknowledged producer,
/// killed, stopped, given a full disk and a failing fdatasync, then every invariant checked. The
/// script runs many more (`scripts/fault-campaign --schedules 200`).
@Suite("fault campaign", .serialized, .timeLimit(.minutes(8)),
       .enabled(if: PyZMQSubscriberTests.pythonWithZMQ != nil, "python3 with pyzmq is not installed (scripts/install-deps)"))
struct FaultCampaignTests {
    /// Seed 32's schedules 3-5: a disk that refuses writes for a while and a daemon kill; a failed
    /// fdatasync (a fence) among worker kills and a daemon kill; and a worker down long enough to
    /// replay pages behind, with the daemon killed while it catches up, among four more daemon faults.
    @Test("seeded schedules of kill -9, SIGSTOP, disk full and a failed fdatasync: every invariant holds")
    func seededSchedules() async throws {
        let python = try #require(PyZMQSubscriberTests.pythonWithZMQ)
        // Two minutes of processes: on a thread of its own, not one of the cooperative pool's.
        let (status, output) = try await PythonClientTests.runOffPool(
            [python, Products.repositoryRoot.appendingPathComponent("scripts/fault-campaign").path,
             "--seed", "32", "--first", "3", "--schedules", "3", "--checkouts", "1500",
             "--bin", Products.directory.path, "--json"], timeout: 420)
        let lines = output.split(separator: "\n").map(String.init)
        for line in lines where !line.hasPrefix("{") { print("fault-campaign: \(line)") }
        #expect(status == 0, "fault-campaign failed:\n\(lines.filter { !$0.hasPrefix("{") }.joined(separator: "\n"))")
        let summary = try #require(lines.first { $0.hasPrefix("{") }.flatMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        })
        #expect(summary["passed"] as? Int == 3 && summary["failed"] as? Int == 0)
        let outcomes = summary["outcomes"] as? [[String: Any]] ?? []
        let figures = outcomes.compactMap { $0["figures"] as? [String: Any] }
        // The faults really happened: daemon restarts, and the fence.
        #expect(figures.reduce(0) { $0 + (($1["daemon_starts"] as? Int ?? 1) - 1) } >= 4)
        #expect(figures.reduce(0) { $0 + ($1["fences"] as? Int ?? 0) } >= 1, "schedule 4's fdatasync failpoint fenced the daemon")
        #expect(figures.allSatisfy { ($0["acked"] as? Int ?? -1) == ($0["events"] as? Int ?? -2) })
    }
}
