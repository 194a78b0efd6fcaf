import CheckoutBusClient
import Foundation
import Synchronization
import Testing
import ZeroMQ

#if canImport(Glibc)
import Glibc
#endif

/// A durability call that fails (docs/durability.md, "When the disk says no"), made to fail on
/// purpose with failpoints in a real daemon under an acknowledged producer: no acknowledgement
/// past the failure, the daemon fenced (exit 75, a `FENCED` marker), and after the restart every
/// acknowledged event still in the journal, and the journal byte for byte what subscribers saw
/// (the unsynced tail read back, checked and written again).
@Suite("durability: failed syncs fence the journal", .serialized, .timeLimit(.minutes(6)))
struct DurabilityFenceTests {
    struct Marker: Decodable {
        var durable_seq: Int
        var reason: String
    }

    /// Everything the publish socket sends, by seq, from its first heartbeat until stopped: what
    /// subscribers saw.
    final class PublishedCapture: Sendable {
        let envelopes = Mutex([Int: String]())
        let subscribed = DispatchSemaphore(value: 0)
        let stop = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)

        init(_ endpoint: String) {
            Thread { [self] in
                defer { done.signal() }
                guard let context = try? ZMQContext(), let sub = try? ZMQSocket(context: context, type: .sub) else { return }
                try? sub.setOption(.receiveHighWaterMark, 1_000_000)
                try? sub.setOption(.receiveTimeout, 200)
                try? sub.setLinger(milliseconds: 0)
                try? sub.subscribe("")
                try? sub.connect(endpoint)
                var heard = false
                while !stop.load(ordering: .relaxed) {
                    guard let frames = try? sub.receiveMultipart(), frames.count == 2 else { continue }
                    let topic = String(decoding: frames[0], as: UTF8.self)
                    if topic == "bus.heartbeat" {
                        if !heard { subscribed.signal() }
                        heard = true
                        continue
                    }
                    let text = String(decoding: frames[1], as: UTF8.self)
                    guard let object = try? JSONSerialization.jsonObject(with: Data(frames[1])) as? [String: Any],
                        let seq = object["seq"] as? Int
                    else { continue }
                    envelopes.withLock { $0[seq] = text }
                }
            }.start()
        }

        func finish() -> [Int: String] {
            stop.store(true, ordering: .relaxed)
            done.wait()
            return envelopes.withLock { $0 }
        }
    }

    /// Sends `count` distinct events until the failpoint fences the daemon; returns what was
    /// acknowledged before it died, what it published, and the marker it left.
    static func sendUntilFenced(failpoints: String, extra: [String] = [], run: String, count: Int = 20_000) async throws
        -> (daemon: DaemonProcess, acked: [Acknowledgement], events: [[UInt8]], marker: Marker, published: [Int: String])
    {
        let daemon = try DaemonProcess(extra, failpoints: failpoints)
        let capture = PublishedCapture(daemon.publish)
        #expect(capture.subscribed.wait(timeout: .now() + 20) == .success, "a heartbeat answered the subscription")
        let producer = try await AcknowledgedProducer(options: .init(endpoint: daemon.ingestAcked, timeout: .seconds(10), window: 64))
        let events = AcknowledgedProducerTests.bytes(distinctEvents(count, run: run))
        var acked: [Acknowledgement] = []
        do {
            acked = try await producer.send(events)
            Issue.record("every event was acknowledged: the failpoint \(failpoints) never fired")
        } catch let error as AcknowledgedProducerError {
            #expect(error.code == .disconnected || error.code == .timedOut, "\(error)")
            acked = error.acknowledged
        }
        await producer.close()
        #expect(waitForExit(daemon.process, timeout: 20) == 75, "a fenced daemon exits 75")
        #expect(daemon.stderrText.contains("journal fenced"), "the log says why: \(daemon.stderrText.suffix(600))")
        let markerURL = daemon.dataDirectory.appendingPathComponent("journal/FENCED")
        let marker = try JSONDecoder().decode(Marker.self, from: Data(contentsOf: markerURL))
        return (daemon, acked, events, marker, capture.finish())
    }

    /// The restart cuts back to the marker, keeps every acknowledged event, numbers after the
    /// cut, and takes the unacknowledged events again (those it kept as duplicates).
    static func restartAndCheck(_ fenced: DaemonProcess, acked: [Acknowledgement], events: [[UInt8]],
                                marker: Marker, published: [Int: String], publishedPastDurable: Bool = true) async throws {
        #expect(!acked.isEmpty, "the run acknowledged something before the failure")
        let ackedSeqs = acked.compactMap(\.seq)
        #expect(ackedSeqs.count == acked.count)
        #expect(ackedSeqs.allSatisfy { $0 <= Int64(marker.durable_seq) },
                "no acknowledgement past the failed sync: max acked \(ackedSeqs.max() ?? 0), durable \(marker.durable_seq)")

        let restarted = try DaemonProcess(["--ingest-acked", fenced.ingestAcked], dataDirectory: fenced.dataDirectory)
        #expect(restarted.stderrText.contains("the last run was fenced"))
        // What subscribers saw is what the journal holds: the records after the durable seq were
        // read back, checked and written again, not cut.
        // (A rotation syncs the segment it closes first: then nothing past the durable seq was written.)
        #expect(published.keys.contains { $0 > marker.durable_seq } == publishedPastDurable,
                "records past the durable seq were published: \(publishedPastDurable)")
        var byteForByte = 0
        for record in try ControlClient(restarted.control).replayAll(prefixes: []) {
            if let seen = published[record.seq] {
                #expect(seen == String(decoding: record.bytes, as: UTF8.self), "seq \(record.seq): published and journaled differ")
                byteForByte += 1
            }
        }
        #expect(byteForByte == published.count, "every published envelope is in the journal: \(byteForByte) of \(published.count)")
        #expect(!FileManager.default.fileExists(atPath: fenced.dataDirectory.appendingPathComponent("journal/FENCED").path),
                "the marker is cleared once the cut is on disk")
        // The operator sees it: stats and the metric the alert reads.
        let stats = try ControlClient(restarted.control).stats()
        let fence = (stats["journal"] as? [String: Any])?["fence_recovered"] as? [String: Any]
        #expect(fence?["durable_seq"] as? Int == marker.durable_seq && fence?["reason"] as? String == marker.reason)
        let metrics = try httpGet(restarted.ready["metrics"] as! String, "/metrics").body
        #expect(metrics.contains("\ncheckoutbus_journal_fence_recovered 1\n"))
        let journal = try AcknowledgedProducerTests.journalEventIDs(restarted)
        for answer in acked {
            #expect(journal[Int(answer.seq ?? -1)] == answer.eventID, "acknowledged \(answer) lost")
        }
        // The rest again: all accepted, numbered after the cut, each event once in the journal.
        let producer = try await AcknowledgedProducer(options: .init(endpoint: restarted.ingestAcked, timeout: .seconds(20), window: 64))
        let resent = try await producer.send(Array(events[acked.count...]))
        await producer.close()
        #expect(resent.allSatisfy { $0.isAccepted })
        let kept = Set(journal.values)
        let lastKept = Int64(journal.keys.max() ?? 0)
        for answer in resent {
            #expect(answer.isDuplicate == kept.contains(answer.eventID ?? ""), "\(answer)")
            if !answer.isDuplicate { #expect((answer.seq ?? 0) > lastKept) }
        }
        let after = try AcknowledgedProducerTests.journalEventIDs(restarted)
        let ids = after.values.sorted()
        #expect(ids.count == events.count && Set(ids).count == events.count, "each event once: \(ids.count) records")
        #expect(restarted.terminate() == 0)
    }

    /// EIO: the disk failed the writeback. ENOSPC: a thin-provisioned volume ran out of space.
    @Test("fdatasync fails under an acknowledged producer: no acknowledgement past it; the restart loses nothing acknowledged",
          arguments: [("journal.fdatasync=eio@40", "Input/output error"), ("journal.fdatasync=enospc@25", "No space left")])
    func fdatasyncFails(failpoint: String, reason: String) async throws {
        let (daemon, acked, events, marker, published) = try await Self.sendUntilFenced(
            failpoints: failpoint, run: "fence-\(failpoint.suffix(6))")
        #expect(marker.reason.contains("fdatasync") && marker.reason.contains(reason), "\(marker.reason)")
        try await Self.restartAndCheck(daemon, acked: acked, events: events, marker: marker, published: published)
    }

    @Test("a new segment's header cannot be synced at a rotation: fenced, nothing acknowledged lost")
    func segmentSyncAtRotation() async throws {
        // Hit 1 is the first segment's, at start; 3 is the second rotation's.
        let (daemon, acked, events, marker, published) = try await Self.sendUntilFenced(
            failpoints: "journal.segment-sync=eio@3", extra: ["--segment-bytes", "262144"], run: "fence-seg")
        #expect(marker.reason.contains("header of journal segment"))
        try await Self.restartAndCheck(daemon, acked: acked, events: events, marker: marker, published: published,
                                       publishedPastDurable: false)
    }

    @Test("a write refused for a while (ENOSPC) holds the acknowledgements, then releases them; nothing lost, no fence")
    func transientWriteFailure() async throws {
        let daemon = try DaemonProcess(failpoints: "journal.write=enospc@5x30")
        let producer = try await AcknowledgedProducer(options: .init(endpoint: daemon.ingestAcked, timeout: .seconds(20), window: 64))
        let events = AcknowledgedProducerTests.bytes(distinctEvents(3000, run: "fence-write"))
        let answers = try await producer.send(events)
        await producer.close()
        #expect(answers.count == events.count && answers.allSatisfy { $0.isAccepted })
        let journal = try AcknowledgedProducerTests.journalEventIDs(daemon)
        for answer in answers { #expect(journal[Int(answer.seq ?? -1)] == answer.eventID) }
        #expect(Set(journal.values).count == events.count)
        #expect(daemon.stderrText.contains("journal write failed; ingest paused"), "the failpoint fired")
        #expect(!daemon.stderrText.contains("journal fenced"))
        #expect(daemon.terminate() == 0)
    }
}
