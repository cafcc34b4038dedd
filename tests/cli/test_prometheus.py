"""End-to-end: a real Prometheus server (Debian's prometheus, on loopback, in a temporary folder)
scrapes a real tracetorchd's /metrics (--metrics-listen) while a traced training run (the Python
agent) streams to it; the session's series are asserted through Prometheus' HTTP query API
against what the daemon itself says (tracetorch sessions / snapshot). Waits are polls with a
deadline on what Prometheus answers, never fixed sleeps."""

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.parse
import urllib.request

import pytest

from conftest import run
from live_daemon import DEADLINE_S, Daemon, Training, require_live_setup, wait_until

PROMETHEUS = shutil.which("prometheus") or ""
HOLD_STEPS = 12


class Prometheus:
    """prometheus scraping `target` (HOST:PORT) every 200 ms, on a port it picks itself."""

    def __init__(self, target):
        self.dir = tempfile.mkdtemp(prefix="ttprom")
        with open(os.path.join(self.dir, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\n"
                    "scrape_configs:\n  - job_name: tracetorchd\n"
                    f"    static_configs:\n      - targets: ['{target}']\n")
        self.log_path = os.path.join(self.dir, "prometheus.log")
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file", os.path.join(self.dir, "prometheus.yml"),
             "--storage.tsdb.path", os.path.join(self.dir, "data"),
             "--web.listen-address", "127.0.0.1:0", "--log.level", "info"],
            stdout=self.log, stderr=self.log)
        found = wait_until(self._listening, "prometheus listening", deadline_s=60,
                           on_timeout=self.log_text)
        self.url = f"http://127.0.0.1:{found}"

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def _listening(self):
        if self.proc.poll() is not None:
            pytest.fail("prometheus exited:\n" + self.log_text())
        m = re.search(r'msg="Listening on" address=127\.0\.0\.1:(\d+)', self.log_text())
        return m.group(1) if m else None

    def query(self, expr):
        """The instant vector of `expr`: {frozenset(labels): value}."""
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return {frozenset(s["metric"].items()): float(s["value"][1])
                for s in body["data"]["result"]}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def scraped():
    """A daemon serving /metrics on a free loopback port and a Prometheus server scraping it."""
    require_live_setup()
    if not PROMETHEUS:
        pytest.skip("prometheus is not installed (Debian package prometheus)")
    daemon = Daemon("--metrics-listen", "127.0.0.1:0", log_level="info").start()
    prom = None
    try:
        port = wait_until(
            lambda: (re.search(r"Prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics",
                               daemon.log_text()) or [None, None])[1],
            "the daemon's metrics address in its log", deadline_s=30,
            on_timeout=daemon.log_text)
        prom = Prometheus(f"127.0.0.1:{port}")
        yield daemon, prom
    finally:
        if prom is not None:
            prom.stop()
        daemon.cleanup()


def one(vector, what):
    assert len(vector) == 1, f"{what}: {vector}"
    return next(iter(vector.values()))


def test_prometheus_sees_the_live_sessions_steps_anomalies_and_nan_origin(scraped):
    daemon, prom = scraped
    # NaN in blocks.1.fc's weights before the first step: non-finite activations from there on.
    open(os.path.join(daemon.dir, "nan"), "w").close()
    train = Training(daemon, "--hold-after", str(HOLD_STEPS), "--step-delay", "0.02",
                     env={"TRACETORCH_JOB": "prom-job", "RANK": "3"})
    try:
        train.wait_steps(HOLD_STEPS)

        # The daemon has every step (the run holds after HOLD_STEPS): its own view is the truth.
        def daemon_view():
            listed = run("sessions", "--remote", daemon.rpc, "--json", env=daemon.env())
            snap = run("snapshot", "latest", "--remote", daemon.rpc, env=daemon.env())
            if listed.returncode != 0 or snap.returncode != 0:
                return None
            sessions = [s for s in json.loads(listed.stdout) if s["state"] == "live"]
            record = json.loads(snap.stdout)
            head = [l for l in record["layers"] if l["full_name"] == "head"]
            if len(sessions) != 1 or not head or head[0]["forward_count"] != HOLD_STEPS:
                return None
            return sessions[0], record

        session, record = wait_until(daemon_view, f"the daemon holding {HOLD_STEPS} steps",
                                     deadline_s=DEADLINE_S, on_timeout=daemon.log_text)
        sid = session["session_id"]
        sel = f'{{session="{sid}",job_id="prom-job",rank="3",model="TrainNet"}}'

        steps = wait_until(
            lambda: prom.query(f"tracetorchd_session_steps_total{sel} == {HOLD_STEPS}"),
            "Prometheus to scrape the held step count", deadline_s=DEADLINE_S,
            on_timeout=lambda: prom.log_text() + daemon.log_text())
        assert one(steps, "steps") == HOLD_STEPS
        assert one(prom.query(f"tracetorchd_session_events_total{sel}"), "events") == \
            session["events"]
        assert one(prom.query(f"tracetorchd_session_nan_origin_known{sel}"), "nan origin") == 1
        assert record["metadata"]["nan_origin"]["layer"] == "blocks.1.fc"

        # Anomalies by type and severity: exactly the daemon's findings.
        expected = collections.Counter((w["type"], w["severity"]) for w in record["warnings"])
        assert expected[("nan_activation", "critical")] > 0, record["warnings"]
        got = {(dict(k)["type"], dict(k)["severity"]): v
               for k, v in prom.query(f"tracetorchd_session_anomalies{sel}").items()}
        assert got == {k: float(v) for k, v in expected.items()}

        # Daemon-wide counters, with Prometheus' own target labels.
        total = one(prom.query('tracetorchd_events_total{job="tracetorchd"}'), "events_total")
        assert total >= session["events"]
        assert one(prom.query("tracetorchd_live_sessions"), "live") == 1
        assert one(prom.query("up"), "up") == 1

        # The run ends: its series go stale (the next scrape no longer has them).
        train.finish()
        wait_until(lambda: not prom.query(f"tracetorchd_session_steps_total{sel}"),
                   "the ended session's series to go", deadline_s=DEADLINE_S,
                   on_timeout=prom.log_text)
        wait_until(lambda: prom.query("tracetorchd_live_sessions == 0"), "no live session",
                   deadline_s=DEADLINE_S)
    finally:
        train.kill()
