import os
import subprocess
import sys

import pytest

from checkoutbus import cursor as c
from checkoutbus.errors import SubscriberError


def test_a_commit_is_read_back(tmp_path):
    path = str(tmp_path / "cursor")
    cur = c.FileCursor(path)
    assert cur.load() == 0
    for seq in (1, 2, 3, 1000, 2**62):
        cur.commit(seq)
    cur.close()
    assert c.FileCursor.committed(path) == 2**62
    assert c.FileCursor(path).load() == 2**62


def test_two_slots_written_alternately_and_a_torn_slot_leaves_the_previous_commit(tmp_path):
    path = str(tmp_path / "cursor")
    cur = c.FileCursor(path)
    cur.commit(41)
    cur.commit(42)
    cur.close()
    data = open(path, "rb").read()
    assert len(data) == 2 * c.SLOT_SIZE
    assert c.decode(data[:c.SLOT_SIZE]) == 41 and c.decode(data[c.SLOT_SIZE:]) == 42
    # tear the newer slot
    with open(path, "r+b") as f:
        f.seek(c.SLOT_SIZE + 20)
        f.write(b"9")
    assert c.FileCursor.committed(path) == 41
    cur = c.FileCursor(path)
    assert cur.load() == 41
    cur.commit(43)  # overwrites the torn slot (the next generation)
    cur.close()
    assert c.FileCursor.committed(path) == 43


def test_both_slots_damaged_is_refused_a_first_commit_cut_short_is_nothing_committed(tmp_path):
    # Both slots unreadable was read as 0: the subscriber started over without a word.
    path = str(tmp_path / "cursor")
    with open(path, "wb") as f:
        f.write(b"x" * (2 * c.SLOT_SIZE))
    with pytest.raises(c.SubscriberError) as e:
        c.FileCursor(path)
    assert e.value.kind == "cursor_unusable"
    with pytest.raises(c.SubscriberError):
        c.FileCursor.committed(path)
    # The first commit writes slot 0 alone: cut short, nothing was committed.
    with open(path, "wb") as f:
        f.write(c.encode(7)[:30])
    assert c.FileCursor.committed(path) == 0
    cur = c.FileCursor(path)
    assert cur.load() == 0
    cur.close()


def test_the_slot_format_matches_the_swift_file_cursor():
    slot = c.encode(5)
    assert slot.startswith(b"cursor v1 seq=00000000000000000005 check=") and slot.endswith(b"\n")
    assert len(slot) == c.SLOT_SIZE == 14 + 20 + 7 + 16 + 1
    # splitmix64(5): independent computation
    z = (5 + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    assert slot[41:57] == b"%016x" % (z ^ (z >> 31))
    assert c.decode(slot.replace(b"5 check", b"6 check")) is None


def test_one_subscriber_per_cursor(tmp_path):
    path = str(tmp_path / "cursor")
    first = c.FileCursor(path)
    with pytest.raises(SubscriberError) as e:
        c.FileCursor(path)
    assert e.value.kind == "cursor_in_use"
    first.close()
    c.FileCursor(path).close()


def test_a_commit_survives_kill_9(tmp_path):
    path = str(tmp_path / "cursor")
    here = os.path.join(os.path.dirname(__file__), "..")
    code = ("import sys, os, signal; sys.path.insert(0, %r); from checkoutbus.cursor import FileCursor\n"
            "cur = FileCursor(%r)\n"
            "for seq in range(1, 5001): cur.commit(seq)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n") % (here, path)
    proc = subprocess.run([sys.executable, "-c", code])
    assert proc.returncode == -9
    assert c.FileCursor.committed(path) == 5000


def test_shard_paths():
    assert c.FileCursor.paths("/x/cur", 1) == ["/x/cur"]
    assert c.FileCursor.paths("/x/cur", 3) == ["/x/cur.0-of-3", "/x/cur.1-of-3", "/x/cur.2-of-3"]
