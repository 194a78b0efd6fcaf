import Foundation
import Testing

@testable import CheckoutBusLoad
import CheckoutBusProtocol
import CheckoutBusTools

@Suite("bench's stage breakdown")
struct StageBreakdownTests {
    static func breakdown(pipeline: Double, stages: [String: Double]) -> StageBreakdown {
        var b = StageBreakdown()
        b.threads = ["pipeline": pipeline, "zmq-io": pipeline / 2]
        b.stages = stages
        return b
    }

    @Test("sampled stages below the thread's CPU leave the loop's rest")
    func rest() {
        let before = Self.breakdown(pipeline: 1, stages: [:])
        // 1,000 events: 3 ms of pipeline CPU, 3 µs per event; 10 timed events of 2 µs in all.
        let after = Self.breakdown(pipeline: 1.003, stages: [
            "timed": 10, "receive_ns": 1_000, "decode_ns": 8_000, "rules_ns": 5_000, "envelope_ns": 4_000,
            "journal_append_ns": 1_000, "publish_timed": 10, "publish_ns": 1_000,
        ])
        let r = StageBreakdown.perEvent(from: before, to: after, events: 1_000)
        #expect(abs(r["pipeline"]! - 3.0) < 1e-6)
        #expect(abs(r["decode"]! - 0.8) < 1e-6)
        #expect(abs(r["publish"]! - 0.1) < 1e-6)
        #expect(abs(r["rest"]! - 1.0) < 1e-6)
        #expect(abs(r["zmq-io"]! - 1.5) < 1e-6)
    }

    @Test("sampled stages above the thread's CPU are scaled down to it, with no rest")
    func scaledDown() {
        let before = Self.breakdown(pipeline: 1, stages: [:])
        let after = Self.breakdown(pipeline: 1.001, stages: [
            "timed": 10, "receive_ns": 0, "decode_ns": 10_000, "rules_ns": 10_000, "envelope_ns": 0,
            "journal_append_ns": 0, "publish_timed": 1, "publish_ns": 0,
        ])
        let r = StageBreakdown.perEvent(from: before, to: after, events: 1_000)
        #expect(abs(r["decode"]! - 0.5) < 1e-6)
        #expect(abs(r["rules"]! - 0.5) < 1e-6)
        #expect(r["rest"] == 0)
        #expect(abs(r["sampled_over_cpu"]! - 2.0) < 1e-6)
    }

    @Test("this process's threads are read from /proc: the main thread is the pipeline group")
    func threadsOfThisProcess() {
        var x = 0.0
        for i in 0..<3_000_000 { x += Double(i & 7) }  // some CPU on this thread
        let cpu = StageBreakdown.threadCPU(pid: getpid())
        #expect(x > 0)
        #expect(cpu.values.reduce(0, +) > 0)
        #expect(Set(cpu.keys).isSubset(of: Set(StageBreakdown.threadGroups)))
    }

    @Test("stats' text shows the pipeline's mean µs per timed event by stage, and nothing before any is timed")
    func statsText() {
        var stats = StatsReply()
        stats.stages.timed = 4
        stats.stages.receive = 800
        stats.stages.decode = 4_400
        stats.stages.rules = 3_600
        stats.stages.envelope = 2_400
        stats.stages.journalAppend = 400
        stats.stages.publishTimed = 2
        stats.stages.publish = 1_000
        let text = StatsCommand.render(stats)
        #expect(text.contains("pipeline µs/event"))
        #expect(text.contains("decode 1.1, rules 0.9, envelope 0.6, journal append 0.1, publish 0.5 (4 events timed)"))
        #expect(!StatsCommand.render(StatsReply()).contains("pipeline µs/event"))
    }
}
