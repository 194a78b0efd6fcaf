"""The subscription's messages as bytes (mirrors SubscriptionWire.swift): envelopes, heartbeats and
control replies read; the control requests written."""
import json
from typing import List, Optional, Sequence

from .envelope import Envelope
from .kinds import KIND_NAMES, kind_of_topic
from .sequencer import Heartbeat, Reply, Report


def _int(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _object(raw: bytes) -> Optional[dict]:
    """`raw` as a JSON object; None when it is not JSON or not an object."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nested past Python's limit (no daemon sends it)
        return None
    return data if isinstance(data, dict) else None


def envelope(topic: bytes, raw: bytes, origin: str) -> Optional[Envelope]:
    """An envelope's positions read from its bytes; None for an envelope without seq or kind_seq, or
    a topic that is no journaled kind's."""
    kind = kind_of_topic(topic)
    if kind is None:
        return None
    data = _object(raw)
    if data is None:
        return None
    seq, kind_seq = _int(data.get("seq")), _int(data.get("kind_seq"))
    if seq is None or kind_seq is None:
        return None
    shard = _int(data.get("shard")) or 0
    return Envelope(seq, kind_seq, kind, bytes(topic), bytes(raw), origin, shard, data)


def page(frames: Sequence[bytes]) -> List[Envelope]:
    """The envelopes of a replay reply's frames after the first (topic, envelope, topic, …)."""
    out = []
    for i in range(0, len(frames) - 1, 2):
        e = envelope(frames[i], frames[i + 1], Envelope.JOURNAL)
        if e is not None:
            out.append(e)
    return out


def heartbeat(raw: bytes) -> Optional[Heartbeat]:
    data = _object(raw)
    if data is None:
        return None
    seq, kinds = _int(data.get("seq")), data.get("kind_seqs")
    if seq is None or not isinstance(kinds, dict):
        return None
    kind_seqs = [_int(kinds.get(name)) or 0 for name in KIND_NAMES]
    hb = Heartbeat(seq, kind_seqs)
    if _int(data.get("shard")) is not None:
        hb.shard = data["shard"]
    if _int(data.get("shards")) is not None:
        hb.shards = data["shards"]
    if isinstance(data.get("started_at"), str):
        hb.started_at = data["started_at"]
    if isinstance(data.get("journal_id"), str):
        hb.journal = data["journal_id"]
    if isinstance(data.get("sent_at"), str):
        hb.sent_at = data["sent_at"]
    return hb


def reply(raw: bytes) -> Optional[Reply]:
    d = _object(raw)
    if d is None:
        return None
    s = lambda k: d.get(k) if isinstance(d.get(k), str) else None  # noqa: E731
    return Reply(op=s("op"), ok=d.get("ok") is True, req=_int(d.get("req")), next=_int(d.get("next")),
                 last_seq=_int(d.get("last_seq")), first_seq=_int(d.get("first_seq")), error=s("error"),
                 detail=s("detail"), shard=_int(d.get("shard")), shards=_int(d.get("shards")),
                 journal=s("journal_id"), started_at=s("started_at"),
                 is_ingest_ack="op" not in d and "error" not in d and "ok" in d and "seq" in d)


def _dump(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def replay_request(req_id: int, from_seq: int, prefixes: List[str], limit: int) -> bytes:
    return _dump({"op": "replay", "from": from_seq, "prefix": list(prefixes), "limit": limit, "req": req_id})


def identity_request(req_id: int) -> bytes:
    return _dump({"op": "stats", "req": req_id})


def report(r: Report, name: str, rejected: Optional[int] = None, durable: Optional[bool] = None) -> bytes:
    """A report of the counts; `rejected`, when given, is how many envelopes the application holds
    parked because it could not apply them (shown by the daemon's stats and metrics); `durable`,
    whether the subscriber keeps its position across runs (a cursor file or store). The bytes are
    the Swift codec's (ControlRequestWire.report): tests/test_wire_golden.py checks them."""
    body = {"op": "report", "subscriber": name, "last_seq": r.last_seq, "missed": r.missed,
            "recovered": r.recovered, "gaps": r.gaps, "through_seq": r.through_seq}
    if r.final:
        body["final"] = True
    if durable is not None:
        body["durable"] = durable
    if rejected is not None:
        body["rejected"] = rejected
    body["req"] = r.id
    return _dump(body)
