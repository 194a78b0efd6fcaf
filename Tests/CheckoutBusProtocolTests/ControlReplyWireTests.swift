import Foundation
import Testing

import CheckoutBusJSON
import CheckoutBusProtocol

/// Heartbeats and control replies as the daemon writes them, byte for byte against
/// `Tests/Golden/control-replies.tsv`, and read back as every Swift subscriber reads them — the
/// same file the Python client's `tests/test_wire_golden.py` reads with its `wire.heartbeat` and
/// `wire.reply`.
@Suite("heartbeats and control replies: one codec, golden bytes")
struct ControlReplyWireTests {
    static let golden = GoldenFile.tsv("control-replies.tsv")

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    static func parsed(_ name: String) throws -> JSONDocument {
        let document = JSONDocument()
        try document.parseOwned(Array(try #require(golden[name]).utf8))
        return document
    }

    /// A journal's identity, as `<data-dir>/journal-id` holds one.
    static let journal = "5f0c2a9e41d7b3806e1f9a2c7d4b8e03"
    /// The run a replay reply names: that journal, and the run's start (the golden heartbeat's).
    static let run = DaemonRun(journal: journal, startedAt: "2025-12-02T11:38:20.000Z")

    static func withRun(_ fields: ControlReplyWire.Fields) -> ControlReplyWire.Fields {
        var f = fields
        f.journal = run.journal
        f.startedAt = run.startedAt
        return f
    }

    @Test("a heartbeat is written as the golden bytes and read back")
    func heartbeat() throws {
        var w = JSONWriter(capacity: 512)
        var contents = HeartbeatWire.Contents(
            seq: 12, shard: 1, shards: 3, kindSeqs: [3, 5, 2, 1, 1, 0], sentAt: Timestamp(milliseconds: 1_764_675_541_123),
            startedAt: Timestamp(milliseconds: 1_764_675_500_000), trackedCheckouts: 4, received: 20, suppressed: 7,
            deadLettered: ["oversized": 2, "invalid_json": 1], evictedCheckouts: 0, expiredCheckouts: 2)
        contents.journal = Self.journal
        HeartbeatWire.write(contents, to: &w)
        #expect(Self.text(w.bytes) == Self.golden["heartbeat"])
        let fields = try #require(HeartbeatWire.read(try Self.parsed("heartbeat")))
        var expected = HeartbeatWire.Fields(seq: 12, kindSeqs: [3, 5, 2, 1, 1, 0], shard: 1, shards: 3)
        expected.startedAt = "2025-12-02T11:38:20.000Z"
        expected.journal = Self.journal
        expected.sentAt = "2025-12-02T11:39:01.123Z"
        #expect(fields == expected)
    }

    @Test("replay statuses and refusals are written as the golden bytes and read back")
    func replies() throws {
        #expect(Self.text(ControlReplyWire.replayPage(from: 5, next: 9, count: 4, first: 1, last: 12, shard: 1, shards: 3,
                                                      run: Self.run, req: Array("7".utf8))) == Self.golden["replay-page"])
        #expect(ControlReplyWire.read(try Self.parsed("replay-page"))
                == Self.withRun(.init(op: "replay", ok: true, req: 7, next: 9, lastSeq: 12, firstSeq: 1, shard: 1, shards: 3)))

        #expect(Self.text(ControlReplyWire.notRetained(first: 100, last: 250, shard: 0, shards: 1, run: Self.run,
                                                       req: Array("8".utf8)))
                == Self.golden["not-retained"])
        #expect(ControlReplyWire.read(try Self.parsed("not-retained"))
                == Self.withRun(.init(op: "replay", ok: false, req: 8, lastSeq: 250, firstSeq: 100, error: "not_retained",
                                      shard: 0, shards: 1)))

        let detail = "segment 00000000000000000001.seg cannot be read"
        #expect(Self.text(ControlReplyWire.journalUnreadable(detail: detail, from: 4, first: 1, last: 10, shard: 0, shards: 1,
                                                             run: Self.run, req: Array("9".utf8)))
                == Self.golden["journal-unreadable"])
        #expect(ControlReplyWire.read(try Self.parsed("journal-unreadable"))
                == Self.withRun(.init(op: "replay", ok: false, req: 9, lastSeq: 10, firstSeq: 1, error: "journal_unreadable",
                                      detail: detail, shard: 0, shards: 1)))

        #expect(Self.text(ControlReplyWire.badRequest("missing op", req: Array("10".utf8))) == Self.golden["bad-request"])
        #expect(ControlReplyWire.read(try Self.parsed("bad-request"))
                == .init(ok: false, req: 10, error: "bad_request", detail: "missing op"))
        // A good request the daemon cannot answer now (stats with the pipeline held up): not bad_request.
        let busy = "the pipeline has not answered yet; retry"
        #expect(Self.text(ControlReplyWire.busy(busy, req: Array("15".utf8))) == Self.golden["busy"])
        #expect(ControlReplyWire.read(try Self.parsed("busy")) == .init(ok: false, req: 15, error: "busy", detail: busy))
    }

    @Test("a subscriber's row in stats, report, forget and seek are written as the golden bytes and read back")
    func subscribersAndPositions() throws {
        let row = ControlReplyWire.Subscriber(
            state: "gone", goneReason: "silent", ageMilliseconds: 61_000, lastSeq: 120, throughSeq: 118, lag: 5, missed: 3,
            recovered: 3, gaps: 1, rejected: 2, durable: true, reportedAt: Timestamp(milliseconds: 1_764_675_500_000))
        var w = JSONWriter(capacity: 256)
        row.write(to: &w)
        let rowText = try #require(Self.golden["subscriber-row"])
        #expect(Self.text(w.bytes) == rowText)
        // As `stats` lists it: by name under `subscribers`.
        let stats = JSONDocument()
        try Array("{\"op\":\"stats\",\"ok\":true,\"subscribers\":{\"fulfil-1\":\(rowText),\"tail-9\":{\"state\":\"live\"}}}".utf8)
            .withUnsafeBytes { try stats.parse($0) }
        let rows = ControlReplyWire.subscribers(stats)
        #expect(rows.map(\.name) == ["fulfil-1", "tail-9"])
        #expect(rows.first?.subscriber == row)
        #expect(rows.last?.subscriber == ControlReplyWire.Subscriber(state: "live", lag: nil))

        #expect(Self.text(ControlReplyWire.report(shard: 0, shards: 1, req: Array("11".utf8))) == Self.golden["report"])
        #expect(ControlReplyWire.read(try Self.parsed("report")) == .init(op: "report", ok: true, req: 11, shard: 0, shards: 1))

        let forgotten = ControlReplyWire.Forgotten(subscriber: "fulfil-1", known: true, state: "gone")
        #expect(Self.text(ControlReplyWire.forget(forgotten, shard: 0, shards: 1, req: Array("12".utf8))) == Self.golden["forget"])
        #expect(ControlReplyWire.readForget(try Self.parsed("forget")) == forgotten)
        #expect(ControlReplyWire.readForget(try Self.parsed("bad-request")) == nil)

        let sought = ControlReplyWire.Sought(timeMilliseconds: 1_764_675_500_000, seq: 42, beforeRetention: false, probes: 7,
                                             tookMicroseconds: 350)
        #expect(Self.text(ControlReplyWire.seek(sought, first: 1, last: 99, shard: 2, shards: 3, req: Array("13".utf8)))
                == Self.golden["seek"])
        #expect(ControlReplyWire.readSeek(try Self.parsed("seek")) == sought)
        #expect(ControlReplyWire.read(try Self.parsed("seek")).firstSeq == 1)
        #expect(ControlReplyWire.readSeek(try Self.parsed("bad-request")) == nil)
    }
}

/// The acknowledged ingest socket's replies as the daemon writes them, byte for byte against
/// `Tests/Golden/ack-replies.tsv`, and read back with the codec's reader — the same file the Swift
/// client's `Acknowledgement` (`AcknowledgementGoldenTests`) and the Python client's
/// `tests/test_wire_golden.py` read.
@Suite("acknowledgements: one codec, golden bytes")
struct AckReplyWireTests {
    static let golden = GoldenFile.tsv("ack-replies.tsv")

    static let cases: [(name: String, outcome: AckReplyWire.Outcome, eventID: String?, fields: AckReplyWire.Fields)] = [
        ("published", .published(seq: 42), "evt-0001", .init(ok: true, seq: 42, eventID: "evt-0001")),
        ("suppressed", .suppressed, "evt-0002", .init(ok: true, seq: nil, suppressed: true, eventID: "evt-0002")),
        ("duplicate", .duplicate(seq: 42), "evt-0001", .init(ok: true, seq: 42, duplicate: true, eventID: "evt-0001")),
        ("duplicate-of-suppressed", .duplicate(seq: 0), "evt-0002", .init(ok: true, seq: nil, duplicate: true, eventID: "evt-0002")),
        ("dead-lettered", .deadLettered(seq: 43, reason: "unknown_event"), "evt-0003",
         .init(ok: false, seq: 43, reason: "unknown_event", eventID: "evt-0003")),
        ("duplicate-dead-letter", .duplicateDeadLetter(seq: 43, reason: "unknown_event"), "evt-0003",
         .init(ok: false, seq: 43, reason: "unknown_event", duplicate: true, eventID: "evt-0003")),
        ("not-json", .deadLettered(seq: 44, reason: "invalid_json"), nil, .init(ok: false, seq: 44, reason: "invalid_json", eventID: nil)),
    ]

    @Test("every outcome is written as the golden bytes and read back")
    func outcomes() throws {
        #expect(Self.golden.count == Self.cases.count)
        for c in Self.cases {
            let line = try #require(Self.golden[c.name], "no golden line \(c.name)")
            #expect(String(decoding: AckReplyWire.write(c.outcome, eventID: c.eventID), as: UTF8.self) == line, "\(c.name)")
            let document = JSONDocument()
            try Array(line.utf8).withUnsafeBytes { try document.parse($0) }
            #expect(AckReplyWire.read(document) == c.fields, "\(c.name)")
        }
    }

    @Test("a frame that is no reply reads as nil: not an object, no ok, a refusal without a reason")
    func notReplies() throws {
        for text in ["[1]", "{\"seq\":1}", "{\"ok\":false,\"seq\":3}"] {
            let document = JSONDocument()
            try Array(text.utf8).withUnsafeBytes { try document.parse($0) }
            #expect(AckReplyWire.read(document) == nil, "\(text)")
        }
    }

    /// `parse` parsed the frame in place, and every caller reads the reply after it returned: a
    /// reply whose frame had gone was read from freed memory (`checkoutbus subscribers` crashed on a
    /// ~100 KiB reply).
    @Test("a reply is read after the frame it was parsed from is gone")
    func readAfterTheFrameIsGone() {
        let d = JSONDocument()
        let padding = String(repeating: "x", count: 100_000)
        var frame: [UInt8]? = Array(#"{"op":"stats","ok":true,"last_seq":42,"detail":"\#(padding)"}"#.utf8)
        #expect(ControlReplyWire.parse(frame!, into: d))
        frame = nil
        // The freed bytes taken and written over while the reply is read.
        var other = [UInt8](repeating: 0, count: 100_060)
        other.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: UInt8(ascii: "{")) }
        withExtendedLifetime(other) {
            let fields = ControlReplyWire.read(d)
            #expect(fields.ok && fields.lastSeq == 42 && fields.op == "stats")
            #expect(fields.detail?.utf8.count == 100_000)
        }
    }
}
