import Foundation
import Testing

import CheckoutBusCore
import CheckoutBusProtocol

/// The closed sets as the code declares them, against `Tests/Golden/closed-sets.json` — the file
/// the Python client's copies (kinds.py) are checked against too (`tests/test_closed_sets.py`) —
/// and the dead-letter table of docs/envelope.md. A set changed in one place and not another fails
/// here (docs/architecture.md, "Closed sets, declared once").
@Suite("closed sets: declared once, every copy checked")
struct ClosedSetsTests {
    static func golden() throws -> [String: Any] {
        let data = try Data(contentsOf: repositoryRoot.appendingPathComponent("Tests/Golden/closed-sets.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test("kinds and topics, families, stable codes, dead-letter reasons and topic limits are the golden file's")
    func codeAgreesWithGolden() throws {
        let g = try Self.golden()
        let kinds = (g["kinds"] as? [[Any]]) ?? []
        #expect(kinds.map { $0[0] as? String } == JournaledKind.allCases.map { $0.name })
        #expect(kinds.map { $0[1] as? String } == JournaledKind.allCases.map { "\($0.topic)" })
        // A fail's topic is a prefix: checkout.fail.<code>.
        #expect(kinds.map { $0[2] as? Bool } == JournaledKind.allCases.map { $0 != .fail })
        #expect(g["families"] as? [String] == RawFormat.labels)
        #expect(g["stable_codes"] as? [String] == StableErrorCode.allCases.map(\.rawValue))
        #expect(g["dead_letter_reasons"] as? [String] == DeadLetterReason.all.map(\.code))
        #expect(g["max_prefix_bytes"] as? Int == TopicLimits.maxPrefixBytes)
        #expect(g["max_replay_prefixes"] as? Int == TopicLimits.maxReplayPrefixes)
    }

    @Test("docs/envelope.md's dead-letter table has a row for each reason, in order, and no other")
    func deadLetterTable() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/envelope.md"), encoding: .utf8)
        let section = try #require(text.range(of: "| reason | when |"))
        let rows = text[section.upperBound...].split(separator: "\n").drop { $0.hasPrefix("|---") }
            .prefix { $0.hasPrefix("| `") }
            .compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
        #expect(rows == DeadLetterReason.all.map(\.code))
    }
}
