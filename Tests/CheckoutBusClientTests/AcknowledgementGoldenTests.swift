import Foundation
import Testing

import CheckoutBusClient
import CheckoutBusJSON

/// The Swift client's `Acknowledgement` reads every reply of `Tests/Golden/ack-replies.tsv` (the
/// daemon's bytes, checked against the writer by `AckReplyWireTests`) to the right fields.
@Suite("acknowledgements: the client reads the golden replies")
struct AcknowledgementGoldenTests {
    static func golden() -> [String: String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = (try? String(contentsOf: root.appendingPathComponent("Tests/Golden/ack-replies.tsv"), encoding: .utf8)) ?? ""
        var out: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "\t", maxSplits: 1).map(String.init)
            if parts.count == 2 { out[parts[0]] = parts[1] }
        }
        return out
    }

    static let expected: [String: Acknowledgement] = [
        "published": .init(isAccepted: true, seq: 42, reason: nil, isDuplicate: false, isSuppressed: false, eventID: "evt-0001"),
        "suppressed": .init(isAccepted: true, seq: nil, reason: nil, isDuplicate: false, isSuppressed: true, eventID: "evt-0002"),
        "duplicate": .init(isAccepted: true, seq: 42, reason: nil, isDuplicate: true, isSuppressed: false, eventID: "evt-0001"),
        "duplicate-of-suppressed": .init(isAccepted: true, seq: nil, reason: nil, isDuplicate: true, isSuppressed: false,
                                         eventID: "evt-0002"),
        "dead-lettered": .init(isAccepted: false, seq: 43, reason: "unknown_event", isDuplicate: false, isSuppressed: false,
                               eventID: "evt-0003"),
        "duplicate-dead-letter": .init(isAccepted: false, seq: 43, reason: "unknown_event", isDuplicate: true, isSuppressed: false,
                                       eventID: "evt-0003"),
        "not-json": .init(isAccepted: false, seq: 44, reason: "invalid_json", isDuplicate: false, isSuppressed: false, eventID: nil),
    ]

    @Test("each golden reply reads to its acknowledgement")
    func readsGolden() throws {
        let golden = Self.golden()
        #expect(Set(golden.keys) == Set(Self.expected.keys))
        let document = JSONDocument()
        for (name, ack) in Self.expected {
            let line = try #require(golden[name], "no golden line \(name)")
            let read = Array(line.utf8).withUnsafeBytes { Acknowledgement(reply: $0, document: document) }
            #expect(read == ack, "\(name)")
        }
    }
}
