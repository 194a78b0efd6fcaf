#!/usr/bin/env python3
# Golden envelopes for Tests/CheckoutBusCoreTests/GoldenEnvelopeTests.swift: every line of the samples,
# the corpus and the bench inputs through `checkoutbus decode --format json` of a reference build, in
# both --buyer-data modes, one JSON record a line; received_at is normalised to the tests' fixed time.
# usage (from the repo root): scripts/make-golden-envelopes.py Tests/Golden/envelopes.jsonl REFERENCE/checkoutbus
import json, re, subprocess, sys
out = open(sys.argv[1], "w")
binary = sys.argv[2]
inputs = ["samples/bridges.jsonl", "samples/tour.jsonl", "Tests/Corpus/sdk-payloads.jsonl",
          "bench/snapshot-1k.json", "Tests/Golden/bench-event.jsonl"]
pat = re.compile(rb'"received_at":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"')
dec = json.JSONDecoder()
n = 0
for f in inputs:
    for mode in ["redacted", "full"]:
        raw = subprocess.run([binary, "decode", "--format", "json", "--buyer-data", mode, f],
                             capture_output=True, check=True).stdout
        text = raw.decode("utf-8")
        i = 0
        while True:
            while i < len(text) and text[i] in " \n": i += 1
            if i >= len(text): break
            obj, end = dec.raw_decode(text, i)
            span = text[i:end]
            rec = {"file": f, "mode": mode, "line": obj["line"], "outcome": obj["outcome"]}
            if "envelope" in obj:
                a = span.index(',"envelope":') + len(',"envelope":')
                b = span.rindex(',"redacted":[')
                env = span[a:b].encode("utf-8")
                assert json.loads(env) == obj["envelope"]
                env = pat.sub(b'"received_at":"2025-12-02T11:39:01.123Z"', env, count=1)
                rec["topic"] = obj["topic"]
                rec["envelope"] = env.decode("utf-8")
            out.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
            i = end
print(n, "records")
