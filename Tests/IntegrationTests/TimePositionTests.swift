import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusProtocol
import CheckoutBusRuntime
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Positions by time (docs/commands.md, "Positions"): `tail --since` a time or a duration, resolved
/// by the daemon's `seek` to the first seq received at or after it.
@Suite("positions by time", .serialized, .timeLimit(.minutes(5)))
struct TimePositionTests {
    @Test("a seq, a duration and RFC 3339 times are read; anything else is refused with what is accepted")
    func parsing() throws {
        let now: Int64 = 1_796_550_000_000
        #expect(try JournalPosition.parse("12345", now: now) == .seq(12345))
        #expect(try JournalPosition.parse("90s", now: now) == .time(milliseconds: now - 90_000))
        #expect(try JournalPosition.parse("1h30m", now: now) == .time(milliseconds: now - 5_400_000))
        #expect(try JournalPosition.parse("2d", now: now) == .time(milliseconds: now - 172_800_000))
        #expect(try JournalPosition.parse("250ms", now: now) == .time(milliseconds: now - 250))
        #expect(try JournalPosition.parse("2026-12-05T14:00:00Z", now: now) == .time(milliseconds: 1_796_479_200_000))
        #expect(try JournalPosition.parse("2026-12-05T15:00:00+01:00", now: now) == .time(milliseconds: 1_796_479_200_000))
        #expect(try JournalPosition.parse("2026-12-05 14:00:00.5Z", now: now) == .time(milliseconds: 1_796_479_200_500))
        // More than three fraction digits (Python's isoformat): the milliseconds are kept.
        #expect(try JournalPosition.parse("2026-12-05T14:00:00.123456Z", now: now) == .time(milliseconds: 1_796_479_200_123))
        for bad in ["", "10x", "m", "2026-12-05", "2026-13-05T14:00:00Z", "2026-12-05T14:00:00", "-5", "1h-3m"] {
            #expect(throws: SubscriberError.self, "\(bad)") { try JournalPosition.parse(bad, now: now) }
        }
    }

    static func fail(_ id: String) -> String { ErrorMapTests.fail(id, "network_error") }

    @Test("tail --since a time replays from the first envelope received at or after it; --since a duration; seek past the end")
    func tailSinceTime() throws {
        let daemon = try DaemonProcess()
        defer { _ = daemon.terminate() }
        #expect(try send((1...10).map { Self.fail("tp-a\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        // Received-at times are in ms: a clear second between the two batches.
        usleep(1_200_000)
        let between = Int64(Date().timeIntervalSince1970 * 1000)
        usleep(200_000)
        #expect(try send((1...10).map { Self.fail("tp-b\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)

        let position = JournalPosition.time(milliseconds: between)
        let resolved = try position.resolve(control: daemon.control)
        #expect(resolved.seq == 11 && resolved.lastSeq == 20 && !resolved.beforeRetention, "\(resolved)")

        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let text = iso.string(from: Date(timeIntervalSince1970: Double(between) / 1000))
        let later = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control, "--since", text,
                                                "--count", "10", "--format", "json", "--timeout", "20"])
        #expect(later.status == 0, "\(later.output)")
        let ids = later.output.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("{"), let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return o["checkout_id"] as? String
        }
        #expect(ids == (1...10).map { "tp-b\($0)" }, "\(later.output)")
        #expect(later.output.contains("is seq 11"), "\(later.output)")

        // A duration back past the oldest envelope: everything, from the first retained seq.
        let all = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control, "--since", "1h",
                                              "--count", "20", "--format", "json", "--timeout", "20"])
        // Nothing was deleted yet: seq 1 is the first ever, not the retention horizon.
        #expect(all.status == 0 && all.output.contains("is seq 1\n") && !all.output.contains("oldest retained"), "\(all.output)")
        // A time after the last envelope: last + 1 (what comes next, live).
        let future = try JournalPosition.time(milliseconds: between + 3_600_000).resolve(control: daemon.control)
        #expect(future.seq == 21)
        // A bad position: the one-line reason, exit 2.
        let bad = try runTool("checkoutbus", ["tail", "--from", daemon.publish, "--control", daemon.control, "--since", "yesterday"])
        #expect(bad.status == 2 && bad.output.contains("is not a position"), "\(bad.output)")
    }
}

extension TimePositionTests {
    @Test("replay --since a time or a seq starts a recording there; lines before it are counted, not sent")
    func replaySince() throws {
        let source = try DaemonProcess()
        defer { _ = source.terminate() }
        #expect(try send((1...10).map { Self.fail("rs-a\($0)") }, to: source.ingestAcked, arguments: ["--acked"]).status == 0)
        usleep(1_200_000)
        let between = Int64(Date().timeIntervalSince1970 * 1000)
        usleep(200_000)
        #expect(try send((1...10).map { Self.fail("rs-b\($0)") }, to: source.ingestAcked, arguments: ["--acked"]).status == 0)
        let recorded = try runTool("checkoutbus", ["tail", "--from", source.publish, "--control", source.control, "--since", "1",
                                                   "--count", "20", "--format", "json", "--timeout", "20"])
        let lines = recorded.output.split(separator: "\n").filter { $0.hasPrefix("{") }
        try #require(lines.count == 20, "\(recorded.output)")
        let file = TestScratch.url("replay-since-\(UUID().uuidString).jsonl")
        try (lines.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)

        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for (since, expected) in [(iso.string(from: Date(timeIntervalSince1970: Double(between) / 1000)), 10), ("15", 6)] {
            let target = try DaemonProcess()
            defer { _ = target.terminate() }
            let replay = try runTool("checkoutbus", ["replay", file.path, "--to", target.ingest, "--flat-out", "--since", since])
            #expect(replay.status == 0 && replay.output.contains("sent=\(expected) ") && replay.output.contains("before_since=\(20 - expected)"),
                    "\(since): \(replay.output)")
            let control = try ControlClient(target.control)
            #expect(waitUntil(10) { ((try? control.request(#"{"op":"stats"}"#).status["last_seq"]) as? Int) == expected })
        }
    }
}

extension TimePositionTests {
    @Test("tail --since a time across two shards: each shard's daemon resolves its own seq")
    func shardedSince() throws {
        let shards = try (0..<2).map { try DaemonProcess(["--shard", "\($0)/2"]) }
        defer { for d in shards { _ = d.terminate() } }
        let acked = shards.map(\.ingestAcked).joined(separator: ",")
        func sendRouted(_ prefix: String) throws -> Int32 {
            let file = TestScratch.url("sharded-since-\(UUID().uuidString).jsonl")
            try ((1...20).map { Self.fail("\(prefix)\($0)") }.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
            return try runTool("checkoutbus", ["send", "--acked", "--shards", acked, file.path]).status
        }
        #expect(try sendRouted("sh-a") == 0)
        usleep(1_200_000)
        let between = Int64(Date().timeIntervalSince1970 * 1000)
        usleep(200_000)
        #expect(try sendRouted("sh-b") == 0)
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let tail = try runTool("checkoutbus", ["tail", "--from", shards.map(\.publish).joined(separator: ","),
                                               "--control", shards.map(\.control).joined(separator: ","),
                                               "--since", iso.string(from: Date(timeIntervalSince1970: Double(between) / 1000)),
                                               "--count", "20", "--format", "json", "--timeout", "20"])
        #expect(tail.status == 0, "\(tail.output)")
        let ids = Set(tail.output.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("{"), let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return o["checkout_id"] as? String
        })
        #expect(ids == Set((1...20).map { "sh-b\($0)" }), "\(tail.output)")
        #expect(tail.output.contains("of shard 0") && tail.output.contains("of shard 1"), "\(tail.output)")
    }
}

extension TimePositionTests {
    /// Records 1…10 on `dataDirectory`'s journal, record N received at `base + N` seconds.
    static func appendTimed(_ dataDirectory: URL, base: Int64) throws -> [Int] {
        let logger = BusLogger(label: "test", level: .error)
        var options = Journal.Options()
        options.cacheBytes = nil
        let journal = try Journal(directory: dataDirectory.appendingPathComponent("journal").path, options: options, logger: logger)
        let batch = JournalBatch(journal: journal, measuresLatency: false, logger: logger)
        let topic = Array("checkout.update".utf8)
        var sizes: [Int] = []
        for seq in UInt64(1)...10 {
            let at = Timestamp(milliseconds: base + Int64(seq) * 1000).rfc3339
            let envelope = Array(#"{"v":1,"seq":\#(seq),"kind_seq":\#(seq),"shard":0,"kind":"update","checkout_id":"gap-\#(seq)","event_id":"gap-\#(seq)-e","source":{"sdk":"shopify","platform":"ios","format":"callback"},"received_at":"\#(at)","repeat":false}"#.utf8)
            sizes.append(JournalFormat.recordHeaderSize + topic.count + envelope.count + JournalFormat.checksumSize)
            topic.withUnsafeBytes { t in
                envelope.withUnsafeBytes { e in
                    batch.append(seq: seq, kindSeq: seq, kind: UInt8(JournaledKind.update.rawValue), topic: t, envelope: e, arrival: 0)
                }
            }
        }
        try batch.flush()
        batch.close()
        return sizes
    }

    @Test("seek over a journal with a recovery's gap finds the first seq at or after the time on either side of it")
    func seekAcrossAGap() throws {
        let first = try DaemonProcess()
        #expect(first.terminate() == 0)
        let base: Int64 = 1_796_400_000_000
        let sizes = try Self.appendTimed(first.dataDirectory, base: base)
        // A corrupt byte in record 5: the next start cuts there and sets 5…10 aside (a gap).
        let segment = first.dataDirectory.appendingPathComponent("journal/" + JournalFormat.segmentName(1)).path
        let damagedAt = JournalFormat.segmentHeaderSize + sizes[0..<4].reduce(0, +)
        let fd = open(segment, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0xFF
        #expect(pwrite(fd, &byte, 1, off_t(damagedAt + JournalFormat.recordHeaderSize + 3)) == 1)
        #expect(close(fd) == 0)
        let daemon = try DaemonProcess(dataDirectory: first.dataDirectory)
        defer { _ = daemon.terminate() }
        #expect(try send((1...5).map { Self.fail("gap-new\($0)") }, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        // Between records 2 and 3 (before the gap): 3; inside the gap's times: 11, the first after it.
        #expect(try JournalPosition.time(milliseconds: base + 2_500).resolve(control: daemon.control).seq == 3)
        let inGap = try JournalPosition.time(milliseconds: base + 7_000).resolve(control: daemon.control)
        #expect(inGap.seq == 11, "\(inGap)")
        #expect(try JournalPosition.time(milliseconds: base).resolve(control: daemon.control).seq == 1)
    }
}
