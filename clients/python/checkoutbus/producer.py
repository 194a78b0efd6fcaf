"""Acknowledged sending (docs/durability.md, "Acknowledged ingest"), as the Swift
AcknowledgedProducer speaks it: a DEALER on the daemon's --ingest-acked socket, one raw event per
message, one JSON reply per event in the order sent, each sent once the event is durable."""
import json
import time
from typing import Iterable, List, Optional, Union

import zmq
from zmq.utils.monitor import recv_monitor_message

from .curve import curve_keys


class Acknowledgement:
    """The daemon's answer to one event.

    accepted: journaled (durable when the daemon answered), or suppressed as an identical update.
    seq: its seq (None for a suppressed update); for a rejection, the dead letter's seq.
    reason: why it was dead-lettered (None when accepted).
    duplicate: a retry of an event_id the daemon already had; seq is the first one's.
    """

    __slots__ = ("accepted", "seq", "reason", "duplicate", "suppressed", "event_id", "raw")

    def __init__(self, raw: dict):
        self.raw = raw
        self.accepted = raw.get("ok") is True
        seq = raw.get("seq")
        self.seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
        self.reason = raw.get("reason") if isinstance(raw.get("reason"), str) else None
        self.duplicate = raw.get("duplicate") is True
        self.suppressed = raw.get("suppressed") is True
        self.event_id = raw.get("event_id") if isinstance(raw.get("event_id"), str) else None

    def __repr__(self) -> str:
        if self.accepted:
            what = "suppressed" if self.suppressed else "seq=%s" % self.seq
        else:
            what = "rejected %s (seq=%s)" % (self.reason, self.seq)
        return "Acknowledgement(%s%s%s)" % (what, " duplicate" if self.duplicate else "",
                                            ", event_id=%s" % self.event_id if self.event_id else "")


class AcknowledgedSendError(Exception):
    """Not every event was answered. `code`: timed_out (no reply for `timeout` seconds: a daemon that
    is down, unreachable, or with CURVE refusing the key), disconnected (the connection dropped with
    events unanswered: a daemon restarted or killed, or one that cut the connection for an event over
    its --max-wire-bytes; a reply on a new connection would answer other events than it seemed to)
    or unexpected_reply (a reply naming another event_id). `acknowledged` holds the answers to the events before the first unanswered one
    (replies come in order); the others may or may not be in the journal: send them again — with
    event_ids the daemon answers those it has as duplicates, with their first seq."""

    def __init__(self, code: str, message: str, acknowledged: List[Acknowledgement]):
        super().__init__(message)
        self.code = code
        self.acknowledged = acknowledged


def _encode(event) -> bytes:
    if isinstance(event, (bytes, bytearray, memoryview)):
        return bytes(event)
    if isinstance(event, str):
        return event.encode()
    return json.dumps(event, separators=(",", ":")).encode()


def _wrapper_event_id(raw: bytes) -> Optional[str]:
    """The top-level event_id of an event that is a JSON object with a string one."""
    if b'"event_id"' not in raw:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # nested deeper than Python's recursion allows
        return None
    if isinstance(data, dict) and isinstance(data.get("event_id"), str):
        return data["event_id"]
    return None


# The acknowledgements the daemon queues for one producer that has not read them.
MAX_WINDOW = 10_000


def send_acked(events: Iterable[Union[bytes, str, dict]], endpoint: str, curve=None, timeout: float = 10.0,
               window: int = 1000, context: Optional["zmq.Context"] = None) -> List[Acknowledgement]:
    """Sends `events` to the daemon's --ingest-acked `endpoint` and returns one Acknowledgement per
    event, in order: its seq, or its rejection reason.

    Events are raw events as bytes, str, or dicts (sent as JSON), exactly as on the plain ingest.
    At most `window` (1 to 10,000: the acknowledgements the daemon queues for one producer) are
    in flight. Nothing is resent by itself (an event without an event_id would
    be published twice): on AcknowledgedSendError resend what is not in its `acknowledged`.
    curve: (client secret key file, daemon public key file), or a CurveKeys; the key must be in
    the daemon's --curve-producers directory.
    Raises AcknowledgedSendError (timed_out, disconnected, unexpected_reply).
    """
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"window must be 1 to {MAX_WINDOW}, got {window}")
    keys = curve_keys(curve)
    payloads = [_encode(e) for e in events]
    own_context = context is None
    ctx = context or zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    monitor = None
    answers: List[Acknowledgement] = []

    def receive_replies(sent: int) -> None:
        while len(answers) < sent:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if frames and not frames[0]:
                frames = frames[1:]
            try:
                reply = json.loads(frames[0]) if frames else None
            except (ValueError, RecursionError):
                reply = None
            if not isinstance(reply, dict):
                raise AcknowledgedSendError("unexpected_reply", "a reply that is not a JSON object", answers)
            answer = Acknowledgement(reply)
            expected = _wrapper_event_id(payloads[len(answers)])
            if expected is not None and answer.event_id is not None and expected != answer.event_id:
                raise AcknowledgedSendError(
                    "unexpected_reply", "the reply for event_id %s names event_id %s" % (expected, answer.event_id),
                    answers)
            answers.append(answer)

    def dropped() -> bool:
        seen = False
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return seen
            if event.get("event") == zmq.EVENT_DISCONNECTED:
                seen = True

    try:
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)  # nothing queued for a dead connection goes to the next daemon unseen
        if keys is not None:
            keys.apply(sock)
        # Watched as the Swift producer watches its connection: replies on a new connection answer
        # the events sent on it, not those lost with the old one.
        monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(endpoint)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        sent = 0
        last_progress = time.monotonic()
        while len(answers) < len(payloads):
            if dropped() and len(answers) < sent:
                # Replies that arrived before the drop still answer their events.
                receive_replies(sent)
                if len(answers) < sent:
                    raise AcknowledgedSendError(
                        "disconnected", "the connection to %s dropped with %d events unanswered (%d of %d answered): "
                        "they may or may not be in the journal" % (endpoint, sent - len(answers), len(answers),
                                                                   len(payloads)), answers)
            while sent < len(payloads) and sent - len(answers) < window:
                try:
                    sock.send(payloads[sent], zmq.NOBLOCK)
                except zmq.Again:
                    break  # not connected yet (IMMEDIATE) or the pipe is full: wait for the socket
                sent += 1
                last_progress = time.monotonic()
            remaining = timeout - (time.monotonic() - last_progress)
            if remaining <= 0:
                raise AcknowledgedSendError(
                    "timed_out", "no reply from %s for %g s: %d of %d events answered%s"
                    % (endpoint, timeout, len(answers), len(payloads),
                       " (with CURVE, a key the daemon refused looks the same: its log names refused keys)"
                       if keys is not None else ""), answers)
            ready = dict(poller.poll(min(remaining, 0.2 if sent < len(payloads) else remaining) * 1000))
            if sock not in ready:
                continue
            before = len(answers)
            receive_replies(sent)
            if len(answers) > before:
                last_progress = time.monotonic()
        return answers
    finally:
        try:
            if monitor is not None:
                sock.disable_monitor()
                monitor.close()
        finally:
            sock.close()
            if own_context:
                ctx.term()
