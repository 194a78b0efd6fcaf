import Testing

import CheckoutBusJetStream
import CheckoutBusRuntime

/// How the bridge names JetStream subjects and message ids, and reads its durations.
@Suite("bridge subjects, ids and durations")
struct BridgeSubjectTests {
    @Test("a bus topic is its own subject; bytes NATS cannot hold and empty tokens become _", arguments: [
        ("checkout.start", "checkout.start"),
        ("checkout.fail.cart_expired", "checkout.fail.cart_expired"),
        ("bus.deadletter", "bus.deadletter"),
        ("a b.c*d.>", "a_b.c_d._"),
        ("a..b", "a._.b"),
        (".a.", "_.a._"),
        ("", "_"),
    ])
    func subjects(topic: String, subject: String) {
        #expect(BridgeSubject.subject(forTopic: Array(topic.utf8)) == subject)
    }

    @Test("message ids are <shard>:<seq>; anything else is not one")
    func ids() {
        #expect(BridgeSubject.parseID("0:1").map { [$0.shard, Int($0.seq)] } == [0, 1])
        #expect(BridgeSubject.parseID("3:9000000000").map { $0.seq } == 9_000_000_000)
        for bad in ["", "1", ":1", "1:", "1:0", "-1:5", "a:b", "1:2:3"] {
            #expect(BridgeSubject.parseID(bad) == nil, "\(bad)")
        }
    }

    @Test("durations: 0 or a number with a unit, in nanoseconds; anything else names the flag")
    func durations() throws {
        #expect(try BridgeOptions.duration("0", flag: "max-age") == 0)
        #expect(try BridgeOptions.duration("500ms", flag: "max-age") == 500_000_000)
        #expect(try BridgeOptions.duration("90s", flag: "max-age") == 90_000_000_000)
        #expect(try BridgeOptions.duration("7d", flag: "max-age") == 7 * 86_400_000_000_000)
        for bad in ["", "5", "-1s", "1w", "s", "99999999999999d"] {
            do {
                _ = try BridgeOptions.duration(bad, flag: "max-age")
                Issue.record("accepted \(bad)")
            } catch {
                #expect(error.description.hasPrefix("--max-age must be 0 or a duration"))
            }
        }
    }
}
