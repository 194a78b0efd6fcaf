import Testing

import CheckoutBusProtocol

@Suite("kind names and topics, defined once")
struct KindNameTests {
    @Test("lifecycle kinds take their names and topics from the journaled kinds")
    func lifecycleFromJournaled() {
        #expect(LifecycleKind.allCases.map { String(describing: $0.name) } == ["start", "update", "complete", "fail", "dismiss"])
        #expect(JournaledKind.allCases.map(\.name) == ["start", "update", "complete", "fail", "dismiss", "deadletter"])
        for kind in LifecycleKind.allCases {
            let journaled = JournaledKind(kind)
            #expect(journaled.rawValue == Int(kind.rawValue))
            #expect(String(describing: kind.topic) == String(describing: journaled.topic))
        }
        #expect(String(describing: JournaledKind.deadletter.topic) == "bus.deadletter")
    }

    @Test("a published topic maps back to its kind")
    func topicsMapBack() {
        #expect(JournaledKind(topic: Array("checkout.fail.cart_expired".utf8)) == .fail)
        #expect(JournaledKind(topic: Array("checkout.fail".utf8)) == .fail)
        #expect(JournaledKind(topic: Array("bus.deadletter".utf8)) == .deadletter)
        #expect(JournaledKind(topic: Array("checkout.update".utf8)) == .update)
        #expect(JournaledKind(topic: Array("checkout.updates".utf8)) == nil)
        #expect(JournaledKind(topic: Array("bus.heartbeat".utf8)) == nil)
    }
}
