import Testing

import CheckoutBusProtocol

/// The kinds and topics both sides of the publish socket agree on.
@Suite("kinds and topics")
struct KindTests {
    @Test("each lifecycle kind is the journaled kind of the same position, name and topic")
    func lifecycleKindsAreJournaledKinds() {
        #expect(LifecycleKind.allCases.count + 1 == JournaledKind.allCases.count)
        for kind in LifecycleKind.allCases {
            let journaled = JournaledKind(rawValue: Int(kind.rawValue))
            #expect(journaled?.name == kind.name.description)
            #expect(journaled.map { Array($0.topicRoot.utf8).starts(with: kind.topic.description.utf8) } == true)
        }
        #expect(JournaledKind.allCases.last == .deadletter)
    }

    @Test("a published topic names its kind; a heartbeat or an unknown topic names none", arguments: [
        ("checkout.start", JournaledKind.start),
        ("checkout.update", .update),
        ("checkout.complete", .complete),
        ("checkout.fail.network_error", .fail),
        ("checkout.fail.unknown", .fail),
        ("checkout.dismiss", .dismiss),
        ("bus.deadletter", .deadletter),
    ])
    func topics(topic: String, kind: JournaledKind) {
        #expect(JournaledKind(topic: Array(topic.utf8)) == kind)
    }

    @Test("topics that take no seq", arguments: ["bus.heartbeat", "checkout.startx", "checkout.", "checkout.completed", ""])
    func notJournaled(topic: String) {
        #expect(JournaledKind(topic: Array(topic.utf8)) == nil)
    }

    @Test("every stable code is a distinct snake_case topic segment, and unknown is among them")
    func stableCodes() {
        let names = StableErrorCode.allCases.map(\.rawValue)
        #expect(Set(names).count == names.count)
        for name in names {
            #expect(!name.isEmpty && name.allSatisfy { $0 == "_" || ("a"..."z").contains($0) })
            #expect(JournaledKind(topic: Array("checkout.fail.\(name)".utf8)) == .fail)
        }
        #expect(StableErrorCode(rawValue: "unknown") == .unknown)
    }
}
