"""The journaled kinds and which of them a list of topic prefixes covers (mirrors JournaledKind and
TopicCoverage in the Swift client)."""
from typing import List, Optional

# (name, topic, topic_is_exact), in JournaledKind.rawValue order.
KINDS = [
    ("start", "checkout.start", True),
    ("update", "checkout.update", True),
    ("complete", "checkout.complete", True),
    ("fail", "checkout.fail", False),
    ("dismiss", "checkout.dismiss", True),
    ("deadletter", "bus.deadletter", True),
]
KIND_NAMES = [k[0] for k in KINDS]
HEARTBEAT_TOPIC = "bus.heartbeat"
DEFAULT_PREFIXES = ["checkout.", "bus.deadletter"]
# The daemon's limits on topic prefixes (TopicLimits in the Swift package): a longer subscription has
# its connection cut; a replay naming more prefixes, or a longer one, is refused as bad_request.
MAX_PREFIX_BYTES = 64
MAX_REPLAY_PREFIXES = 32


def check_prefixes(prefixes) -> None:
    """Raises ValueError for prefixes the daemon would not take."""
    for p in prefixes:
        if len(p.encode()) > MAX_PREFIX_BYTES:
            raise ValueError("topic prefix of %d bytes: at most %d (%r...)" % (len(p.encode()), MAX_PREFIX_BYTES, p[:40]))
    if len(prefixes) > MAX_REPLAY_PREFIXES:
        raise ValueError("%d topic prefixes: at most %d" % (len(prefixes), MAX_REPLAY_PREFIXES))


def topic_root(i: int) -> str:
    _, topic, exact = KINDS[i]
    return topic if exact else topic + "."


def kind_of_topic(topic: bytes) -> Optional[int]:
    """The kind index of a topic, or None for a topic that is no journaled kind's."""
    for i, (_, t, exact) in enumerate(KINDS):
        root = topic_root(i).encode()
        if exact:
            if topic == root:
                return i
        elif topic.startswith(root) or topic == root[:-1]:
            return i
    return None


NONE, PARTIAL, FULL = 0, 1, 2


class TopicCoverage:
    def __init__(self, prefixes: List[str]):
        levels = []
        for i, (_, topic, exact) in enumerate(KINDS):
            root = topic_root(i)
            if any(root.startswith(p) or (not exact and p == root[:-1]) for p in prefixes):
                levels.append(FULL)
            elif not exact and any(p.startswith(root) and len(p) > len(root) for p in prefixes):
                levels.append(PARTIAL)
            else:
                levels.append(NONE)
        self.levels = levels

    def level(self, kind: int) -> int:
        return self.levels[kind]

    @property
    def covers_everything(self) -> bool:
        return all(level == FULL for level in self.levels)

    @property
    def subscribed_kinds(self) -> List[int]:
        return [i for i, level in enumerate(self.levels) if level != NONE]

    @property
    def single_full_kind(self) -> Optional[int]:
        kinds = self.subscribed_kinds
        if len(kinds) == 1 and self.levels[kinds[0]] == FULL:
            return kinds[0]
        return None
