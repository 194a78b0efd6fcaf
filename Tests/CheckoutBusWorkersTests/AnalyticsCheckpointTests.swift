import Foundation
import Testing

@testable import CheckoutBusWorkers

/// The analytics checkpoint read back: what a hand-edited file may not hold.
@Suite("analytics checkpoint: read back whole or refused")
struct AnalyticsCheckpointTests {
    static func text(_ funnel: AnalyticsFunnel) -> String {
        String(decoding: AnalyticsCheckpoint.encode(funnel), as: UTF8.self)
    }

    static func refusal(_ text: String) -> String? {
        do {
            _ = try AnalyticsCheckpoint.decode(Array(text.utf8), maxCheckouts: 10, path: "state")
            return nil
        } catch {
            return error.description
        }
    }

    @Test("a checkpoint written is read back; a negative count anywhere refuses it, named",
          arguments: [
            (#""events":0"#, #""events":-5"#, "a negative counter events"),
            (#""failed_by_code":{}"#, #""failed_by_code":{"network_error":-1}"#, "failed_by_code"),
            (#""dead_letters_by_reason":{}"#, #""dead_letters_by_reason":{"bad_json":-2}"#, "dead_letters_by_reason"),
            (#""revenue":{}"#, #""revenue":{"USD":[-1,100,0]}"#, "revenue"),
            (#""buckets":[]"#, #""buckets":[[12,-4]]"#, "durations"),
            (#""buckets":[]"#, #""buckets":[[12,9223372036854775000],[13,9223372036854775000]]"#, "durations"),
            (#""evicted_checkouts":0"#, #""evicted_checkouts":-3"#, "evicted_checkouts"),
          ])
    func negative(field: String, edited: String, named: String) throws {
        let written = Self.text(AnalyticsFunnel(maxCheckouts: 10))
        #expect(written.contains(field), "\(written)")
        #expect(Self.refusal(written) == nil)
        let refusal = try #require(Self.refusal(written.replacingOccurrences(of: field, with: edited)))
        #expect(refusal.contains("not an analytics checkpoint") && refusal.contains("negative")
                    && refusal.contains(named), "\(refusal)")
    }

    @Test("a revenue's total below zero is read as it was written (the totals the envelopes carried)")
    func negativeTotal() throws {
        let written = Self.text(AnalyticsFunnel(maxCheckouts: 10))
            .replacingOccurrences(of: #""revenue":{}"#, with: #""revenue":{"USD":[1,-250,0]}"#)
        let funnel = try AnalyticsCheckpoint.decode(Array(written.utf8), maxCheckouts: 10, path: "state")
        #expect(funnel.revenue["USD"]?.total == -250 && funnel.revenue["USD"]?.orders == 1)
    }
}
