import Testing

import CheckoutBusJSON
import CheckoutBusProtocol

/// The `stats` reply, one codec: the daemon writes it with `StatsReply.write`, `stats`, `top`, `ping`
/// and the benchmarks read it with `StatsReply.read`; its bytes are the golden line `stats` of
/// `Tests/Golden/control-replies.tsv`.
@Suite("the stats reply: one codec, golden bytes")
struct StatsReplyTests {
    static func sample() -> StatsReply {
        var s = StatsReply()
        s.shard = 1
        s.shards = 2
        s.lastSeq = 120
        s.durableSeq = 118
        s.firstSeq = 3
        s.snapshotAgeMilliseconds = 4
        s.publishHighWaterMark = 100_000
        s.daemon = .init(version: "1.2.3", revision: "abc1234", curve: false, endpoints: .init(
            ingest: "tcp://127.0.0.1:7700", ingestAcked: "tcp://127.0.0.1:7701", publish: "tcp://127.0.0.1:7702",
            control: "tcp://127.0.0.1:7703", metrics: "127.0.0.1:7780"))
        s.daemon.journalID = ControlReplyWireTests.journal
        s.kindSeqs = [10, 60, 20, 15, 5, 2]
        s.counters.received = 200
        s.counters.publishedByKind = [10, 60, 20, 15, 5]
        s.counters.receivedByFamily = [100, 50, 30, 18]
        s.counters.failedByCode = StableErrorCode.allCases.map { $0 == .networkError ? 9 : $0 == .unknown ? 6 : 0 }
        s.counters.unknownRawCodes = ["E_ODD": 4, "B_RARE": 2]
        s.counters.unknownRawCodesOther = 1
        s.counters.repeatedFailures = 3
        s.counters.suppressed = 40
        s.counters.duplicates = 7
        s.counters.deadLettered = ["oversized": 1, "invalid_json": 1]
        s.counters.trackedCheckouts = 30
        s.counters.evictedCheckouts = 0
        s.counters.expiredCheckouts = 2
        s.journal.segments = 1
        s.journal.bytes = 65_536
        s.journal.fsyncs = 50
        s.journal.fsyncMaxMicros = 900
        s.journal.fsyncP99Micros = 512
        s.journal.writesDirect = true
        s.journal.writable = true
        s.journal.fenceRecovered = .init(durableSeq: 100, reason: "fdatasync failed", at: "2025-12-02T11:38:20.000Z")
        s.stages.timed = 4
        s.stages.receive = 800
        s.stages.decode = 4_400
        s.stages.rules = 3_600
        s.stages.envelope = 2_400
        s.stages.journalAppend = 400
        s.stages.publishTimed = 2
        s.stages.publish = 1_000
        s.connections.sockets = [
            .init(name: "ingest", accepted: 3, disconnected: 1, handshakesFailed: 0, refused: 0),
            .init(name: "ingest_acked", accepted: 2, disconnected: 2, handshakesFailed: 1, refused: 0),
            .init(name: "publish", accepted: 4, disconnected: 0, handshakesFailed: 0, refused: 1),
            .init(name: "control", accepted: 1, disconnected: 0, handshakesFailed: 0, refused: 0),
        ]
        s.connections.http.accepted = 5
        s.connections.http.open = 1
        s.connections.http.requests = 4
        s.connections.controlRepliesDropped = 0
        s.connections.replayPages = 6
        s.subscribers = [.init(name: "fulfil-1", row: .init(
            state: "live", ageMilliseconds: 300, lastSeq: 118, throughSeq: 118, lag: 2, durable: true,
            reportedAt: Timestamp(milliseconds: 1_764_675_500_000)))]
        return s
    }

    @Test("a stats reply is written as the golden bytes and read back whole")
    func golden() throws {
        let bytes = Self.sample().write(req: Array("14".utf8))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text == ControlReplyWireTests.golden["stats"])
        let read = try #require(StatsReply.read(bytes))
        #expect(read == Self.sample())
        #expect(ControlReplyWire.read(try ControlReplyWireTests.parsed("stats")).req == 14)
    }

    @Test("an older daemon's reply without some members reads as zeros; a refusal or another op reads as nil")
    func partial() throws {
        let old = try #require(StatsReply.read(Array(#"{"op":"stats","ok":true,"last_seq":5,"counters":{"received":9}}"#.utf8)))
        #expect(old.lastSeq == 5 && old.counters.received == 9 && old.counters.publishedByKind.allSatisfy { $0 == 0 })
        #expect(old.daemon.endpoints == nil && old.subscribers.isEmpty && old.journal.fenceRecovered == nil)
        // A subscriber row from before the daemon wrote `lag`: nil, for the reader to work out.
        let oldRow = try #require(StatsReply.read(Array(#"{"op":"stats","ok":true,"subscribers":{"a":{"state":"live","last_seq":3}}}"#.utf8)))
        #expect(oldRow.subscribers.first?.row.lag == nil && oldRow.subscribers.first?.row.lastSeq == 3)
        #expect(StatsReply.read(Array(#"{"ok":false,"error":"bad_request","detail":"x"}"#.utf8)) == nil)
        #expect(StatsReply.read(Array(#"{"op":"seek","ok":true,"seq":4}"#.utf8)) == nil)
        #expect(StatsReply.read(Array("not json".utf8)) == nil)
    }
}
