"""Cursors: where a subscriber is (the last committed seq).

`FileCursor` writes the same file as the Swift client's FileCursor (byte for byte): two checksummed
slots of `cursor v1 seq=<20 digits> check=<16 hex>\n`, written alternately with one pwrite, so a torn
write leaves the previous commit and a commit is in the kernel (survives kill -9) when commit returns;
`durable=True` adds an fdatasync (survives power loss). The file is locked (flock) while open: one
subscriber per cursor. A Swift subscriber and a Python one can take over each other's cursor file.
"""
import fcntl
import os
from typing import List, Optional

from .errors import SubscriberError

PREFIX = b"cursor v1 seq="
CHECK_LABEL = b" check="
SLOT_SIZE = len(PREFIX) + 20 + len(CHECK_LABEL) + 16 + 1
_MASK = (1 << 64) - 1


def check(seq: int) -> int:
    """splitmix64 of the seq (as the Swift FileCursor.check)."""
    z = (seq & _MASK) + 0x9E3779B97F4A7C15 & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def encode(seq: int) -> bytes:
    return PREFIX + b"%020d" % seq + CHECK_LABEL + b"%016x" % check(seq) + b"\n"


def decode(slot: bytes) -> Optional[int]:
    if len(slot) != SLOT_SIZE or not slot.startswith(PREFIX) or not slot.endswith(b"\n"):
        return None
    end = len(PREFIX) + 20
    digits = slot[len(PREFIX):end]
    if not digits.isdigit() or slot[end:end + len(CHECK_LABEL)] != CHECK_LABEL:
        return None
    try:
        seq = int(digits)
        value = int(slot[end + len(CHECK_LABEL):SLOT_SIZE - 1], 16)
    except ValueError:
        return None
    return seq if value == check(seq) else None


def _read(fd: int):
    data = os.pread(fd, 2 * SLOT_SIZE, 0)
    seq, generation = 0, 0
    for slot in range(2):
        start = slot * SLOT_SIZE
        if start + SLOT_SIZE > len(data):
            continue
        value = decode(data[start:start + SLOT_SIZE])
        if value is not None and value >= seq:
            seq, generation = value, slot + 1
    # A commit cut short spoils one slot; the first commit writes slot 0 only. Bytes in both slots and
    # neither readable is damage: reading it as 0 would start over from the oldest retained envelope.
    if generation == 0 and len(data) > SLOT_SIZE:
        raise SubscriberError("cursor_unusable", "cursor file holds %d bytes and no readable position (both slots "
                              "damaged, which a commit cut short never does): move it aside and set the position "
                              "with `checkoutbus cursor set PATH --to-seq SEQ`" % len(data))
    return seq, generation


class MemoryCursor:
    # The position ends with the process: reported as not durable.
    keeps_position = False

    def __init__(self, seq: int = 0):
        self.seq = seq

    def load(self) -> int:
        return self.seq

    def commit(self, seq: int) -> None:
        self.seq = seq

    def close(self) -> None:
        pass


class FileCursor:
    def __init__(self, path: str, durable: bool = False):
        self.path = path
        self.durable = durable
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise SubscriberError("cursor_unusable", "cannot open cursor file %s: %s" % (path, e.strerror))
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            self._fd = -1
            raise SubscriberError("cursor_in_use", "cursor file %s is in use by another subscriber" % path)
        try:
            self._seq, self._generation = _read(self._fd)
        except OSError as e:
            self.close()
            raise SubscriberError("cursor_unusable", "cannot read cursor file %s: %s" % (path, e.strerror))
        except SubscriberError as e:
            self.close()
            raise SubscriberError("cursor_unusable", "%s: %s" % (path, e))

    @staticmethod
    def committed(path: str) -> int:
        """The seq committed in a cursor file, without taking it (0 when there is no file)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return 0
        try:
            return _read(fd)[0]
        finally:
            os.close(fd)

    @staticmethod
    def paths(path: str, shards: int, shard_ids: Optional[List[int]] = None,
              shard_count: Optional[int] = None) -> List[str]:
        """PATH for one daemon, PATH.I-of-N for shard I of N (the Swift shardCursors layout); with
        `shard_ids` of `shard_count`, one per chosen shard, named by its real id (Swift's
        FileCursor.paths(_:shardIDs:of:))."""
        if shard_ids is not None:
            return [path] if shard_count <= 1 else ["%s.%d-of-%d" % (path, i, shard_count) for i in shard_ids]
        if shards <= 1:
            return [path]
        return ["%s.%d-of-%d" % (path, i, shards) for i in range(shards)]

    def load(self) -> int:
        return self._seq

    def commit(self, seq: int) -> None:
        slot = encode(seq)
        offset = (self._generation % 2) * SLOT_SIZE
        try:
            n = os.pwrite(self._fd, slot, offset)
        except OSError as e:
            raise SubscriberError("cursor_unusable", "cannot write cursor file %s: %s" % (self.path, e.strerror))
        if n != len(slot):
            raise SubscriberError("cursor_unusable", "cannot write cursor file %s: short write" % self.path)
        self._seq = seq
        self._generation += 1
        if self.durable:
            os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
