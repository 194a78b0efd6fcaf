"""The Python client's control requests, byte for byte against Tests/Golden/control-requests.tsv,
the file the Swift codec (ControlRequestWire) is checked against too; and the heartbeats and control
replies of Tests/Golden/control-replies.tsv (as the daemon writes them, checked on the Swift side by
ControlReplyWireTests) read by wire.heartbeat and wire.reply."""
import os

import pytest

from checkoutbus import wire
from checkoutbus.sequencer import Heartbeat, Reply, Report

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "Tests", "Golden")
GOLDEN = os.path.join(GOLDEN_DIR, "control-requests.tsv")


def golden(path=GOLDEN):
    with open(path) as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)


def test_replay_identity_and_report_are_the_golden_bytes():
    g = golden()
    assert wire.replay_request(7, 1000, ["checkout.complete"], 1000).decode() == g["replay"]
    assert wire.identity_request(3).decode() == g["stats"]
    full = Report(id=9, last_seq=42, missed=3, recovered=3, gaps=1, through_seq=45, final=True)
    assert wire.report(full, "fulfil-1", rejected=2, durable=True).decode() == g["report"]
    plain = Report(id=10, last_seq=0, missed=0, recovered=0, gaps=0, through_seq=0)
    assert wire.report(plain, "tail").decode() == g["report-plain"]


# A journal's identity, as `<data-dir>/journal-id` holds one.
JOURNAL = "5f0c2a9e41d7b3806e1f9a2c7d4b8e03"
STARTED = "2025-12-02T11:38:20.000Z"  # the start of the run a replay reply names


def test_heartbeat_and_replies_read_as_the_daemon_writes_them():
    g = golden(os.path.join(GOLDEN_DIR, "control-replies.tsv"))
    assert wire.heartbeat(g["heartbeat"].encode()) == Heartbeat(
        seq=12, kind_seqs=[3, 5, 2, 1, 1, 0], shard=1, shards=3, started_at="2025-12-02T11:38:20.000Z",
        journal=JOURNAL, sent_at="2025-12-02T11:39:01.123Z")
    assert wire.reply(g["replay-page"].encode()) == Reply(
        op="replay", ok=True, req=7, next=9, last_seq=12, first_seq=1, shard=1, shards=3, journal=JOURNAL,
        started_at=STARTED)
    assert wire.reply(g["not-retained"].encode()) == Reply(
        op="replay", ok=False, req=8, last_seq=250, first_seq=100, error="not_retained", shard=0, shards=1,
        journal=JOURNAL, started_at=STARTED)
    assert wire.reply(g["journal-unreadable"].encode()) == Reply(
        op="replay", ok=False, req=9, last_seq=10, first_seq=1, error="journal_unreadable",
        detail="segment 00000000000000000001.seg cannot be read", shard=0, shards=1, journal=JOURNAL, started_at=STARTED)
    assert wire.reply(g["bad-request"].encode()) == Reply(ok=False, req=10, error="bad_request", detail="missing op")
    assert wire.reply(g["busy"].encode()) == Reply(
        ok=False, req=15, error="busy", detail="the pipeline has not answered yet; retry")


def test_stats_report_forget_and_seek_replies_read_as_the_daemon_writes_them():
    """The replies the client reads beside replay pages: `stats` (which shard answered, on
    connect), `report`; and `forget` and `seek`, which it does not send but must not misread."""
    g = golden(os.path.join(GOLDEN_DIR, "control-replies.tsv"))
    assert wire.reply(g["stats"].encode()) == Reply(
        op="stats", ok=True, req=14, last_seq=120, first_seq=3, shard=1, shards=2)
    assert wire.reply(g["report"].encode()) == Reply(op="report", ok=True, req=11, shard=0, shards=1)
    assert wire.reply(g["forget"].encode()) == Reply(op="forget", ok=True, req=12, shard=0, shards=1)
    assert wire.reply(g["seek"].encode()) == Reply(
        op="seek", ok=True, req=13, last_seq=99, first_seq=1, shard=2, shards=3)


ACKS = {
    # name: (accepted, seq, reason, duplicate, suppressed, event_id), as AckReplyWireTests reads them
    "published": (True, 42, None, False, False, "evt-0001"),
    "suppressed": (True, None, None, False, True, "evt-0002"),
    "duplicate": (True, 42, None, True, False, "evt-0001"),
    "duplicate-of-suppressed": (True, None, None, True, False, "evt-0002"),
    "dead-lettered": (False, 43, "unknown_event", False, False, "evt-0003"),
    "duplicate-dead-letter": (False, 43, "unknown_event", True, False, "evt-0003"),
    "not-json": (False, 44, "invalid_json", False, False, None),
}


def test_acknowledgements_read_as_the_daemon_writes_them():
    """Tests/Golden/ack-replies.tsv: the acknowledged ingest socket's replies, written by the Swift
    codec (AckReplyWire) byte for byte, read here by the producer's Acknowledgement."""
    import json

    from checkoutbus.producer import Acknowledgement

    g = golden(os.path.join(GOLDEN_DIR, "ack-replies.tsv"))
    assert sorted(g) == sorted(ACKS)
    for name, expected in ACKS.items():
        a = Acknowledgement(json.loads(g[name]))
        assert (a.accepted, a.seq, a.reason, a.duplicate, a.suppressed, a.event_id) == expected, name
