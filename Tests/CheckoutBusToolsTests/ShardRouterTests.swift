import Testing

import CheckoutBusCore
import CheckoutBusTools

/// `checkoutbus send --shards` and `route` pick the shard the daemons themselves pick.
@Suite("shard router")
struct ShardRouterTests {
    static func wrapped(_ checkoutID: String, eventID: String) -> [UInt8] {
        Array(#"{"checkout_id":"\#(checkoutID)","platform":"ios","sdk":"shopify","event_id":"\#(eventID)","payload":{"jsonrpc":"2.0","method":"ec.start","params":{"checkout":{"id":"\#(checkoutID)","status":"incomplete"}}}}"#.utf8)
    }

    @Test("a decodable event goes to its checkout's owner, by ShardMap, with its event id kept")
    func ownedEvents() {
        let router = ShardRouter(count: 5)
        var shardsSeen = Set<Int>()
        for i in 0..<200 {
            let id = "gid://shopify/Checkout/\(i)"
            let route = Self.wrapped(id, eventID: "e-\(i)").withUnsafeBytes { router.route($0) }
            #expect(route.shard == ShardMap.owner(of: id, count: 5) && route.owned)
            #expect(router.lastEventID == "e-\(i)")
            shardsSeen.insert(route.shard)
        }
        #expect(shardsSeen == Set(0..<5))
    }

    /// The daemon skips a UTF-8 byte order mark before the JSON; the router read such an event as
    /// not JSON and routed it by its bytes, so N-1 of N shards dead-lettered it `wrong_shard`.
    @Test("an event after a UTF-8 byte order mark goes to its checkout's owner, as the daemons read it")
    func byteOrderMark() {
        let router = ShardRouter(count: 5)
        for i in 0..<50 {
            let id = "gid://shopify/Checkout/bom-\(i)"
            let route = ([0xEF, 0xBB, 0xBF] + Self.wrapped(id, eventID: "b-\(i)")).withUnsafeBytes { router.route($0) }
            #expect(route.owned && route.shard == ShardMap.owner(of: id, count: 5))
            #expect(router.lastEventID == "b-\(i)")
        }
    }

    @Test("input no shard can own is routed by its bytes: the same input, the same shard, never lost",
          arguments: ["not json", #"{"name":"no_such_event"}"#, #"{"jsonrpc":"2.0","method":"ec.start","params":{}}"#])
    func unowned(text: String) {
        let router = ShardRouter(count: 7)
        let first = Array(text.utf8).withUnsafeBytes { router.route($0) }
        let again = Array(text.utf8).withUnsafeBytes { router.route($0) }
        #expect(!first.owned)
        #expect(first == again)
        #expect((0..<7).contains(first.shard))
    }

    @Test("one shard takes everything without decoding, unless event ids are kept")
    func oneShard() {
        let router = ShardRouter(count: 1)
        let bytes = Self.wrapped("c-1", eventID: "e-1")
        let route = bytes.withUnsafeBytes { router.route($0) }
        #expect(route.shard == 0 && route.owned)
        #expect(router.lastEventID == nil)
        router.keepsEventIDs = true
        _ = bytes.withUnsafeBytes { router.route($0) }
        #expect(router.lastEventID == "e-1")
    }
}
