"""Three shards, CURVE and send_acked against real daemons."""
import json
import os

import pytest

from checkoutbus import AcknowledgedSendError, CurveKeys, FileCursor, Subscriber, SubscriberError, send_acked

from bus import needs_daemon, wait_for

pytestmark = needs_daemon


def test_three_shards_every_envelope_once_per_shard_with_a_cursor_each(bus):
    shards = [bus.daemon("--shard", "%d/3" % i, "--heartbeat-ms", "100") for i in range(3)]
    path = bus.path("cursor")
    publish, control = [d.publish for d in shards], [d.control for d in shards]
    with Subscriber(publish=publish, control=control, cursor=path, name="py-shards") as sub:
        assert sub.wait_subscribed(60)
        report = bus.finish_flood(bus.flood("--shards", ",".join(d.ingest for d in shards),
                                            "--from", ",".join(publish), "--checkouts", "1500"))
        last = [d.stats()["last_seq"] for d in shards]
        assert sum(last) == report["published"] and all(n > 0 for n in last)
        seen = [[], [], []]
        while any((s[-1] if s else 0) < n for s, n in zip(seen, last)):
            envelope = sub.receive(60)
            assert envelope is not None, "stalled at %r of %r" % ([s[-1:] for s in seen], last)
            assert envelope.shard == envelope.position
            seen[envelope.position].append(envelope.seq)
            sub.commit(envelope)
        for position, n in enumerate(last):
            assert seen[position] == list(range(1, n + 1))
        assert [s.heartbeats > 0 for s in sub.shard_statistics] == [True] * 3
    assert [FileCursor.committed(p) for p in FileCursor.paths(path, 3)] == last
    assert FileCursor.paths(path, 3) == ["%s.%d-of-3" % (path, i) for i in range(3)]
    for d in shards:
        d.report_of("py-shards", until=lambda r, n=d.stats()["last_seq"]: r["last_seq"] == n)


def test_a_subset_of_the_shards_by_their_ids_with_cursor_files_named_by_id(bus):
    shards = [bus.daemon("--shard", "%d/3" % i, "--heartbeat-ms", "100") for i in range(3)]
    chosen = [2, 0]
    path = bus.path("cursor")
    bus.finish_flood(bus.flood("--shards", ",".join(d.ingest for d in shards),
                               "--from", ",".join(d.publish for d in shards), "--checkouts", "300"))
    last = {i: shards[i].stats()["last_seq"] for i in chosen}
    with Subscriber(publish=[shards[i].publish for i in chosen], control=[shards[i].control for i in chosen],
                    cursor=path, shard_ids=chosen, shard_count=3, name="py-subset") as sub:
        seen = {i: [] for i in chosen}
        while any((seen[i][-1] if seen[i] else 0) < last[i] for i in chosen):
            envelope = sub.receive(60)
            assert envelope is not None and envelope.shard == chosen[envelope.position]
            seen[envelope.shard].append(envelope.seq)
            sub.commit(envelope)
        assert all(seen[i] == list(range(1, last[i] + 1)) for i in chosen)
    assert FileCursor.committed(path + ".2-of-3") == last[2] and FileCursor.committed(path + ".0-of-3") == last[0]
    assert not os.path.exists(path + ".1-of-3")
    # One endpoint given as shard 1 that is shard 0: refused, though it is alone in its list.
    with pytest.raises(SubscriberError) as refused:
        with Subscriber(publish=shards[0].publish, control=shards[0].control, cursor=bus.path("other"),
                        shard_ids=[1], shard_count=3) as sub:
            sub.receive(60)
    assert refused.value.kind == "wrong_shard"


@pytest.mark.parametrize("order", [[1, 0, 2], [0, 1]])
def test_a_shard_list_out_of_order_or_short_is_refused_before_anything_is_yielded(bus, order):
    shards = [bus.daemon("--shard", "%d/3" % i, "--heartbeat-ms", "100") for i in range(3)]
    send_acked([{"checkout_id": "c-%d" % i, "event": "checkoutDidStart", "checkout": {"id": "c-%d" % i}}
                for i in range(20)], shards[0].ingest_acked)  # wrong_shard dead letters: something to yield
    sub = Subscriber(publish=[shards[i].publish for i in order], control=[shards[i].control for i in order],
                     cursor=bus.path("c"))
    with pytest.raises(SubscriberError) as refused:
        with sub:
            sub.receive(60)
    assert refused.value.kind == "wrong_shard"


def curve_daemon(bus):
    bus.run("keygen", bus.path("server"))
    for name, role in (("reader", "subscribers"), ("writer", "producers")):
        bus.run("keygen", bus.path(name))
        os.makedirs(bus.path(role), exist_ok=True)
        os.rename(bus.path(name + ".pub"), bus.path(role, name + ".pub"))
    bus.run("keygen", bus.path("stranger"))
    daemon = bus.daemon("--curve-secret-key", bus.path("server.key"), "--curve-producers", bus.path("producers"),
                      "--curve-subscribers", bus.path("subscribers"), "--heartbeat-ms", "100")
    daemon.curve = CurveKeys.from_files(bus.path("reader.key"), bus.path("server.pub"))
    return daemon


def test_curve_keys_from_keygen_files(bus):
    daemon = curve_daemon(bus)
    reader = (bus.path("reader.key"), bus.path("server.pub"))
    events = [{"event_id": "cv-%d" % i, "checkout_id": "cv-%d" % i, "event": "checkoutDidStart",
               "checkout": {"id": "cv-%d" % i, "currency": "EUR"}} for i in range(5)]
    with Subscriber(publish=daemon.publish, control=daemon.control, cursor=bus.path("cursor"), curve=reader,
                    name="py-curve") as sub:
        assert sub.wait_subscribed(60)
        acks = send_acked(events, daemon.ingest_acked, curve=(bus.path("writer.key"), bus.path("server.pub")))
        assert [a.seq for a in acks] == [1, 2, 3, 4, 5]
        got = [sub.receive(60) for _ in events]
        assert [e["checkout_id"] for e in got] == ["cv-%d" % i for i in range(5)]
    daemon.report_of("py-curve")
    # A key in neither directory gets nothing: the handshake is refused (and logged by the daemon).
    stranger = CurveKeys.from_files(bus.path("stranger.key"), bus.path("server.pub"))
    with pytest.raises(AcknowledgedSendError) as refused:
        send_acked(events[:1], daemon.ingest_acked, curve=stranger, timeout=1)
    assert refused.value.code == "timed_out" and "CURVE" in str(refused.value)
    wait_for(lambda: "curve: refused" in daemon.log(), what="the daemon's log of the refused key")
    with pytest.raises(SubscriberError):
        CurveKeys.from_files(bus.path("server.pub") + ".missing", bus.path("server.pub"))


def test_curve_keys_from_the_environment(bus, monkeypatch):
    bus.run("keygen", bus.path("server"))
    bus.run("keygen", bus.path("client"))
    monkeypatch.delenv("CHECKOUTBUS_CURVE_KEY", raising=False)
    monkeypatch.delenv("CHECKOUTBUS_CURVE_SERVER", raising=False)
    assert CurveKeys.from_environment() is None
    monkeypatch.setenv("CHECKOUTBUS_CURVE_KEY", bus.path("client.key"))
    with pytest.raises(SubscriberError):
        CurveKeys.from_environment()  # one without the other
    monkeypatch.setenv("CHECKOUTBUS_CURVE_SERVER", bus.path("server.pub"))
    keys = CurveKeys.from_environment()
    with open(bus.path("client.pub")) as f:
        public = [line.strip() for line in f if line.strip() and not line.startswith("#")][0]
    assert keys.public_key.decode() == public  # derived from the secret key as keygen derived it


def test_send_acked_returns_each_seq_or_rejection(bus):
    daemon = bus.daemon()
    events = [
        {"event_id": "a-1", "checkout_id": "a", "event": "checkoutDidStart", "checkout": {"id": "a"}},
        json.dumps({"event_id": "a-2", "checkout_id": "a", "event": "onCheckoutCompleted",
                    "checkout": {"id": "a", "order": {"id": "o-a"}}}),
        b"{not json",
        {"event_id": "a-3", "checkout_id": "a", "event": "no-such-event"},
    ]
    acks = send_acked(events, daemon.ingest_acked)
    assert [(a.accepted, a.seq, a.reason) for a in acks[:2]] == [(True, 1, None), (True, 2, None)]
    assert (acks[2].accepted, acks[2].reason, acks[2].event_id) == (False, "invalid_json", None)
    assert not acks[3].accepted and acks[3].reason and acks[3].event_id == "a-3"
    assert acks[0].event_id == "a-1"
    again = send_acked(events[:2], daemon.ingest_acked)  # a retry: answered from the journal, not published
    assert [(a.seq, a.duplicate) for a in again] == [(1, True), (2, True)]
    assert daemon.stats()["last_seq"] == acks[3].seq


def test_send_acked_a_dropped_connection_fails_the_unanswered_never_answers_them_from_the_next(bus):
    # The daemon cuts a producer whose message is over --max-wire-bytes. The DEALER reconnected and
    # the next connection's replies were taken for the events lost with the first: 181 events
    # reported accepted that were never journaled, the oversized one among them.
    daemon = bus.daemon("--max-message-bytes", "65536", "--max-wire-bytes", "131072")
    small = [{"event_id": "d-%d" % i, "checkout_id": "d-%d" % i, "event": "checkoutDidStart",
              "checkout": {"id": "d-%d" % i}} for i in range(400)]
    huge = {"event_id": "d-huge", "checkout_id": "d-huge", "event": "checkoutDidStart",
            "checkout": {"id": "d-huge", "note": "x" * 300000}}
    events = small[:200] + [huge] + small[200:]
    with pytest.raises(AcknowledgedSendError) as e:
        send_acked(events, daemon.ingest_acked, timeout=10)
    assert e.value.code == "disconnected", str(e.value)
    acknowledged = e.value.acknowledged
    assert len(acknowledged) <= 200
    journaled = {envelope.get("event_id") for _, _, envelope in daemon.journal()}
    # Every answer is for its own event, and every event answered accepted is in the journal.
    for event, answer in zip(events, acknowledged):
        assert answer.event_id == event["event_id"] and answer.accepted
        assert event["event_id"] in journaled
    assert "d-huge" not in journaled


def test_send_acked_refuses_a_window_past_the_acknowledgements_the_daemon_queues():
    # The daemon queues at most 10,000 unread acknowledgements for one producer; a larger window
    # could have more in flight than it keeps answers for.
    for window in (0, 10_001):
        with pytest.raises(ValueError, match="window must be 1 to 10000"):
            send_acked([b"{}"], "tcp://127.0.0.1:1", window=window)
