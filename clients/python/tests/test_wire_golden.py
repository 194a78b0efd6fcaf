"""The Python client's control requests, byte for byte against Tests/Golden/control-requests.tsv,
the file the Swift codec (ControlRequestWire) is checked against too."""
import os

import pytest

from checkoutbus import wire
from checkoutbus.sequencer import Report

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "Tests", "Golden", "control-requests.tsv")


def golden():
    with open(GOLDEN) as f:
        return dict(line.rstrip("\n").split("\t", 1) for line in f if "\t" in line)


def test_replay_identity_and_report_are_the_golden_bytes():
    g = golden()
    assert wire.replay_request(7, 1000, ["checkout.complete"], 1000).decode() == g["replay"]
    assert wire.identity_request(3).decode() == g["stats"]
    full = Report(id=9, last_seq=42, missed=3, recovered=3, gaps=1, through_seq=45, final=True)
    assert wire.report(full, "fulfil-1", rejected=2, durable=True).decode() == g["report"]
    plain = Report(id=10, last_seq=0, missed=0, recovered=0, gaps=0, through_seq=0)
    assert wire.report(plain, "tail").decode() == g["report-plain"]
