import CheckoutBusRuntime
import Foundation
import Testing

@testable import CheckoutBusDaemon

#if canImport(Glibc)
import Glibc
#endif

/// A batch's life (``JournalBatch``) on a real journal in a temporary directory: pending, at the
/// writer thread, written and published, or failed and retried with its arrival times kept.
@Suite("journal batch: pending, in flight, written or failed and retried")
struct JournalBatchTests {
    /// A journal in a fresh temporary directory, writing through the page cache (no `O_DIRECT`
    /// probe), and its batches measuring latency.
    final class Fixture {
        let root: String
        let journal: Journal
        let batch: JournalBatch
        /// Each published record: its seq (from the envelope) and topic.
        var published: [(seq: UInt64, topic: String)] = []
        /// Envelopes lent and not yet given back: the loan's hint, the bytes where they lie, and
        /// the text they held when published.
        var loans: [(hint: UnsafeMutableRawPointer, bytes: UnsafeRawBufferPointer, text: String)] = []
        /// Give each loan back as soon as it is made (a subscriber that keeps up); else keep it in
        /// ``loans`` until ``giveBackAll()``.
        var givesBackAtOnce = true
        /// Envelopes published without a loan (copied).
        var copied = 0

        /// - Parameters:
        ///   - direct: long runs go through `O_DIRECT` where the file system takes it.
        ///   - segmentBytes: `--segment-bytes`.
        ///   - lends: the batch lends published envelopes (``JournalBatch/Loan``).
        init(direct: Bool = false, segmentBytes: Int = 64 << 20, lends: Bool = false) throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("cb-batch-\(UUID().uuidString)").path
            var options = Journal.Options()
            options.cacheBytes = direct ? 0 : nil
            options.segmentBytes = segmentBytes
            let logger = BusLogger(label: "test", level: .error)
            journal = try Journal(directory: root + "/journal", options: options, logger: logger)
            batch = JournalBatch(journal: journal, measuresLatency: true, lendsPublishedBytes: lends, logger: logger)
        }

        deinit {
            batch.close()
            try? FileManager.default.removeItem(atPath: root)
        }

        /// Appends records `seqs`, each arriving at its seq (monotonic ns), their topics
        /// `checkout.update` then `padding` spaces.
        func append(_ seqs: ClosedRange<UInt64>, padding: Int = 0) {
            for seq in seqs {
                let topic = Array("checkout.update".utf8) + [UInt8](repeating: 0x20, count: padding)
                let envelope = Array("{\"seq\":\(seq)}".utf8)
                topic.withUnsafeBytes { t in
                    envelope.withUnsafeBytes { e in
                        batch.append(seq: seq, kindSeq: seq, kind: 1, topic: t, envelope: e, arrival: seq)
                    }
                }
            }
        }

        /// Publishes into ``published``, keeping or giving back each loan.
        func publish(_ topic: UnsafeRawBufferPointer, _ envelope: UnsafeRawBufferPointer, _ loan: JournalBatch.Loan?) {
            let text = String(decoding: envelope, as: UTF8.self)
            let seq = UInt64(text.dropFirst(7).dropLast())!
            published.append((seq, String(decoding: topic, as: UTF8.self).trimmingCharacters(in: .whitespaces)))
            guard let loan else {
                copied += 1
                return
            }
            if givesBackAtOnce {
                JournalBatch.Loan.giveBack(nil, loan.hint)
            } else {
                loans.append((loan.hint, envelope, text))
            }
        }

        /// Gives back every loan kept.
        func giveBackAll() {
            for loan in loans { JournalBatch.Loan.giveBack(nil, loan.hint) }
            loans.removeAll()
        }

        /// Whether every envelope still lent holds what it held when published.
        var lentBytesIntact: Bool { loans.allSatisfy { String(decoding: $0.bytes, as: UTF8.self) == $0.text } }

        func advance() throws -> Bool { try batch.advance(publish) }
        func settle() throws -> Bool { try batch.settle(publish) }

        /// Runs the appender wrote where they lay, and runs it copied into its staging buffer.
        var runs: (inPlace: Int, staged: Int) {
            journal.appender.withValue { ($0.runsInPlace, $0.runsStaged) }
        }

        /// The seqs in the journal's file, read back.
        func seqsInFile() throws -> [UInt64] {
            var seqs: [UInt64] = []
            _ = try journal.read(from: 1, prefixes: [], limit: 100_000) { seq, _, _ in seqs.append(seq) }
            return seqs
        }

        /// Makes every write to the open segment fail with `ENOSPC` (a full disk) until `body`
        /// returns: `/dev/full` stands in for the segment's descriptor.
        func withFullDisk<T>(_ body: () throws -> T) throws -> T {
            // The sync thread first syncs everything written so far, so it has nothing to sync
            // while `/dev/full` stands in (nothing is written then): its `fdatasync` fails there
            // (EINVAL), and a failed sync fences the journal, which ends the process — the whole
            // test run, at random, with status 75.
            let deadline = BusClock.monotonicNanoseconds() + 10_000_000_000
            while journal.syncer.durable < journal.lastSeq && BusClock.monotonicNanoseconds() < deadline { usleep(200) }
            try #require(journal.syncer.durable >= journal.lastSeq)
            let full = open("/dev/full", O_WRONLY | O_CLOEXEC)
            let saved = dup(journal.fd)
            try #require(full >= 0 && saved >= 0)
            #expect(dup2(full, journal.fd) == journal.fd)
            defer {
                _ = dup2(saved, journal.fd)
                close(saved)
                close(full)
            }
            return try body()
        }
    }

    @Test("a small batch is written and published on the calling thread at once")
    func small() throws {
        let f = try Fixture()
        f.append(1...5)
        #expect(f.batch.pendingCount == 5)
        #expect(try f.advance())
        #expect(!f.batch.hasInflight && f.batch.pendingCount == 0)
        #expect(f.published.map(\.seq) == Array(1...5))
        #expect(f.published.allSatisfy { $0.topic == "checkout.update" })
        #expect(f.batch.publishedSeq == 5)
        #expect(f.batch.latency.count == 5)
        #expect(try f.seqsInFile() == Array(1...5))
    }

    @Test("a large batch goes to the writer thread, then is published once written; the next one fills meanwhile")
    func writeBehind() throws {
        let f = try Fixture()
        f.append(1...40)
        #expect(try f.advance())
        #expect(f.batch.hasInflight)
        #expect(f.batch.pendingCount == 0)
        f.append(41...45)
        #expect(f.published.isEmpty || f.published.map(\.seq) == Array(1...40))
        #expect(try f.settle())
        #expect(!f.batch.hasInflight && f.batch.pendingCount == 0)
        #expect(f.published.map(\.seq) == Array(1...45))
        #expect(f.batch.publishedSeq == 45)
        #expect(f.batch.latency.count == 45)
        #expect(try f.seqsInFile() == Array(1...45))
    }

    @Test("lent envelopes stay as they were until given back; past four buffers set aside, envelopes are copied; given back, lending resumes; small batches are copied")
    func lending() throws {
        let f = try Fixture(lends: true)
        f.givesBackAtOnce = false
        var seq: UInt64 = 0
        /// Appends `n` records and settles: written and published on this thread.
        func batch(_ n: UInt64, padding: Int) throws {
            f.append(seq + 1...seq + n, padding: padding)
            seq += n
            #expect(try f.settle())
        }
        // Batches of 32 (``writeBehindMinimum``) lend their envelopes and are set aside, and the
        // next goes to another buffer; past four set aside, the rest are copied.
        for round in 0..<6 { try batch(32, padding: 10 * round) }
        #expect(f.batch.lentBufferCount == JournalBatch.maxLentBuffers)
        #expect(f.loans.count == 128 && f.copied == 64)
        #expect(f.batch.envelopesLent == 128)
        // A large batch at the writer thread while four are out: copied too, and its buffer reused.
        f.append(seq + 1...seq + 40, padding: 300)
        seq += 40
        #expect(try f.advance())
        try batch(3, padding: 0)
        #expect(f.copied == 107 && f.loans.count == 128)
        #expect(f.lentBytesIntact, "records appended since did not overwrite a lent envelope")
        #expect(f.published.map(\.seq) == Array(1...seq))
        #expect(try f.seqsInFile() == Array(1...seq))

        // Given back: the set-aside buffers are taken back, and the next large batches lend again;
        // a small one is copied whatever is out.
        f.giveBackAll()
        try batch(5, padding: 20)
        #expect(f.copied == 112 && f.batch.lentBufferCount == 0)
        f.append(seq + 1...seq + 40, padding: 50)
        seq += 40
        #expect(try f.advance())
        #expect(try f.settle())
        #expect(f.batch.lentBufferCount == 1)
        #expect(f.loans.count == 40 && f.batch.envelopesLent == 168)
        for _ in 0..<3 { try batch(33, padding: 700) }
        #expect(f.batch.lentBufferCount == 4 && f.loans.count == 139)
        #expect(f.lentBytesIntact)
        f.giveBackAll()
        f.givesBackAtOnce = true
        let last = try JournalBatchTests.flood(f, after: seq)
        #expect(f.batch.lentBufferCount == 0, "every buffer taken back once its loans came back")
        #expect(f.batch.envelopesLent + UInt64(f.copied) == last)
        #expect(f.batch.envelopesLent > 267, "the flood's large batches were lent")
        #expect(f.published.map(\.seq) == Array(1...last))
        #expect(try f.seqsInFile() == Array(1...last))
    }

    @Test("a failed write publishes nothing and stays pending; the retry writes it with what came after, in order, arrival times kept")
    func failedOnThisThread() throws {
        let f = try Fixture()
        f.append(1...3)
        #expect(try f.advance())
        f.append(4...6)
        let ok = try f.withFullDisk { try f.advance() }
        #expect(!ok)
        #expect(f.batch.isFailing)
        #expect(!f.journal.isWritable)
        #expect(f.published.map(\.seq) == Array(1...3))
        #expect(f.batch.pendingCount == 3)
        let now = BusClock.monotonicNanoseconds()
        #expect(!f.batch.retryDue(now: now))
        #expect(f.batch.retryDue(now: now + JournalBatch.retryInterval))
        f.append(7...8)
        #expect(try f.advance())
        #expect(!f.batch.isFailing && f.journal.isWritable)
        #expect(f.published.map(\.seq) == Array(1...8))
        #expect(f.batch.latency.count == 8)
        #expect(try f.seqsInFile() == Array(1...8))
    }

    @Test("a failed write at the writer thread puts its batch back ahead of the records appended since")
    func failedAtWriter() throws {
        let f = try Fixture()
        let ok = try f.withFullDisk { () throws -> Bool in
            f.append(1...40)
            #expect(try f.advance())
            #expect(f.batch.hasInflight)
            f.append(41...50)
            return try f.settle()
        }
        #expect(!ok)
        #expect(f.batch.isFailing)
        #expect(!f.batch.hasInflight)
        #expect(f.batch.pendingCount == 50)
        #expect(f.published.isEmpty)
        #expect(f.batch.latency.count == 0)
        #expect(try f.advance())
        #expect(!f.batch.isFailing)
        #expect(f.published.map(\.seq) == Array(1...50))
        #expect(f.batch.latency.count == 50)
        #expect(try f.seqsInFile() == Array(1...50))
    }

    /// Records per batch: small ones written on the calling thread, large ones at the writer
    /// thread, some long enough for a direct write.
    static let batchSizes = [3, 40, 1, 200, 33, 7, 500, 64, 2, 90, 31, 32]

    /// Appends and advances ``batchSizes``' batches from seq `after + 1`, the records' sizes
    /// varying with the batch, then settles. Returns the last seq.
    static func flood(_ f: Fixture, after: UInt64 = 0) throws -> UInt64 {
        var seq = after
        for (i, n) in batchSizes.enumerated() {
            f.append(seq + 1...seq + UInt64(n), padding: 200 + 61 * i)
            seq += UInt64(n)
            #expect(try f.advance())
        }
        #expect(try f.settle())
        return seq
    }

    @Test("every batch is written where it lies, with no copy into the staging buffer, direct or through the page cache", arguments: [false, true])
    func inPlace(direct: Bool) throws {
        let f = try Fixture(direct: direct)
        // Direct where the test directory's file system takes it (not tmpfs before Linux 6.6).
        #expect(f.journal.writesDirect == (direct && JournalFiles.probeDirectWrites(in: f.root) == nil))
        let last = try JournalBatchTests.flood(f)
        #expect(f.published.map(\.seq) == Array(1...last))
        #expect(try f.seqsInFile() == Array(1...last))
        // Batches appended while one is at the writer thread join the next run: at most one run
        // per batch and the last settle. At least three: the first (small) batch on this thread,
        // the first large one at the writer thread, and what was appended meanwhile (a slow
        // writer thread, on a loaded machine, can gather all the rest into that one).
        let runs = f.runs
        #expect(runs.staged == 0)
        #expect(runs.inPlace >= 3 && runs.inPlace <= JournalBatchTests.batchSizes.count + 1, "\(runs)")
    }

    @Test("after a rotation the batch split across two segments goes through the staging buffer, and the ones after it where they lie", arguments: [false, true])
    func inPlaceAcrossRotations(direct: Bool) throws {
        let f = try Fixture(direct: direct, segmentBytes: 256 << 10)
        let first = try JournalBatchTests.flood(f)
        let segments = f.journal.segmentCount
        #expect(segments > 2)
        let before = f.runs
        #expect(before.staged > 0)
        #expect(before.staged <= 2 * (segments - 1))
        // Batches small enough not to rotate: each in place again.
        f.append(first + 1...first + 3)
        #expect(try f.advance())
        f.append(first + 4...first + 40)
        #expect(try f.settle())
        #expect(f.journal.segmentCount == segments)
        #expect(f.runs.staged == before.staged)
        #expect(f.runs.inPlace >= before.inPlace + 2)
        #expect(f.published.map(\.seq) == Array(1...first + 40))
        #expect(try f.seqsInFile() == Array(1...first + 40))
    }

    @Test("a batch whose write failed is written again with the records after it, and later batches where they lie")
    func inPlaceAfterFailure() throws {
        let f = try Fixture()
        f.append(1...5)
        #expect(try f.advance())
        let ok = try f.withFullDisk { () throws -> Bool in
            f.append(6...45)
            #expect(try f.advance())
            f.append(46...50, padding: 1000)
            return try f.settle()
        }
        #expect(!ok)
        #expect(try f.advance())
        #expect(f.published.map(\.seq) == Array(1...50))
        let before = f.runs
        let last = try JournalBatchTests.flood(f, after: 50)
        #expect(f.published.map(\.seq) == Array(1...last))
        #expect(try f.seqsInFile() == Array(1...last))
        #expect(f.runs.staged == before.staged)
        #expect(f.runs.inPlace >= before.inPlace + 4)
    }
}
