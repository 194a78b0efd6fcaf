"""The gap logic fed by hand: no sockets, no daemon, no clock (the cases of
Tests/CheckoutBusClientTests/SubscriptionSequencerTests.swift, plus a few)."""
import pytest

from checkoutbus import wire
from checkoutbus.envelope import Envelope
from checkoutbus.errors import ShardIdentity, SubscriberError
from checkoutbus.kinds import KIND_NAMES
from checkoutbus.sequencer import Heartbeat, Options, Reply, SubscriptionSequencer

EVERYTHING = ["checkout.", "bus.deadletter"]
COMPLETE, FAIL = KIND_NAMES.index("complete"), KIND_NAMES.index("fail")


def options(prefixes=EVERYTHING, max_pending_bytes=64 << 20):
    return Options(publish="tcp://publish", control="tcp://control", prefixes=list(prefixes),
                   max_pending_bytes=max_pending_bytes)


def envelope(seq, kind=COMPLETE, kind_seq=None, topic="checkout.complete", origin=Envelope.LIVE, shard=0):
    ks = seq if kind_seq is None else kind_seq
    raw = ('{"v":1,"seq":%d,"kind_seq":%d}' % (seq, ks)).encode()
    return Envelope(seq, ks, kind, topic.encode(), raw, origin, shard)


def heartbeat(seq, complete, fail=0):
    kind_seqs = [0] * len(KIND_NAMES)
    kind_seqs[COMPLETE] = complete
    kind_seqs[FAIL] = fail
    return Heartbeat(seq, kind_seqs)


def delivered(actions):
    return [a[1].seq for a in actions if a[0] == "deliver"]


def replays(actions):
    return [(a[1], a[2]) for a in actions if a[0] == "replay"]


def page(rid, next, last_seq):
    return Reply(op="replay", ok=True, req=rid, next=next, last_seq=last_seq)


def gap_logic(opts, log=None):
    """A sequencer for the gap logic alone: its replays do not wait for a first heartbeat (the check
    that needs one, "One journal behind both endpoints", has tests of its own)."""
    s = SubscriptionSequencer(opts, log=log)
    s.replay_awaits_heartbeat = False
    return s


def caught_up(cursor=0, prefixes=EVERYTHING, max_pending_bytes=64 << 20):
    s = gap_logic(options(prefixes, max_pending_bytes))
    assert s.start(cursor, 0) == []
    rid, frm = replays(s.tick(0))[0]
    assert frm == cursor + 1
    assert delivered(s.receive_reply(page(rid, cursor + 1, cursor), [], 0)) == []
    assert replays(s.tick(0)) == []
    return s


def test_contiguous_live_envelopes_are_delivered_without_asking_the_journal():
    s = caught_up()
    for seq in range(1, 6):
        assert delivered(s.receive_live(envelope(seq))) == [seq]
    assert replays(s.tick(1)) == []
    st = s.statistics
    assert (st.handled, st.last_seq, st.missed, st.replay_requests) == (5, 5, 0, 1)


def test_a_busy_replay_is_asked_again_after_a_pause_that_doubles():
    s = gap_logic(options())
    assert s.start(0, 0) == []
    rid, frm = replays(s.tick(0))[0]
    assert s.receive_reply(Reply(ok=False, req=rid, error="busy", detail="pages queued"), [], 1_000) == []
    assert replays(s.tick(20_000_000)) == []  # 20 ms later, not before
    rid, frm = replays(s.tick(20_001_000))[0]
    assert frm == 1
    assert s.receive_reply(Reply(ok=False, req=rid, error="busy", detail="pages queued"), [], 20_001_000) == []
    assert replays(s.tick(60_000_000)) == []  # then 40 ms
    rid, frm = replays(s.tick(60_001_000))[0]
    journal = [envelope(1, origin=Envelope.JOURNAL), envelope(2, origin=Envelope.JOURNAL)]
    assert delivered(s.receive_reply(page(rid, 3, 2), journal, 60_002_000)) == [1, 2]
    assert (s.statistics.replay_busy, s.statistics.replay_requests) == (2, 3)
    # A page resets the pause: the next busy waits 20 ms again.
    s.receive_heartbeat(heartbeat(4, 4))
    rid, frm = replays(s.tick(70_000_000))[0]
    assert frm == 3
    assert s.receive_reply(Reply(ok=False, req=rid, error="busy", detail="pages queued"), [], 70_000_000) == []
    assert replays(s.tick(89_000_000)) == []
    assert [f for _, f in replays(s.tick(90_000_001))] == [3]


def test_a_gap_is_filled_from_the_journal_before_anything_after_it():
    s = caught_up()
    assert delivered(s.receive_live(envelope(1))) == [1]
    assert delivered(s.receive_live(envelope(4))) == []
    assert delivered(s.receive_live(envelope(5))) == []
    rid, frm = replays(s.tick(1))[0]
    assert frm == 2
    journal = [envelope(i, origin=Envelope.JOURNAL) for i in range(2, 6)]
    actions = s.receive_reply(page(rid, 6, 5), journal, 2)
    assert delivered(actions) == [2, 3, 4, 5]
    assert [a[1].origin for a in actions if a[0] == "deliver"] == ["journal", "journal", "live", "live"]
    st = s.statistics
    assert (st.missed, st.recovered, st.gaps) == (2, 2, 1)
    assert delivered(s.receive_live(envelope(6))) == [6]


def test_a_heartbeat_ahead_of_what_was_delivered_is_a_gap_at_the_tail():
    s = caught_up()
    assert delivered(s.receive_live(envelope(1))) == [1]
    s.receive_heartbeat(heartbeat(3, 3))
    rid, frm = replays(s.tick(1))[0]
    assert frm == 2
    actions = s.receive_reply(page(rid, 4, 3), [envelope(2, origin="journal"), envelope(3, origin="journal")], 2)
    assert delivered(actions) == [2, 3]
    assert (s.statistics.missed, s.statistics.gaps) == (2, 1)
    s.receive_heartbeat(heartbeat(3, 3))
    assert replays(s.tick(3)) == []


def test_a_heartbeat_sends_a_report_of_the_counts():
    s = caught_up(7)
    actions = s.receive_heartbeat(heartbeat(7, 7))
    reports = [a[1] for a in actions if a[0] == "report"]
    assert len(reports) == 1 and reports[0].last_seq == 7
    assert ("subscribed",) in actions


def test_duplicates_are_dropped_and_counted():
    s = gap_logic(options())
    s.start(0, 0)
    rid, _ = replays(s.tick(0))[0]
    journal = [envelope(i, origin="journal") for i in (1, 2, 3)]
    assert delivered(s.receive_reply(page(rid, 4, 3), journal, 0)) == [1, 2, 3]
    assert delivered(s.receive_live(envelope(2))) == []
    assert delivered(s.receive_live(envelope(3))) == []
    assert s.statistics.duplicates == 2
    assert delivered(s.receive_live(envelope(4))) == [4]
    assert s.statistics.handled == 4


def test_a_kept_cursor_ahead_of_the_journal_is_refused_a_passing_one_goes_on():
    # A journal never numbers below a seq it may have published: a first heartbeat behind the
    # cursor is another journal's.
    kept = gap_logic(options())
    kept.start(9, 0, kept=True)
    with pytest.raises(SubscriberError) as e:
        kept.receive_heartbeat(heartbeat(4, 4))
    assert e.value.kind == "cursor_mismatch"
    passing = gap_logic(options())
    passing.start(9, 0)
    assert ("subscribed",) in passing.receive_heartbeat(heartbeat(4, 4))
    level = gap_logic(options())
    level.start(9, 0, kept=True)
    assert ("subscribed",) in level.receive_heartbeat(heartbeat(9, 9))


def hb(seq, run):
    h = heartbeat(seq, seq)
    h.started_at = run
    return h


def test_a_restart_whose_journal_ends_below_what_the_old_run_published_is_refused():
    # What the live socket showed (envelopes and heartbeats, which go out once everything before them
    # is published) was written by the old run.
    for kept in (True, False):
        logs = []
        s = gap_logic(options(), log=lambda level, message: logs.append(message))
        s.start(0, 0, kept=kept)
        rid, _ = replays(s.tick(0))[0]
        s.receive_reply(page(rid, 1, 0), [], 0)
        s.receive_heartbeat(hb(0, "a"))
        for seq in range(1, 6):
            assert delivered(s.receive_live(envelope(seq))) == [seq]
        s.receive_heartbeat(hb(5, "b"))  # the same journal, restarted
        assert not [m for m in logs if "behind" in m]
        if kept:
            with pytest.raises(SubscriberError) as e:
                s.receive_heartbeat(hb(3, "c"))
            assert e.value.kind == "cursor_mismatch"
        else:
            s.receive_heartbeat(hb(3, "c"))
            assert [m for m in logs if "behind seq 5 it had published" in m], logs


def test_a_restart_with_another_journal_is_refused_whatever_its_seqs():
    # The daemon's data directory replaced while the subscriber waited: the new journal's seqs may
    # already be past what was published, and are not the ones handled.
    for kept in (True, False):
        logs = []
        s = gap_logic(options(), log=lambda level, message: logs.append(message))
        s.start(0, 0, kept=kept)
        rid, _ = replays(s.tick(0))[0]
        s.receive_reply(page(rid, 1, 0), [], 0)
        first = hb(0, "a")
        first.journal = "journal-a"
        s.receive_heartbeat(first)
        for seq in range(1, 6):
            assert delivered(s.receive_live(envelope(seq))) == [seq]
        later = hb(900, "c")
        later.journal = "journal-c"
        if kept:
            with pytest.raises(SubscriberError) as e:
                s.receive_heartbeat(later)
            assert e.value.kind == "cursor_mismatch"
        else:
            s.receive_heartbeat(later)
            assert [m for m in logs if "another journal" in m], logs


def test_a_heartbeat_alone_is_evidence_of_what_was_published():
    s = gap_logic(options(["checkout.complete"]))
    s.start(0, 0, kept=True)
    rid, _ = replays(s.tick(0))[0]
    s.receive_reply(page(rid, 1, 0), [], 0)
    s.receive_heartbeat(hb(40, "a"))
    with pytest.raises(SubscriberError):
        s.receive_heartbeat(hb(12, "b"))


def test_not_retained_skips_to_the_oldest_retained():
    s = gap_logic(options())
    s.start(10, 0)
    rid, frm = replays(s.tick(0))[0]
    assert frm == 11
    refused = Reply(op="replay", ok=False, req=rid, first_seq=50, error="not_retained")
    assert delivered(s.receive_reply(refused, [], 1)) == []
    assert s.statistics.not_retained == 39
    rid, frm = replays(s.tick(1))[0]
    assert frm == 50
    assert delivered(s.receive_reply(page(rid, 51, 50), [envelope(50, origin="journal")], 2)) == [50]


def test_another_refusal_raises():
    s = gap_logic(options())
    s.start(0, 0)
    rid, _ = replays(s.tick(0))[0]
    with pytest.raises(SubscriberError):
        s.receive_reply(Reply(op="error", ok=False, req=rid, error="bad_request"), [], 1)


def test_a_prefix_narrower_than_a_kind_lets_the_journal_decide():
    prefixes = ["checkout.fail.network_error"]
    s = caught_up(prefixes=prefixes)
    live = envelope(9, kind=FAIL, kind_seq=5, topic="checkout.fail.network_error")
    assert delivered(s.receive_live(live)) == []
    rid, frm = replays(s.tick(1))[0]
    assert frm == 1
    journal = [envelope(9, kind=FAIL, kind_seq=5, topic="checkout.fail.network_error", origin="journal")]
    assert delivered(s.receive_reply(page(rid, 10, 9), journal, 2)) == [9]
    assert s.statistics.missed == 0
    assert delivered(s.receive_live(envelope(10, kind=FAIL, kind_seq=6, topic="checkout.fail.network_error"))) == []
    assert replays(s.tick(3))[0][1] == 10


def test_a_single_full_kind_follows_kind_seq_live():
    s = caught_up(prefixes=["checkout.complete"])
    s.receive_heartbeat(heartbeat(0, 0))
    # seq jumps (other kinds in between) but kind_seq is contiguous: delivered directly.
    assert delivered(s.receive_live(envelope(3, kind_seq=1))) == [3]
    assert delivered(s.receive_live(envelope(7, kind_seq=2))) == [7]
    # a kind_seq jump is a gap
    assert delivered(s.receive_live(envelope(9, kind_seq=4))) == []
    assert replays(s.tick(1))[0][1] == 8


def test_live_envelopes_beyond_the_pending_bound_are_let_go_and_read_from_the_journal():
    s = gap_logic(options(max_pending_bytes=120))
    s.start(0, 0)
    rid, _ = replays(s.tick(0))[0]
    for seq in (1, 2, 3):
        assert delivered(s.receive_live(envelope(seq))) == []
    assert delivered(s.receive_reply(page(rid, 1, 0), [], 1)) == []
    rid, frm = replays(s.tick(1))[0]
    assert frm == 1
    journal = [envelope(i, origin="journal") for i in (1, 2, 3)]
    assert delivered(s.receive_reply(page(rid, 4, 3), journal, 2)) == [1, 2, 3]
    assert (s.statistics.missed, s.statistics.from_journal) == (0, 3)


def test_pages_are_prefetched_and_the_cursor_is_followed():
    s = gap_logic(options())
    s.start(0, 0)
    rid, _ = replays(s.tick(0))[0]
    actions = s.receive_reply(page(rid, 3, 4), [envelope(1, origin="journal"), envelope(2, origin="journal")], 0)
    # the next page is asked for before this one is delivered
    assert actions[0][0] == "replay" and actions[0][2] == 3
    assert delivered(actions) == [1, 2]
    actions = s.receive_reply(page(actions[0][1], 5, 4), [envelope(3, origin="journal"), envelope(4, origin="journal")], 0)
    assert delivered(actions) == [3, 4] and replays(actions) == []


def test_an_unanswered_request_is_sent_again():
    s = gap_logic(options())
    s.start(0, 0)
    assert len(replays(s.tick(0))) == 1
    assert replays(s.tick(1_000_000)) == []
    timeout = s.options.request_timeout_ms * 1_000_000
    assert replays(s.tick(timeout + 1))[0][1] == 1


def test_a_prefetch_lost_with_the_daemon_is_sent_again_despite_other_replies():
    # A daemon killed holding the prefetched request never answers it; its successor answers a
    # report every second. Those replies must not keep the lost request looking fresh.
    s = gap_logic(options())
    s.start(0, 0)
    rid, _ = replays(s.tick(0))[0]
    actions = s.receive_reply(page(rid, 4, 10), [envelope(i, origin=Envelope.JOURNAL) for i in (1, 2, 3)], 1)
    assert delivered(actions) == [1, 2, 3]
    assert replays(actions)[0][1] == 4
    second = 1_000_000_000
    s.page_delivered(second)
    timeout = s.options.request_timeout_ms * 1_000_000
    now = second
    while now <= second + timeout:
        now += 1_000_000_000
        s.receive_heartbeat(heartbeat(10, 10))
        assert delivered(s.receive_reply(Reply(op="report", ok=True, req=1000 + now // second), [], now)) == []
        s.page_delivered(now)
        if now <= second + timeout:
            assert replays(s.tick(now)) == []
    again = replays(s.tick(now))
    assert again and again[0][1] == 4
    rest = [envelope(i, origin=Envelope.JOURNAL) for i in range(4, 11)]
    assert delivered(s.receive_reply(page(again[0][0], 11, 10), rest, now)) == list(range(4, 11))


def test_a_request_in_flight_is_asked_again_at_once_when_the_daemon_restarted():
    s = gap_logic(options())
    s.start(0, 0)
    first = heartbeat(10, 10)
    first.started_at = "2026-12-06T05:00:00.000Z"
    s.receive_heartbeat(first)
    rid, frm = replays(s.tick(1))[0]
    s.receive_heartbeat(first)
    assert replays(s.tick(2)) == []
    restarted = heartbeat(10, 10)
    restarted.started_at = "2026-12-06T05:00:07.512Z"
    s.receive_heartbeat(restarted)
    again = replays(s.tick(3))
    assert again and again[0][1] == frm and again[0][0] != rid
    page_ = [envelope(i, origin=Envelope.JOURNAL) for i in range(1, 11)]
    assert delivered(s.receive_reply(page(rid, 11, 10), page_, 4)) == []
    assert delivered(s.receive_reply(page(again[0][0], 11, 10), page_, 5)) == list(range(1, 11))


def test_a_shard_other_than_expected_is_refused_before_anything_is_delivered():
    s = SubscriptionSequencer(options(), expected_shard=ShardIdentity(1, 2))
    start = s.start(0, 0)
    assert any(a[0] == "identity" for a in start)
    assert replays(s.tick(0)) == []
    assert delivered(s.receive_live(envelope(1, shard=1))) == []
    wrong = heartbeat(0, 0)
    wrong.shard, wrong.shards = 0, 2
    with pytest.raises(SubscriberError):
        s.receive_heartbeat(wrong)


def test_a_busy_answer_to_which_shard_is_asked_again():
    s = SubscriptionSequencer(options(), expected_shard=ShardIdentity(1, 2))
    t = 100_000_000_000  # a monotonic clock well past the request timeout
    rid = [a for a in s.start(0, t) if a[0] == "identity"][0][1]
    assert s.receive_reply(Reply(ok=False, req=rid, error="busy", detail="held up"), [], t + 2_000) == []
    assert not [a for a in s.tick(t + 500_000_000) if a[0] == "identity"]
    again = [a for a in s.tick(t + 1_100_000_000) if a[0] == "identity"]
    assert again
    s.receive_reply(Reply(op="stats", ok=True, req=again[0][1], shard=1, shards=2), [], t + 1_200_000_000)
    h = heartbeat(0, 0)
    h.shard, h.shards = 1, 2
    s.receive_heartbeat(h)
    assert s.is_identified


def test_the_expected_shard_is_released_after_both_endpoints_identify():
    s = SubscriptionSequencer(options(), expected_shard=ShardIdentity(1, 2))
    rid = [a for a in s.start(0, 0) if a[0] == "identity"][0][1]
    hb = heartbeat(0, 0)
    hb.shard, hb.shards = 1, 2
    s.receive_heartbeat(hb)
    s.receive_reply(Reply(op="stats", ok=True, req=rid, shard=1, shards=2), [], 0)
    assert s.is_identified and not s.released
    s.release()
    assert replays(s.tick(0))[0][1] == 1


def test_wire_round_trip():
    e = wire.envelope(b"checkout.fail.cart_expired", b'{"v":1,"seq":12,"kind_seq":3,"shard":2,"kind":"fail"}', "live")
    assert (e.seq, e.kind_seq, e.kind, e.shard, e["kind"]) == (12, 3, FAIL, 2, "fail")
    assert wire.envelope(b"checkout.heartbeat", b'{"seq":1,"kind_seq":1}', "live") is None
    assert wire.envelope(b"checkout.complete", b'{"seq":1}', "live") is None
    hb = wire.heartbeat(b'{"seq":9,"kind_seqs":{"complete":4,"fail":2},"shard":1,"shards":3}')
    assert hb.seq == 9 and hb.kind_seqs[COMPLETE] == 4 and hb.kind_seqs[FAIL] == 2 and (hb.shard, hb.shards) == (1, 3)
    r = wire.reply(b'{"op":"replay","ok":true,"shard":0,"shards":1,"req":7,"from":1,"next":3,"count":2,"last_seq":9}')
    assert (r.op, r.ok, r.req, r.next, r.last_seq, r.shard, r.shards) == ("replay", True, 7, 3, 9, 0, 1)
    assert wire.replay_request(7, 1000, ["checkout.complete"], 1000) == \
        b'{"op":"replay","from":1000,"prefix":["checkout.complete"],"limit":1000,"req":7}'


JOURNAL_A, JOURNAL_B = "a" * 32, "b" * 32


def at(second):
    """Second `second` of a day, as daemons write times."""
    return "2026-12-07T10:%02d:%02d.000Z" % (second // 60, second % 60)


def journal_heartbeat(seq, journal, started_at="2026-12-07T10:00:00.000Z", sent=100):
    h = heartbeat(seq, seq)
    h.journal = journal
    h.started_at = started_at
    h.sent_at = at(sent)
    return h


def journal_page(rid, next, last_seq, journal, started=0):
    reply = page(rid, next, last_seq)
    reply.journal = journal
    reply.started_at = at(started)
    return reply


def asking_after_heartbeat(seq, journal, kept=False):
    """A sequencer started from seq 0 whose first heartbeat (seq `seq`, journal `journal`) has let its
    first replay go: the sequencer and that request's id."""
    s = SubscriptionSequencer(options())
    s.start(0, 0, kept=kept)
    s.receive_heartbeat(journal_heartbeat(seq, journal))
    rid, _ = replays(s.tick(1))[0]
    return s, rid


def test_replays_wait_for_the_first_heartbeat_and_a_page_of_the_publish_endpoints_journal_is_delivered():
    s = SubscriptionSequencer(options())
    s.start(0, 0, kept=True)
    assert replays(s.tick(0)) == []
    s.receive_heartbeat(journal_heartbeat(2, JOURNAL_A))
    rid, frm = replays(s.tick(1))[0]
    assert frm == 1
    reply = journal_page(rid, 3, 2, JOURNAL_A)
    two = [envelope(1, origin=Envelope.JOURNAL), envelope(2, origin=Envelope.JOURNAL)]
    assert delivered(s.receive_reply(reply, two, 2)) == [1, 2]


def test_a_page_from_another_journal_than_the_heartbeats_is_not_delivered_and_two_heartbeats_later_stops():
    logs = []
    s = SubscriptionSequencer(options(), log=lambda level, message: logs.append(message))
    s.start(0, 0, kept=True)
    s.receive_heartbeat(journal_heartbeat(2, JOURNAL_A))
    rid, _ = replays(s.tick(1))[0]
    reply = journal_page(rid, 6, 5, JOURNAL_B)
    assert s.receive_reply(reply, [envelope(n, origin=Envelope.JOURNAL) for n in range(1, 6)], 2) == []
    assert s.statistics.handled == 0 and s.verified == 0
    assert any("answered from journal " + JOURNAL_B in m for m in logs)
    # Nothing is asked while it waits for a heartbeat to explain the reply.
    assert replays(s.tick(3)) == []
    s.receive_heartbeat(journal_heartbeat(2, JOURNAL_A, sent=101))
    assert replays(s.tick(4)) == []
    with pytest.raises(SubscriberError) as raised:
        s.receive_heartbeat(journal_heartbeat(2, JOURNAL_A, sent=102))
    assert raised.value.kind == "endpoint_mismatch"
    assert "tcp://control answers from journal " + JOURNAL_B in str(raised.value)
    assert s.statistics.handled == 0


def test_a_page_from_the_journal_a_restarted_daemon_shows_next_is_asked_again():
    s, rid = asking_after_heartbeat(2, JOURNAL_A)
    reply = journal_page(rid, 3, 2, JOURNAL_B)
    assert s.receive_reply(reply, [envelope(1, origin=Envelope.JOURNAL), envelope(2, origin=Envelope.JOURNAL)], 2) == []
    # The daemon came back with another data directory: its heartbeats show journal B.
    s.receive_heartbeat(journal_heartbeat(2, JOURNAL_B, started_at="2026-12-07T10:05:00.000Z"))
    rid, frm = replays(s.tick(3))[0]
    assert frm == 1
    reply = journal_page(rid, 3, 2, JOURNAL_B)
    two = [envelope(1, origin=Envelope.JOURNAL), envelope(2, origin=Envelope.JOURNAL)]
    assert delivered(s.receive_reply(reply, two, 4)) == [1, 2]


def test_a_daemon_that_does_not_say_its_journal_is_not_checked():
    s = SubscriptionSequencer(options())
    s.start(0, 0)
    s.receive_heartbeat(heartbeat(1, 1))
    rid, _ = replays(s.tick(1))[0]
    reply = journal_page(rid, 2, 1, JOURNAL_B)
    assert delivered(s.receive_reply(reply, [envelope(1, origin=Envelope.JOURNAL)], 2)) == [1]


def test_held_envelopes_keep_their_bytes_not_their_parsed_objects_so_the_bound_bounds_memory():
    """`max_pending_bytes` counts envelope bytes; a parsed envelope is about ten times its bytes in
    Python objects. Held envelopes keep only their bytes (parsed again when handed over)."""
    import json
    import tracemalloc

    def published(seq):
        snapshot = {"id": "c-%d" % seq, "status": "incomplete", "currency": "USD",
                    "line_items": [{"id": "li_%d" % i, "quantity": i, "title": "Item %d" % i} for i in range(12)]}
        raw = json.dumps({"v": 1, "seq": seq, "kind_seq": seq, "kind": "update", "checkout": snapshot}).encode()
        return wire.envelope(b"checkout.update", raw, Envelope.LIVE)

    bound = 4 << 20
    s = caught_up(max_pending_bytes=bound)
    assert delivered(s.receive_live(published(1))) == [1]
    first = published(3)  # 2 was dropped: 3 and everything after it is held
    held_bytes = 0
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held = [first]
    for seq in range(3, 3 + 20000):
        e = first if seq == 3 else published(seq)
        held_bytes += len(e.raw) + len(e.topic)
        if held_bytes > bound:
            break
        assert s.receive_live(e) == []
        held.append(e)
    del held
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert held_bytes > bound // 2
    assert kept < 2 * bound, "held %d bytes of envelopes in %d bytes of memory" % (held_bytes, kept)
    # Handed over, a held envelope reads as it was published.
    request = replays(s.tick(1))[0]
    actions = s.receive_reply(page(request[0], 3, 2), [published(2)], 2)
    handed = [a[1] for a in actions if a[0] == "deliver"]
    assert [e.seq for e in handed[:3]] == [2, 3, 4] and handed[1]["checkout"]["id"] == "c-3"


def test_an_answer_of_an_acknowledged_ingest_socket_stops_the_subscriber():
    ack = wire.reply(b'{"ok":false,"seq":7,"reason":"unknown_shape","event_id":null}')
    assert ack.is_ingest_ack
    assert not wire.reply(b'{"op":"replay","ok":true,"shard":0,"shards":1,"req":1,"from":1,"next":2,"count":0,'
                          b'"first_seq":1,"last_seq":1}').is_ingest_ack
    assert not wire.reply(b'{"ok":false,"error":"busy","detail":"later","req":2}').is_ingest_ack
    s = SubscriptionSequencer(options())
    s.start(0, 0, kept=True)
    s.receive_heartbeat(journal_heartbeat(1, JOURNAL_A))
    assert len(replays(s.tick(1))) == 1
    with pytest.raises(SubscriberError) as raised:
        s.receive_reply(ack, [], 2)
    assert raised.value.kind == "endpoint_mismatch"
    assert "tcp://control answered as an acknowledged ingest socket" in str(raised.value)


def test_an_old_runs_heartbeats_queued_behind_a_new_runs_reply_are_not_two_daemons():
    """A daemon killed and started again with another data directory while the subscriber was behind:
    the old run's heartbeats, still queued, were sent before the new run started. (A subscriber that
    keeps its position stops at the new run's first heartbeat instead: its seqs are not the
    position's; one that does not goes on, as here.)"""
    s, rid = asking_after_heartbeat(2, JOURNAL_A, kept=False)
    two = [envelope(1, origin=Envelope.JOURNAL), envelope(2, origin=Envelope.JOURNAL)]
    assert s.receive_reply(journal_page(rid, 3, 2, JOURNAL_B, started=130), two, 2) == []
    # However many are queued: sent before the new run started, none is evidence of two daemons.
    for sent in range(101, 130):
        for _ in range(10):
            s.receive_heartbeat(journal_heartbeat(2, JOURNAL_A, sent=sent))
    assert replays(s.tick(3)) == []
    s.receive_heartbeat(journal_heartbeat(2, JOURNAL_B, started_at=at(130), sent=131))
    rid, frm = replays(s.tick(4))[0]
    assert frm == 1
    assert delivered(s.receive_reply(journal_page(rid, 3, 2, JOURNAL_B, started=130), two, 5)) == [1, 2]


def test_a_reply_without_a_journal_while_heartbeats_have_one_is_held_until_the_heartbeats_agree():
    s, rid = asking_after_heartbeat(1, JOURNAL_A)
    assert s.receive_reply(page(rid, 2, 1), [envelope(1, origin=Envelope.JOURNAL)], 2) == []
    # Its start is unknown, so no heartbeat is evidence of two daemons (they may be queued ones of a run
    # replaced by an older build): nothing is replayed or handed over, and nothing stops.
    for sent in range(101, 201):
        s.receive_heartbeat(journal_heartbeat(1, JOURNAL_A, sent=sent))
    assert replays(s.tick(3)) == [] and s.statistics.handled == 0
    # The older build's own heartbeats (no journal id) end the wait.
    older = heartbeat(1, 1)
    older.started_at = at(201)
    s.receive_heartbeat(older)
    rid, _ = replays(s.tick(4))[0]
    assert delivered(s.receive_reply(page(rid, 2, 1), [envelope(1, origin=Envelope.JOURNAL)], 5)) == [1]


def test_with_no_heartbeat_in_the_silence_time_replays_go_unchecked_and_the_first_heartbeat_checks():
    s = SubscriptionSequencer(options())
    s.start(0, 0)
    silence = s.options.silence_ms * 1_000_000
    assert replays(s.tick(silence)) == []
    rid, _ = replays(s.tick(silence + 1))[0]
    assert delivered(s.receive_reply(journal_page(rid, 2, 1, JOURNAL_B), [envelope(1, origin=Envelope.JOURNAL)],
                                     silence + 2)) == [1]
    with pytest.raises(SubscriberError) as raised:
        s.receive_heartbeat(journal_heartbeat(1, JOURNAL_A))
    assert raised.value.kind == "endpoint_mismatch" and "handed over before this first heartbeat" in str(raised.value)
