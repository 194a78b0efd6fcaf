"""A subscriber that sees every envelope once, in seq order, across drops, restarts and shards: the
Clone pattern of docs/durability.md ("Subscribers that recover every gap"), as the Swift
BusSubscriber and ShardedSubscriber speak it.

Per shard, a SUB socket subscribes to the prefixes and then to `bus.heartbeat` (the heartbeat that
answers the last subscription proves the others live), and a DEALER on the control socket replays
from the cursor + 1, a page at a time, until it meets what arrives live. The gap rules live in
SubscriptionSequencer (sequencer.py); this module owns the sockets.

Threads: a Subscriber and its sockets belong to the thread that iterates it. AsyncSubscriber runs
one on a thread of its own and hands envelopes to the event loop through a bounded queue.
"""
import asyncio
import collections
import logging
import os
import threading
import time
from typing import Deque, Iterator, List, Optional, Sequence, Tuple, Union

import zmq

from . import wire
from .cursor import FileCursor, MemoryCursor
from .curve import curve_keys
from .envelope import Envelope
from .errors import ShardIdentity, SubscriberError
from .kinds import DEFAULT_PREFIXES, HEARTBEAT_TOPIC, check_prefixes
from .sequencer import LIVE_PREFIXES, Options, Statistics, SubscriptionSequencer

_HEARTBEAT = HEARTBEAT_TOPIC.encode()


_LOGGER = logging.getLogger("checkoutbus")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


def _default_log(level: str, message: str) -> None:
    """The `checkoutbus` logger: with logging unconfigured, Python's last-resort handler prints
    warnings and errors to stderr."""
    _LOGGER.log(_LEVELS.get(level, logging.WARNING), message)


def _now() -> int:
    return time.monotonic_ns()


def _keeps_position(cursor) -> bool:
    """Whether `cursor` outlives the process (a file, a database: `keeps_position`, true unless it
    says not): reported `durable`, and refused rather than warned when ahead of the journal."""
    return cursor is not None and getattr(cursor, "keeps_position", True)


def _endpoints(value: Union[str, Sequence[str]]) -> List[str]:
    if isinstance(value, str):
        return [e for e in value.split(",") if e]
    return list(value)


class _Shard:
    """One shard's sockets, sequencer and cursor."""

    def __init__(self, position: int, options: Options, cursor, expected: Optional[ShardIdentity], log):
        self.position = position
        self.options = options
        self.cursor = cursor
        self.sequencer = SubscriptionSequencer(options, expected, log)
        self.sub = None
        self.control = None
        self.subscribed = False
        # Envelopes the application holds parked (Subscriber.report_rejected); None: not reported.
        self.rejected = None
        # When the last heartbeat arrived (or the shard was opened), time.monotonic(); silent: none
        # for silence_ms, said once until one arrives.
        self.heard_at = 0.0
        self.silent = False
        # A reply's page was queued for the application: once it has taken all of it, a request
        # prefetched behind the page is timed from then (SubscriptionSequencer.page_delivered).
        self.page_queued = False
        # The seq of the last envelope the application took from this shard (its cursor's at first).
        self.taken_seq = 0


class Subscriber:
    """Iterate it (`for envelope in sub:`) and `sub.commit(envelope)` once an envelope is handled.

    Every matching envelope after the cursor is yielded once per run, in `seq` order per shard; a
    gap (a drop at a high-water mark, a restart) is filled from the daemon's journal before
    anything after it. Nothing but `commit` moves a cursor, so what was yielded and not committed
    when the process dies comes again from the next run: a handler keyed by `seq` or
    `idempotency_key` makes that exactly once.

    Parameters:
      publish, control: the daemon's --publish and --control endpoints; for several shards, lists
        (or comma-separated strings) in shard order: endpoint i must be shard i of N, which each
        shard's first heartbeat and its answer to `stats` must confirm before anything is yielded
        (a SubscriberError `wrong_shard` otherwise).
      prefixes: topic prefixes (default "checkout." and "bus.deadletter").
      cursor: a path (a FileCursor, one file per shard: PATH.I-of-N), a cursor object with
        load()/commit(seq)/close() (a list of them for shards), or None: begin with what is
        published from now on, and commit nowhere.
      name: the name the subscriber reports its drops under (`checkoutbus stats`).
      curve: (client secret key file, daemon public key file) as `checkoutbus keygen` writes them,
        or a CurveKeys.
      receive_hwm, receive_buffer: the SUB's ZMQ_RCVHWM (messages) and SO_RCVBUF (bytes, None: OS
        default). Small ones drop sooner; the journal fills what is dropped.
      live_subscription: "prefixes" (the daemon filters) or "everything" (seq is contiguous on the
        wire, so the journal is read only for real gaps).
      shard_ids, shard_count: some of a bus's shards: endpoint p must be shard shard_ids[p] of
        shard_count (checked as for the whole bus, even with one endpoint); cursor files are then
        named by the real shard id (PATH.I-of-N), so subscribers of disjoint subsets share the work.
      durable: FileCursor commits are fdatasync'ed too (survive power loss, not only kill -9).
      log: log(level, message), for what the subscriber has to say (a silence, a cursor ahead of the
        journal, …); default: the `checkoutbus` logger of Python's logging (warnings reach stderr
        even when logging is not configured).
      silence_ms, on_silence: when no heartbeat arrives from a shard for silence_ms (5 s; the daemon
        sends one a second), the subscriber logs a warning naming the endpoint, calls
        on_silence(position, True) and lists the shard in `silent_shards`; it keeps waiting, and
        when heartbeats are back it says so and calls on_silence(position, False).

    Not thread-safe: use it from one thread (AsyncSubscriber for asyncio).
    """

    def __init__(self, publish: Union[str, Sequence[str]], control: Union[str, Sequence[str]],
                 prefixes: Optional[Sequence[str]] = None, cursor=None, name: Optional[str] = None,
                 curve=None, receive_hwm: int = 100_000, receive_buffer: Optional[int] = None,
                 page_size: int = 1000, request_timeout_ms: int = 15_000,
                 live_subscription: str = LIVE_PREFIXES, durable: bool = False, log=None,
                 shard_ids: Optional[Sequence[int]] = None, shard_count: Optional[int] = None,
                 silence_ms: int = 5000, on_silence=None, max_pending_bytes: int = 64 << 20):
        publishes, controls = _endpoints(publish), _endpoints(control)
        if isinstance(prefixes, (str, bytes)):
            # A single prefix given bare: one prefix, not one per character.
            prefixes = [prefixes.decode() if isinstance(prefixes, bytes) else prefixes]
        elif prefixes is not None:
            prefixes = list(prefixes)  # once: a generator read twice is empty the second time
        if prefixes is not None:
            if not prefixes:
                raise ValueError("no topic prefixes: give at least one (\"checkout.\" follows every lifecycle topic)")
            check_prefixes(list(prefixes))
        if not isinstance(max_pending_bytes, int) or max_pending_bytes < 0:
            raise ValueError("max_pending_bytes must be an integer, 0 or more")
        if not publishes or len(publishes) != len(controls):
            raise ValueError("one control endpoint per publish endpoint, and at least one")
        if (shard_ids is None) != (shard_count is None):
            raise ValueError("shard_ids and shard_count go together")
        if shard_ids is not None:
            shard_ids = list(shard_ids)
            if not 1 <= shard_count <= 1024:
                raise ValueError("the shard count must be 1 to 1024, not %d" % shard_count)
            if len(shard_ids) != len(publishes) or len(set(shard_ids)) != len(shard_ids) \
                    or any(not 0 <= i < shard_count for i in shard_ids):
                raise ValueError("shard ids %r: one per endpoint, distinct, each in 0..%d"
                                 % (shard_ids, shard_count - 1))
        self.name = name or "subscriber-%d" % os.getpid()
        self._curve = curve_keys(curve)
        self._receive_hwm = receive_hwm
        self._receive_buffer = receive_buffer
        self._log = log or _default_log
        self._silence = max(1, silence_ms) / 1000.0
        self._on_silence = on_silence
        count = len(publishes)
        self._owns_cursors = isinstance(cursor, str)
        if cursor is None:
            cursors = [None] * count
        elif isinstance(cursor, str):
            cursors = FileCursor.paths(cursor, count, shard_ids, shard_count)
        elif isinstance(cursor, (list, tuple)):
            cursors = list(cursor)
        else:
            cursors = [cursor]
        if len(cursors) != count:
            raise ValueError("one cursor per shard")
        self._cursor_paths = cursors if self._owns_cursors else None
        if self._owns_cursors:
            cursors = [None] * count  # opened (and locked) by open()
        self._durable = durable
        self._shards: List[_Shard] = []
        for i in range(count):
            options = Options(publish=publishes[i], control=controls[i],
                              prefixes=list(prefixes) if prefixes is not None else list(DEFAULT_PREFIXES),
                              name=self.name, page_size=page_size, request_timeout_ms=request_timeout_ms,
                              live_subscription=live_subscription, max_pending_bytes=max_pending_bytes,
                              silence_ms=silence_ms)
            if shard_ids is not None:  # chosen shards: every endpoint is checked, even a single one
                expected = ShardIdentity(shard_ids[i], shard_count)
            else:
                expected = ShardIdentity(i, count) if count > 1 else None
            label = (lambda e: lambda level, message: self._log(level, "shard %d/%d: %s" % (e.shard, e.shards, message)))(
                expected) if expected is not None else self._log
            self._shards.append(_Shard(i, options, cursors[i], expected, label))
        self._by_shard_id = {i: i for i in range(count)}
        self._context = None
        self._poller = None
        self._ready: Deque[Envelope] = collections.deque()
        self._released = all(shard.sequencer.released for shard in self._shards)
        self._closed = False

    # Life cycle

    def open(self) -> "Subscriber":
        """Connects every shard and loads the cursors (the first iteration does it too)."""
        if self._context is not None:
            return self
        if self._closed:
            raise SubscriberError("closed", "the subscriber is closed")
        self._context = zmq.Context()
        self._poller = zmq.Poller()
        try:
            for shard in self._shards:
                if self._owns_cursors:
                    shard.cursor = FileCursor(self._cursor_paths[shard.position], durable=self._durable)
                self._open_shard(shard)
        except BaseException:
            self.close()
            raise
        return self

    def _open_shard(self, shard: _Shard) -> None:
        sub = self._context.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, self._receive_hwm)
        if self._receive_buffer is not None:
            sub.setsockopt(zmq.RCVBUF, self._receive_buffer)
        sub.setsockopt(zmq.LINGER, 0)
        if self._curve is not None:
            self._curve.apply(sub)
        sub.connect(shard.options.publish)
        for prefix in shard.sequencer.wire_prefixes:
            sub.setsockopt(zmq.SUBSCRIBE, prefix.encode())
        sub.setsockopt(zmq.SUBSCRIBE, _HEARTBEAT)  # last: the heartbeat answering it proves the others live
        control = self._context.socket(zmq.DEALER)
        control.setsockopt(zmq.LINGER, 200)  # long enough for the last report to leave
        if self._curve is not None:
            self._curve.apply(control)
        control.connect(shard.options.control)
        shard.sub, shard.control = sub, control
        self._poller.register(sub, zmq.POLLIN)
        self._poller.register(control, zmq.POLLIN)
        shard.heard_at, shard.silent = time.monotonic(), False
        start = shard.cursor.load() if shard.cursor is not None else None
        shard.taken_seq = start or 0
        self._perform(shard, shard.sequencer.start(start, _now(), _keeps_position(shard.cursor)))

    def close(self) -> None:
        """Sends each shard's last report, closes the sockets and the cursor files it opened."""
        if self._closed:
            return
        self._closed = True
        # What was queued and never taken was not handled: the statistics and the final reports
        # count what the application took.
        for shard in self._shards:
            untaken = [e for e in self._ready if e.position == shard.position]
            if untaken:
                shard.sequencer.not_delivered(untaken, shard.taken_seq)
        self._ready.clear()
        for shard in self._shards:
            if shard.control is not None:
                try:
                    if not shard.sequencer.control_is_ingest:
                        self._perform(shard, [shard.sequencer.final_report()])
                except Exception:
                    pass
                shard.control.close()
                shard.sub.close()
                shard.control = shard.sub = None
            if self._owns_cursors and shard.cursor is not None:
                shard.cursor.close()
                shard.cursor = None
        if self._context is not None:
            self._context.term()
            self._context = None

    def __enter__(self) -> "Subscriber":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # Consuming

    def __iter__(self) -> Iterator[Envelope]:
        while True:
            envelope = self.receive()
            if envelope is not None:
                yield envelope

    def receive(self, timeout: Optional[float] = None) -> Optional[Envelope]:
        """The next envelope, or None when `timeout` seconds (None: no limit) pass first.
        Raises SubscriberError when the daemon refuses a request or an endpoint is not its shard."""
        self.open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._ready:
            wait = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            self._round(wait)
            if not self._ready and deadline is not None and time.monotonic() >= deadline:
                return None
        envelope = self._ready.popleft()
        self._shards[envelope.position].taken_seq = envelope.seq
        return envelope

    def report_rejected(self, count: int, position: int = 0) -> None:
        """Says how many envelopes of the shard at `position` the application holds parked because
        it could not apply them: sent with every report from now on (`rejected`), shown by the
        daemon's stats and `checkoutbus_subscriber_rejected`. Raises ValueError for a count that is
        not an integer 0 or more (the daemon would refuse every report that carried it)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError("the rejected count must be an integer, 0 or more, not %r" % (count,))
        self._shards[position].rejected = count

    def commit(self, envelope: Envelope) -> None:
        """Moves the cursor of the envelope's shard to its seq (a FileCursor write is in the kernel
        when this returns, so it survives kill -9). Raises SubscriberError once the subscriber is
        closed when it opened the cursor files itself (cursor=PATH): they are closed with it, and a
        commit that moved nothing must not look done."""
        if self._closed and self._owns_cursors:
            raise SubscriberError("closed", "the subscriber is closed, and its cursor files with it: the commit of "
                                  "seq %d moved nothing" % envelope.seq)
        cursor = self._shards[envelope.position].cursor
        if cursor is not None:  # None: no cursor was given (start from now, commit nowhere)
            cursor.commit(envelope.seq)

    def wait_subscribed(self, timeout: Optional[float] = None) -> bool:
        """Reads the sockets until every shard's subscriptions are live (its first heartbeat arrived),
        keeping what arrives for iteration. False when `timeout` seconds pass first."""
        self.open()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.subscribed:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            wait = 200 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            self._round(min(wait, 200))
        return True

    @property
    def subscribed(self) -> bool:
        return all(shard.subscribed for shard in self._shards)

    @property
    def silent_shards(self) -> List[int]:
        """The positions of the shards from which no heartbeat arrived for silence_ms (the daemon is
        stopped, unreachable, or not at that endpoint); empty while every shard is heard."""
        return [shard.position for shard in self._shards if shard.silent]

    @property
    def statistics(self) -> Statistics:
        """Every shard's counts added up (last_seq: shard 0's; see shard_statistics)."""
        if len(self._shards) == 1:
            return self._shards[0].sequencer.statistics
        total = Statistics()
        for s in self.shard_statistics:
            for field in ("handled", "from_journal", "missed", "recovered", "gaps", "not_retained",
                          "duplicates", "replay_requests", "replay_busy", "heartbeats"):
                setattr(total, field, getattr(total, field) + getattr(s, field))
        return total

    @property
    def shard_statistics(self) -> List[Statistics]:
        return [shard.sequencer.statistics for shard in self._shards]

    # The loop

    def _round(self, wait_ms: Optional[int]) -> None:
        """One poll of every socket; queues what the sequencers deliver."""
        now = _now()
        wait = 200
        for shard in self._shards:
            if shard.page_queued and not self._ready:
                # The application asked for more with every queued envelope taken: handled.
                shard.page_queued = False
                shard.sequencer.page_delivered(now)
            self._perform(shard, shard.sequencer.tick(now))
            wait = min(wait, shard.sequencer.poll_timeout_ms)
        if wait_ms is not None:
            wait = min(wait, wait_ms)
        self._poller.poll(wait)
        for shard in self._shards:
            self._service(shard)
        if not self._released and all(shard.sequencer.is_identified for shard in self._shards):
            self._released = True
            for shard in self._shards:
                shard.sequencer.release()

    def _check_silence(self, shard: _Shard) -> None:
        quiet = time.monotonic() - shard.heard_at
        if shard.silent or quiet < self._silence:
            return
        shard.silent = True
        if shard.sequencer.statistics.heartbeats == 0:
            why = "in %.1f s since connecting: is it running, at this endpoint, with these keys?" % quiet
        else:
            why = "for %.1f s: it is stopped or unreachable" % quiet
        self._log("warning", "no heartbeat from the daemon at %s %s; still waiting" % (shard.options.publish, why))
        if self._on_silence is not None:
            self._on_silence(shard.position, True)

    def _heard(self, shard: _Shard) -> None:
        """A message arrived from the daemon (a heartbeat or an envelope): ends a silence, saying so."""
        now = time.monotonic()
        if shard.silent:
            shard.silent = False
            self._log("warning", "heartbeats from the daemon at %s again after %.1f s of silence"
                      % (shard.options.publish, now - shard.heard_at))
            if self._on_silence is not None:
                self._on_silence(shard.position, False)
        shard.heard_at = now

    def _service(self, shard: _Shard) -> None:
        sequencer = shard.sequencer
        while True:
            try:
                frames = shard.control.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if frames and not frames[0]:
                frames = frames[1:]  # tolerate a REQ-style empty delimiter
            if not frames:
                continue
            reply = wire.reply(frames[0])
            if reply is None:
                continue
            page = wire.page(frames[1:]) if reply.op == "replay" and reply.ok else []
            self._perform(shard, sequencer.receive_reply(reply, page, _now()))
            # Timed from when the application has taken the page, not from when it was queued: a
            # slow handler had every prefetched request time out and asked for each page again.
            if self._ready:
                shard.page_queued = True
            else:
                sequencer.page_delivered(_now())
        received, drained = 0, False
        for _ in range(1024):
            try:
                frames = shard.sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                drained = True
                break
            received += 1
            if len(frames) < 2:
                continue
            if frames[0] == _HEARTBEAT:
                heartbeat = wire.heartbeat(frames[1])
                if heartbeat is None:
                    self._log("warning", "heartbeat without seq or kind_seqs; ignored")
                    continue
                self._perform(shard, sequencer.receive_heartbeat(heartbeat))
            elif sequencer.released:
                envelope = wire.envelope(frames[0], frames[1], Envelope.LIVE)
                if envelope is not None:
                    self._perform(shard, sequencer.receive_live(envelope))
        # Anything from the daemon ends a silence; silence is judged only once the socket is empty
        # (messages still queued behind a slow consumer are the daemon's, not its silence).
        if received:
            self._heard(shard)
        if drained:
            self._check_silence(shard)

    def _perform(self, shard: _Shard, actions: list) -> None:
        for action in actions:
            what = action[0]
            if what == "deliver":
                envelope = action[1]
                envelope.position = shard.position
                self._ready.append(envelope)
            elif what == "replay":
                request = wire.replay_request(action[1], action[2], shard.options.prefixes, shard.options.page_size)
                try:
                    shard.control.send(request, zmq.NOBLOCK)
                except zmq.Again:
                    shard.sequencer.replay_not_sent()
            elif what == "identity":
                try:
                    shard.control.send(wire.identity_request(action[1]), zmq.NOBLOCK)
                except zmq.Again:
                    pass  # asked again after the request timeout
            elif what == "report":
                try:
                    durable = _keeps_position(shard.cursor)
                    shard.control.send(wire.report(action[1], self.name, shard.rejected, durable), zmq.NOBLOCK)
                except zmq.Again:
                    pass  # the next heartbeat reports again
            elif what == "subscribed":
                shard.subscribed = True


_END = object()


class AsyncSubscriber:
    """The asyncio form: `async for envelope in sub:` and `sub.commit(envelope)`.

    A Subscriber runs on a thread of its own (started at the first iteration; never the event
    loop's). Envelopes cross to the loop through a queue of at most `buffer` envelopes: when it is
    full the thread stops reading, ZeroMQ drops at the high-water mark, and the journal fills the
    gap once the consumer catches up, so memory stays bounded however slow the consumer is.
    Leaving `async with` (also when the task iterating inside it is cancelled) or `await sub.aclose()`
    stops the thread within a poll round (200 ms); it sends its last report and closes the sockets.
    An error on the thread is raised by the iteration. Takes the same arguments as Subscriber, plus
    `buffer`.
    """

    def __init__(self, *args, buffer: int = 1024, **kwargs):
        self._subscriber = Subscriber(*args, **kwargs)
        self._buffer = buffer
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._slots = threading.Semaphore(buffer)
        self._queue: Optional[asyncio.Queue] = None
        self._loop = None
        self._subscribed: Optional[asyncio.Event] = None
        self._error: Optional[BaseException] = None
        self._finished = False

    @property
    def silent_shards(self) -> List[int]:
        """The shards from which nothing has arrived for silence_ms (see Subscriber); on_silence,
        if given, is called on the subscriber's background thread, not the event loop."""
        return self._subscriber.silent_shards

    @property
    def statistics(self) -> Statistics:
        return self._subscriber.statistics

    @property
    def name(self) -> str:
        return self._subscriber.name

    def _start(self) -> None:
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._subscribed = asyncio.Event()
        self._thread = threading.Thread(target=self._run, name="checkoutbus-subscriber", daemon=True)
        self._thread.start()

    def _hand(self, item) -> None:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the loop is closed
            self._stop.set()

    def _run(self) -> None:
        sub = self._subscriber
        told = False
        try:
            sub.open()
            while not self._stop.is_set():
                if not told and sub.subscribed:
                    told = True
                    self._loop.call_soon_threadsafe(self._subscribed.set)
                envelope = sub.receive(0.2)
                if envelope is None:
                    continue
                while not self._slots.acquire(timeout=0.2):
                    if self._stop.is_set():
                        return
                self._hand(envelope)
        except BaseException as e:  # handed to the iterating task (and to wait_subscribed)
            self._error = e
            self._hand(e)
        finally:
            sub.close()
            self._hand(_END)
            try:
                self._loop.call_soon_threadsafe(self._subscribed.set)  # wait_subscribed returns (or raises)
            except RuntimeError:
                pass

    def __aiter__(self) -> "AsyncSubscriber":
        return self

    async def __anext__(self) -> Envelope:
        if self._finished:
            raise StopAsyncIteration
        self._start()
        item = await self._queue.get()
        if item is _END:
            self._finished = True
            raise StopAsyncIteration
        if isinstance(item, BaseException):
            self._finished = True
            raise item
        self._slots.release()
        return item

    async def wait_subscribed(self) -> None:
        """Returns once every shard's subscriptions are live (starts the thread if need be); raises
        what stopped the thread first, if anything did (a wrong shard, an unusable cursor)."""
        self._start()
        await self._subscribed.wait()
        if self._error is not None:
            raise self._error

    def commit(self, envelope: Envelope) -> None:
        """Moves the envelope's shard cursor to its seq (a write in the kernel: survives kill -9)."""
        self._subscriber.commit(envelope)

    def report_rejected(self, count: int, position: int = 0) -> None:
        """See Subscriber.report_rejected."""
        self._subscriber.report_rejected(count, position)

    async def aclose(self) -> None:
        """Stops the thread; returns once it sent its last report and closed the sockets."""
        self._stop.set()
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)
        else:
            self._subscriber.close()
        self._finished = True

    async def __aenter__(self) -> "AsyncSubscriber":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
