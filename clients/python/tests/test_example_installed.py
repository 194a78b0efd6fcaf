"""The README's "done when": the package installed with pip into a fresh environment, then
examples/analytics_worker.py against a daemon under `checkoutbus flood`, killed with kill -9 in the
middle and restarted, counts every complete once.

The environment is a venv over the system's site-packages, installed with --no-index: the test needs
no network (pyzmq and setuptools come from the system), but pip really builds and installs the
package from clients/python."""
import json
import os
import shutil
import signal
import subprocess
import sys

from bus import REPOSITORY, needs_daemon, wait_for

pytestmark = needs_daemon
EXAMPLE = os.path.join(REPOSITORY, "examples", "analytics_worker.py")


def install(bus) -> str:
    source = bus.path("src")
    shutil.copytree(os.path.join(REPOSITORY, "clients", "python"), source,
                    ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    venv = bus.path("venv")
    # pip itself comes from the system's site-packages too, and installs into the venv.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    done = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", source],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert done.returncode == 0, done.stdout.decode()
    where = subprocess.run([python, "-c", "import checkoutbus; print(checkoutbus.__file__)"], cwd=bus.directory,
                           stdout=subprocess.PIPE, check=True).stdout.decode()
    assert where.startswith(venv), where
    return python


def test_pip_installed_example_counts_every_complete_once_across_kill_9(bus):
    python = install(bus)
    daemon = bus.daemon("--heartbeat-ms", "100")
    state = bus.path("state")
    os.makedirs(state)

    def start(stdout):
        worker = bus.spawn([python, EXAMPLE, daemon.publish, daemon.control, state], cwd=bus.directory,
                           stdout=stdout, stderr=subprocess.PIPE, text=True)
        # A warning (a silence on a loaded host) may come first.
        assert any(line == "subscribed\n" for line in iter(worker.stderr.readline, ""))
        return worker

    worker = start(subprocess.PIPE)
    flood = bus.flood("--to", daemon.ingest, "--from", daemon.publish, "--checkouts", "2000", "--rate", "4000")
    for _ in range(100):  # 100 completes counted, then the kill
        assert json.loads(worker.stdout.readline())["seq"] > 0
    assert flood.poll() is None, "the kill should land during the flood"
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    with open(bus.path("worker.out"), "w") as out:  # a file: nobody reads the restarted worker's lines
        worker = start(out)
    bus.finish_flood(flood)
    completes = [e for _, topic, e in daemon.journal(["checkout.complete"])]
    expected = {"completes": 0, "revenue": {}}
    for e in completes:
        if not e["repeat"]:
            summary = e.get("summary") or {}
            currency = summary.get("currency") or "?"
            expected["completes"] += 1
            expected["revenue"][currency] = expected["revenue"].get(currency, 0) + (summary.get("total") or 0)
    totals_path = os.path.join(state, "totals.json")

    def caught_up():
        try:
            with open(totals_path) as f:
                return json.load(f)["seen"].get("0") == completes[-1]["seq"]
        except (FileNotFoundError, ValueError):
            return False

    wait_for(caught_up, 60, "the worker to count the last complete")
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    with open(totals_path) as f:
        totals = json.load(f)
    assert totals["completes"] == expected["completes"] > 500
    assert totals["revenue"] == expected["revenue"]
    daemon.report_of("analytics-py")
