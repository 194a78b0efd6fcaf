#!/usr/bin/env python3
"""A CheckoutBus subscriber in plain pyzmq: no project code needed.

usage: pyzmq_subscriber.py ENDPOINT COUNT [TOPIC ...]
Prints COUNT envelopes as JSON lines; writes "subscribed" to stderr once the filters are live.
"""
import json
import sys

import zmq

endpoint, count, topics = sys.argv[1], int(sys.argv[2]), sys.argv[3:] or ["checkout."]
sub = zmq.Context().socket(zmq.SUB)
sub.connect(endpoint)
for topic in topics + ["bus.heartbeat"]:           # heartbeat last: it proves the others are live
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
seen = 0
while seen < count:
    topic, envelope = sub.recv_multipart()
    if topic == b"bus.heartbeat":
        if seen == 0:
            print("subscribed", file=sys.stderr, flush=True)
        continue
    event = json.loads(envelope)
    print(json.dumps({"topic": topic.decode(), "kind": event["kind"], "seq": event["seq"],
                      "checkout_id": event.get("checkout_id"), "code": (event.get("error") or {}).get("code")}),
          flush=True)
    seen += 1
