import Foundation
import Testing
import ZeroMQ

/// `--pipeline-threads`: messages are prepared (parsed, decoded, hashed) on several threads and
/// committed in arrival order, so the journal holds exactly what one thread would have written.
@Suite("parallel pipeline", .serialized, .timeLimit(.minutes(5)))
struct ParallelPipelineTests {
    /// The same stream for every daemon: the shipped samples many times over (repeats, retries by
    /// event id, suppressed updates, repeated completes), broken JSON, a byte order mark, an
    /// unknown shape and a multipart message among them.
    static func stream() throws -> [[[UInt8]]] {
        var lines: [String] = []
        for name in ["samples/tour.jsonl", "samples/bridges.jsonl"] {
            let text = try String(contentsOf: Products.repositoryRoot.appendingPathComponent(name), encoding: .utf8)
            lines += text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty }
        }
        var messages: [[[UInt8]]] = []
        for round in 0..<250 {
            for (i, line) in lines.enumerated() {
                // Every other round under new checkout ids, so state grows as well as repeats.
                let text = round % 2 == 0 ? line : line.replacingOccurrences(of: "\"ck-", with: "\"ck-r\(round)-")
                messages.append([Array(text.utf8)])
                if i == 3 { messages.append([Array("{\"checkout\":{\"id\":\"x\"".utf8)]) }
                if i == 5 { messages.append([[0xEF, 0xBB, 0xBF] + Array(line.utf8)]) }
                if i == 7 { messages.append([Array("{\"hello\":\"world\"}".utf8)]) }
                if i == 9 && round % 10 == 0 { messages.append([Array("{}".utf8), Array("{}".utf8)]) }
            }
        }
        return messages
    }

    /// What a record says that does not depend on when it was processed.
    static func fingerprint(_ record: (Int, String, [String: Any])) -> String {
        let e = record.2
        let keys = ["kind", "kind_seq", "checkout_id", "event_id", "repeat", "after_complete", "idempotency_key",
                    "reason", "error", "summary"]
        let parts = keys.map { k -> String in
            guard let v = e[k] else { return "-" }
            if let data = try? JSONSerialization.data(withJSONObject: ["v": v], options: [.sortedKeys]) {
                return String(decoding: data, as: UTF8.self)
            }
            return "\(v)"
        }
        return "\(record.0) \(record.1) " + parts.joined(separator: " ")
    }

    static func run(threads: Int, _ messages: [[[UInt8]]]) throws -> (records: [String], stages: [String: Any], names: [String]) {
        let daemon = try DaemonProcess(["--pipeline-threads", String(threads)])
        let context = try ZMQContext()
        let push = try ZMQSocket(context: context, type: .push)
        try push.setLinger(milliseconds: 5000)
        try push.setOption(.sendHighWaterMark, Int32(0))
        try push.connect(daemon.ingest)
        for frames in messages {
            for (i, frame) in frames.enumerated() { _ = try push.send(frame, more: i < frames.count - 1) }
        }
        let control = try ControlClient(daemon.control)
        var stats = try control.stats()
        func received(_ s: [String: Any]) -> Int { ((s["counters"] as? [String: Any])?["received"] as? Int) ?? 0 }
        let deadline = Date().addingTimeInterval(60)
        while received(stats) < messages.count && Date() < deadline {
            usleep(50_000)
            stats = try control.stats()
        }
        #expect(received(stats) == messages.count)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(daemon.process.processIdentifier)/task"))?
            .compactMap { try? String(contentsOfFile: "/proc/\(daemon.process.processIdentifier)/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? []
        let records = try control.replayAll().map(fingerprint)
        #expect(daemon.terminate() == 0)
        return (records, stats["stages"] as? [String: Any] ?? [:], names)
    }

    @Test("three prepare threads write the journal one thread writes, record for record")
    func sameJournal() throws {
        let messages = try Self.stream()
        let one = try Self.run(threads: 1, messages)
        let three = try Self.run(threads: 3, messages)
        #expect(one.records.count > 5_000)
        #expect(one.records.contains { $0.contains("deadletter") })
        #expect(one.records.contains { $0.contains("checkout.update") })
        // Record for record: seq, topic, kind, kind_seq, ids, repeat flags, error and summary.
        #expect(one.records.count == three.records.count)
        let firstDifference = zip(one.records, three.records).first { $0 != $1 }
        #expect(firstDifference == nil, "\(String(describing: firstDifference))")
        // The parallel path ran: its two threads exist, and batches were prepared on them.
        #expect(three.names.filter { $0.hasPrefix("prepare-") }.count == 2)
        #expect(one.names.filter { $0.hasPrefix("prepare-") }.isEmpty)
        #expect((three.stages["parallel_batches"] as? Int ?? 0) > 0, "\(three.stages)")
        #expect((three.stages["parallel_messages"] as? Int ?? 0) > 0)
        #expect((one.stages["parallel_batches"] as? Int ?? -1) == 0)
    }
}
