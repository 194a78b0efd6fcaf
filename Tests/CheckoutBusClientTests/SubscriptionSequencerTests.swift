import Testing
import CheckoutBusProtocol
import CheckoutBusJSON
@testable import CheckoutBusClient

/// The gap logic fed by hand: no sockets, no daemon, no clock.
@Suite("SubscriptionSequencer")
struct SubscriptionSequencerTests {
    static let everything = ["checkout.", "bus.deadletter"]

    static func options(_ prefixes: [String] = everything, maxPendingBytes: Int = 64 << 20) -> BusSubscriber.Options {
        var o = BusSubscriber.Options(publish: "tcp://publish", control: "tcp://control")
        o.prefixes = prefixes
        o.maxPendingBytes = maxPendingBytes
        return o
    }

    static func envelope(_ seq: Int64, kind: JournaledKind = .complete, kindSeq: Int64? = nil,
                         topic: String = "checkout.complete", origin: BusEnvelope.Origin = .live,
                         shard: Int = 0) -> BusEnvelope {
        let bytes = Array(#"{"v":1,"seq":\#(seq),"kind_seq":\#(kindSeq ?? seq)}"#.utf8)
        return BusEnvelope(seq: seq, kindSeq: kindSeq ?? seq, kind: kind, topic: Array(topic.utf8), bytes: bytes,
                           origin: origin, shard: shard)
    }

    static func heartbeat(_ seq: Int64, complete: Int64, fail: Int64 = 0) -> SubscriptionSequencer.Heartbeat {
        var kindSeqs = [Int64](repeating: 0, count: JournaledKind.allCases.count)
        kindSeqs[JournaledKind.complete.rawValue] = complete
        kindSeqs[JournaledKind.fail.rawValue] = fail
        return SubscriptionSequencer.Heartbeat(seq: seq, kindSeqs: kindSeqs)
    }

    static func delivered(_ actions: [SubscriptionSequencer.Action]) -> [Int64] {
        actions.compactMap { if case .deliver(let e) = $0 { e.seq } else { nil } }
    }

    static func replays(_ actions: [SubscriptionSequencer.Action]) -> [(id: Int64, from: Int64)] {
        actions.compactMap { if case .requestReplay(let id, let from) = $0 { (id, from) } else { nil } }
    }

    static func page(_ id: Int64, next: Int64, lastSeq: Int64) -> SubscriptionSequencer.Reply {
        SubscriptionSequencer.Reply(op: "replay", ok: true, req: id, next: next, lastSeq: lastSeq)
    }

    /// The daemon's `busy` answer to request `id`.
    static func busy(_ id: Int64, detail: String = "pages queued") -> SubscriptionSequencer.Reply {
        SubscriptionSequencer.Reply(ok: false, req: id, error: "busy", detail: detail)
    }

    /// A sequencer for the gap logic alone: its replays do not wait for a first heartbeat (the
    /// check that needs one, "One journal behind both endpoints", has tests of its own).
    static func gapLogic(_ options: BusSubscriber.Options) -> SubscriptionSequencer {
        var s = SubscriptionSequencer(options: options)
        s.replayAwaitsHeartbeat = false
        return s
    }

    /// A sequencer started at `cursor` whose first replay found the journal ending there.
    static func caughtUp(at cursor: Int64 = 0, _ prefixes: [String] = everything,
                         maxPendingBytes: Int = 64 << 20) throws -> SubscriptionSequencer {
        var s = Self.gapLogic(options(prefixes, maxPendingBytes: maxPendingBytes))
        #expect(s.start(cursor: cursor, now: 0).isEmpty)
        let request = try #require(replays(s.tick(now: 0)).first)
        #expect(request.from == cursor + 1)
        #expect(delivered(try s.receiveReply(page(request.id, next: cursor + 1, lastSeq: cursor), page: [], now: 0)).isEmpty)
        #expect(replays(s.tick(now: 0)).isEmpty)
        return s
    }

    @Test func contiguousLiveEnvelopesAreDeliveredWithoutAskingTheJournal() throws {
        var s = try Self.caughtUp()
        for seq: Int64 in 1...5 {
            #expect(Self.delivered(try s.receiveLive(Self.envelope(seq))) == [seq])
        }
        #expect(Self.replays(s.tick(now: 1)).isEmpty)
        #expect(s.statistics.handled == 5 && s.statistics.lastSeq == 5 && s.statistics.missed == 0)
        #expect(s.statistics.replayRequests == 1)
    }

    @Test("a replay answered busy is asked again after a pause that doubles, from the same seq; a page resets the pause")
    func aBusyReplayIsAskedAgainAfterAPause() throws {
        var s = Self.gapLogic(Self.options())
        #expect(s.start(cursor: 0, now: 0).isEmpty)
        var request = try #require(Self.replays(s.tick(now: 0)).first)
        let busy = Self.busy(request.id)
        #expect(try s.receiveReply(busy, page: [], now: 1_000).isEmpty)
        // 20 ms later, not before.
        #expect(Self.replays(s.tick(now: 20_000_000)).isEmpty)
        request = try #require(Self.replays(s.tick(now: 20_001_000)).first)
        #expect(request.from == 1)
        let again = Self.busy(request.id)
        #expect(try s.receiveReply(again, page: [], now: 20_001_000).isEmpty)
        // Then 40 ms.
        #expect(Self.replays(s.tick(now: 60_000_000)).isEmpty)
        request = try #require(Self.replays(s.tick(now: 60_001_000)).first)
        let actions = try s.receiveReply(Self.page(request.id, next: 3, lastSeq: 2),
                                         page: [Self.envelope(1, origin: .journal), Self.envelope(2, origin: .journal)],
                                         now: 60_002_000)
        #expect(Self.delivered(actions) == [1, 2])
        #expect(s.statistics.replayBusy == 2 && s.statistics.replayRequests == 3)
        // The next busy waits 20 ms again.
        _ = try s.receiveHeartbeat(Self.heartbeat(4, complete: 4))
        request = try #require(Self.replays(s.tick(now: 70_000_000)).first)
        #expect(request.from == 3)
        let third = Self.busy(request.id)
        #expect(try s.receiveReply(third, page: [], now: 70_000_000).isEmpty)
        #expect(Self.replays(s.tick(now: 89_000_000)).isEmpty)
        #expect(Self.replays(s.tick(now: 90_000_001)).first?.from == 3)
    }

    @Test func aGapIsFilledFromTheJournalBeforeAnythingAfterIt() throws {
        var s = try Self.caughtUp()
        #expect(Self.delivered(try s.receiveLive(Self.envelope(1))) == [1])
        // 2 and 3 were dropped: 4 is held, and the journal asked from 2.
        #expect(Self.delivered(try s.receiveLive(Self.envelope(4))).isEmpty)
        #expect(Self.delivered(try s.receiveLive(Self.envelope(5))).isEmpty)
        let request = try #require(Self.replays(s.tick(now: 1)).first)
        #expect(request.from == 2)
        let journal = (2...5).map { Self.envelope(Int64($0), origin: .journal) }
        let actions = try s.receiveReply(Self.page(request.id, next: 6, lastSeq: 5), page: journal, now: 2)
        #expect(Self.delivered(actions) == [2, 3, 4, 5])
        // 4 and 5 arrived live after all: the held copies are handed over.
        let origins = actions.compactMap { if case .deliver(let e) = $0 { e.origin } else { nil } }
        #expect(origins == [.journal, .journal, .live, .live])
        #expect(s.statistics.missed == 2 && s.statistics.recovered == 2 && s.statistics.gaps == 1)
        #expect(Self.delivered(try s.receiveLive(Self.envelope(6))) == [6])
    }

    @Test func aHeartbeatAheadOfWhatWasDeliveredIsAGapAtTheTail() throws {
        var s = try Self.caughtUp()
        #expect(Self.delivered(try s.receiveLive(Self.envelope(1))) == [1])
        // 2 and 3 were published and dropped, and nothing follows them live.
        _ = try s.receiveHeartbeat(Self.heartbeat(3, complete: 3))
        let request = try #require(Self.replays(s.tick(now: 1)).first)
        #expect(request.from == 2)
        let actions = try s.receiveReply(Self.page(request.id, next: 4, lastSeq: 3),
                                         page: [Self.envelope(2, origin: .journal), Self.envelope(3, origin: .journal)],
                                         now: 2)
        #expect(Self.delivered(actions) == [2, 3])
        #expect(s.statistics.missed == 2 && s.statistics.gaps == 1)
        // A heartbeat that matches what was delivered asks nothing.
        _ = try s.receiveHeartbeat(Self.heartbeat(3, complete: 3))
        #expect(Self.replays(s.tick(now: 3)).isEmpty)
    }

    @Test func aHeartbeatSendsAReportOfTheCounts() throws {
        var s = try Self.caughtUp(at: 7)
        let actions = try s.receiveHeartbeat(Self.heartbeat(7, complete: 7))
        let reports = actions.compactMap { if case .report(let r) = $0 { r } else { nil } }
        #expect(reports.count == 1 && reports.first?.lastSeq == 7)
        #expect(actions.contains { if case .subscribed = $0 { true } else { false } })
    }

    @Test func duplicatesAreDroppedAndCounted() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 0, now: 0)
        let request = try #require(Self.replays(s.tick(now: 0)).first)
        let journal = (1...3).map { Self.envelope(Int64($0), origin: .journal) }
        #expect(Self.delivered(try s.receiveReply(Self.page(request.id, next: 4, lastSeq: 3), page: journal, now: 0))
            == [1, 2, 3])
        // The live copies of what the journal delivered arrive late.
        #expect(Self.delivered(try s.receiveLive(Self.envelope(2))).isEmpty)
        #expect(Self.delivered(try s.receiveLive(Self.envelope(3))).isEmpty)
        #expect(s.statistics.duplicates == 2)
        #expect(Self.delivered(try s.receiveLive(Self.envelope(4))) == [4])
        #expect(s.statistics.handled == 4)
    }

    /// A journal never numbers below a seq it may have published, so a first heartbeat behind the
    /// cursor is another journal's: a kept cursor stops there, a passing one (`tail --since`) warns.
    @Test func aKeptCursorAheadOfTheJournalIsRefusedAPassingOneGoesOn() throws {
        var kept = Self.gapLogic(Self.options())
        _ = kept.start(cursor: 9, kept: true, now: 0)
        #expect(Self.isCursorMismatch { _ = try kept.receiveHeartbeat(Self.heartbeat(4, complete: 4)) })
        var passing = Self.gapLogic(Self.options())
        _ = passing.start(cursor: 9, now: 0)
        #expect(try passing.receiveHeartbeat(Self.heartbeat(4, complete: 4)).contains {
            if case .subscribed = $0 { true } else { false }
        })
        // At or past the cursor, a kept one goes on.
        var level = Self.gapLogic(Self.options())
        _ = level.start(cursor: 9, kept: true, now: 0)
        _ = try level.receiveHeartbeat(Self.heartbeat(9, complete: 9))
    }

    static func heartbeat(_ seq: Int64, run: String) -> SubscriptionSequencer.Heartbeat {
        var h = heartbeat(seq, complete: seq)
        h.startedAt = run
        return h
    }

    static func isCursorMismatch(_ body: () throws -> Void) -> Bool {
        do {
            try body()
            return false
        } catch {
            return (error as? SubscriberError)?.code == .cursorMismatch
        }
    }

    /// A new run of the daemon whose journal ends below a seq the old run showed live (an envelope
    /// or a heartbeat: heartbeats go out once everything before them is published) lost records it
    /// had published. A kept position stops there; a passing one goes on (with a warning).
    @Test func aRestartWhoseJournalEndsBelowWhatTheOldRunPublishedIsRefused() throws {
        for kept in [true, false] {
            var s = Self.gapLogic(Self.options())
            _ = s.start(cursor: 0, kept: kept, now: 0)
            let request = try #require(Self.replays(s.tick(now: 0)).first)
            _ = try s.receiveReply(Self.page(request.id, next: 1, lastSeq: 0), page: [], now: 0)
            _ = try s.receiveHeartbeat(Self.heartbeat(0, run: "a"))
            for seq: Int64 in 1...5 { #expect(Self.delivered(try s.receiveLive(Self.envelope(seq))) == [seq]) }
            // Killed and restarted on the same journal: it goes on after 5.
            _ = try s.receiveHeartbeat(Self.heartbeat(5, run: "b"))
            // Killed again; this time the journal lost 4 and 5, which were published.
            let refused = Self.isCursorMismatch { _ = try s.receiveHeartbeat(Self.heartbeat(3, run: "c")) }
            #expect(refused == kept)
        }
    }

    static func heartbeat(_ seq: Int64, run: String, journal: String) -> SubscriptionSequencer.Heartbeat {
        var h = heartbeat(seq, run: run)
        h.journal = journal
        return h
    }

    /// A kept position names the journal it is in: a daemon whose first heartbeat names another is
    /// refused, even with its seqs past the position (a worker restarted after the new journal had
    /// passed it); a position that names none adopts the first heartbeat's, before any delivery.
    @Test func aKeptPositionInAnotherJournalIsRefusedAndOneWithoutAdoptsTheDaemons() throws {
        var refused = Self.gapLogic(Self.options())
        _ = refused.start(cursor: 100, kept: true, journal: "journal-a", now: 0)
        #expect(Self.isCursorMismatch { _ = try refused.receiveHeartbeat(Self.heartbeat(5_000, run: "r", journal: "journal-b")) })
        var same = Self.gapLogic(Self.options())
        _ = same.start(cursor: 100, kept: true, journal: "journal-a", now: 0)
        let sameActions = try same.receiveHeartbeat(Self.heartbeat(5_000, run: "r", journal: "journal-a"))
        #expect(!sameActions.contains { if case .adoptJournal = $0 { true } else { false } })
        var adopting = Self.gapLogic(Self.options())
        _ = adopting.start(cursor: 100, kept: true, journal: nil, now: 0)
        let adopted = try adopting.receiveHeartbeat(Self.heartbeat(5_000, run: "r", journal: "journal-b"))
        #expect(adopted.compactMap { if case .adoptJournal(let id) = $0 { id } else { nil } } == ["journal-b"])
        // A position the process does not keep (`tail --since`) only follows.
        var passing = Self.gapLogic(Self.options())
        _ = passing.start(cursor: 100, kept: false, journal: nil, now: 0)
        #expect(!Self.isCursorMismatch { _ = try passing.receiveHeartbeat(Self.heartbeat(5_000, run: "r", journal: "journal-b")) })
    }

    /// A daemon that comes back with another journal (its data directory replaced while the
    /// subscriber waited or was frozen) is refused by a kept position whatever its seqs: they are
    /// not the ones handled. A passing one goes on.
    @Test func aRestartWithAnotherJournalIsRefusedWhateverItsSeqs() throws {
        for kept in [true, false] {
            var s = Self.gapLogic(Self.options())
            _ = s.start(cursor: 0, kept: kept, journal: "journal-a", now: 0)
            let request = try #require(Self.replays(s.tick(now: 0)).first)
            _ = try s.receiveReply(Self.page(request.id, next: 1, lastSeq: 0), page: [], now: 0)
            _ = try s.receiveHeartbeat(Self.heartbeat(0, run: "a", journal: "journal-a"))
            for seq: Int64 in 1...5 { #expect(Self.delivered(try s.receiveLive(Self.envelope(seq))) == [seq]) }
            // Restarted on the same journal: it goes on.
            _ = try s.receiveHeartbeat(Self.heartbeat(5, run: "b", journal: "journal-a"))
            // Restarted with a new journal already past what was published.
            let refused = Self.isCursorMismatch { _ = try s.receiveHeartbeat(Self.heartbeat(900, run: "c", journal: "journal-c")) }
            #expect(refused == kept)
        }
    }

    /// A worker of completes only sees the other kinds' seqs in heartbeats; those count too.
    @Test func aHeartbeatAloneIsEvidenceOfWhatWasPublished() throws {
        var s = Self.gapLogic(Self.options(["checkout.complete"]))
        _ = s.start(cursor: 0, kept: true, now: 0)
        let request = try #require(Self.replays(s.tick(now: 0)).first)
        _ = try s.receiveReply(Self.page(request.id, next: 1, lastSeq: 0), page: [], now: 0)
        _ = try s.receiveHeartbeat(Self.heartbeat(40, run: "a"))
        #expect(Self.isCursorMismatch { _ = try s.receiveHeartbeat(Self.heartbeat(12, run: "b")) })
    }

    /// Envelopes delivered from the journal count once a heartbeat of the same run has passed them
    /// (a subscriber that caught up and saw nothing live since, when the daemon's journal was reset).
    @Test func aRestartBelowEnvelopesDeliveredFromTheJournalIsRefused() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 0, kept: true, now: 0)
        let request = try #require(Self.replays(s.tick(now: 0)).first)
        let journal = (1...4).map { Self.envelope(Int64($0), origin: .journal) }
        #expect(Self.delivered(try s.receiveReply(Self.page(request.id, next: 5, lastSeq: 4), page: journal, now: 0))
            == [1, 2, 3, 4])
        _ = try s.receiveHeartbeat(Self.heartbeat(4, run: "a"))
        #expect(Self.isCursorMismatch { _ = try s.receiveHeartbeat(Self.heartbeat(0, run: "b")) })
    }

    @Test func notRetainedSkipsToTheOldestRetained() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 10, now: 0)
        let request = try #require(Self.replays(s.tick(now: 0)).first)
        #expect(request.from == 11)
        let refused = SubscriptionSequencer.Reply(op: "replay", ok: false, req: request.id, firstSeq: 50,
                                                  error: "not_retained")
        #expect(Self.delivered(try s.receiveReply(refused, page: [], now: 1)).isEmpty)
        #expect(s.statistics.notRetained == 39)
        let again = try #require(Self.replays(s.tick(now: 1)).first)
        #expect(again.from == 50)
        let actions = try s.receiveReply(Self.page(again.id, next: 51, lastSeq: 50),
                                         page: [Self.envelope(50, origin: .journal)], now: 2)
        #expect(Self.delivered(actions) == [50])
    }

    @Test func anotherRefusalThrows() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 0, now: 0)
        let request = try #require(Self.replays(s.tick(now: 0)).first)
        let refused = SubscriptionSequencer.Reply(op: "error", ok: false, req: request.id, error: "bad_request")
        #expect(throws: SubscriberError.self) { try s.receiveReply(refused, page: [], now: 1) }
    }

    @Test func aPrefixNarrowerThanAKindLetsTheJournalDecide() throws {
        let prefixes = ["checkout.fail.network_error"]
        var s = try Self.caughtUp(prefixes)
        // kind_seq 5 after nothing: other codes' failures jump it naturally, so only the journal can tell.
        let live = Self.envelope(9, kind: .fail, kindSeq: 5, topic: "checkout.fail.network_error")
        #expect(Self.delivered(try s.receiveLive(live)).isEmpty)
        let request = try #require(Self.replays(s.tick(now: 1)).first)
        #expect(request.from == 1)
        let journal = [Self.envelope(9, kind: .fail, kindSeq: 5, topic: "checkout.fail.network_error", origin: .journal)]
        let actions = try s.receiveReply(Self.page(request.id, next: 10, lastSeq: 9), page: journal, now: 2)
        #expect(Self.delivered(actions) == [9])
        #expect(s.statistics.missed == 0)
        // The next one too: one journal round trip per burst, never a direct hand-over.
        #expect(Self.delivered(try s.receiveLive(
            Self.envelope(10, kind: .fail, kindSeq: 6, topic: "checkout.fail.network_error"))).isEmpty)
        #expect(Self.replays(s.tick(now: 3)).first?.from == 10)
    }

    @Test func liveEnvelopesBeyondThePendingBoundAreLetGoAndReadFromTheJournal() throws {
        // Each test envelope is about 50 bytes with its topic: three exceed 120.
        var s = Self.gapLogic(Self.options(maxPendingBytes: 120))
        _ = s.start(cursor: 0, now: 0)
        let request = try #require(Self.replays(s.tick(now: 0)).first)
        for seq: Int64 in 1...3 { #expect(Self.delivered(try s.receiveLive(Self.envelope(seq))).isEmpty) }
        // Caught up to nothing: what was held is gone, so the journal is asked again.
        #expect(Self.delivered(try s.receiveReply(Self.page(request.id, next: 1, lastSeq: 0), page: [], now: 1)).isEmpty)
        let again = try #require(Self.replays(s.tick(now: 1)).first)
        #expect(again.from == 1)
        let journal = (1...3).map { Self.envelope(Int64($0), origin: .journal) }
        #expect(Self.delivered(try s.receiveReply(Self.page(again.id, next: 4, lastSeq: 3), page: journal, now: 2))
            == [1, 2, 3])
        // Received live and let go: not missed.
        #expect(s.statistics.missed == 0 && s.statistics.fromJournal == 3)
    }

    @Test func anUnansweredRequestIsSentAgain() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 0, now: 0)
        #expect(Self.replays(s.tick(now: 0)).count == 1)
        #expect(Self.replays(s.tick(now: 1_000_000)).isEmpty)
        let timeout = UInt64(s.options.requestTimeoutMilliseconds) * 1_000_000
        #expect(Self.replays(s.tick(now: timeout + 1)).first?.from == 1)
    }

    /// The fulfilment worker's freeze (issue 32): a daemon killed after reading the prefetched
    /// request for the next page never answers it, and the restarted daemon answers every `report`
    /// (one per heartbeat). Those replies must not keep the lost request looking fresh.
    @Test func aPrefetchLostWithTheDaemonIsSentAgainDespiteOtherReplies() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 0, now: 0)
        let first = try #require(Self.replays(s.tick(now: 0)).first)
        let page = (1...3).map { Self.envelope(Int64($0), origin: .journal) }
        let actions = try s.receiveReply(Self.page(first.id, next: 4, lastSeq: 10), page: page, now: 1)
        #expect(Self.delivered(actions) == [1, 2, 3])
        let prefetch = try #require(Self.replays(actions).first)
        #expect(prefetch.from == 4)
        let second: UInt64 = 1_000_000_000
        s.pageDelivered(now: second)
        let timeout = UInt64(s.options.requestTimeoutMilliseconds) * 1_000_000
        // The daemon died holding the prefetch; its successor answers a report every second.
        var now = second
        while now <= second + timeout {
            now += 1_000_000_000
            _ = try s.receiveHeartbeat(Self.heartbeat(10, complete: 10))
            let report = SubscriptionSequencer.Reply(op: "report", ok: true, req: 1000 + Int64(now / 1_000_000_000))
            #expect(Self.delivered(try s.receiveReply(report, page: [], now: now)).isEmpty)
            s.pageDelivered(now: now)
            if now <= second + timeout { #expect(Self.replays(s.tick(now: now)).isEmpty) }
        }
        let again = try #require(Self.replays(s.tick(now: now)).first)
        #expect(again.from == 4)
        let rest = (4...10).map { Self.envelope(Int64($0), origin: .journal) }
        #expect(Self.delivered(try s.receiveReply(Self.page(again.id, next: 11, lastSeq: 10), page: rest, now: now)) == Array(4...10))
    }

    /// A heartbeat with another `started_at` is another run of the daemon: a request in flight was
    /// lost with the old one, and is asked again at once, not after the timeout.
    @Test func aRequestInFlightIsAskedAgainAtOnceWhenTheDaemonRestarted() throws {
        var s = Self.gapLogic(Self.options())
        _ = s.start(cursor: 0, now: 0)
        var first = Self.heartbeat(10, complete: 10)
        first.startedAt = "2026-12-06T05:00:00.000Z"
        _ = try s.receiveHeartbeat(first)
        let request = try #require(Self.replays(s.tick(now: 1)).first)
        // The same run again: nothing to resend.
        _ = try s.receiveHeartbeat(first)
        #expect(Self.replays(s.tick(now: 2)).isEmpty)
        var restarted = first
        restarted.startedAt = "2026-12-06T05:00:07.512Z"
        _ = try s.receiveHeartbeat(restarted)
        let again = try #require(Self.replays(s.tick(now: 3)).first, "asked again well before the timeout")
        #expect(again.from == request.from && again.id != request.id)
        let page = (1...10).map { Self.envelope(Int64($0), origin: .journal) }
        // The old request's answer, should it come after all, is not the one in flight.
        #expect(Self.delivered(try s.receiveReply(Self.page(request.id, next: 11, lastSeq: 10), page: page, now: 4)).isEmpty)
        #expect(Self.delivered(try s.receiveReply(Self.page(again.id, next: 11, lastSeq: 10), page: page, now: 5)) == Array(1...10))
    }

    /// `busy` is a good request the daemon cannot answer now: asked again a second later, not refused.
    @Test func aBusyAnswerToWhichShardIsAskedAgain() throws {
        let identity = ShardIdentity(position: 1, shard: 1, shards: 2, chosen: nil)
        var s = SubscriptionSequencer(options: Self.options(), expectedShard: identity)
        let t: UInt64 = 100_000_000_000  // a monotonic clock well past the request timeout
        let start = s.start(cursor: 0, now: t)
        let id = try #require(start.compactMap { if case .requestIdentity(let id) = $0 { id } else { nil } }.first)
        let busy = Self.busy(id, detail: "the pipeline has not answered yet")
        #expect(try s.receiveReply(busy, page: [], now: t + 2_000).isEmpty)
        #expect(!s.tick(now: t + 500_000_000).contains { if case .requestIdentity = $0 { true } else { false } })
        let again = s.tick(now: t + 1_100_000_000)
        let second = try #require(again.compactMap { if case .requestIdentity(let id) = $0 { id } else { nil } }.first)
        _ = try s.receiveReply(SubscriptionSequencer.Reply(op: "stats", ok: true, req: second, shard: 1, shards: 2), page: [],
                               now: t + 1_200_000_000)
        var h = Self.heartbeat(0, complete: 0)
        h.shard = 1
        h.shards = 2
        _ = try s.receiveHeartbeat(h)
        #expect(s.isIdentified)
    }

    @Test func aShardOtherThanExpectedIsRefusedBeforeAnythingIsDelivered() throws {
        let identity = ShardIdentity(position: 1, shard: 1, shards: 2, chosen: nil)
        var s = SubscriptionSequencer(options: Self.options(), expectedShard: identity)
        let start = s.start(cursor: 0, now: 0)
        #expect(start.contains { if case .requestIdentity = $0 { true } else { false } })
        // Not released: nothing is replayed or delivered.
        #expect(Self.replays(s.tick(now: 0)).isEmpty)
        #expect(Self.delivered(try s.receiveLive(Self.envelope(1, shard: 1))).isEmpty)
        var wrong = Self.heartbeat(0, complete: 0)
        wrong.shard = 0
        wrong.shards = 2
        #expect(throws: SubscriberError.self) { try s.receiveHeartbeat(wrong) }
    }

    // MARK: One journal behind both endpoints

    static let journalA = String(repeating: "a", count: 32)
    static let journalB = String(repeating: "b", count: 32)

    /// A heartbeat of journal `journal`, sent at second `sent` of a day (RFC 3339, as daemons write it).
    static func heartbeat(_ seq: Int64, journal: String?, run: String = "run-1", sent: Int = 100) -> SubscriptionSequencer.Heartbeat {
        var h = heartbeat(seq, run: run)
        h.journal = journal
        h.sentAt = time(sent)
        return h
    }

    static func time(_ second: Int) -> String {
        "2026-12-07T10:\(second / 60 < 10 ? "0" : "")\(second / 60):\(second % 60 < 10 ? "0" : "")\(second % 60).000Z"
    }

    /// A replay page of journal `journal`, answered by a daemon that started at second `started`.
    static func page(_ id: Int64, next: Int64, lastSeq: Int64, journal: String?, started: Int = 0) -> SubscriptionSequencer.Reply {
        var reply = page(id, next: next, lastSeq: lastSeq)
        reply.journal = journal
        reply.startedAt = time(started)
        return reply
    }

    static func journalPage(_ seqs: ClosedRange<Int64>) -> [BusEnvelope] { seqs.map { envelope($0, origin: .journal) } }

    /// A sequencer started from seq 0 whose first heartbeat (seq `seq`, journal `journal`) has let
    /// its first replay go: the sequencer and that request.
    static func askingAfterHeartbeat(_ seq: Int64, journal: String?, kept: Bool = false)
        throws -> (SubscriptionSequencer, (id: Int64, from: Int64))
    {
        var s = SubscriptionSequencer(options: options())
        _ = s.start(cursor: 0, kept: kept, now: 0)
        _ = try s.receiveHeartbeat(heartbeat(seq, journal: journal))
        let request = try #require(replays(s.tick(now: 1)).first)
        return (s, request)
    }

    @Test("replays wait for the first heartbeat; a page of the publish endpoint's journal is delivered")
    func replaysWaitForTheFirstHeartbeat() throws {
        var s = SubscriptionSequencer(options: Self.options())
        _ = s.start(cursor: 0, kept: true, now: 0)
        #expect(Self.replays(s.tick(now: 0)).isEmpty)
        _ = try s.receiveHeartbeat(Self.heartbeat(2, journal: Self.journalA))
        let request = try #require(Self.replays(s.tick(now: 1)).first)
        #expect(request.from == 1)
        let actions = try s.receiveReply(Self.page(request.id, next: 3, lastSeq: 2, journal: Self.journalA),
                                         page: Self.journalPage(1...2), now: 2)
        #expect(Self.delivered(actions) == [1, 2])
    }

    @Test("a page from another journal than the heartbeats' is not delivered; two heartbeats later the subscriber stops")
    func aPageFromAnotherJournalIsNotDelivered() throws {
        var (s, request) = try Self.askingAfterHeartbeat(2, journal: Self.journalA, kept: true)
        let actions = try s.receiveReply(Self.page(request.id, next: 6, lastSeq: 5, journal: Self.journalB),
                                         page: Self.journalPage(1...5), now: 2)
        #expect(Self.delivered(actions).isEmpty)
        #expect(s.statistics.handled == 0 && s.statistics.lastSeq == 0)
        // Nothing is asked while a heartbeat has not explained the reply.
        #expect(Self.replays(s.tick(now: 3)).isEmpty)
        _ = try s.receiveHeartbeat(Self.heartbeat(2, journal: Self.journalA, sent: 101))
        #expect(Self.replays(s.tick(now: 4)).isEmpty)
        do {
            _ = try s.receiveHeartbeat(Self.heartbeat(2, journal: Self.journalA, sent: 102))
            Issue.record("a second heartbeat of the publish endpoint's journal did not stop the subscriber")
        } catch {
            #expect(error.code == .endpointMismatch)
            #expect(error.description.contains("tcp://control answers from journal \(Self.journalB)"), "\(error)")
        }
        #expect(s.statistics.handled == 0)
    }

    @Test("a page from the journal a restarted daemon's heartbeats show next is asked again and delivered")
    func aPageFromARestartedDaemonsNewJournal() throws {
        var (s, first) = try Self.askingAfterHeartbeat(2, journal: Self.journalA)
        #expect(try s.receiveReply(Self.page(first.id, next: 3, lastSeq: 2, journal: Self.journalB),
                                   page: Self.journalPage(1...2), now: 2).isEmpty)
        // The daemon came back with another data directory: its heartbeats show journal B.
        _ = try s.receiveHeartbeat(Self.heartbeat(2, journal: Self.journalB, run: "run-2"))
        let again = try #require(Self.replays(s.tick(now: 3)).first)
        #expect(again.from == 1)
        let actions = try s.receiveReply(Self.page(again.id, next: 3, lastSeq: 2, journal: Self.journalB),
                                         page: Self.journalPage(1...2), now: 4)
        #expect(Self.delivered(actions) == [1, 2])
    }

    @Test("a daemon whose heartbeats do not say their journal is not checked")
    func aDaemonThatDoesNotSayItsJournal() throws {
        var (s, request) = try Self.askingAfterHeartbeat(1, journal: nil)
        let actions = try s.receiveReply(Self.page(request.id, next: 2, lastSeq: 1, journal: Self.journalB),
                                         page: Self.journalPage(1...1), now: 2)
        #expect(Self.delivered(actions) == [1])
    }

    @Test("an answer of an acknowledged ingest socket stops the subscriber; a control reply does not read as one")
    func anAcknowledgedIngestForTheControlEndpoint() throws {
        func read(_ text: String) throws -> SubscriptionSequencer.Reply {
            let document = JSONDocument()
            #expect(ControlReplyWire.parse(Array(text.utf8), into: document))
            return ControlReplyWire.read(document)
        }
        // The acknowledgement a replay request got from --ingest-acked (Tests/Golden/ack-replies.tsv's shape).
        let ack = try read(#"{"ok":false,"seq":7,"reason":"unknown_shape","event_id":null}"#)
        #expect(ack.isIngestAck)
        for reply in [#"{"op":"replay","ok":true,"shard":0,"shards":1,"req":1,"from":1,"next":2,"count":0,"first_seq":1,"last_seq":1}"#,
                      #"{"ok":false,"error":"busy","detail":"later","req":2}"#] {
            #expect(try !read(reply).isIngestAck)
        }
        var s = SubscriptionSequencer(options: Self.options())
        _ = s.start(cursor: 0, kept: true, now: 0)
        _ = try s.receiveHeartbeat(Self.heartbeat(1, journal: Self.journalA))
        #expect(Self.replays(s.tick(now: 1)).count == 1)
        do {
            _ = try s.receiveReply(ack, page: [], now: 2)
            Issue.record("an acknowledgement was taken for a control reply")
        } catch {
            #expect(error.code == .endpointMismatch)
            #expect(error.description.contains("tcp://control answered as an acknowledged ingest socket"), "\(error)")
        }
    }

    /// A daemon killed and started again with another data directory while the subscriber was behind
    /// on its live socket: the new run answers a replay at once, while the old run's heartbeats are
    /// still queued. Those were sent before the new run started: they do not count as two daemons.
    /// (A subscriber that keeps its position stops at the new run's first heartbeat instead: its seqs
    /// are not the position's, aRestartWithAnotherJournalIsRefusedWhateverItsSeqs; one that does not
    /// goes on, as here.)
    @Test("an old run's heartbeats queued behind a new run's reply do not count as two daemons; the new run's clear it")
    func anOldRunsQueuedHeartbeatsAreNotTwoDaemons() throws {
        var (s, first) = try Self.askingAfterHeartbeat(2, journal: Self.journalA, kept: false)
        // The new run (journal B) started at second 130 and answered.
        #expect(try s.receiveReply(Self.page(first.id, next: 3, lastSeq: 2, journal: Self.journalB, started: 130),
                                   page: Self.journalPage(1...2), now: 2).isEmpty)
        // However many are queued: sent before the new run started, none is evidence of two daemons.
        for sent in 101...129 {
            for _ in 0..<10 { _ = try s.receiveHeartbeat(Self.heartbeat(2, journal: Self.journalA, sent: sent)) }
        }
        #expect(Self.replays(s.tick(now: 3)).isEmpty)
        _ = try s.receiveHeartbeat(Self.heartbeat(2, journal: Self.journalB, run: "run-2", sent: 131))
        let again = try #require(Self.replays(s.tick(now: 4)).first)
        let actions = try s.receiveReply(Self.page(again.id, next: 3, lastSeq: 2, journal: Self.journalB, started: 130),
                                         page: Self.journalPage(1...2), now: 5)
        #expect(Self.delivered(actions) == [1, 2])
    }

    @Test("a reply without journal_id while the heartbeats have one is held until the heartbeats agree, never delivered before")
    func aReplyWithoutAJournalIsHeld() throws {
        var (s, request) = try Self.askingAfterHeartbeat(1, journal: Self.journalA)
        var old = Self.page(request.id, next: 2, lastSeq: 1)
        old.journal = nil
        #expect(try s.receiveReply(old, page: Self.journalPage(1...1), now: 2).isEmpty)
        // Its start is unknown, so no heartbeat is evidence of two daemons (they may be queued ones of
        // a run replaced by an older build): nothing is replayed or handed over, and nothing stops.
        for sent in 101...200 { _ = try s.receiveHeartbeat(Self.heartbeat(1, journal: Self.journalA, sent: sent)) }
        #expect(Self.replays(s.tick(now: 3)).isEmpty)
        #expect(s.statistics.handled == 0)
        // The older build's own heartbeats (no journal id) end the wait.
        _ = try s.receiveHeartbeat(Self.heartbeat(1, journal: nil, run: "run-2", sent: 201))
        let again = try #require(Self.replays(s.tick(now: 4)).first)
        var page = Self.page(again.id, next: 2, lastSeq: 1)
        page.journal = nil
        #expect(Self.delivered(try s.receiveReply(page, page: Self.journalPage(1...1), now: 5)) == [1])
    }

    @Test("with no heartbeat in the silence time replays go unchecked; the first heartbeat of another journal stops")
    func noHeartbeatInTimeReplaysUnchecked() throws {
        var s = SubscriptionSequencer(options: Self.options())
        _ = s.start(cursor: 0, now: 0)
        let silence = UInt64(s.options.silenceMilliseconds) * 1_000_000
        #expect(Self.replays(s.tick(now: silence)).isEmpty)
        let request = try #require(Self.replays(s.tick(now: silence + 1)).first)
        let actions = try s.receiveReply(Self.page(request.id, next: 2, lastSeq: 1, journal: Self.journalB),
                                         page: Self.journalPage(1...1), now: silence + 2)
        #expect(Self.delivered(actions) == [1])
        do {
            _ = try s.receiveHeartbeat(Self.heartbeat(1, journal: Self.journalA))
            Issue.record("the first heartbeat of another journal did not stop the subscriber")
        } catch {
            #expect(error.code == .endpointMismatch)
            #expect(error.description.contains("handed over before this first heartbeat"), "\(error)")
        }
    }

    @Test("with no heartbeat in the silence time, a kept position in another journal than the reply's is refused before any delivery")
    func noHeartbeatInTimeAKeptPositionChecksTheReplysJournal() throws {
        var s = SubscriptionSequencer(options: Self.options())
        _ = s.start(cursor: 5, kept: true, journal: Self.journalA, now: 0)
        let silence = UInt64(s.options.silenceMilliseconds) * 1_000_000
        let request = try #require(Self.replays(s.tick(now: silence + 1)).first)
        #expect(Self.isCursorMismatch {
            _ = try s.receiveReply(Self.page(request.id, next: 12, lastSeq: 11, journal: Self.journalB),
                                   page: Self.journalPage(6...11), now: silence + 2)
        })
        #expect(s.statistics.handled == 0)
        // The same journal: delivered.
        var same = SubscriptionSequencer(options: Self.options())
        _ = same.start(cursor: 5, kept: true, journal: Self.journalA, now: 0)
        let asked = try #require(Self.replays(same.tick(now: silence + 1)).first)
        let actions = try same.receiveReply(Self.page(asked.id, next: 12, lastSeq: 11, journal: Self.journalA),
                                            page: Self.journalPage(6...11), now: silence + 2)
        #expect(Self.delivered(actions) == Array(6...11))
    }
}
