import CheckoutBusCore
import CheckoutBusJSON
import CheckoutBusProtocol
import Foundation
import Testing

/// Every line of `samples/*.jsonl`, `Tests/Corpus` and the bench inputs through one processor per
/// file (as `checkoutbus decode` does), in both buyer-data modes: outcomes, topics and envelopes
/// byte for byte as a reference build wrote them (`Tests/Golden/envelopes.jsonl`, made by
/// `scripts/make-golden-envelopes.py`; `received_at` normalised to the tests' fixed time). Guards
/// the hot path's shortcuts (summary, ids, envelope writing) against any change of output.
@Suite("golden envelopes")
struct GoldenEnvelopeTests {
    struct Record: Decodable {
        var file: String
        var mode: String
        var line: Int
        var outcome: String
        var topic: String?
        var envelope: String?
    }

    static func records() throws -> [Record] {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("Tests/Golden/envelopes.jsonl"), encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONDecoder().decode(Record.self, from: Data($0.utf8)) }
    }

    static func outcomeName(_ o: EventProcessor.Outcome) -> String {
        switch o {
        case .published: "published"
        case .deadLettered: "deadletter"
        case .suppressed: "suppressed"
        case .duplicate, .duplicateDeadLetter: "duplicate"
        }
    }

    @Test("every sample, corpus and bench line: envelopes identical to the reference build's")
    func envelopesMatchGolden() throws {
        let golden = try Self.records()
        #expect(golden.count >= 390)
        var groups: [String: [Record]] = [:]
        var order: [String] = []
        for r in golden {
            let key = r.file + "\u{0}" + r.mode
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(r)
        }
        #expect(order.count == 10)
        var compared = 0
        for key in order {
            let records = groups[key]!
            let (file, mode) = (records[0].file, records[0].mode)
            var options = EventProcessor.Options()
            options.dedupeWindow = 200_000  // as the daemon's (and `checkoutbus decode`'s) configuration
            options.keepBuyerData = mode == "full"
            let processor = EventProcessor(options: options)
            let input = try Data(contentsOf: repositoryRoot.appendingPathComponent(file))
            let lines = [UInt8](input).split(separator: 0x0A, omittingEmptySubsequences: false)
            var expected = records.makeIterator()
            for (n, raw) in lines.enumerated() {
                var line = Array(raw)
                if line.last == 0x0D { line.removeLast() }
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) || line.first == 0x23 { continue }
                let result = line.withUnsafeBytes {
                    processor.process($0, receivedAt: Timestamp(milliseconds: fixedReceivedAt), now: 1_000)
                }
                guard let want = expected.next() else {
                    Issue.record("\(file) (\(mode)) line \(n + 1): no golden record")
                    return
                }
                #expect(want.line == n + 1, "\(file) (\(mode))")
                #expect(Self.outcomeName(result.outcome) == want.outcome, "\(file) (\(mode)) line \(n + 1)")
                let topic = result.publication.map { String(decoding: $0.topic, as: UTF8.self) }
                let envelope = result.publication.map { String(decoding: $0.envelope, as: UTF8.self) }
                #expect(topic == want.topic, "\(file) (\(mode)) line \(n + 1)")
                #expect(envelope == want.envelope, "\(file) (\(mode)) line \(n + 1)")
                compared += 1
            }
            #expect(expected.next() == nil, "\(file) (\(mode)): golden records left over")
        }
        #expect(compared == golden.count)
    }
}
