import json
from collections.abc import Mapping
from typing import Any, Iterator, Optional


class Envelope(Mapping):
    """One journaled envelope: its positions, its topic and its bytes exactly as published (`raw`),
    and the parsed JSON object (`data`). It is a read-only mapping of that object too:
    `envelope["checkout_id"]`, `envelope.get("order")`, `dict(envelope)`.

    `origin` says where it came from ("live" or "journal"); `position` is its shard's place in the
    subscriber's endpoint list (whose cursor `commit` moves)."""

    __slots__ = ("seq", "kind_seq", "kind", "topic", "raw", "origin", "shard", "position_only", "position", "_data")

    LIVE = "live"
    JOURNAL = "journal"

    def __init__(self, seq: int, kind_seq: int, kind: int, topic: bytes, raw: bytes, origin: str,
                 shard: int = 0, data: Optional[dict] = None):
        self.seq = seq
        self.kind_seq = kind_seq
        self.kind = kind
        self.topic = topic
        self.raw = raw
        self.origin = origin
        self.shard = shard
        self.position_only = False
        self.position = 0
        self._data = data

    @property
    def data(self) -> dict:
        if self._data is None:
            self._data = json.loads(self.raw)
        return self._data

    @property
    def topic_str(self) -> str:
        return self.topic.decode("utf-8", "replace")

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        return "Envelope(seq=%d, kind_seq=%d, topic=%r, shard=%d, origin=%s)" % (
            self.seq, self.kind_seq, self.topic_str, self.shard, self.origin)
