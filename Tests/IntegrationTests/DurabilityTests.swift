import CheckoutBusClient
import CheckoutBusDaemon
import CheckoutBusTools
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime
import Foundation
import Testing
import ZeroMQ

/// A DEALER on the daemon's control socket speaking the protocol of docs/durability.md: the ground
/// truth recordings and workers are checked against (Foundation JSON, no project code).
final class ControlClient {
    let context: ZMQContext
    let socket: ZMQSocket

    init(_ endpoint: String) throws {
        context = try ZMQContext()
        socket = try ZMQSocket(context: context, type: .dealer)
        try socket.setLinger(milliseconds: 0)
        try socket.setOption(.receiveTimeout, 10_000)
        try socket.connect(endpoint)
    }

    /// Sends one request and returns the reply's frames: the JSON status, then any payload frames.
    func request(_ json: String) throws -> (status: [String: Any], frames: [[UInt8]]) {
        _ = try socket.send(json)
        guard let frames = try socket.receiveMultipart(), let first = frames.first,
            let status = try JSONSerialization.jsonObject(with: Data(first)) as? [String: Any]
        else { throw HarnessError("no reply from the control socket to \(json)") }
        return (status, Array(frames.dropFirst()))
    }

    func stats() throws -> [String: Any] { try request(#"{"op":"stats"}"#).status }

    /// Every record from `from` on whose topic starts with one of `prefixes` (all when empty),
    /// paging until caught up: (seq, topic, envelope bytes as published).
    func replayAll(from: Int = 1, prefixes: [String], page: Int = 10_000) throws -> [(seq: Int, topic: String, bytes: [UInt8])] {
        var out: [(seq: Int, topic: String, bytes: [UInt8])] = []
        var next = from
        let prefixField = prefixes.isEmpty ? "" : ",\"prefix\":[" + prefixes.map { "\"\($0)\"" }.joined(separator: ",") + "]"
        while true {
            let (status, frames) = try request("{\"op\":\"replay\",\"from\":\(next),\"limit\":\(page)\(prefixField)}")
            // Seqs a recovery set aside are skipped, as a subscriber does.
            if status["error"] as? String == "not_retained", let first = status["first_seq"] as? Int, first > next, next > 1 {
                next = first
                continue
            }
            guard status["ok"] as? Bool == true, let n = status["next"] as? Int, let last = status["last_seq"] as? Int else {
                throw HarnessError("replay refused: \(status)")
            }
            for i in stride(from: 0, to: frames.count - 1, by: 2) {
                out.append((try seqOf(frames[i + 1]), String(decoding: frames[i], as: UTF8.self), frames[i + 1]))
            }
            if n > last { return out }
            guard n > next else { throw HarnessError("replay from \(next) made no progress: \(status)") }
            next = n
        }
    }

    /// The same, each envelope parsed: (seq, topic, envelope object).
    func replayAll(from: Int = 1, prefix: String? = nil, page: Int = 1000) throws -> [(Int, String, [String: Any])] {
        try replayAll(from: from, prefixes: prefix.map { [$0] } ?? [], page: page).map { record in
            guard let envelope = try JSONSerialization.jsonObject(with: Data(record.bytes)) as? [String: Any] else {
                throw HarnessError("replay returned a non-object envelope at seq \(record.seq)")
            }
            return (record.seq, record.topic, envelope)
        }
    }
}

/// The daemon's journal segment files, oldest first.
func journalSegments(_ daemon: DaemonProcess) throws -> [URL] {
    let journal = daemon.dataDirectory.appendingPathComponent("journal")
    return try FileManager.default.contentsOfDirectory(atPath: journal.path).filter { $0.hasSuffix(".seg") }.sorted()
        .map { journal.appendingPathComponent($0) }
}

/// The byte size of each record in a journal segment file, in order (docs/durability.md: a 64-byte
/// segment header, then records of a 32-byte header, the body its bytes 4–7 count, and an 8-byte checksum).
func journalRecordSizes(segment path: String) throws -> [Int] {
    let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    var sizes: [Int] = []
    var offset = 64
    while offset + 32 <= bytes.count {
        let body = Int(bytes[offset + 4]) | Int(bytes[offset + 5]) << 8 | Int(bytes[offset + 6]) << 16 | Int(bytes[offset + 7]) << 24
        sizes.append(32 + body + 8)
        offset += 32 + body + 8
    }
    return sizes
}

/// Wrapped `onCheckoutUpdated` events with distinct snapshots and event ids: nothing is suppressed.
func distinctEvents(_ n: Int, run: String) -> [String] {
    (0..<n).map { i in
        #"{"event_id":"\#(run)-\#(i)","checkout_id":"\#(run)-c\#(i % 997)","platform":"android","sdk":"shopify","payload":{"event":"onCheckoutUpdated","checkout":{"id":"\#(run)-c\#(i % 997)","n":\#(i),"currency":"USD"}}}"#
    }
}

@Suite("durability: journal, acknowledged ingest, control socket", .serialized, .timeLimit(.minutes(5)))
struct DurabilityTests {
    @Test("kill -9 in the middle of an acknowledged flood: every acknowledged event survives, replayable, and seq continues")
    func killDuringAckedFlood() throws {
        let daemon = try DaemonProcess()
        let tmp = daemon.dataDirectory.deletingLastPathComponent()
        let input = tmp.appendingPathComponent("flood.jsonl")
        let ackLog = tmp.appendingPathComponent("acks.log")
        try (distinctEvents(60_000, run: "k9").joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let sender = Process()
        sender.executableURL = Products.url("checkoutbus")
        sender.arguments = ["send", "--acked", "--to", daemon.ingestAcked, "--ack-log", ackLog.path, "--timeout", "3",
                            "--window", "2000", input.path]
        sender.standardError = FileHandle.nullDevice
        try sender.start()

        // Kill once the daemon has journaled a good part of the flood, but not all of it.
        let control = try ControlClient(daemon.control)
        let deadline = Date().addingTimeInterval(60)
        var seen = 0
        while Date() < deadline {
            seen = try control.request(#"{"op":"stats"}"#).status["last_seq"] as? Int ?? 0
            if seen >= 5_000 { break }
            usleep(2_000)
        }
        daemon.kill9()
        #expect(seen >= 5_000)
        let senderStatus = waitForExit(sender, timeout: 30)
        #expect(senderStatus != 0, "the sender must notice that not everything was acknowledged")

        let acked = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n").map { line -> (Int, String) in
            let parts = line.split(separator: " ")
            return (Int(parts[0])!, String(parts[1]))
        }
        #expect(acked.count > 0)
        #expect(acked.count < 60_000, "the kill came before the flood finished")

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let lastSeq = try #require(restarted.ready["last_seq"] as? Int)
        #expect(lastSeq >= acked.last!.0)
        let records = try ControlClient(restarted.control).replayAll()
        #expect(records.count == lastSeq)
        #expect(records.map(\.0) == Array(1...lastSeq), "seq has no gap and no repeat")
        for (seq, eventID) in acked {
            #expect(records[seq - 1].2["event_id"] as? String == eventID, "acknowledged seq \(seq) is event \(eventID)")
        }
        // kind_seq of updates is strictly increasing and continues after the restart.
        let updateKindSeqs = records.map { $0.2["kind_seq"] as! Int }
        #expect(updateKindSeqs == Array(1...lastSeq))

        let more = try sendBytes(Array((distinctEvents(1, run: "after")[0] + "\n").utf8), to: restarted.ingestAcked,
                                 arguments: ["--acked"])
        #expect(more.status == 0)
        let tail = try ControlClient(restarted.control).replayAll(from: lastSeq + 1)
        #expect(tail.count == 1)
        #expect(tail.first?.0 == lastSeq + 1)
        #expect(tail.first?.2["kind_seq"] as? Int == lastSeq + 1)
        #expect(restarted.terminate() == 0)
    }

    @Test("a producer's retry by event_id is not published again, also after kill -9 and restart")
    func retryIsRecognised() throws {
        let daemon = try DaemonProcess()
        let events = distinctEvents(20, run: "retry")
        let first = try send(events, to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(first.status == 0)
        // The same events again (a producer that never saw its answers): acknowledged, not republished.
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("retry.acks")
        let again = try send(events, to: daemon.ingestAcked, arguments: ["--acked", "--ack-log", ackLog.path])
        #expect(again.status == 0)
        let lines = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        #expect(lines == (1...20).map { "\($0) retry-\($0 - 1)"[...] })
        let stats = try ControlClient(daemon.control).request(#"{"op":"stats"}"#).status
        #expect(stats["last_seq"] as? Int == 20)
        #expect((stats["counters"] as? [String: Any])?["duplicates"] as? Int == 20)

        daemon.kill9()
        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let afterRestart = try send(events, to: restarted.ingestAcked, arguments: ["--acked"])
        #expect(afterRestart.status == 0)
        #expect(try ControlClient(restarted.control).request(#"{"op":"stats"}"#).status["last_seq"] as? Int == 20)
        #expect(restarted.terminate() == 0)
    }

    @Test("after kill -9 and restart, checkout state comes back from the journal: a repeated complete keeps its key, an unchanged update stays suppressed")
    func stateSurvivesRestart() throws {
        let daemon = try DaemonProcess()
        func event(_ id: String, _ name: String, _ checkout: String) -> String {
            #"{"event_id":"\#(id)","checkout_id":"ck-r","platform":"ios","sdk":"shopify","payload":{"event":"\#(name)","checkout":\#(checkout)}}"#
        }
        let snapshot = #"{"id":"ck-r","status":"incomplete","currency":"USD","buyer":{"email":"r@example.com"},"line_items":[{"id":"l1","quantity":2}]}"#
        let done = #"{"id":"ck-r","status":"completed","currency":"USD","buyer":{"email":"r@example.com"},"line_items":[{"id":"l1","quantity":2}]}"#
        let withOrder = String(done.dropLast()) + #","order":{"id":"gid://shopify/Order/501"}}"#
        let before = [event("e1", "checkoutDidStart", snapshot), event("e2", "checkoutDidUpdate", snapshot),
                      event("e3", "checkoutDidComplete", done)]
        #expect(try send(before, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        daemon.kill9()

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        // The unchanged update (a new event id: not a retry) and the complete again, now naming its order.
        let after = [event("e4", "checkoutDidUpdate", done), event("e5", "checkoutDidComplete", withOrder),
                     event("e6", "checkoutDidUpdate", withOrder)]
        #expect(try send(after, to: restarted.ingestAcked, arguments: ["--acked"]).status == 0)
        let records = try ControlClient(restarted.control).replayAll()
        // start, complete before; the repeated complete after (the update after start, e4 and e6 suppressed).
        #expect(records.map(\.1) == ["checkout.start", "checkout.complete", "checkout.complete"])
        let repeated = try #require(records.last?.2)
        #expect(repeated["repeat"] as? Bool == true)
        #expect(repeated["idempotency_key"] as? String == "ck-r")
        #expect(repeated["event_id"] as? String == "e5")
        let stats = try ControlClient(restarted.control).stats()
        #expect((stats["counters"] as? [String: Any])?["suppressed"] as? Int == 2)
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("state rebuilt from the journal"))
    }

    @Test("a retry of a suppressed update after kill -9 is recognised, not published as a stale snapshot; a torn suppressed-id log is cut")
    func suppressedRetryAfterRestart() throws {
        let daemon = try DaemonProcess()
        func event(_ id: String, _ name: String, quantity: Int) -> String {
            #"{"event_id":"\#(id)","checkout_id":"ck-s","sdk":"shopify","payload":{"event":"\#(name)","checkout":{"id":"ck-s","line_items":[{"id":"l1","quantity":\#(quantity)}]}}}"#
        }
        let before = [event("e0", "checkoutDidStart", quantity: 1), event("e1", "checkoutDidUpdate", quantity: 1),
                      event("e2", "checkoutDidUpdate", quantity: 2)]
        #expect(try send(before, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect((try ControlClient(daemon.control).stats()["counters"] as? [String: Any])?["suppressed"] as? Int == 1)
        daemon.kill9()
        // A torn record after the intact one (a write cut short): ignored and cut off.
        let log = daemon.dataDirectory.appendingPathComponent("suppressed.log")
        let handle = try FileHandle(forWritingTo: log)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data([0x43, 0x42, 0x53, 0x31, 9, 0]))
        try handle.close()

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        // The producer never saw its answers and sends everything again, then something new.
        let again = before + [event("e3", "checkoutDidUpdate", quantity: 2)]
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("again.acks")
        #expect(try send(again, to: restarted.ingestAcked,
                         arguments: ["--acked", "--ack-log", ackLog.path]).status == 0)
        let lines = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        #expect(lines == ["1 e0", "- e1", "2 e2", "- e3"])
        let records = try ControlClient(restarted.control).replayAll()
        #expect(records.count == 2)
        let counters = try ControlClient(restarted.control).stats()["counters"] as? [String: Any]
        #expect(counters?["duplicates"] as? Int == 3)
        #expect(counters?["suppressed"] as? Int == 1)
        #expect(restarted.terminate() == 0)
        // The log holds e1 (before the restart) and e3 (after), the torn bytes gone.
        let size = try FileManager.default.attributesOfItem(atPath: log.path)[.size] as? Int
        let e1 = 16 + "ck-s".utf8.count + "e1".utf8.count + 8
        #expect(size == 2 * e1)
    }

    @Test("a damaged record in the suppressed-id log is skipped, logged, and the records after it still count")
    func suppressedLogDamage() throws {
        let daemon = try DaemonProcess()
        func event(_ id: String, quantity: Int) -> String {
            #"{"event_id":"\#(id)","checkout_id":"ck-d","sdk":"shopify","payload":{"event":"checkoutDidUpdate","checkout":{"id":"ck-d","line_items":[{"id":"l1","quantity":\#(quantity)}]}}}"#
        }
        let events = [event("e0", quantity: 1), event("e1", quantity: 1), event("e2", quantity: 2), event("e3", quantity: 2),
                      event("e4", quantity: 3)]
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        daemon.kill9()
        // Damage e1's record (the first): its checksum fails.
        let log = daemon.dataDirectory.appendingPathComponent("suppressed.log")
        var bytes = try [UInt8](Data(contentsOf: log))
        #expect(bytes.count == 2 * (16 + "ck-d".utf8.count + 2 + 8))
        bytes[17] ^= 0xFF
        try Data(bytes).write(to: log)

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("damaged.acks")
        #expect(try send(events, to: restarted.ingestAcked,
                         arguments: ["--acked", "--ack-log", ackLog.path]).status == 0)
        let lines = try String(contentsOf: ackLog, encoding: .utf8).split(separator: "\n")
        // e1's id was in the damaged record: its stale snapshot is published again (the documented
        // price); e3's record, after the damage, still makes its retry a duplicate.
        #expect(lines == ["1 e0", "4 e1", "2 e2", "- e3", "3 e4"])
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("skipped damaged bytes"))
    }

    @Test("suppressed-id records past the journal's end (the log runs ahead of it) are dropped at start")
    func suppressedLogAhead() throws {
        let daemon = try DaemonProcess()
        func event(_ id: String, quantity: Int) -> String {
            #"{"event_id":"\#(id)","checkout_id":"ck-a","sdk":"shopify","payload":{"event":"checkoutDidUpdate","checkout":{"id":"ck-a","line_items":[{"id":"l1","quantity":\#(quantity)}]}}}"#
        }
        #expect(try sendBytes(Array((event("e0", quantity: 1) + "\n").utf8), to: daemon.ingestAcked,
                              arguments: ["--acked"]).status == 0)
        daemon.kill9()
        // A record the daemon logged for seq 7 although the journal ended at 1: e9 was never journaled.
        var record: [UInt8] = []
        func put<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { record.append(contentsOf: $0) } }
        put(UInt32(0x3153_4243))
        put(UInt16(4))
        put(UInt16(2))
        put(UInt64(7))
        record += Array("ck-a".utf8) + Array("e9".utf8)
        let sum = record.withUnsafeBytes { JournalFormat.checksumV1($0.baseAddress!, $0.count) }
        put(sum)
        try Data(record).write(to: daemon.dataDirectory.appendingPathComponent("suppressed.log"))

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("ahead.acks")
        #expect(try sendBytes(Array((event("e9", quantity: 2) + "\n").utf8), to: restarted.ingestAcked,
                              arguments: ["--acked", "--ack-log", ackLog.path]).status == 0)
        #expect(try String(contentsOf: ackLog, encoding: .utf8) == "2 e9\n")
        // The journal goes past seq 7; after another restart, e9's retry names its seq 2.
        let more = (3...8).map { event("m\($0)", quantity: $0) }
        #expect(try send(more, to: restarted.ingestAcked, arguments: ["--acked"]).status == 0)
        restarted.kill9()
        #expect(restarted.stderrText.contains("dropped records past the journal's end"))
        let third = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        let again = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("again.acks")
        #expect(try sendBytes(Array((event("e9", quantity: 2) + "\n").utf8), to: third.ingestAcked,
                              arguments: ["--acked", "--ack-log", again.path]).status == 0)
        #expect(try String(contentsOf: again, encoding: .utf8) == "2 e9\n")
        #expect(third.terminate() == 0)
    }

    @Test("a journal with a torn last record recovers: the tear is cut off, everything before it replays")
    func tornTail() throws {
        let daemon = try DaemonProcess()
        let events = distinctEvents(50, run: "torn")
        let first = try send(events, to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(first.status == 0)
        #expect(daemon.terminate() == 0)

        // Tear the last record in half, as a crash in the middle of a write would.
        let path = try #require(try journalSegments(daemon).last).path
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(truncate(path, off_t(size - 100)) == 0)

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        // Seq 50 was published (and acknowledged) before the tear: it is not given to another event.
        #expect(restarted.ready["last_seq"] as? Int == 50)
        let records = try ControlClient(restarted.control).replayAll()
        #expect(records.map(\.0) == Array(1...49))
        #expect(records.map { $0.2["event_id"] as? String } == (0..<49).map { "torn-\($0)" })
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("torn.acks")
        let again = try sendBytes(Array((distinctEvents(1, run: "next")[0] + "\n").utf8), to: restarted.ingestAcked,
                                  arguments: ["--acked", "--ack-log", ackLog.path])
        #expect(again.status == 0)
        #expect(try String(contentsOf: ackLog, encoding: .utf8) == "51 next-0\n")
        // A subscriber whose cursor is at 50 is told that 50 is gone, and goes on at 51.
        let gap = try ControlClient(restarted.control).request(#"{"op":"replay","from":50}"#).status
        #expect(gap["error"] as? String == "not_retained")
        #expect(gap["first_seq"] as? Int == 51)
        let after = try ControlClient(restarted.control).replayAll(from: 51)
        #expect(after.map(\.0) == [51])
        #expect(after.first?.2["event_id"] as? String == "next-0")
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("journal recovered"))
        #expect(restarted.stderrText.contains("not reused"))
    }

    @Test("whole-block writes: after kill -9 the segment ends in zero padding that recovery cuts without a warning; after a clean stop it ends at its last record")
    func directWritePadding() throws {
        let daemon = try DaemonProcess()
        let journal = try ControlClient(daemon.control).stats()["journal"] as? [String: Any]
        let writes = try #require(journal?["writes"] as? String)
        #expect(writes == "direct" || writes == "page_cache")
        #expect(daemon.stderrText.contains("journal_writes=\(writes)"))
        #expect(try send(distinctEvents(300, run: "pad"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        daemon.kill9()
        let path = try #require(try journalSegments(daemon).last).path
        let killed = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // The records end where the 300th does (the helper reads zeros as empty records past it).
        let end = 64 + (try journalRecordSizes(segment: path)).prefix(300).reduce(0, +)
        // Whole blocks are written, direct or through the page cache: the last one padded.
        #expect(killed.count % 4096 == 0)
        #expect(killed.count >= end && killed.count - end < 4096)
        #expect(!killed[end...].contains { $0 != 0 })

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(restarted.ready["last_seq"] as? Int == 300)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == end)
        #expect(try send(distinctEvents(200, run: "pad2"),
                         to: restarted.ingestAcked, arguments: ["--acked"]).status == 0)
        let records = try ControlClient(restarted.control).replayAll()
        #expect(records.map(\.0) == Array(1...500))
        #expect(records.map { $0.2["event_id"] as? String }
                == (0..<300).map { "pad-\($0)" } + (0..<200).map { "pad2-\($0)" })
        #expect(restarted.terminate() == 0)
        // Padding is no damage: nothing to warn about, nothing set aside.
        #expect(!restarted.stderrText.contains("journal recovered"))
        #expect(!restarted.stderrText.contains("level=warning"))
        #expect(!restarted.stderrText.contains("level=error"))
        // After the clean stop the file is its header and its 500 records, nothing after them.
        let sizes = try journalRecordSizes(segment: path)
        #expect(sizes.count == 500)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int == 64 + sizes.reduce(0, +))
    }

    @Test("kill -9 twice, then a clean stop and a cut tail: straight on after each kill, after the last seq before the stop once records are lost")
    func cutTailAfterKill() throws {
        let daemon = try DaemonProcess()
        #expect(try send(distinctEvents(50, run: "cut"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        daemon.kill9()
        // A plain kill -9: the kernel kept every written record, so numbering goes straight on.
        let plain = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(plain.ready["last_seq"] as? Int == 50)
        #expect(try send(distinctEvents(10, run: "more"), to: plain.ingestAcked, arguments: ["--acked"]).status == 0)
        plain.kill9()
        let again = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(again.ready["last_seq"] as? Int == 60)
        #expect(again.terminate() == 0)
        // After the clean stop the tail loses three records (a disk's fault): their seqs were
        // published, and stay theirs.
        let path = try #require(try journalSegments(daemon).last).path
        let records = try journalRecordSizes(segment: path)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        // Cut at the third-to-last record's first byte: a clean cut, nothing torn to notice.
        #expect(truncate(path, off_t(size - records.suffix(3).reduce(0, +))) == 0)
        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(restarted.ready["last_seq"] as? Int == 60)
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("cut.acks")
        #expect(try sendBytes(Array((distinctEvents(1, run: "new")[0] + "\n").utf8), to: restarted.ingestAcked,
                              arguments: ["--acked", "--ack-log", ackLog.path]).status == 0)
        #expect(try String(contentsOf: ackLog, encoding: .utf8) == "61 new-0\n")
        let all = try ControlClient(restarted.control).replayAll()
        #expect(all.map(\.0) == Array(1...57) + [61])
        // Every kind_seq goes on past the lost records' too.
        #expect(all.last?.2["kind_seq"] as? Int == 61)
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("not reused"))
        #expect(!restarted.stderrText.contains("journal recovered"))
    }

    @Test("a corrupt byte with intact records after it: those are set aside, kept in a file, and their seqs never reused")
    func corruptMiddle() throws {
        let daemon = try DaemonProcess()
        let events = distinctEvents(50, run: "mid")
        #expect(try send(events, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        daemon.kill9()
        let journal = daemon.dataDirectory.appendingPathComponent("journal")
        let path = try #require(try journalSegments(daemon).last).path
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // One flipped byte about two fifths in: a record in the middle fails its checksum.
        let at = bytes.count * 2 / 5
        bytes[at] ^= 0x5A
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(restarted.ready["last_seq"] as? Int == 50)
        let before = try ControlClient(restarted.control).replayAll()
        let kept = before.map(\.0)
        #expect(!kept.isEmpty && kept.count < 50)
        #expect(kept == Array(1...kept.count))
        // The next event is 51: no subscriber that saw 20…50 is told a different event under one of them.
        #expect(try sendBytes(Array((distinctEvents(1, run: "after")[0] + "\n").utf8), to: restarted.ingestAcked,
                              arguments: ["--acked"]).status == 0)
        // A replay into the set-aside seqs is told where the journal goes on, as for seqs no longer retained.
        let gap = try ControlClient(restarted.control).request(#"{"op":"replay","from":\#(kept.count + 1)}"#).status
        #expect(gap["error"] as? String == "not_retained")
        #expect(gap["first_seq"] as? Int == 51)
        let after = try ControlClient(restarted.control).replayAll(from: 51)
        #expect(after.map(\.0) == [51])
        #expect(try ControlClient(restarted.control).replayAll().map(\.0) == kept + [51])
        #expect(after.first?.2["event_id"] as? String == "after-0")
        let aside = try FileManager.default.contentsOfDirectory(atPath: journal.path).filter { $0.contains(".damaged-at-") }
        #expect(aside.count == 1)
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("set aside"))
        // Rebuilding state at start says which seqs it could not read.
        #expect(restarted.stderrText.contains("state rebuild: seqs not readable in the journal, skipped\" from_seq=\(kept.count + 1) to_seq=50"))
        // And a second restart keeps it so.
        let third = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(third.ready["last_seq"] as? Int == 51)
        #expect(third.terminate() == 0)
    }

    @Test("a damaged record in a closed segment: a replay is told its seq is gone and reads on from the next record, not from the next segment")
    func damagedClosedSegment() throws {
        let daemon = try DaemonProcess(["--segment-bytes", "8192"])
        #expect(try send(distinctEvents(100, run: "closed"),
                         to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(daemon.terminate() == 0)
        let segments = try journalSegments(daemon)
        #expect(segments.count >= 3)
        // The first segment's fifth record gets a flipped byte in its envelope.
        let path = segments[0].path
        let sizes = try journalRecordSizes(segment: path)
        #expect(sizes.count > 10)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[64 + sizes.prefix(4).reduce(0, +) + 100] ^= 0x5A
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        let restarted = try DaemonProcess(["--segment-bytes", "8192"], dataDirectory: daemon.dataDirectory)
        let control = try ControlClient(restarted.control)
        let gone = try control.request(#"{"op":"replay","from":5}"#).status
        #expect(gone["error"] as? String == "not_retained")
        #expect(gone["first_seq"] as? Int == 6)
        // Everything else replays, the rest of the damaged segment included.
        #expect(try control.replayAll(from: 2).map(\.0) == Array(2...4) + Array(6...100))
        // A page that reaches the damage ends before it.
        let page = try control.request(#"{"op":"replay","from":1,"limit":10}"#).status
        #expect(page["next"] as? Int == 5)
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("a damaged record in a segment; read on at the next intact record"))
        #expect(restarted.stderrText.contains("skipped\" from_seq=5 to_seq=5"))
    }

    @Test("a corrupt byte in the newest segment's header: the header is rebuilt and every record kept")
    func damagedNewestHeader() throws {
        let daemon = try DaemonProcess(["--segment-bytes", "8192"])
        #expect(try send(distinctEvents(60, run: "hdr"), to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
        #expect(daemon.terminate() == 0)
        let segments = try journalSegments(daemon)
        #expect(segments.count >= 2)
        let newest = segments.last!
        var bytes = try [UInt8](Data(contentsOf: newest))
        let original = Array(bytes.prefix(64))
        bytes[3] ^= 0x20  // the magic
        try Data(bytes).write(to: newest)

        let restarted = try DaemonProcess(["--segment-bytes", "8192"], dataDirectory: daemon.dataDirectory)
        #expect(restarted.ready["last_seq"] as? Int == 60)
        #expect(try ControlClient(restarted.control).replayAll().map(\.0) == Array(1...60))
        let ackLog = daemon.dataDirectory.deletingLastPathComponent().appendingPathComponent("hdr.acks")
        #expect(try sendBytes(Array((distinctEvents(1, run: "after")[0] + "\n").utf8), to: restarted.ingestAcked,
                              arguments: ["--acked", "--ack-log", ackLog.path]).status == 0)
        #expect(try String(contentsOf: ackLog, encoding: .utf8) == "61 after-0\n")
        let after = try ControlClient(restarted.control).replayAll(from: 61)
        #expect(after.first?.2["kind_seq"] as? Int == 61)
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("header was damaged; rebuilt from its name and records"))
        // The rebuilt header is the one the daemon wrote.
        #expect(Array(try Data(contentsOf: newest).prefix(64)) == original)
        #expect(FileManager.default.fileExists(atPath: newest.path + ".damaged-header"))
    }

    @Test("garbage after the last record is cut off too, and a garbage-only new segment is ignored")
    func garbageTail() throws {
        let daemon = try DaemonProcess()
        let first = try send(distinctEvents(10, run: "g"), to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(first.status == 0)
        #expect(daemon.terminate() == 0)
        let journal = daemon.dataDirectory.appendingPathComponent("journal")
        let handle = try FileHandle(forWritingTo: try #require(try journalSegments(daemon).last))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 37) }))
        try handle.close()
        // A segment whose header never made it to disk.
        try Data("CBJ".utf8).write(to: journal.appendingPathComponent("00000000000000000011.seg"))

        let restarted = try DaemonProcess(dataDirectory: daemon.dataDirectory)
        #expect(restarted.ready["last_seq"] as? Int == 10)
        let records = try ControlClient(restarted.control).replayAll()
        #expect(records.map(\.0) == Array(1...10))
        #expect(restarted.terminate() == 0)
    }

    @Test("retention deletes the oldest closed segments; a replay from before them is refused as not_retained")
    func retention() throws {
        let daemon = try DaemonProcess(["--segment-bytes", "8192", "--retain-bytes", "32768"])
        let sent = try send(distinctEvents(400, run: "ret"), to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(sent.status == 0)
        let control = try ControlClient(daemon.control)
        let stats = try control.request(#"{"op":"stats"}"#).status
        let journal = try #require(stats["journal"] as? [String: Any])
        #expect((journal["bytes"] as? Int ?? .max) <= 32768 + 8192 * 2)
        let firstSeq = try #require(stats["first_seq"] as? Int)
        #expect(firstSeq > 1)
        let refused = try control.request(#"{"op":"replay","from":1}"#).status
        #expect(refused["ok"] as? Bool == false)
        #expect(refused["error"] as? String == "not_retained")
        #expect(refused["first_seq"] as? Int == firstSeq)
        let kept = try control.replayAll(from: firstSeq)
        #expect(kept.map(\.0) == Array(firstSeq...400))
        #expect(daemon.terminate() == 0)

        // After a restart, seq and kind_seq continue from the newest segment's header and records.
        let restarted = try DaemonProcess(["--segment-bytes", "8192", "--retain-bytes", "32768"],
                                          dataDirectory: daemon.dataDirectory)
        #expect(restarted.ready["last_seq"] as? Int == 400)
        let more = try sendBytes(Array((distinctEvents(1, run: "ret-after")[0] + "\n").utf8), to: restarted.ingestAcked,
                                 arguments: ["--acked"])
        #expect(more.status == 0)
        let next = try ControlClient(restarted.control).replayAll(from: 401)
        #expect(next.map(\.0) == [401])
        #expect(next.first?.2["kind_seq"] as? Int == 401)
        // The event-id window (200,000 by default) wanted records retention deleted: said at start.
        #expect(restarted.terminate() == 0)
        #expect(restarted.stderrText.contains("retains fewer records than --dedupe-window"))
        #expect(!daemon.stderrText.contains("retains fewer records than --dedupe-window"))
    }

    @Test("journal pages in the page cache: at most 1 MiB with 0 (long runs written direct), the newest N bytes with N, all with kernel")
    func journalPageCache() throws {
        let events = Array((distinctEvents(8000, run: "cache").joined(separator: "\n") + "\n").utf8)
        var resident: [String: (bytes: Int, size: Int)] = [:]
        var writes: [String: String] = [:]
        for setting in ["0", "1048576", "kernel"] {
            let daemon = try DaemonProcess(["--journal-cache-bytes", setting])
            // Acknowledged: every event is durable, so the sync that covered the last one has run.
            #expect(try sendBytes(events, to: daemon.ingestAcked, arguments: ["--acked"]).status == 0)
            let path = try #require(try journalSegments(daemon).last).path
            guard try fileSystemType(path) != "tmpfs" else {
                // tmpfs: the page cache is the file; there is nothing to drop.
                #expect(daemon.terminate() == 0)
                return
            }
            resident[setting] = try residentBytes(path)
            writes[setting] = (try ControlClient(daemon.control).stats()["journal"] as? [String: Any])?["writes"] as? String
            #expect(daemon.terminate() == 0)
        }
        // Only 0 asks for direct writes; a file system may refuse them (then pages are dropped).
        #expect(writes["1048576"] == "page_cache" && writes["kernel"] == "page_cache")
        let none = try #require(resident["0"])
        let newest = try #require(resident["1048576"])
        let kept = try #require(resident["kernel"])
        #expect(newest.size > 4 << 20, "the flood should fill more than 4 MiB of journal")
        // Long runs skip the page cache (direct); short ones' pages are dropped in steps of 1 MiB.
        #expect(writes["0"] == "direct" || writes["0"] == "page_cache")
        // (With the same allowance for the last batches as for N below.)
        #expect(none.bytes <= (1 << 20) + (256 << 10), "\(none.bytes) of \(none.size) bytes still cached")
        // Dropped in steps of at least 1 MiB after each sync, all but the newest 1 MiB: under
        // N + 1 MiB by the daemon's rule. The kernel may keep a few hundred KiB more for a while
        // (pages just written are skipped by POSIX_FADV_DONTNEED until its per-CPU LRU batches are
        // drained; up to 270 KiB over seen), so the bound is N + 2 MiB: still well under the
        // whole file (`kernel`, below, keeps over 90% of its 4+ MiB).
        #expect(newest.bytes <= 3 << 20, "\(newest.bytes) of \(newest.size) bytes still cached")
        #expect(newest.bytes >= 1 << 20, "\(newest.bytes) of \(newest.size) bytes cached")
        #expect(kept.bytes >= kept.size * 9 / 10, "\(kept.bytes) of \(kept.size) bytes cached")
    }

    /// The type of the file system holding `path` (`stat -f`), e.g. `ext2/ext3`, `xfs`, `tmpfs`.
    private func fileSystemType(_ path: String) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/stat")
        p.arguments = ["-f", "-c", "%T", path]
        let out = Pipe()
        p.standardOutput = out
        try p.start()
        let text = PipeLineReader(out.fileHandleForReading).readAll(timeout: 10).joined()
        _ = waitForExit(p, timeout: 10)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// How many bytes of the file at `path` are in the page cache (`mincore`), and its size.
    private func residentBytes(_ path: String) throws -> (bytes: Int, size: Int) {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw HarnessError("cannot open \(path)") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0 else { throw HarnessError("cannot stat \(path)") }
        let size = Int(st.st_size)
        guard let map = mmap(nil, size, PROT_READ, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            throw HarnessError("cannot map \(path)")
        }
        defer { munmap(map, size) }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        var vector = [UInt8](repeating: 0, count: (size + page - 1) / page)
        guard mincore(map, size, &vector) == 0 else { throw HarnessError("mincore failed on \(path)") }
        return (vector.reduce(0) { $0 + Int($1 & 1) } * page, size)
    }

    @Test("control socket: replay by prefix in pages, not_retained, stats, report, bad requests")
    func controlProtocol() throws {
        let daemon = try DaemonProcess()
        let tour = try String(contentsOf: Products.repositoryRoot.appendingPathComponent("samples/tour.jsonl"), encoding: .utf8)
        let sent = try sendBytes(Array(tour.utf8), to: daemon.ingestAcked, arguments: ["--acked"])
        #expect(sent.status == 1, "the tour holds one non-lifecycle message, rejected with its reason")
        let control = try ControlClient(daemon.control)

        let all = try control.replayAll(page: 2)
        #expect(all.count == 12)
        let completes = try control.replayAll(prefix: "checkout.complete")
        #expect(completes.count == 3)
        #expect(completes.allSatisfy { $0.1 == "checkout.complete" })
        #expect(completes.map { $0.2["kind_seq"] as? Int } == [1, 2, 3])

        let page = try control.request(#"{"op":"replay","from":1,"limit":3,"prefix":["checkout.fail","bus."],"req":[7]}"#)
        #expect(page.status["ok"] as? Bool == true)
        #expect(page.status["req"] as? [Int] == [7])
        #expect(page.status["count"] as? Int == 3)
        #expect(page.frames.count == 6)
        #expect(page.frames.enumerated().filter { $0.offset % 2 == 0 }.allSatisfy {
            let topic = String(decoding: $0.element, as: UTF8.self)
            return topic.hasPrefix("checkout.fail") || topic.hasPrefix("bus.")
        })

        let stats = try control.request(#"{"op":"stats"}"#).status
        #expect(stats["last_seq"] as? Int == 12)
        #expect(stats["durable_seq"] as? Int == 12)
        #expect((stats["kind_seqs"] as? [String: Int])?["complete"] == 3)

        let report = try control.request(#"{"op":"report","subscriber":"worker-a","last_seq":9,"missed":4,"recovered":4,"gaps":2}"#)
        #expect(report.status["ok"] as? Bool == true)
        let withReport = try control.request(#"{"op":"stats"}"#).status
        let subscribers = try #require(withReport["subscribers"] as? [String: [String: Any]])
        #expect(subscribers["worker-a"]?["missed"] as? Int == 4)
        #expect(subscribers["worker-a"]?["gaps"] as? Int == 2)
        // A negative count, or one that is not an integer, is refused and leaves the report as it was.
        for bad in [#""missed":-1"#, #""last_seq":-9"#, #""gaps":"two""#, #""rejected":1.5"#] {
            let refused = try control.request(#"{"op":"report","subscriber":"worker-a",\#(bad)}"#).status
            #expect(refused["error"] as? String == "bad_request", "\(bad)")
            #expect((refused["detail"] as? String)?.contains("0 or more") == true, "\(refused)")
        }
        let unchanged = try #require(try control.request(#"{"op":"stats"}"#).status["subscribers"] as? [String: [String: Any]])
        #expect(unchanged["worker-a"]?["missed"] as? Int == 4 && unchanged["worker-a"]?["last_seq"] as? Int == 9)

        // checkout_id: only the envelopes naming that checkout (tour-1: a start, two updates, a
        // complete; and-3: a fail and a dismiss), across every page; count is what the page holds.
        for (checkout, kinds) in [("gid://shopify/Checkout/tour-1", ["start", "update", "update", "complete"]),
                                  ("and-3", ["fail", "dismiss"]), ("nobody", [])] {
            var got: [String] = []
            var from = 1
            while from <= 12 {
                let r = try control.request(#"{"op":"replay","from":\#(from),"limit":2,"checkout_id":"\#(checkout)"}"#)
                #expect(r.status["count"] as? Int == r.frames.count / 2)
                for i in stride(from: 1, to: r.frames.count, by: 2) {
                    let envelope = try #require(try JSONSerialization.jsonObject(with: Data(r.frames[i])) as? [String: Any])
                    #expect(envelope["checkout_id"] as? String == checkout)
                    got.append(envelope["kind"] as? String ?? "?")
                }
                from = try #require(r.status["next"] as? Int)
            }
            #expect(got == kinds, "\(checkout)")
        }

        for bad in ["not json", #"{"op":"fly"}"#, #"{"op":"replay"}"#, #"{"op":"replay","from":1,"prefix":7}"#, "[1]",
                    #"{"op":"replay","from":1,"checkout_id":7}"#] {
            let r = try control.request(bad).status
            #expect(r["ok"] as? Bool == false)
            #expect(r["error"] as? String == "bad_request", "\(bad)")
        }
        #expect(daemon.process.isRunning)
    }
}
