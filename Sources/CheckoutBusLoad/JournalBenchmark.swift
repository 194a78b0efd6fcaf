#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusTools
import CheckoutBusCore
import Foundation
import ZeroMQ
import CheckoutBusDaemon
import CheckoutBusClient
import CheckoutBusProtocol
import CheckoutBusJSON
import CheckoutBusRuntime

/// `checkoutbus bench journal`: how fast the journal is read back, beside a plain sequential read
/// of the same files, and how fast a client pages through it over the control socket.
///
/// Writes `events` ~1 KB envelopes into a fresh journal in a temporary directory, then measures
/// (1) `Journal.read` over all of them (checksums verified), (2) `read(2)` of the same bytes doing
/// nothing else (the disk/page-cache ceiling), (3) a DEALER paging through a spawned daemon's
/// control socket. Not `Sendable`; runs on the calling thread.
package struct JournalBenchmark {
    package var events = 1_000_000
    package init() {}

    package func say(_ s: String) { FileHandleWriter.standardOutput(s + "\n") }

    package func run() -> Int32 {
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("cb-journal-bench-\(getpid())")
        defer { try? FileManager.default.removeItem(at: tmp) }
        do {
            let directory = tmp.appendingPathComponent("data/journal").path
            let logger = BusLogger(label: "bench", level: .warning)
            let journal = try Journal(directory: directory, options: Journal.Options(), logger: logger)
            let batch = JournalBatch(journal: journal, measuresLatency: false, logger: logger)
            let envelope = JournalBenchmark.sampleEnvelope()
            let topic = Array("checkout.update".utf8)
            var t0 = BusClock.monotonicNanoseconds()
            for seq in 1...UInt64(events) {
                topic.withUnsafeBytes { t in
                    envelope.withUnsafeBytes { e in batch.append(seq: seq, kindSeq: seq, kind: 1, topic: t, envelope: e, arrival: 0) }
                }
                if seq % 512 == 0 { try batch.flush() }
            }
            try batch.flush()
            let writeSeconds = Double(BusClock.monotonicNanoseconds() - t0) / 1e9
            say("checkoutbus bench journal: \(events) records of \(envelope.count + topic.count) bytes, \(journal.segmentCount) segment(s), \(journal.totalBytes / 1_048_576) MiB")
            say("  write (append + write, 512 per batch, no fsync wait): \(Int(Double(events) / writeSeconds)) records/s")

            // (1) Journal.read, whole journal, checksums verified.
            var best = 0.0
            for _ in 0..<3 {
                t0 = BusClock.monotonicNanoseconds()
                var next: UInt64 = 1
                var total = 0
                var bytes = 0
                while next <= journal.lastSeq {
                    let r = try journal.read(from: next, prefixes: [], limit: 10_000) { _, t, e in bytes &+= t.count + e.count }
                    next = r.next
                    total += r.count
                }
                let rate = Double(total) / (Double(BusClock.monotonicNanoseconds() - t0) / 1e9)
                best = max(best, rate)
                if total != events { throw ToolError("journal read returned \(total) of \(events) records") }
            }
            // (2) The baseline: read(2) of the same files, nothing else.
            var baseline = 0.0
            let files = (try FileManager.default.contentsOfDirectory(atPath: directory)).filter { $0.hasSuffix(".seg") }.sorted()
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: 1 << 20, alignment: 8)
            defer { buffer.deallocate() }
            for _ in 0..<3 {
                t0 = BusClock.monotonicNanoseconds()
                for f in files {
                    let fd = open(directory + "/" + f, O_RDONLY)
                    guard fd >= 0 else {
                        throw ToolError("cannot open \(directory)/\(f): \(String(cString: strerror(errno)))")
                    }
                    var n = 0
                    repeat { n = read(fd, buffer, 1 << 20) } while n > 0 || (n < 0 && errno == EINTR)
                    close(fd)
                    if n < 0 { throw ToolError("cannot read \(directory)/\(f): \(String(cString: strerror(errno)))") }
                }
                baseline = max(baseline, Double(events) / (Double(BusClock.monotonicNanoseconds() - t0) / 1e9))
            }
            journal.close()
            say("  replay from the journal (Journal.read, checksums verified): \(Int(best)) records/s")
            say("  baseline, read(2) of the same files doing nothing else:     \(Int(baseline)) records/s (ratio \(String(format2x: best / baseline)))")

            // (3) Over the control socket of a daemon started on this journal.
            let daemon = try ThroughputBenchmark.BusProcess("checkoutbusd", [
                "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*", "--ingest-acked", "tcp://127.0.0.1:*",
                "--control", "tcp://127.0.0.1:*", "--metrics", "127.0.0.1:*", "--data-dir", tmp.appendingPathComponent("data").path, "--log-level", "warning",
            ])
            defer { daemon.stop() }
            guard let control = daemon.ready["control"] as? String else { throw ToolError("no control endpoint") }
            let context = try ZMQContext()
            let dealer = try ZMQSocket(context: context, type: .dealer)
            try dealer.setLinger(milliseconds: 0)
            try dealer.connect(control)
            let message = ZMQMessage()
            t0 = BusClock.monotonicNanoseconds()
            var next = 1
            var received = 0
            let document = JSONDocument()
            while next <= events {
                _ = try dealer.send(ControlRequestWire.replay(from: Int64(next), limit: 10000))
                _ = try dealer.receive(into: message)
                let status = message.bytes
                guard ControlReplyWire.parse(status, into: document) else {
                    throw ToolError("bad replay reply: \(String(decoding: status, as: UTF8.self))")
                }
                // The daemon's control replies at their bound (docs/durability.md): asked again shortly.
                if ControlReplyWire.read(document).error == "busy" {
                    usleep(20_000)
                    continue
                }
                guard let n = ControlReplyWire.read(document).next.map({ Int($0) }) else {
                    throw ToolError("bad replay reply: \(String(decoding: status, as: UTF8.self))")
                }
                guard n > next else { throw ToolError("replay from \(next) made no progress (next \(n))") }
                while message.hasMore {
                    _ = try dealer.receive(into: message)
                    received += 1
                }
                next = n
            }
            let overSocket = Double(received / 2) / (Double(BusClock.monotonicNanoseconds() - t0) / 1e9)
            say("  replay over the control socket (pages of 10000, one DEALER client): \(Int(overSocket)) records/s")
            checksums(recordBytes: JournalFormat.recordHeaderSize + topic.count + envelope.count)
            return 0
        } catch {
            FileHandleWriter.standardError("checkoutbus bench journal: \(error)\n")
            return 1
        }
    }

    /// The record checksum of "CBR2" against the serial one of "CBR1" on records of the bench's
    /// size, in alternating passes of 200,000 records each, on this thread.
    package func checksums(recordBytes: Int) {
        let record = (0..<recordBytes).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
        var nanos: [[Double]] = [[], []]
        var sink: UInt64 = 0
        record.withUnsafeBytes { r in
            for _ in 0..<5 {
                for version in 0..<2 {
                    let t0 = BusClock.monotonicNanoseconds()
                    for k in 0..<200_000 {
                        let p = r.baseAddress!
                        sink &+= version == 0 ? JournalFormat.checksumV1(p, r.count - (k & 1)) : JournalFormat.checksum(p, r.count - (k & 1))
                    }
                    nanos[version].append(Double(BusClock.monotonicNanoseconds() - t0) / 200_000)
                }
            }
        }
        let v1 = ThroughputBenchmark.median(nanos[0])
        let v2 = ThroughputBenchmark.median(nanos[1])
        say("  record checksum, \(recordBytes)-byte records (median of 5 alternating passes): CBR2 \(String(format2: v2)) ns, CBR1 \(String(format2: v1)) ns per record (CBR2/CBR1 \(String(format2x: v2 / v1)))\(sink == 42 ? " " : "")")
    }

    /// A ~1 KB lifecycle envelope, as the daemon writes them.
    package static func sampleEnvelope() -> [UInt8] {
        let processor = EventProcessor()
        let event = ThroughputBenchmark.snapshots(1, run: "journal")[0].bytes
        let result = event.withUnsafeBytes {
            processor.process($0, receivedAt: Timestamp(milliseconds: BusClock.wallMilliseconds()), now: 1)
        }
        return result.publication.map { Array($0.envelope) } ?? []
    }
}
