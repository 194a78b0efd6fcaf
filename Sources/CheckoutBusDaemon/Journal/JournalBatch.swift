#if canImport(Glibc)
import Glibc
#endif
import CheckoutBusRuntime
import Synchronization

/// The journal's batches from the first record appended to their publication: the pending batch,
/// the one at the writer thread, each record's arrival time, and the retry after a failed write.
///
/// The pipeline appends records (``append(seq:kindSeq:kind:topic:envelope:arrival:)``) and calls
/// ``advance(_:)`` after each read of its sockets: it publishes the batch the ``JournalWriter``
/// thread has written and hands that thread the pending one — or, for a small batch (light load),
/// writes it on the calling thread, where handing it over would add two thread wake-ups to its
/// latency and save nothing. ``settle(_:)`` writes and publishes everything appended so far before
/// returning (heartbeats, stopping).
///
/// A failed write (a full disk, say) puts its batch, with its arrival times, back in front of the
/// records appended since; nothing of it is published. ``isFailing`` is then true: the pipeline
/// stops reading ingest and calls ``advance(_:)`` again once ``retryDue(now:)``, every 100 ms,
/// until a write succeeds. The files themselves — segments, rotation, syncing — are the
/// ``Journal``'s.
///
/// With `lendsPublishedBytes`, a written batch of at least ``writeBehindMinimum`` records (at the
/// writer thread or on the calling thread) is published without copying its envelopes: each is
/// lent to the publisher (``Loan``), which hands it to libzmq where it lies, and the buffer is
/// written again, or freed, only once every loan has come back. A buffer with loans
/// out is set aside (at most ``maxLentBuffers``; beyond that, envelopes are copied as before), so
/// a subscriber that stops reading holds on to at most that many buffers.
///
/// Not `Sendable`: owned by the pipeline thread, with its ``Journal``.
package final class JournalBatch {
    /// A record's place in a batch's bytes.
    typealias Record = (offset: Int, topicLength: Int, envelopeLength: Int, seq: UInt64)

    /// One batch: its records' bytes, each record's place in them and arrival time, and how much
    /// of it is in the file.
    ///
    /// The memory is block-aligned, and the records start ``start`` bytes into it: the length of
    /// the segment's last partial block when they are written, as foreseen when the batch began.
    /// The appender then copies that block in front of them, on a block boundary, and writes the
    /// run where it lies (``SegmentAppender/append(_:_:room:)``); at least a block is kept free
    /// after the records for the zero padding.
    struct Buffer {
        var base: UnsafeMutableRawPointer
        var capacity: Int
        /// Where the first record goes (below ``SegmentAppender/blockSize``).
        var start = 0
        /// The end of the last record.
        var bytes = 0
        var records: [Record] = []
        /// Arrival time (monotonic ns) of each record, when latency is measured; empty otherwise.
        var arrivals: [UInt64] = []
        /// Records before this index are in the file: written on the pipeline thread ahead of a
        /// rotation, or before a failed write. A retry starts here.
        var written = 0
        /// The bytes of the run from ``written`` on that the writer thread was handed.
        var runBytes = 0
        /// Loans of these bytes made to the publisher, counted here (the pipeline thread).
        var lent = 0
        /// Loans given back, counted by the borrower on any thread (``Loan/giveBack``); on a cache
        /// line of its own, so the borrower's counting does not contend with the pipeline.
        let returned: UnsafeMutablePointer<Atomic<Int>>

        init(capacity: Int, start: Int) {
            self.capacity = capacity
            base = .allocate(byteCount: capacity, alignment: SegmentAppender.blockSize)
            self.start = start
            bytes = start
            returned = UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64)
                .bindMemory(to: Atomic<Int>.self, capacity: 1)
            returned.initialize(to: Atomic(0))
        }

        /// Every loan has come back: the bytes may be written again or freed. The acquiring load
        /// orders the borrower's last reads before whatever this thread does next.
        var isSettled: Bool { returned.pointee.load(ordering: .acquiring) == lent }

        /// Frees the memory; only once ``isSettled``.
        func free() {
            precondition(isSettled, "a batch buffer freed with its bytes lent")
            base.deallocate()
            returned.deinitialize(count: 1)
            UnsafeMutableRawPointer(returned).deallocate()
        }

        /// The memory around records `from..<to`, a run of them, that the appender may write
        /// over: before the batch's first record and after its last.
        func room(_ from: Int, _ to: Int) -> SegmentAppender.Room {
            SegmentAppender.Room(before: from == 0 ? records[0].offset : 0, after: to == records.count ? capacity - bytes : 0)
        }

        /// The bytes of record `i`: up to the next record, or to the end.
        func size(of i: Int) -> Int {
            (i + 1 < records.count ? records[i + 1].offset : bytes) - records[i].offset
        }

        /// Forgets the records, keeping the memory; the next goes `start` bytes in. Only once
        /// ``isSettled``: the next records are written over these.
        mutating func clear(start: Int) {
            precondition(isSettled, "a batch buffer reused with its bytes lent")
            self.start = start
            bytes = start
            written = 0
            runBytes = 0
            records.removeAll(keepingCapacity: true)
            arrivals.removeAll(keepingCapacity: true)
        }

        /// Calls `body` with the topic and envelope of each record, in order; with `lending`,
        /// each envelope is lent, and counted in `made` before the call (the caller adds `made`
        /// to ``lent`` whether or not `body` throws: the buffer is not held during the calls).
        func forEachRecord(lending: Bool, made: inout Int, _ body: Publish) throws {
            let loan = Loan(hint: UnsafeMutableRawPointer(returned))
            for r in records {
                let p = base + r.offset + JournalFormat.recordHeaderSize
                if lending { made &+= 1 }
                let envelope = UnsafeRawBufferPointer(start: p + r.topicLength, count: r.envelopeLength)
                try body(UnsafeRawBufferPointer(start: p, count: r.topicLength), envelope, lending ? loan : nil)
            }
        }
    }

    /// An envelope's bytes lent to the publisher: they stay as they are until it calls
    /// ``giveBack`` with ``hint``, exactly once, from any thread (libzmq does, from its I/O thread,
    /// when the last subscriber's copy of the frame is sent or dropped: `ZMQSocket.send(lending:)`).
    package struct Loan {
        /// The buffer's count of loans given back.
        package let hint: UnsafeMutableRawPointer

        /// Counts one loan of the buffer `hint` names as given back (`zmq_free_fn`'s shape: the
        /// bytes, then the hint).
        package static let giveBack: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = {
            _, hint in
            hint?.assumingMemoryBound(to: Atomic<Int>.self).pointee.wrappingAdd(1, ordering: .releasing)
        }
    }

    /// Publishes one record: its topic and its envelope, and the envelope's loan when it is lent
    /// rather than to be copied (the callee must see that ``Loan/giveBack`` is called, exactly once).
    package typealias Publish = (UnsafeRawBufferPointer, UnsafeRawBufferPointer, Loan?) throws -> Void

    /// At most this many buffers are set aside with loans out; past it, envelopes are copied.
    package static let maxLentBuffers = 4

    /// Batches of at least this many records go to the writer thread; smaller ones are written on
    /// the calling thread.
    package static let writeBehindMinimum = 32
    /// The wait between two attempts at a failing write (ns).
    package static let retryInterval: UInt64 = 100_000_000

    package let journal: Journal
    private let logger: BusLogger
    /// Keep each record's arrival time and observe ``latency`` as batches are published.
    private let measuresLatency: Bool
    /// Records appended and not yet handed to the writer thread (nor published).
    private var pending: Buffer
    /// The batch handed to the writer thread, until published.
    private var inflight: Buffer?
    /// The batch in flight was collected as written (and awaits publication).
    private var inflightWritten = false
    /// Batch buffers to reuse, all with no loan out (at most ``maxLentBuffers``: as many as may
    /// come back at once).
    private var spares: [Buffer] = []
    /// Publish written batches by lending their envelopes rather than copying them.
    private let lendsPublishedBytes: Bool
    /// Published buffers with loans still out, set aside until they come back.
    private var lentBuffers: [Buffer] = []
    /// Consecutive failed writes (0 while the journal takes them).
    package private(set) var failures = 0
    /// When a failing write is next tried (monotonic ns).
    private var retryAt: UInt64 = 0
    /// The last seq published (every seq up to it is written and was sent).
    package private(set) var publishedSeq: UInt64
    /// Time from an event's arrival to its publication (kept when `measuresLatency`).
    package private(set) var latency = Histogram.pipeline()

    /// - Parameters:
    ///   - journal: where the batches are written.
    ///   - measuresLatency: keep arrival times and observe ``latency`` (with `--metrics` on).
    ///   - lendsPublishedBytes: publish written batches of at least ``writeBehindMinimum`` records
    ///     (at the writer thread or on this one) by lending their envelopes (``Loan``) rather than
    ///     having them copied.
    package init(journal: Journal, measuresLatency: Bool, lendsPublishedBytes: Bool = false, logger: BusLogger) {
        self.journal = journal
        self.measuresLatency = measuresLatency
        self.lendsPublishedBytes = lendsPublishedBytes
        self.logger = logger
        publishedSeq = journal.lastSeq
        pending = Buffer(capacity: 1 << 20, start: journal.endInBlock(after: 0))
    }

    /// Buffers with loans still out (a subscriber's queue when the daemon stops) are left to the
    /// process's exit rather than freed under their reader.
    deinit {
        for buffer in [pending] + (inflight.map { [$0] } ?? []) + spares + lentBuffers
        where buffer.isSettled {
            buffer.free()
        }
    }

    /// Buffers set aside with loans out (at most ``maxLentBuffers``).
    package var lentBufferCount: Int { lentBuffers.count }
    /// Envelopes published by loan, where they lie, since the start (the rest were copied).
    package private(set) var envelopesLent: UInt64 = 0

    /// A write is failing: nothing new should be taken in until ``advance(_:)`` succeeds.
    package var isFailing: Bool { failures > 0 }
    /// Records appended and not yet handed to the writer thread (nor published).
    package var pendingCount: Int { pending.records.count }
    /// A batch is with the writer thread, or written and not yet published.
    package var hasInflight: Bool { inflight != nil }

    /// Whether a failing write is due to be tried again.
    package func retryDue(now: UInt64) -> Bool { failures > 0 && now >= retryAt }

    /// Adds one record to the pending batch. Nothing reaches the file until ``advance(_:)``,
    /// ``settle(_:)`` or ``flush()``.
    /// - Parameter arrival: when its event arrived (monotonic ns), for ``latency``.
    package func append(seq: UInt64, kindSeq: UInt64, kind: UInt8, topic: UnsafeRawBufferPointer,
                        envelope: UnsafeRawBufferPointer, arrival: UInt64) {
        let body = topic.count + envelope.count
        let size = JournalFormat.recordHeaderSize + body + JournalFormat.checksumSize
        // A block is kept free after the records, for the padding of a write in place.
        if pending.bytes + size + SegmentAppender.blockSize > pending.capacity { growPending(toHold: size) }
        let p = pending.base + pending.bytes
        JournalFormat.store(JournalFormat.recordMagic, p, 0)
        JournalFormat.store(UInt32(body), p, 4)
        JournalFormat.store(seq, p, 8)
        JournalFormat.store(kindSeq, p, 16)
        JournalFormat.store(kind, p, 24)
        JournalFormat.store(UInt8(0), p, 25)
        JournalFormat.store(UInt16(0), p, 26)
        JournalFormat.store(UInt32(topic.count), p, 28)
        if let b = topic.baseAddress { (p + JournalFormat.recordHeaderSize).copyMemory(from: b, byteCount: topic.count) }
        if let b = envelope.baseAddress {
            (p + JournalFormat.recordHeaderSize + topic.count).copyMemory(from: b, byteCount: envelope.count)
        }
        // The checksum is stored when the record is written (JournalFormat.seal).
        pending.records.append((pending.bytes, topic.count, envelope.count, seq))
        if measuresLatency { pending.arrivals.append(arrival) }
        pending.bytes += size
    }

    /// Makes room for `size` more bytes in the pending batch, and the free block after them: twice
    /// the capacity, or more when that is not enough. Out of line: rare, and ``append`` stays small.
    @inline(never)
    private func growPending(toHold size: Int) {
        precondition(pending.isSettled, "the pending batch's bytes lent")
        let capacity = max(pending.capacity * 2, pending.bytes + size + SegmentAppender.blockSize)
        let bigger = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: SegmentAppender.blockSize)
        bigger.copyMemory(from: pending.base, byteCount: pending.bytes)
        pending.base.deallocate()
        pending.base = bigger
        pending.capacity = capacity
    }

    /// Moves batches on: publishes the batch the writer thread has finished, and hands it the
    /// pending one when it is free (a small one is written and published here). While a write is
    /// failing, writes the pending batch on this thread instead.
    /// - Returns: false when a write failed: nothing of that batch is published, it stays
    ///   pending, and ``isFailing`` is true until a retry succeeds.
    /// - Throws: what `publish` throws (a journal error is not thrown: it is retried).
    package func advance(_ publish: Publish) throws -> Bool {
        if failures > 0 { return try settle(publish) }
        let collected: Bool
        do { collected = try collect(wait: false) } catch { return failed(error) }
        if collected { try publishCollected(publish) }
        if inflight == nil && !pending.records.isEmpty {
            if pending.records.count < JournalBatch.writeBehindMinimum { return try settle(publish) }
            do { try submit() } catch { return failed(error) }
        }
        return true
    }

    /// Writes and publishes everything appended so far before returning.
    /// - Returns: false when a write failed; what it did not take stays pending.
    /// - Throws: what `publish` throws.
    package func settle(_ publish: Publish) throws -> Bool {
        let collected: Bool
        do { collected = try collect(wait: true) } catch { return failed(error) }
        if collected { try publishCollected(publish) }
        guard !pending.records.isEmpty else {
            recovered()
            return true
        }
        do { try write() } catch { return failed(error) }
        recovered()
        reclaimLent()
        var made = 0
        do {
            defer { countLoans(made, in: &pending) }  // also when `publish` throws part-way
            try pending.forEachRecord(lending: mayLend(pending), made: &made, publish)
        }
        publishedSeq = journal.lastSeq
        observeLatency(pending.arrivals)
        let start = journal.endInBlock(after: 0)
        if !pending.isSettled {
            // Its bytes are out on loan: the next records go to a spare, or a new buffer.
            lentBuffers.append(pending)
            pending = spares.popLast() ?? Buffer(capacity: 1 << 20, start: start)
        }
        pending.clear(start: start)
        return true
    }

    /// Writes the pending batch on the calling thread and forgets it, unpublished (benchmarks).
    /// - Throws: a ``JournalError`` when the write fails; the batch then stays pending.
    package func flush() throws {
        precondition(inflight == nil, "flush() with a batch at the writer thread")
        precondition(pending.isSettled, "flush() with the pending batch's bytes lent")
        try write()
        publishedSeq = journal.lastSeq
        pending.clear(start: journal.endInBlock(after: 0))
    }

    /// Waits for a batch still at the writer thread (it is in the file once written, published or
    /// not), then closes the journal.
    package func close() {
        if inflight != nil { _ = try? collect(wait: true) }
        journal.close()
    }

    // MARK: The batch's life

    /// Writes the pending batch's unwritten records to the open segment with one `write` per
    /// segment they go to. After it returns, every pending record may be published.
    private func write() throws {
        guard pending.written < pending.records.count else { return }
        try journal.reserve(through: pending.records[pending.records.count - 1].seq)
        let last = try journal.writeRunsBeforeLast(&pending)
        try journal.writeRun(&pending, last.start, pending.records.count, last.bytes)
    }

    /// Hands the pending batch to the writer thread and starts a new one. Records that must go to
    /// the segment being closed when the batch crosses `--segment-bytes` are written here first.
    /// - Throws: when writing before a rotation, or the rotation, fails; the batch then stays
    ///   pending, as after a failed ``write()``.
    private func submit() throws {
        precondition(inflight == nil, "submit() with a batch already at the writer thread")
        guard pending.written < pending.records.count else { return }
        try journal.reserve(through: pending.records[pending.records.count - 1].seq)
        let last = try journal.writeRunsBeforeLast(&pending)
        pending.runBytes = last.bytes
        journal.post(pending.base + pending.records[last.start].offset, count: last.bytes,
                     room: pending.room(last.start, pending.records.count))
        let reserve = pending.records.count
        inflight = pending
        // A fresh batch, a spare buffer when there is one, placed for the segment's end once
        // the run just posted is written.
        let start = journal.endInBlock(after: last.bytes)
        reclaimLent()
        if var next = spares.popLast() {
            next.clear(start: start)
            pending = next
        } else {
            pending = Buffer(capacity: 1 << 20, start: start)
            pending.records.reserveCapacity(reserve)
            if measuresLatency { pending.arrivals.reserveCapacity(reserve) }
        }
    }

    /// Takes the writer thread's result for the batch in flight.
    /// - Parameter wait: wait for it rather than return false while it is being written.
    /// - Returns: true when the batch is written (publish it with ``publishCollected(_:)``). False
    ///   when there is none or it is still being written.
    /// - Throws: a ``JournalError`` when the write failed: the file is as before it, and the batch
    ///   is pending again ahead of the records appended since, for ``write()`` to retry.
    private func collect(wait: Bool) throws -> Bool {
        guard let batch = inflight else { return false }
        if inflightWritten { return true }
        guard let result = journal.writerResult(wait: wait) else { return false }
        guard result == 0 else {
            requeue(batch)
            throw JournalError(.notWritable, "journal write failed: \(String(cString: strerror(result)))")
        }
        journal.noteWritten(batch, batch.written, batch.records.count, bytes: batch.runBytes)
        inflightWritten = true
        return true
    }

    /// Publishes the batch the writer thread has written, lending its envelopes when it may, then
    /// keeps its buffer for reuse (set aside while loans are out).
    private func publishCollected(_ publish: Publish) throws {
        guard inflight != nil else { return }
        reclaimLent()
        var made = 0
        do {
            defer { countLoans(made, in: &inflight!) }  // also when `publish` throws part-way
            try inflight!.forEachRecord(lending: mayLend(inflight!), made: &made, publish)
        }
        let batch = inflight!
        inflight = nil
        inflightWritten = false
        publishedSeq = journal.lastSeq
        observeLatency(batch.arrivals)
        keep(batch)
    }

    /// Adds `made` loans to `buffer`'s count and the total.
    private func countLoans(_ made: Int, in buffer: inout Buffer) {
        buffer.lent &+= made
        envelopesLent &+= UInt64(made)
    }

    /// Keeps a published buffer: as a spare when no loan is out, else set aside.
    private func keep(_ batch: Buffer) {
        guard batch.isSettled else {
            lentBuffers.append(batch)
            return
        }
        spare(batch)
    }

    /// Keeps a buffer with no loan out for reuse, or frees it when there are spares enough.
    private func spare(_ buffer: Buffer) {
        if spares.count < JournalBatch.maxLentBuffers { spares.append(buffer) } else { buffer.free() }
    }

    /// Whether `batch` is published by lending its envelopes: lending is on, the batch is one
    /// worth handing to the writer thread (``writeBehindMinimum`` records: under light load
    /// the copies cost nothing that matters, and the pending buffer stays the same one), and
    /// fewer than ``maxLentBuffers`` buffers are set aside.
    private func mayLend(_ batch: Buffer) -> Bool {
        lendsPublishedBytes && batch.records.count >= JournalBatch.writeBehindMinimum
            && lentBuffers.count < JournalBatch.maxLentBuffers
    }

    /// Takes back the set-aside buffers whose loans have all come back, as spares.
    private func reclaimLent() {
        var i = 0
        while i < lentBuffers.count {
            guard lentBuffers[i].isSettled else {
                i += 1
                continue
            }
            spare(lentBuffers.remove(at: i))
        }
    }

    /// Puts a batch whose write failed back in front of the pending records, arrival times and all.
    private func requeue(_ batch: Buffer) {
        precondition(batch.isSettled, "a batch whose write failed was never published")
        inflight = nil
        inflightWritten = false
        var merged = batch
        let moved = pending.bytes - pending.start
        let needed = batch.bytes + moved + SegmentAppender.blockSize
        if needed > merged.capacity {
            let bigger = UnsafeMutableRawPointer.allocate(byteCount: needed, alignment: SegmentAppender.blockSize)
            bigger.copyMemory(from: merged.base, byteCount: merged.bytes)
            merged.base.deallocate()
            merged.base = bigger
            merged.capacity = needed
        }
        (merged.base + merged.bytes).copyMemory(from: pending.base + pending.start, byteCount: moved)
        let shift = batch.bytes - pending.start
        merged.records += pending.records.map { ($0.offset + shift, $0.topicLength, $0.envelopeLength, $0.seq) }
        merged.arrivals += pending.arrivals
        merged.bytes = batch.bytes + moved
        merged.runBytes = 0
        pending.free()
        pending = merged
    }

    /// Records a failed write: the caller stops taking input, and the retry comes in 100 ms.
    /// - Returns: false, for the caller to return.
    private func failed(_ error: any Error) -> Bool {
        retryAt = BusClock.monotonicNanoseconds() + JournalBatch.retryInterval
        if failures % 50 == 0 {
            logger.error("journal write failed; ingest paused, retrying every 100 ms",
                         ["error": "\(error)", "failures": String(failures + 1)])
        }
        failures += 1
        return false
    }

    private func recovered() {
        guard failures > 0 else { return }
        logger.warning("journal writable again; ingest resumed", ["failed_attempts": String(failures)])
        failures = 0
    }

    private func observeLatency(_ arrivals: [UInt64]) {
        guard measuresLatency, !arrivals.isEmpty else { return }
        let now = BusClock.monotonicNanoseconds()
        for a in arrivals { latency.observe(nanoseconds: now &- a) }
    }
}
