#!/usr/bin/env python3
"""A CheckoutBus subscriber in plain pyzmq: no project code needed.

usage: pyzmq_subscriber.py ENDPOINT[,ENDPOINT...] COUNT [TOPIC ...]
Prints COUNT envelopes as JSON lines, each with the shard it came from; writes "subscribed" to
stderr once the filters are live on every endpoint.

Several shards: give every shard's publish endpoint, comma-separated. One SUB socket connects to
all of them. Each shard's seq counts on its own, so order holds per shard (and so per checkout),
not across shards; the envelope's "shard" says which one it came from.
"""
import json
import sys

import zmq

endpoints, count, topics = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3:] or ["checkout."]
sub = zmq.Context().socket(zmq.SUB)
for endpoint in endpoints:
    sub.connect(endpoint)
for topic in topics + ["bus.heartbeat"]:           # heartbeat last: it proves the others are live
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
live = set()                                       # shards whose heartbeat arrived
seen = 0
while seen < count:
    topic, envelope = sub.recv_multipart()
    event = json.loads(envelope)
    if topic == b"bus.heartbeat":
        if len(live) < len(endpoints):
            live.add(event.get("shard", 0))
            if len(live) == len(endpoints):
                print("subscribed", file=sys.stderr, flush=True)
        continue
    print(json.dumps({"topic": topic.decode(), "shard": event.get("shard", 0), "kind": event["kind"],
                      "seq": event["seq"], "checkout_id": event.get("checkout_id"),
                      "code": (event.get("error") or {}).get("code")}),
          flush=True)
    seen += 1
