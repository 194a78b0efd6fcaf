"""The Subscriber against a real daemon under `checkoutbus flood`."""
import time

import pytest

from checkoutbus import FileCursor, MemoryCursor, Subscriber, SubscriberError, send_acked

from bus import needs_daemon, wait_for

pytestmark = needs_daemon


def consume_through(sub, last_seq, timeout=60):
    """Envelopes until one with seq last_seq (each committed); fails on a receive timeout."""
    seen = []
    while not seen or seen[-1].seq < last_seq:
        envelope = sub.receive(timeout)
        assert envelope is not None, "nothing for %ss after seq %s of %s" % (
            timeout, seen[-1].seq if seen else None, last_seq)
        seen.append(envelope)
        sub.commit(envelope)
    return seen


def test_receive_hwm_1_stalled_under_flood_recovers_every_drop(bus):
    # A tiny publish HWM and a small receive buffer: the kernel's socket buffers hold only a part
    # of what is published while the subscriber is stalled.
    daemon = bus.daemon("--publish-hwm", "2000", "--heartbeat-ms", "100")
    sub = Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0),
                     name="py-stalled", receive_hwm=1, receive_buffer=4096)
    with sub:
        assert sub.wait_subscribed(60)
        flood = bus.flood("--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "3000")
        first = sub.receive(60)
        assert first is not None and first.seq == 1
        sub.commit(first)
        # The stall: nothing is read while the flood runs. (The flood's own subscriber, live only,
        # may lose at this publish HWM on a loaded machine: its verdict is not what is tested here.)
        bus.finish_flood(flood, check=False, daemons=[daemon])
        last_seq = daemon.stats()["last_seq"]
        assert last_seq == daemon.journal()[-1][0]
        rest = consume_through(sub, last_seq)
        seqs = [first.seq] + [e.seq for e in rest]
        assert seqs == list(range(1, last_seq + 1))
        statistics = sub.statistics
        assert statistics.missed > 0 and statistics.recovered == statistics.missed
        assert statistics.gaps > 0
        # the envelopes are the journal's, byte for byte, and readable as dicts
        journal = {seq: envelope for seq, _, envelope in daemon.journal()}
        for e in rest[:: max(1, len(rest) // 50)]:
            assert dict(e) == journal[e.seq] and e["seq"] == e.seq
            assert e.topic.startswith(b"checkout.")
    reported = daemon.report_of("py-stalled", until=lambda r: r["last_seq"] == last_seq)
    assert reported["missed"] == statistics.missed
    assert reported["recovered"] == statistics.recovered
    assert reported["gaps"] == statistics.gaps
    assert "py-stalled" in bus.run("stats", "--control", daemon.control)


VARIANTS = [
    (["checkout.complete"], "prefixes"),                                  # one kind whole: kind_seq proves live ones
    (["checkout.complete", "checkout.fail.cart_expired"], "prefixes"),    # several kinds, part of one: the journal decides
    (["checkout.complete", "checkout.fail.cart_expired"], "everything"),  # every topic on the wire, filtered here
]


def test_narrower_prefixes_stalled_under_flood_get_every_match_once_byte_for_byte(bus):
    # A publish HWM of 100: only a few hundred of the matches fit in the buffers while stalled. The
    # flood's own subscriber (live only) loses at it too; its verdict is not what is tested here.
    daemon = bus.daemon("--publish-hwm", "100", "--heartbeat-ms", "100")
    subs = [Subscriber(publish=daemon.publish, control=daemon.control, prefixes=prefixes, cursor=MemoryCursor(0),
                       name="py-narrow-%d" % i, receive_hwm=1, receive_buffer=4096, live_subscription=live).open()
            for i, (prefixes, live) in enumerate(VARIANTS)]
    try:
        for sub in subs:
            assert sub.wait_subscribed(60)
        flood = bus.flood("--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "3000")
        firsts = [sub.receive(60) for sub in subs]
        assert None not in firsts
        bus.finish_flood(flood, check=False, daemons=[daemon])  # the stall: none of them reads meanwhile
        for sub, first, (prefixes, live) in zip(subs, firsts, VARIANTS):
            expected = daemon.journal(prefixes, raw=True)
            got = [first] + consume_through(sub, expected[-1][0])
            assert [(e.seq, e.topic, e.raw) for e in got] == expected, (prefixes, live)
            statistics = sub.statistics
            assert statistics.missed > 0 and statistics.recovered == statistics.missed, (prefixes, live, statistics)
    finally:
        for sub in subs:
            sub.close()


def test_parked_envelopes_are_reported_to_the_daemon(bus):
    daemon = bus.daemon()
    with Subscriber(publish=daemon.publish, control=daemon.control, name="py-parking") as sub:
        assert sub.wait_subscribed(20)
        assert daemon.report_of("py-parking")["rejected"] == 0
        sub.report_rejected(3)
        # Reports go out with each heartbeat: read on until one carries the count.
        deadline = time.monotonic() + 10
        while daemon.stats()["subscribers"]["py-parking"]["rejected"] != 3 and time.monotonic() < deadline:
            sub.receive(timeout=0.2)
    assert daemon.stats()["subscribers"]["py-parking"]["rejected"] == 3


def test_resumes_from_a_cursor_file_and_refuses_a_second_user(bus, tmp_path):
    daemon = bus.daemon()
    report = bus.finish_flood(bus.flood("--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "200"))
    last_seq = report["published"]
    path = bus.path("cursor")
    with Subscriber(publish=daemon.publish, control=daemon.control, cursor=path, name="py-resume") as sub:
        half = consume_through(sub, last_seq // 2)
    assert FileCursor.committed(path) == half[-1].seq == last_seq // 2
    with Subscriber(publish=daemon.publish, control=daemon.control, cursor=path, name="py-resume") as sub:
        rest = consume_through(sub, last_seq)
        assert rest[0].seq == last_seq // 2 + 1 and rest[0].origin == "journal"
        try:
            Subscriber(publish=daemon.publish, control=daemon.control, cursor=path).open()
            raise AssertionError("a second subscriber took the cursor file")
        except Exception as e:
            assert getattr(e, "kind", None) == "cursor_in_use"
    assert FileCursor.committed(path) == last_seq


def test_prefixes_the_daemon_would_not_take_are_refused_up_front(bus):
    daemon = bus.daemon()
    # A prefix longer than 64 bytes would have its connection cut over and over: refused here.
    with pytest.raises(ValueError, match="at most 64"):
        Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0),
                   prefixes=["checkout." + "x" * 56])
    with pytest.raises(ValueError, match="at most 32"):
        Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0),
                   prefixes=["checkout.%d" % i for i in range(33)])
    # At the limit it subscribes, and the daemon answers with a heartbeat.
    sub = Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0),
                     prefixes=["checkout." + "x" * 55], name="py-long-prefix")
    with sub:
        assert sub.wait_subscribed(30)


def test_api_edges_a_bare_prefix_no_prefixes_bad_counts_and_a_commit_after_close(bus):
    daemon = bus.daemon()
    send_acked([{"checkout_id": "e-1", "event": "checkoutDidStart", "checkout": {"id": "e-1"}},
                {"checkout_id": "e-1", "event": "checkoutDidComplete", "checkout": {"id": "e-1", "order": {"id": "o-1"}}}],
               daemon.ingest_acked)
    # A bare string was split into one-character prefixes, and "c" followed every checkout topic.
    with Subscriber(publish=daemon.publish, control=daemon.control, cursor=bus.path("edge.cursor"),
                    prefixes="checkout.complete", name="py-bare") as sub:
        first = sub.receive(timeout=20)
        assert first is not None and first.topic == b"checkout.complete"
        with pytest.raises(ValueError):
            sub.report_rejected(-1)  # the daemon refuses a report with a negative count
        with pytest.raises(ValueError):
            sub.report_rejected(1.5)
    with pytest.raises(SubscriberError) as e:
        sub.commit(first)  # its cursor file closed with it
    assert e.value.kind == "closed"
    # A generator of prefixes is read once (a second read found it empty, and no prefix was used).
    with Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0),
                    prefixes=(p for p in ["checkout.complete"]), name="py-generator") as sub:
        first = sub.receive(timeout=20)
        assert first is not None and first.topic == b"checkout.complete"
    sub.commit(first)  # a cursor of the caller's own outlives the subscriber
    with pytest.raises(ValueError, match="no topic prefixes"):
        Subscriber(publish=daemon.publish, control=daemon.control, prefixes=[])
    with pytest.raises(ValueError, match="max_pending_bytes"):
        Subscriber(publish=daemon.publish, control=daemon.control, max_pending_bytes=-1)


def test_reports_say_durable_and_final_and_a_clean_stop_is_gone_stopped(bus):
    daemon = bus.daemon()
    path = bus.path("durable-cursor")
    # No cursor: the position ends with the process; a cursor file keeps it.
    with Subscriber(publish=daemon.publish, control=daemon.control, name="py-memory") as memory, \
            Subscriber(publish=daemon.publish, control=daemon.control, cursor=path, name="py-durable") as durable:
        assert memory.wait_subscribed(20) and durable.wait_subscribed(20)
        assert daemon.report_of("py-memory")["durable"] is False
        assert daemon.report_of("py-durable")["durable"] is True
        assert daemon.report_of("py-durable")["state"] == "live"
    # close() sent each one's final report: gone at once, stopped.
    for name in ("py-memory", "py-durable"):
        report = daemon.report_of(name, until=lambda r: r["state"] == "gone")
        assert report["gone_reason"] == "stopped"


def test_a_handler_slower_than_the_request_timeout_asks_for_each_page_once(bus):
    # The prefetched request was timed from when its page was queued for iteration, not handled:
    # with a page taking longer to handle than request_timeout_ms, every page was asked for again.
    daemon = bus.daemon()
    send_acked([{"checkout_id": "s-%d" % i, "event": "checkoutDidStart", "checkout": {"id": "s-%d" % i}}
                for i in range(400)], daemon.ingest_acked)
    logs = []
    with Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0), page_size=100,
                    request_timeout_ms=500, log=lambda level, message: logs.append(message), name="py-slow") as sub:
        for _ in range(400):
            assert sub.receive(timeout=20) is not None
            time.sleep(0.008)  # 100 envelopes: 0.8 s a page, past the 0.5 s timeout
        assert sub.statistics.replay_requests <= 5, (sub.statistics.replay_requests, logs)
    assert not [m for m in logs if "unanswered" in m], logs


def test_one_daemons_publish_and_anothers_control_stop_with_endpoint_mismatch_before_anything(bus):
    """Both daemons say shard 0 of 1: only their journal identities tell them apart. Before the
    check, the other daemon's journal was delivered as this one's (docs/durability.md, "One journal
    behind both endpoints")."""
    here, other = bus.daemon(), bus.daemon()
    bus.finish_flood(bus.flood("--to", other.ingest, "--from", other.publish, "--checkouts", "50"))
    assert here.journal() == []
    path = bus.path("cursor")
    got = []
    started = time.monotonic()
    with pytest.raises(SubscriberError) as raised:
        with Subscriber(publish=here.publish, control=other.control, cursor=path, name="py-two-daemons") as sub:
            while time.monotonic() - started < 30:
                envelope = sub.receive(1)
                if envelope is not None:
                    got.append(envelope)
    assert raised.value.kind == "endpoint_mismatch", str(raised.value)
    assert other.control in str(raised.value) and here.publish in str(raised.value)
    assert got == [] and FileCursor.committed(path) == 0


def test_replay_answered_busy_while_clients_that_never_read_hold_the_control_memory(bus):
    # Records larger than any client's share of --control-memory (1 MiB), and 10 control clients that
    # ask for them and never read: the daemon answers busy past its bound, and the subscriber asks
    # again after a pause until the others leave, then reads every record once.
    import urllib.request
    import zmq
    daemon = bus.daemon("--control-memory", str(1 << 20))
    pad = "z" * 900_000
    events = [{"event_id": "py-huge-%d" % i, "checkout_id": "py-huge-%d" % i,
               "payload": {"event": "onCheckoutStarted", "checkout": {"id": "py-huge-%d" % i, "note": pad}}}
              for i in range(6)]
    assert [a.seq for a in send_acked(events, daemon.ingest_acked, timeout=60)] == list(range(1, 7))
    context = zmq.Context()
    greedy = []
    for _ in range(10):
        s = context.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVHWM, 1)
        s.setsockopt(zmq.RCVBUF, 4096)
        s.connect(daemon.control)
        greedy.append(s)
    for s in greedy:
        for _ in range(8):
            s.send(b'{"op":"replay","from":1,"limit":10000}', zmq.NOBLOCK)

    def metric(name):
        with urllib.request.urlopen("http://%s/metrics" % daemon.ready["metrics"], timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return 0.0

    wait_for(lambda: metric("checkoutbus_control_requests_total") >= 80, what="the 80 requests served")
    assert metric("checkoutbus_replay_bytes_queued") > 0
    sub = Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0), name="py-busy")
    with sub:
        assert sub.wait_subscribed(60)
        deadline = time.monotonic() + 20
        while sub.statistics.replay_busy == 0 and time.monotonic() < deadline:
            assert sub.receive(0.05) is None  # nothing gets through while the others hold the memory
        assert sub.statistics.replay_busy > 0
        for s in greedy:
            s.close()
        context.term()
        seen = consume_through(sub, 6)
        assert [e.seq for e in seen] == list(range(1, 7))
        assert seen[-1]["checkout_id"] == "py-huge-5"


def test_close_with_envelopes_queued_counts_only_what_was_taken(bus):
    # A page of 50 is queued for the application, which takes 7 and closes: the statistics and the
    # final report say 7, not 50.
    daemon = bus.daemon()
    events = [{"event_id": "py-taken-%d" % i, "checkout_id": "py-taken-%d" % i,
               "payload": {"event": "onCheckoutStarted", "checkout": {"id": "py-taken-%d" % i}}} for i in range(50)]
    assert [a.seq for a in send_acked(events, daemon.ingest_acked)] == list(range(1, 51))
    sub = Subscriber(publish=daemon.publish, control=daemon.control, cursor=MemoryCursor(0), name="py-taken")
    taken = [sub.receive(30) for _ in range(7)]
    assert [e.seq for e in taken] == list(range(1, 8))
    assert sub.statistics.handled > 7  # the rest of the page is queued
    sub.close()
    assert (sub.statistics.handled, sub.statistics.last_seq, sub.statistics.from_journal) == (7, 7, 7)
    reported = daemon.report_of("py-taken", until=lambda r: r["last_seq"] == 7)
    assert reported["last_seq"] == 7
