"""The gap logic of one shard's subscription, without sockets and without a clock: a port of
Sources/CheckoutBusClient/Subscriber/SubscriptionSequencer.swift (read it for the reasoning; the
rules, names and order of actions are the same).

What arrives goes in (live envelopes, heartbeats, control replies with their page); what to do
comes out as actions, tuples:

    ("deliver", envelope)        hand it to the application (once per seq, in seq order)
    ("replay", req_id, from_seq) send {"op":"replay","from":…,"prefix":…,"limit":…,"req":…}
    ("identity", req_id)         send {"op":"stats","req":…}: which shard are you?
    ("report", Report)           send {"op":"report",…} under the subscriber's name
    ("subscribed",)              the first heartbeat: the subscriptions are live

`now` is monotonic nanoseconds, passed by the driver.
"""
from dataclasses import dataclass, field
from typing import List, Optional

from .envelope import Envelope
from .errors import ShardIdentity, SubscriberError
from .kinds import DEFAULT_PREFIXES, FULL, KINDS, NONE, PARTIAL, TopicCoverage, topic_root

LIVE_PREFIXES = "prefixes"
LIVE_EVERYTHING = "everything"


@dataclass
class Options:
    publish: str = ""
    control: str = ""
    prefixes: List[str] = field(default_factory=lambda: list(DEFAULT_PREFIXES))
    name: str = ""
    page_size: int = 1000
    request_timeout_ms: int = 15_000
    live_subscription: str = LIVE_PREFIXES
    max_pending_bytes: int = 64 << 20
    # Replays wait for the first heartbeat at most this long (a daemon that cannot write its journal sends none).
    silence_ms: int = 5000


@dataclass
class Statistics:
    handled: int = 0
    from_journal: int = 0
    missed: int = 0
    recovered: int = 0
    gaps: int = 0
    not_retained: int = 0
    duplicates: int = 0
    replay_requests: int = 0
    # Of those, answered busy by the daemon (its control replies at their memory bound): asked again after a pause.
    replay_busy: int = 0
    heartbeats: int = 0
    last_seq: int = 0


@dataclass
class Report:
    id: int
    last_seq: int
    missed: int
    recovered: int
    gaps: int
    # The seq through which every envelope this subscriber follows was delivered.
    through_seq: int = 0
    # The subscriber's last report: it is stopping.
    final: bool = False


@dataclass
class Heartbeat:
    seq: int
    kind_seqs: List[int]  # indexed like kinds.KINDS
    shard: int = 0
    shards: int = 1
    started_at: Optional[str] = None  # when the daemon's run started; None: it does not say
    journal: Optional[str] = None  # the daemon's journal identity; None: it does not say
    sent_at: Optional[str] = None  # when it was sent


@dataclass
class Reply:
    op: Optional[str] = None
    ok: bool = False
    req: Optional[int] = None
    next: Optional[int] = None
    last_seq: Optional[int] = None
    first_seq: Optional[int] = None
    error: Optional[str] = None
    detail: Optional[str] = None
    shard: Optional[int] = None
    shards: Optional[int] = None
    journal: Optional[str] = None  # the answering daemon's journal identity (replay replies)
    started_at: Optional[str] = None  # when the answering daemon's run started (replay replies)
    # An acknowledgement of an event: the endpoint is an acknowledged ingest socket, not --control.
    is_ingest_ack: bool = False


class SubscriptionSequencer:
    def __init__(self, options: Options, expected_shard: Optional[ShardIdentity] = None, log=None):
        self.options = options
        self.expected_shard = expected_shard
        self.log = log or (lambda level, message: None)
        self.statistics = Statistics()
        user = TopicCoverage(options.prefixes)
        if options.live_subscription == LIVE_EVERYTHING and not user.covers_everything:
            extra = []
            for i, (_, topic, exact) in enumerate(KINDS):
                if user.level(i) != FULL:
                    extra.append(topic_root(i) if exact else topic_root(i)[:-1])
            self.wire_prefixes = list(options.prefixes) + extra
            self._filters_locally = True
            self._coverage = TopicCoverage(self.wire_prefixes)
        else:
            self.wire_prefixes = list(options.prefixes)
            self._filters_locally = False
            self._coverage = user
        n = len(KINDS)
        # Invariant: every matching envelope with seq <= verified was delivered.
        self._verified: Optional[int] = None
        self._started_at: Optional[int] = None
        # Whether that position outlives the process: ahead of the journal it is refused, not warned.
        self._position_kept = False
        self._exact_kind_seq: List[Optional[int]] = [None] * n
        self._checked_kind_seq: List[int] = [-1] * n
        self._pending: List[Envelope] = []
        self._pending_head = 0
        self._pending_bytes = 0
        self._evicted_through = 0
        self._live_floor: Optional[int] = None
        self._live_high = 0
        self._last_heartbeat: Optional[Heartbeat] = None
        self._unconfirmed: List[int] = []
        self._unconfirmed_head = 0
        self._last_was_missed = False
        self._publish_identified = expected_shard is None
        self._control_identified = expected_shard is None
        self._identity_request = None  # (id, sent_at)
        self.released = expected_shard is None
        self._need_replay = False
        self._in_flight = None  # (id, from, sent_at)
        # The in-flight request was prefetched behind the page just received: page_delivered
        # restarts its clock, once. Other replies (a report's) leave it alone.
        self._prefetch_awaits_delivery = False
        self._daemon_run = None  # the started_at of the daemon's run: a new one is a restart
        # One journal behind both endpoints (docs/durability.md, step 9): replays wait for the first
        # heartbeat, at most options.silence_ms (a daemon that cannot write its journal sends none), and
        # a reply's journal is checked against the heartbeats' before its page counts.
        self._heartbeat_seen = False
        # Always, but in unit tests of the gap logic alone (which feed no heartbeat before their first page).
        self.replay_awaits_heartbeat = True
        self._connected_at = 0
        # Replays went out before any heartbeat (none came in time): [asked, the first reply's journal],
        # which the first heartbeat checks.
        self._unchecked = [False, None]
        self._publish_journal = None
        # A replay reply from another journal than the heartbeats': {journal, started_at, fresh, heartbeats}.
        # No replay is asked until a heartbeat explains it: one showing the reply's journal (the daemon
        # came back with another data directory) clears it; heartbeats still showing the publish endpoint's
        # journal are evidence of two daemons once sent after the reply's daemon started (earlier ones may
        # be an old run's, still queued on the live socket, however many): two such stop. A reply that does
        # not say when its run started (a daemon before journal ids) gives no such evidence: the subscriber
        # keeps waiting, and says so every ten heartbeats.
        self._foreign_reply = None
        self.control_is_ingest = False  # the control endpoint answered as an acknowledged ingest socket
        self._next_request_id = 1
        # Replays answered busy in a row, and when the next may be asked: 20 ms after the first, doubling to 1 s.
        self._busy_replays = 0
        self._replay_not_before = 0

    @property
    def is_identified(self) -> bool:
        return self._publish_identified and self._control_identified

    @property
    def verified(self) -> Optional[int]:
        return self._verified

    # Driving

    def start(self, cursor: Optional[int], now: int, kept: bool = False) -> list:
        """The sockets are connected: begin after `cursor` (None: with what is published from now on).

        `kept`: the cursor outlives the process (a file, a worker's database); when it is ahead of the
        daemon's journal the first heartbeat raises `cursor_mismatch` rather than warns."""
        actions = []
        if self.expected_shard is not None:
            actions.append(self._identity_request_action(now))
        self._connected_at = now
        self._position_kept = kept
        if cursor is not None:
            self._verified = cursor
            self._started_at = cursor
            self.statistics.last_seq = cursor
            self._need_replay = True
        return actions

    def release(self) -> None:
        self.released = True

    def tick(self, now: int) -> list:
        actions = []
        timeout = self.options.request_timeout_ms * 1_000_000
        if self._in_flight is not None and now - self._in_flight[2] > timeout:
            self.log("warning", "control request unanswered; sending it again (from %d)" % self._in_flight[1])
            self._in_flight = None
            self._need_replay = True
        if not self._control_identified and self._identity_request is not None \
                and now - self._identity_request[1] > timeout:
            self.log("warning", "control endpoint has not said which shard it is; asking again")
            actions.append(self._identity_request_action(now))
        if self.released and self._need_replay and self._in_flight is None and not self._heartbeat_seen \
                and not self._unchecked[0] \
                and self.replay_awaits_heartbeat and now - self._connected_at > self.options.silence_ms * 1_000_000:
            self.log("warning", "no heartbeat from the publish endpoint %s yet (a daemon that cannot write its journal "
                     "sends none): replaying without checking that the control endpoint %s is the same daemon; the "
                     "first heartbeat checks it" % (self.options.publish, self.options.control))
            self._unchecked[0] = True
        if self._may_ask_journal and self._need_replay and self._in_flight is None and now >= self._replay_not_before:
            actions.append(self._replay_action(None, now))
        return actions

    @property
    def _may_ask_journal(self) -> bool:
        return self.released and (self._heartbeat_seen or not self.replay_awaits_heartbeat or self._unchecked[0]) \
            and self._foreign_reply is None

    @property
    def poll_timeout_ms(self) -> int:
        # (20 ms while replays are answered busy, whose pauses are 20 ms and longer.)
        if self._may_ask_journal and self._need_replay and self._in_flight is None:
            return 20 if self._busy_replays > 0 else 10
        return 200

    def replay_not_sent(self) -> None:
        self._in_flight = None
        self._need_replay = True
        self.statistics.replay_requests -= 1

    def not_delivered(self, envelopes, last_seq: int) -> None:
        """Envelopes delivered to the driver that the application never took (it closed with them
        queued): uncounted, and the position (last_seq, the final report's through_seq) set back to
        last_seq, the last one it took (SubscriptionSequencer.notDelivered in the Swift client)."""
        for envelope in envelopes:
            self.statistics.handled -= 1
            if envelope.origin == Envelope.JOURNAL:
                self.statistics.from_journal -= 1
        self.statistics.last_seq = last_seq
        if self._verified is not None and self._verified > last_seq:
            self._verified = last_seq

    def final_report(self) -> tuple:
        what, report = self._report_action()
        report.final = True
        return (what, report)

    # Live stream

    def receive_live(self, envelope: Envelope) -> list:
        if not self.released:
            return []
        self._check_shard(envelope, self.options.publish)
        if self._filters_locally and not any(envelope.topic.startswith(p.encode()) for p in self.options.prefixes):
            envelope.position_only = True
        self._confirm(envelope.seq, envelope.seq)
        self._live_high = max(self._live_high, envelope.seq)
        if self._live_floor is None:
            self._live_floor = envelope.seq - 1
        if self._verified is None:
            self._verified = envelope.seq - 1
        if envelope.seq <= self._verified:
            if not envelope.position_only:
                self.statistics.duplicates += 1
            return []
        if self._in_flight is not None or self._need_replay or self._pending_head < len(self._pending):
            self._hold(envelope)
            return []
        if self._is_provably_next(envelope):
            actions = []
            self._deliver(envelope, True, actions)
            return actions
        self._hold(envelope)
        self._need_replay = True
        return []

    def receive_heartbeat(self, heartbeat: Heartbeat) -> list:
        self._check_identity(heartbeat)
        if self._note_run(heartbeat.started_at):
            self._check_restarted_journal(heartbeat)
        self._note_publish_journal(heartbeat)
        if not self.released:
            return []
        actions = []
        self.statistics.heartbeats += 1
        self._confirm(heartbeat.seq, None)
        self._live_high = max(self._live_high, heartbeat.seq)
        if self._live_floor is None:
            self._live_floor = heartbeat.seq
        if self.statistics.heartbeats == 1:
            actions.append(("subscribed",))
        if self._verified is None:
            self._verified = heartbeat.seq
            self.statistics.last_seq = heartbeat.seq
        # A journal never numbers below a seq it may have published: a cursor ahead of it belongs to
        # another journal, and following it would skip the new journal's envelopes up to the cursor.
        if self._started_at is not None and heartbeat.seq < self._started_at and self.statistics.heartbeats == 1:
            if self._position_kept:
                raise SubscriberError(
                    "cursor_mismatch",
                    "the cursor is at seq %d but the daemon's journal ends at seq %d (%s): the cursor belongs to "
                    "another journal (the daemon's data directory was reset or replaced); nothing was skipped. Move "
                    "it to the journal's start with `checkoutbus cursor set PATH --to-seq 1` (docs/runbook.md, \"A "
                    "daemon's journal was reset\")" % (self._started_at, heartbeat.seq, self.options.publish))
            self.log("warning", "the daemon's last seq %d is behind this subscriber's cursor %d (was its journal reset?)"
                     % (heartbeat.seq, self._started_at))
        self._last_heartbeat = heartbeat
        if self._in_flight is None and not self._need_replay and self._pending_head == len(self._pending):
            self._evaluate_heartbeat()
        actions.append(self._report_action())
        return actions

    def _hold(self, envelope: Envelope) -> None:
        if self._pending_head < len(self._pending) and self._pending[-1].seq >= envelope.seq:
            return
        # Held as its bytes: the parsed object (about ten times their size in Python objects) is
        # dropped and read again if it is handed over, so the bound counts what is kept.
        envelope._data = None
        self._pending.append(envelope)
        self._pending_bytes += len(envelope.raw) + len(envelope.topic)
        if self._pending_bytes > self.options.max_pending_bytes:
            # The journal has every one of them: let them go and read them from there.
            self._evicted_through = max(self._evicted_through, envelope.seq)
            self._pending = []
            self._pending_head = 0
            self._pending_bytes = 0
            self._need_replay = True

    def _is_provably_next(self, envelope: Envelope) -> bool:
        if self._verified is None:
            return False
        if self._coverage.covers_everything:
            return envelope.seq == self._verified + 1
        if self._coverage.single_full_kind == envelope.kind:
            known = self._exact_kind_seq[envelope.kind]
            if known is not None:
                return envelope.kind_seq == known + 1
        return False

    def _evaluate_heartbeat(self) -> None:
        heartbeat = self._last_heartbeat
        v = self._verified
        if heartbeat is None or v is None:
            return
        if v >= heartbeat.seq:
            for kind in range(len(KINDS)):
                level = self._coverage.level(kind)
                if level == FULL:
                    if self._exact_kind_seq[kind] is None:
                        self._exact_kind_seq[kind] = heartbeat.kind_seqs[kind]
                elif level == PARTIAL:
                    self._checked_kind_seq[kind] = max(self._checked_kind_seq[kind], heartbeat.kind_seqs[kind])
            self._last_heartbeat = None
            return
        behind = self._coverage.covers_everything
        for kind in self._coverage.subscribed_kinds:
            if behind:
                break
            published = heartbeat.kind_seqs[kind]
            level = self._coverage.level(kind)
            if level == FULL:
                known = self._exact_kind_seq[kind]
                if known is None:
                    known = 0 if published == 0 else -1
                behind = known < published
            elif level == PARTIAL:
                behind = self._checked_kind_seq[kind] < published
        if behind:
            self._need_replay = True
        else:
            self._verified = heartbeat.seq
            self._last_heartbeat = None

    # Identity

    def _check_identity(self, heartbeat: Heartbeat) -> None:
        expected = self.expected_shard
        if expected is None:
            if self.statistics.heartbeats == 0 and heartbeat.shards > 1:
                self.log("info", "this daemon is shard %d/%d: only its checkouts are seen"
                         % (heartbeat.shard, heartbeat.shards))
            return
        if heartbeat.shard != expected.shard or heartbeat.shards != expected.shards:
            raise expected.mismatch(self.options.publish, "shard %d/%d" % (heartbeat.shard, heartbeat.shards))
        if not self._publish_identified and self._verified is not None and heartbeat.seq < self._verified:
            raise SubscriberError(
                "cursor_mismatch",
                "the cursor of shard %d/%d is at seq %d but that shard's journal ends at seq %d (%s): the cursor "
                "belongs to another journal (one daemon's before sharding, or another shard count); start this "
                "shard's cursor over" % (expected.shard, expected.shards, self._verified, heartbeat.seq,
                                         self.options.publish))
        self._publish_identified = True

    def _identity_request_action(self, now: int) -> tuple:
        rid = self._next_request_id
        self._next_request_id += 1
        self._identity_request = (rid, now)
        return ("identity", rid)

    def _check_control_identity(self, reply: Reply, now: int) -> None:
        expected = self.expected_shard
        if expected is None:
            return
        if reply.error == "busy" and self._identity_request is not None:
            # A good request the daemon cannot answer now (its pipeline held up): asked again in a
            # second, not refused.
            timeout = self.options.request_timeout_ms * 1_000_000
            wait = min(timeout, 1_000_000_000)
            self._identity_request = (self._identity_request[0], now - min(now, timeout - wait))
            self.log("info", "the control endpoint %s is busy; asking which shard it is again" % self.options.control)
            return
        self._identity_request = None
        if not reply.ok:
            raise SubscriberError("refused", "the control endpoint %s refused stats: %s %s"
                                  % (self.options.control, reply.error or "?", reply.detail or ""))
        if reply.shard != expected.shard or reply.shards != expected.shards:
            raise expected.mismatch(self.options.control, self._describe_shard(reply))
        self._control_identified = True

    @staticmethod
    def _describe_shard(reply: Reply) -> str:
        if reply.shard is None:
            return "a daemon that does not say its shard"
        return "shard %d/%d" % (reply.shard, reply.shards if reply.shards is not None else 1)

    def _check_shard(self, envelope: Envelope, endpoint: str) -> None:
        expected = self.expected_shard
        if expected is None or envelope.shard == expected.shard:
            return
        raise expected.mismatch(endpoint, "an envelope of shard %d (seq %d)" % (envelope.shard, envelope.seq))

    # Journal

    def _replay_action(self, start: Optional[int], now: int) -> tuple:
        from_seq = start if start is not None else (self._verified or 0) + 1
        rid = self._next_request_id
        self._next_request_id += 1
        self._need_replay = False
        self._in_flight = (rid, from_seq, now)
        self._prefetch_awaits_delivery = False
        self.statistics.replay_requests += 1
        return ("replay", rid, from_seq)

    def _note_publish_journal(self, heartbeat: Heartbeat) -> None:
        """Notes the publish endpoint's journal, and settles a reply from another journal (see
        _foreign_reply)."""
        first = not self._heartbeat_seen
        self._heartbeat_seen = True
        self._publish_journal = heartbeat.journal
        asked, theirs = self._unchecked
        if first and asked and theirs is not None and heartbeat.journal is not None and theirs != heartbeat.journal:
            raise self._two_daemons(theirs, heartbeat.journal,
                                    "Pages from the control endpoint were handed over before this first heartbeat")
        foreign = self._foreign_reply
        if foreign is None:
            return
        if heartbeat.journal is None or heartbeat.journal == foreign["journal"]:
            self._foreign_reply = None
            return
        foreign["heartbeats"] += 1
        if foreign["started_at"] is not None and heartbeat.sent_at is not None \
                and heartbeat.sent_at >= foreign["started_at"]:
            foreign["fresh"] += 1
        if foreign["started_at"] is None and foreign["heartbeats"] % 10 == 1:
            self.log("warning", "the control endpoint %s answered from a daemon without a journal id, the publish "
                     "endpoint %s's heartbeats have one: nothing is replayed until they agree (two daemons, or one "
                     "that was replaced by an older build)" % (self.options.control, self.options.publish))
        if foreign["fresh"] >= 2:
            raise self._two_daemons(foreign["journal"] or "(none: a daemon without journal ids)", heartbeat.journal,
                                    "Nothing from the control endpoint was handed over")

    def _two_daemons(self, control: str, publish: str, handed_over: str) -> SubscriberError:
        return SubscriberError(
            "endpoint_mismatch",
            "the control endpoint %s answers from journal %s, the publish endpoint %s from journal %s: they are two "
            "daemons, and one's journal would be delivered as the other's. %s. Give one daemon's publish and control "
            "endpoints (docs/durability.md, \"One journal behind both endpoints\")"
            % (self.options.control, control, self.options.publish, publish, handed_over))

    def receive_reply(self, reply: Reply, page: List[Envelope], now: int) -> list:
        if reply.is_ingest_ack:
            # Asking again would only journal another dead letter each time: nothing more is sent to it,
            # the final report included.
            self.control_is_ingest = True
            raise SubscriberError(
                "endpoint_mismatch", "the control endpoint %s answered as an acknowledged ingest socket "
                "(--ingest-acked): it took the request for an event and dead-lettered it. Give the daemon's "
                "--control endpoint" % self.options.control)
        if self._identity_request is not None and reply.req == self._identity_request[0]:
            self._check_control_identity(reply, now)
            return []
        request = self._in_flight
        if request is None or reply.req != request[0]:
            return []
        self._in_flight = None
        from_seq = request[1]
        if reply.error == "busy":
            # The daemon holds as many unread replay pages as its --control-memory allows (clients that
            # do not read), or this client's own: asked again after a pause.
            self._busy_replays += 1
            self._replay_not_before = now + min(1_000_000_000, 20_000_000 << min(self._busy_replays - 1, 6))
            self._need_replay = True
            self._prefetch_awaits_delivery = False
            self.statistics.replay_busy += 1
            if self._busy_replays == 1 or self._busy_replays % 20 == 0:
                self.log("info", "the control endpoint %s is busy; asking for the page from %d again shortly (%d "
                         "times): %s" % (self.options.control, from_seq, self._busy_replays, reply.detail or ""))
            return []
        self._busy_replays = 0
        if reply.op != "replay":
            raise SubscriberError("refused", "the daemon refused replay from %d: %s %s"
                                  % (from_seq, reply.error or "?", reply.detail or ""))
        expected = self.expected_shard
        if expected is not None and (reply.shard != expected.shard or reply.shards != expected.shards):
            raise expected.mismatch(self.options.control, self._describe_shard(reply))
        if not self._heartbeat_seen and self._unchecked[1] is None:
            self._unchecked[1] = reply.journal
        if self._publish_journal is not None and reply.journal != self._publish_journal:
            # Not delivered, nor asked again until a heartbeat explains it (_note_publish_journal).
            if self._foreign_reply is None or self._foreign_reply["journal"] != reply.journal:
                self._foreign_reply = {"journal": reply.journal, "started_at": reply.started_at, "fresh": 0,
                                       "heartbeats": 0}
            self._need_replay = True
            self._prefetch_awaits_delivery = False
            self.log("warning", "the control endpoint %s answered from journal %s, the publish endpoint %s's "
                     "heartbeats show journal %s; waiting for heartbeats to tell a restart from two daemons"
                     % (self.options.control, reply.journal, self.options.publish, self._publish_journal))
            return []
        if not reply.ok:
            if reply.error == "not_retained" and reply.first_seq is not None:
                skipped = reply.first_seq - from_seq
                self.log("warning", "envelopes no longer retained by the journal; skipping from %d to the oldest "
                         "retained, %d" % (from_seq, reply.first_seq))
                if skipped > 0:
                    self.statistics.not_retained += skipped
                    self._verified = max(self._verified or 0, reply.first_seq - 1)
                self._need_replay = True
                return []
            raise SubscriberError("refused", "the daemon refused replay from %d: %s %s"
                                  % (from_seq, reply.error or "?", reply.detail or ""))
        if reply.next is None or reply.last_seq is None:
            raise SubscriberError("bad_reply", "replay reply without next or last_seq")
        nxt, last_seq = reply.next, reply.last_seq
        actions = []
        more_pages = nxt <= last_seq and nxt > from_seq
        if more_pages:
            actions.append(self._replay_action(nxt, now))
            self._prefetch_awaits_delivery = True
        for envelope in page:
            self._check_shard(envelope, self.options.control)
            if envelope.seq <= (self._verified or 0):
                continue
            while self._pending_head < len(self._pending) and self._pending[self._pending_head].seq < envelope.seq:
                self._drop_pending_head()
            if self._pending_head < len(self._pending) and self._pending[self._pending_head].seq == envelope.seq:
                live = self._pending[self._pending_head]
                self._drop_pending_head()
                self._deliver(live, True, actions)
            else:
                self._deliver(envelope, envelope.seq <= self._evicted_through, actions)
        self._verified = max(self._verified or 0, nxt - 1)
        if not more_pages:
            if nxt <= from_seq and nxt <= last_seq:
                self.log("warning", "replay from %d made no progress; following live" % from_seq)
            self._caught_up(actions)
        return actions

    def _note_run(self, run: Optional[str]) -> bool:
        """A heartbeat of another run of the daemon: the requests in flight were lost with the old
        run, so they are asked again at once rather than after their timeout. Returns whether the run
        is another than the last one seen."""
        if run is None:
            return False
        known, self._daemon_run = self._daemon_run, run
        if known is None or known == run:
            return False
        if self._in_flight is not None:
            self.log("info", "the daemon restarted; asking the journal again from %d" % self._in_flight[1])
            self._in_flight = None
            self._need_replay = True
            self._prefetch_awaits_delivery = False
        if self._identity_request is not None:
            self._identity_request = (self._identity_request[0], 0)
        # The new run has no unread pages of anyone's: a pause after busy ends.
        self._busy_replays = 0
        self._replay_not_before = 0
        return True

    def _check_restarted_journal(self, heartbeat: Heartbeat) -> None:
        """The first heartbeat of a new run: a journal never numbers below a seq it may have
        published; every envelope is written before it is published, and every heartbeat sent once
        everything before it is published, so the highest seq the live socket showed was written by
        the old run. A new run whose last seq is below it lost records it had published, and will give
        those seqs to new events, which this subscriber would skip as seen (SubscriptionSequencer.swift
        says more; journal pages do not count: one may come from the new run first)."""
        # Another journal than the old run's (its data directory replaced while this subscriber
        # waited, or was frozen): whatever its seqs, they are not the ones handled.
        old, new = self._publish_journal, heartbeat.journal
        if old is not None and new is not None and old != new:
            if self._position_kept:
                raise SubscriberError(
                    "cursor_mismatch",
                    "the daemon at %s restarted with another journal (%s, was %s): its data directory was reset or "
                    "replaced, and its seqs are not the ones this subscriber handled. Nothing was skipped. Move the "
                    "position to the journal's start with `checkoutbus cursor set PATH --to-seq 1` (docs/runbook.md, "
                    "\"A daemon's journal was reset\")" % (self.options.publish, new, old))
            self.log("warning", "the daemon restarted with another journal (%s, was %s); its seqs are not the ones "
                     "handled before" % (new, old))
            return
        published = self._live_high
        if heartbeat.seq >= published:
            return
        if self._position_kept:
            raise SubscriberError(
                "cursor_mismatch",
                "the daemon at %s restarted with its journal ending at seq %d, but it had published seq %d to this "
                "subscriber: records it published were lost from its journal (a disk fault, or its data directory "
                "restored from a copy or replaced), and it will give those seqs to new events, which this subscriber "
                "would skip as seen. Nothing was skipped. Check the daemon's disk, then resume after the journal's last "
                "record, N in the daemon's `started ... last_seq=N` line (at most %d): `checkoutbus cursor set PATH "
                "--to-seq N+1` (docs/runbook.md, \"A daemon's journal lost records it had published\")"
                % (self.options.publish, heartbeat.seq, published, heartbeat.seq))
        self.log("warning", "the daemon restarted with its journal at seq %d, behind seq %d it had published; new "
                 "events up to it will be taken for seen ones" % (heartbeat.seq, published))

    def page_delivered(self, now: int) -> None:
        """After handling a reply: a request prefetched behind the page just delivered is timed
        from now. Only then: restarting the clock after any reply (a report's, each heartbeat)
        kept a request lost with a daemon that died after reading it in flight for ever."""
        if not self._prefetch_awaits_delivery:
            return
        self._prefetch_awaits_delivery = False
        if self._in_flight is not None:
            self._in_flight = (self._in_flight[0], self._in_flight[1], now)

    def _caught_up(self, actions: list) -> None:
        while self._pending_head < len(self._pending) and self._pending[self._pending_head].seq <= self._verified:
            self._drop_pending_head()
        while self._pending_head < len(self._pending):
            envelope = self._pending[self._pending_head]
            if not self._is_provably_next(envelope):
                self._need_replay = True
                break
            self._drop_pending_head()
            self._deliver(envelope, True, actions)
        if self._pending_head == len(self._pending):
            self._pending = []
            self._pending_head = 0
            self._pending_bytes = 0
            if not self._need_replay:
                self._evaluate_heartbeat()

    def _drop_pending_head(self) -> None:
        head = self._pending[self._pending_head]
        self._pending_bytes -= len(head.raw) + len(head.topic)
        self._pending_head += 1
        if self._pending_head == len(self._pending):
            self._pending = []
            self._pending_head = 0
            self._pending_bytes = 0
        elif self._pending_head >= 4096:
            del self._pending[:self._pending_head]
            self._pending_head = 0

    # Delivery

    def _deliver(self, envelope: Envelope, seen_live: bool, actions: list) -> None:
        level = self._coverage.level(envelope.kind)
        if envelope.position_only:
            self._verified = max(self._verified or 0, envelope.seq)
            if level == FULL:
                self._exact_kind_seq[envelope.kind] = envelope.kind_seq
            self._last_was_missed = False
            return
        actions.append(("deliver", envelope))
        self._verified = max(self._verified or 0, envelope.seq)
        stats = self.statistics
        stats.handled += 1
        stats.last_seq = envelope.seq
        if level == FULL:
            self._exact_kind_seq[envelope.kind] = envelope.kind_seq
        elif level == PARTIAL:
            self._checked_kind_seq[envelope.kind] = max(self._checked_kind_seq[envelope.kind], envelope.kind_seq)
        if envelope.origin == Envelope.JOURNAL:
            stats.from_journal += 1
            if seen_live:
                self._last_was_missed = False
            elif self._live_floor is not None and envelope.seq > self._live_floor:
                if self._unconfirmed_head == len(self._unconfirmed) and envelope.seq <= self._live_high:
                    self._count_missed()
                else:
                    self._unconfirmed.append(envelope.seq)
                    if len(self._unconfirmed) - self._unconfirmed_head > 1_000_000:
                        self._unconfirmed_head += 1
            else:
                self._last_was_missed = False
        else:
            self._last_was_missed = False

    def _count_missed(self) -> None:
        self.statistics.missed += 1
        self.statistics.recovered += 1
        if not self._last_was_missed:
            self.statistics.gaps += 1
        self._last_was_missed = True

    def _confirm(self, through: int, arrived: Optional[int]) -> None:
        while self._unconfirmed_head < len(self._unconfirmed) and self._unconfirmed[self._unconfirmed_head] <= through:
            if self._unconfirmed[self._unconfirmed_head] == arrived:
                self._last_was_missed = False
            else:
                self._count_missed()
            self._unconfirmed_head += 1
        if self._unconfirmed_head == len(self._unconfirmed):
            self._unconfirmed = []
            self._unconfirmed_head = 0
        elif self._unconfirmed_head >= 4096:
            del self._unconfirmed[:self._unconfirmed_head]
            self._unconfirmed_head = 0

    def _report_action(self) -> tuple:
        rid = self._next_request_id
        self._next_request_id += 1
        s = self.statistics
        through = max(self._verified if self._verified is not None else s.last_seq, s.last_seq)
        return ("report", Report(rid, s.last_seq, s.missed, s.recovered, s.gaps, through))
