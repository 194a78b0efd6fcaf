"""Real daemons for the integration tests: `checkoutbusd` and `checkoutbus` from the directory in
CHECKOUTBUS_BIN_DIR (the Swift suite PythonClientTests passes its build directory). Every daemon
runs on ephemeral ports in a temporary directory removed afterwards."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
import zmq

BIN_DIR = os.environ.get("CHECKOUTBUS_BIN_DIR")
REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

needs_daemon = pytest.mark.skipif(
    not BIN_DIR or not os.access(os.path.join(BIN_DIR or "", "checkoutbusd"), os.X_OK),
    reason="CHECKOUTBUS_BIN_DIR does not hold checkoutbusd (swift test --filter PythonClient sets it)")


def tool(name: str) -> str:
    return os.path.join(BIN_DIR, name)


def wait_for(condition, timeout: float = 20.0, what: str = "the condition") -> None:
    """Polls a real condition (a file's contents, a daemon's answer) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


class Daemon:
    """A running checkoutbusd; `ready` is its ready line (ingest, ingest_acked, publish, control)."""

    def __init__(self, directory: str, *arguments: str):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.stderr_path = os.path.join(directory, "daemon.stderr")
        with open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(
                [tool("checkoutbusd"), "--ingest", "tcp://127.0.0.1:*", "--publish", "tcp://127.0.0.1:*",
                 "--ingest-acked", "tcp://127.0.0.1:*", "--control", "tcp://127.0.0.1:*",
                 "--metrics", "127.0.0.1:*", "--data-dir", os.path.join(directory, "data"), *arguments],
                stdout=subprocess.PIPE, stderr=err)
        line = self.process.stdout.readline()  # the ready line: the sockets are bound
        if not line:
            self.process.wait(10)
            raise RuntimeError("checkoutbusd printed no ready line: " + self.log())
        self.ready = json.loads(line)
        self.ingest = self.ready["ingest"]
        self.ingest_acked = self.ready["ingest_acked"]
        self.publish = self.ready["publish"]
        self.control = self.ready["control"]
        self.curve = None  # a CurveKeys for the test's own control requests, with CURVE on

    def log(self) -> str:
        with open(self.stderr_path, "r", errors="replace") as f:
            return f.read()

    def request(self, request: dict, timeout: float = 10.0) -> list:
        """One control request; the reply's frames, the first parsed."""
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        if self.curve is not None:
            self.curve.apply(sock)
        sock.connect(self.control)
        try:
            sock.send(json.dumps(request).encode())
            if not sock.poll(int(timeout * 1000)):
                raise TimeoutError("no reply to %r" % request)
            frames = sock.recv_multipart()
            return [json.loads(frames[0])] + frames[1:]
        finally:
            sock.close()

    def stats(self) -> dict:
        return self.request({"op": "stats"})[0]

    def journal(self, prefixes=("checkout.", "bus.deadletter"), raw: bool = False) -> list:
        """Every record matching `prefixes`, as (seq, topic, envelope dict), read page by page; with
        `raw`, (seq, topic bytes, envelope bytes)."""
        records, start = [], 1
        while True:
            frames = self.request({"op": "replay", "from": start, "prefix": list(prefixes), "limit": 10000})
            head = frames[0]
            assert head["ok"], head
            for i in range(1, len(frames), 2):
                envelope = json.loads(frames[i + 1])
                if raw:
                    records.append((envelope["seq"], frames[i], frames[i + 1]))
                else:
                    records.append((envelope["seq"], frames[i].decode(), envelope))
            start = head["next"]
            if start > head["last_seq"]:
                return records

    def report_of(self, name: str, timeout: float = 10.0, until=lambda report: True):
        """The daemon's latest report from subscriber `name`, once `until(report)` holds."""
        deadline = time.monotonic() + timeout
        while True:
            report = self.stats().get("subscribers", {}).get(name)
            if report is not None and until(report):
                return report
            if time.monotonic() > deadline:
                raise AssertionError("no report from %s satisfying the condition; last: %r" % (name, report))
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()


class Bus:
    """Daemons made in one temporary directory, stopped and removed by close()."""

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="cb-py-")
        self.daemons = []
        self.processes = []

    def path(self, *names: str) -> str:
        return os.path.join(self.directory, *names)

    def daemon(self, *arguments: str, name: str = None) -> Daemon:
        d = Daemon(self.path(name or "d%d" % len(self.daemons)), *arguments)
        self.daemons.append(d)
        return d

    def run(self, *arguments: str, timeout: float = 30) -> str:
        """`checkoutbus ARGUMENTS`; its stdout (fails the test on a non-zero exit)."""
        done = subprocess.run([tool("checkoutbus"), *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=timeout)
        assert done.returncode == 0, "checkoutbus %s: %s" % (" ".join(arguments), done.stderr.decode())
        return done.stdout.decode()

    def flood(self, *arguments: str) -> subprocess.Popen:
        """A `checkoutbus flood --json …` running in the background (see finish_flood)."""
        p = subprocess.Popen([tool("checkoutbus"), "flood", "--json", *arguments],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.processes.append(p)
        return p

    @staticmethod
    def finish_flood(p: subprocess.Popen, timeout: float = 120, check: bool = True, daemons=()) -> dict:
        """Waits for the flood; its report. `check`: its own (live-only) subscriber must have seen
        what the generator expects. Then waits until `daemons` have taken in every event it sent."""
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0 or not check, "flood failed: %s %s" % (out.decode(), err.decode())
        report = json.loads(out)
        assert report["sent"] > 0
        if daemons:
            wait_for(lambda: sum(d.stats()["counters"]["received"] for d in daemons) == report["sent"], 60,
                     "the daemons to take in the %d events sent" % report["sent"])
        return report

    def spawn(self, arguments, **kwargs) -> subprocess.Popen:
        p = subprocess.Popen(arguments, **kwargs)
        self.processes.append(p)
        return p

    def close(self) -> None:
        for p in self.processes:
            if p.poll() is None:
                p.kill()
            p.wait()
            for stream in (p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
        for d in self.daemons:
            d.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def bus():
    b = Bus()
    try:
        yield b
    finally:
        b.close()
