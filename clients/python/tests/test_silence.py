"""Silence is reported: a subscriber that hears no heartbeat says so (log, callback, state)."""
import socket

from checkoutbus import Subscriber


def unused_endpoint() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "tcp://127.0.0.1:%d" % port


def test_no_daemon_at_the_endpoint_is_said_named_and_kept_waiting_on():
    publish, control = unused_endpoint(), unused_endpoint()
    logged, calls = [], []
    sub = Subscriber(publish=publish, control=control, silence_ms=300,
                     log=lambda level, message: logged.append((level, message)),
                     on_silence=lambda position, silent: calls.append((position, silent)))
    try:
        assert sub.silent_shards == []
        assert sub.wait_subscribed(1.5) is False
        assert sub.silent_shards == [0]
        assert calls == [(0, True)]
        warnings = [m for level, m in logged if level == "warning" and "no heartbeat from the daemon" in m]
        assert len(warnings) == 1 and publish in warnings[0] and "since connecting" in warnings[0]
        # Still waiting, and said once, not every round.
        assert sub.receive(timeout=0.5) is None
        assert calls == [(0, True)]
    finally:
        sub.close()
