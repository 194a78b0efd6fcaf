#!/usr/bin/env python3
"""Counts completed orders and revenue by currency, each complete once across drops, restarts and
kill -9 (pip install ./clients/python). Several shards: comma-separated lists, in shard order.
usage: analytics_worker.py PUBLISH CONTROL STATE_DIR  — prints each counted complete as JSON."""
import json, os, sys  # noqa: E401
from checkoutbus import Subscriber

publish, control, state = sys.argv[1:4]
path = os.path.join(state, "totals.json")
totals = json.load(open(path)) if os.path.exists(path) else {"completes": 0, "revenue": {}, "seen": {}}


def main():
    with Subscriber(publish=publish, control=control, prefixes=["checkout.complete"],
                    cursor=os.path.join(state, "cursor"), name="analytics-py") as sub:
        sub.wait_subscribed()
        print("subscribed", file=sys.stderr, flush=True)
        for envelope in sub:
            shard = str(envelope.shard)
            if envelope.seq > totals["seen"].get(shard, 0):      # counted already: a redelivery after kill -9
                summary = envelope.get("summary") or {}
                if not envelope["repeat"]:                         # a repeated complete is the same order
                    currency = summary.get("currency") or "?"
                    totals["completes"] += 1
                    totals["revenue"][currency] = totals["revenue"].get(currency, 0) + (summary.get("total") or 0)
                    print(json.dumps({"seq": envelope.seq, "shard": envelope.shard, "currency": currency,
                                      "checkout_id": envelope["checkout_id"]}), flush=True)
                totals["seen"][shard] = envelope.seq
                with open(path + ".tmp", "w") as f:
                    json.dump(totals, f)
                os.replace(path + ".tmp", path)                    # the totals and their seq move together
            sub.commit(envelope)                                   # only now does the cursor move


try:
    main()
except KeyboardInterrupt:  # Ctrl-C: the cursor and the totals are as the last envelope left them
    print("analytics-py: interrupted", file=sys.stderr)
    sys.exit(130)
