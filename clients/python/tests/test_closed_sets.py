"""The Python client's copies of the closed sets against Tests/Golden/closed-sets.json, the file
the Swift declarations are checked against (ClosedSetsTests)."""
import json
import os

from checkoutbus import kinds

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "Tests", "Golden", "closed-sets.json")


def test_kinds_topics_and_limits_are_the_golden_ones():
    with open(GOLDEN) as f:
        g = json.load(f)
    assert [list(k) for k in kinds.KINDS] == g["kinds"]
    assert kinds.MAX_PREFIX_BYTES == g["max_prefix_bytes"]
    assert kinds.MAX_REPLAY_PREFIXES == g["max_replay_prefixes"]
