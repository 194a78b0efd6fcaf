"""A subscriber killed with kill -9 three times mid-flood delivers every envelope exactly once to an
idempotent handler, resuming each time from its cursor file."""
import os
import signal
import subprocess
import sys
import time

from checkoutbus import FileCursor

from bus import needs_daemon

pytestmark = needs_daemon
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kill_worker.py")


def read_seqs(path):
    with open(path) as f:
        return [int(line) for line in f if line.endswith("\n")]


def test_killed_three_times_mid_flood_every_envelope_once(bus):
    daemon = bus.daemon("--heartbeat-ms", "100")
    cursor, log = bus.path("cursor"), bus.path("handled.log")

    def start():
        worker = bus.spawn([sys.executable, WORKER, daemon.publish, daemon.control, cursor, log],
                           stdout=subprocess.PIPE, text=True)
        assert worker.stdout.readline() == "subscribed\n"
        return worker

    worker = start()
    # Paced so the flood is still running through the kills (about 20,800 events, 7 s; the kills
    # come after about 1,500 of them and three restarts).
    flood = bus.flood("--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "4000", "--rate", "3000")
    flood_running_at_kill = []
    for _ in range(3):
        for _ in range(2):  # 500 envelopes handled in this run, then the kill
            assert worker.stdout.readline().startswith("handled ")
        flood_running_at_kill.append(flood.poll() is None)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        worker = start()
    report = bus.finish_flood(flood)
    last_seq = daemon.stats()["last_seq"]
    assert last_seq == report["published"]
    deadline = time.monotonic() + 60
    while not (os.path.exists(log) and read_seqs(log)[-1:] == [last_seq] and FileCursor.committed(cursor) == last_seq):
        assert worker.poll() is None and time.monotonic() < deadline, "the worker did not reach seq %d" % last_seq
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert read_seqs(log) == list(range(1, last_seq + 1)), "every envelope once, in seq order"
    assert FileCursor.committed(cursor) == last_seq
    assert flood_running_at_kill == [True, True, True], "the kills should land during the flood (%r)" % report
