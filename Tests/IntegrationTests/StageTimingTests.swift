import Foundation
import Testing

/// The daemon times about one event in 64 stage by stage and reports the sums in `stats`
/// (`stages`); `checkoutbus bench` splits the pipeline's CPU by them.
@Suite("stage timing", .serialized, .timeLimit(.minutes(4)))
struct StageTimingTests {
    @Test("after a flood, stats' stages hold a sample of about one event in 64, every stage timed")
    func statsStages() throws {
        let daemon = try DaemonProcess()
        let flood = try runTool("checkoutbus", ["flood", "--to", daemon.ingest, "--from", daemon.publish,
                                                "--checkouts", "1500", "--seed", "3", "--json"], timeout: 60)
        #expect(flood.status == 0, "\(flood.output)")
        let stats = try ControlClient(daemon.control).stats()
        let stages = try #require(stats["stages"] as? [String: Any])
        func n(_ k: String) -> Int { (stages[k] as? NSNumber)?.intValue ?? -1 }
        let counters = try #require(stats["counters"] as? [String: Any])
        let received = (counters["received"] as? NSNumber)?.intValue ?? 0
        #expect(received > 5_000)
        // Intervals are 33...95 events: the sample (kept or discarded) is within those bounds.
        let sampled = n("timed") + n("discarded")
        #expect(sampled >= received / 95 - 1 && sampled <= received / 33 + 1, "\(sampled) of \(received)")
        #expect(n("timed") > 0)
        for k in ["receive_ns", "decode_ns", "rules_ns", "envelope_ns", "journal_append_ns", "publish_ns"] {
            #expect(n(k) > 0, "\(k): \(stages)")
        }
        #expect(n("publish_timed") > 0)
    }
}
