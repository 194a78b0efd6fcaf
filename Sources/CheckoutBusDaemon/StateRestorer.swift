import CheckoutBusCore
import CheckoutBusProtocol
import CheckoutBusRuntime

/// Rebuilds the pipeline's state from the journal at start: per-checkout state (the rules' table),
/// the event-id window (published and dead-lettered events, and suppressed updates from the
/// ``SuppressedLog``), so a restart looks to producers and subscribers like no restart at all.
///
/// Not `Sendable`: used once, on the pipeline thread, before the loop starts.
struct StateRestorer {
    let journal: Journal
    let processor: EventProcessor
    /// `--dedupe-window`: how many of the last records' event ids to remember.
    let dedupeWindow: Int
    /// `--restore-records`: how many of the last records rebuild per-checkout state.
    let restoreRecords: Int
    let logger: BusLogger

    /// The topics whose envelopes rebuild state at start: lifecycle events, and dead letters for
    /// their event ids.
    static let restoredTopics = [Array("checkout.".utf8), Array("bus.deadletter".utf8)]

    /// Rebuilds the processor's state from the journal's most recent records: per-checkout state
    /// from the last `--restore-records`, and the event-id window from the last `--dedupe-window`,
    /// so a complete repeated after a restart keeps its idempotency key and `repeat: true`, an
    /// unchanged update is still suppressed, and a producer's retry is still recognised.
    /// - Parameter suppressed: the suppressed-id log's records (``SuppressedLog``), oldest first.
    func restore(suppressed: [SuppressedLog.Entry]) throws {
        let window = UInt64(dedupeWindow)
        let records = UInt64(restoreRecords)
        guard max(window, records) > 0 else { return }
        let last = journal.lastSeq
        /// The first seq of the journal's last `n` (`last + 1` for none).
        func firstOfLast(_ n: UInt64) -> UInt64 { last >= n ? last - n + 1 : 1 }
        let idsFrom = firstOfLast(window)
        let restoreFrom = firstOfLast(records)
        let from = max(journal.firstSeq, min(idsFrom, restoreFrom))
        let started = BusClock.monotonicNanoseconds()
        let wallNow = Timestamp(milliseconds: BusClock.wallMilliseconds())
        let now = BusClock.monotonicSeconds()
        var (ids, rebuilt) = (0, 0)
        // Suppressed updates' ids (not in the journal), each after the record published before it.
        var nextSuppressed = suppressed.firstIndex { $0.seq + 1 >= idsFrom } ?? suppressed.count
        func rememberSuppressed(before seq: UInt64) {
            while nextSuppressed < suppressed.count && suppressed[nextSuppressed].seq < seq {
                let e = suppressed[nextSuppressed]
                processor.rememberEventID(e.eventID, checkoutID: e.checkoutID, seq: 0)
                nextSuppressed += 1
                ids += 1
            }
        }
        var next = from
        // A long rebuild says how far it is, once a second, so a start that takes a while is seen
        // to be working (ingest opens only after it).
        var nextProgressAt = started + 1_000_000_000
        if last >= from {
            logger.info("rebuilding state from the journal", ["from_seq": String(from), "to_seq": String(last)])
        }
        while next <= last {
            let clock = BusClock.monotonicNanoseconds()
            if clock >= nextProgressAt {
                nextProgressAt = clock + 1_000_000_000
                let done = next - from, total = last - from + 1
                logger.info("rebuilding state from the journal", [
                    "seq": String(next), "to_seq": String(last), "done": "\(done * 100 / max(1, total))%",
                    "checkouts": String(processor.state.count), "ms": String((clock - started) / 1_000_000),
                ])
            }
            let page: (next: UInt64, count: Int)
            do {
                page = try journal.read(from: next, prefixes: StateRestorer.restoredTopics, limit: 10_000,
                                        maxExamined: 100_000) { seq, _, envelope in
                    rememberSuppressed(before: seq)
                    let remember = window > 0 && seq >= idsFrom
                    let rebuild = seq >= restoreFrom
                    if processor.restore(envelope: envelope, seq: seq, rememberEventID: remember, rebuildState: rebuild,
                                         wallNow: wallNow, now: now)
                    {
                        if remember { ids += 1 }
                        if rebuild { rebuilt += 1 }
                    }
                }
            } catch Journal.ReplayError.notRetained(let first) where first > next {
                // Seqs a recovery set aside or skipped, or a damaged record in a closed segment.
                logger.warning("state rebuild: seqs not readable in the journal, skipped", [
                    "from_seq": String(next), "to_seq": String(first - 1),
                    "note": "their event ids and checkout state are not restored; retries of them are published again",
                ])
                next = first
                continue
            } catch let error as JournalError where error.code == .notReadable {
                // A segment that cannot be read (an I/O error, a file gone): the rebuild ends here
                // and the daemon starts; replays that reach it are refused with the same error.
                logger.error("state rebuild: the journal cannot be read; rebuild ended early", [
                    "from_seq": String(next), "error": error.description,
                    "note": "event ids and checkout state after this are not restored; retries of them are published again",
                ])
                break
            }
            if page.next <= next { break }
            next = page.next
        }
        rememberSuppressed(before: .max)
        processor.finishRestore(now: now)
        // Retention deleted records the event-id window needs: retries of them are not recognised.
        if window > 0, journal.firstSeq > idsFrom {
            logger.warning("the journal retains fewer records than --dedupe-window: the event-id window restored reaches back only to its first seq", [
                "first_retained_seq": String(journal.firstSeq), "window_from_seq": String(idsFrom),
                "dedupe_window": String(window),
                "note": "a producer's retry of an older event is published again; raise --retain-bytes/--retain-hours",
            ])
        }
        if ids + rebuilt > 0 {
            let ms = (BusClock.monotonicNanoseconds() - started) / 1_000_000
            logger.info("state rebuilt from the journal", [
                "envelopes": String(rebuilt), "checkouts": String(processor.state.count), "event_id_envelopes": String(ids),
                "ms": String(ms),
            ])
        }
    }
}
