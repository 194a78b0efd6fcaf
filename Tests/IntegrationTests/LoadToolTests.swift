import Foundation
import Testing

/// The load tools against the real daemon: flood's generator knows what must be published, and
/// the daemon must publish exactly that; bench runs end to end (its figures are never asserted).
@Suite("flood and bench", .serialized, .timeLimit(.minutes(3)))
struct LoadToolTests {
    @Test("flood: every family's lifecycles, published exactly as the generator expects")
    func floodMatchesGenerator() throws {
        let daemon = try DaemonProcess()
        let result = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                 "--checkouts", "2000", "--seed", "7", "--json"])
        #expect(result.status == 0, "\(result.output)")
        let line = try #require(result.output.split(separator: "\n").last.map(String.init))
        let report = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(report.bool("ok") == true)
        #expect(report.int("published") == report.int("expected_published"))
        #expect(report.int("suppressed") == report.int("expected_suppressed"))
        #expect((report.int("expected_suppressed") ?? 0) > 0, "the generator repeats snapshots")
        #expect(report.object("published_by_kind")?.int("complete") == report.object("expected_by_kind")?.int("complete"))
        #expect(report.int("deadletters") == 0)
        #expect((report.int("sent") ?? 0) > 8000)
    }

    @Test("flood at a fixed rate with a count limit stops where told and still matches")
    func floodPacedAndLimited() throws {
        let daemon = try DaemonProcess()
        let result = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                 "--rate", "5000", "--count", "3000", "--json"])
        #expect(result.status == 0, "\(result.output)")
        let line = try #require(result.output.split(separator: "\n").last.map(String.init))
        let report = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(report.int("sent") == 3000)
        #expect(report.bool("ok") == true)
        #expect((report.object("latency_us")?["p99"] as? Double ?? 0) > 0)
    }

    @Test("bench runs the daemon beside the raw forwarder and reports a ratio")
    func benchSmoke() throws {
        let result = try runTool("checkoutbus", ["bench", "--rounds", "1", "--events", "2000",
                                                 "--latency-events", "200", "--latency-rate", "2000",
                                                 "--memory-checkouts", "2000"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("ratio bus/raw"))
        #expect(result.output.contains("(2000/2000 received)"))
        #expect(result.output.contains("bytes per tracked checkout"))
    }
}
