"""A worker for the kill -9 test: records each handled seq once (an idempotent handler: a seq
already in its log is not recorded again), then commits. usage: kill_worker.py PUBLISH CONTROL CURSOR LOG"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from checkoutbus import Subscriber  # noqa: E402

publish, control, cursor, log = sys.argv[1:5]
handled = set()
if os.path.exists(log):
    with open(log) as f:
        handled = {int(line) for line in f if line.endswith("\n")}
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
with Subscriber(publish=publish, control=control, cursor=cursor, name="py-killed") as sub:
    sub.wait_subscribed()
    print("subscribed", flush=True)
    count = 0
    for envelope in sub:
        if envelope.seq not in handled:
            os.write(fd, b"%d\n" % envelope.seq)  # one write: in the kernel, survives kill -9
            handled.add(envelope.seq)
        sub.commit(envelope)
        count += 1
        if count % 250 == 0:
            print("handled %d seq %d" % (count, envelope.seq), flush=True)
