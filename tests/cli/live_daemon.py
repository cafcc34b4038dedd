"""Helpers for the live-watch end-to-end tests: a tracetorchd on temporary sockets and a traced
training run (live_train.py, the Python agent) streaming to it. Every test that needs a daemon
takes it from here (the `live` fixture); processes and waits come from conftest.py.

Environment (tests/CMakeLists.txt sets it):
  TRACETORCHD_BIN        the built tracetorchd
  TRACETORCH_PYTHONPATH  the build's python/ folder (the tracetorch package with its extension)
  TRACETORCH_PYTHON      the interpreter with torch (/usr/bin/python3)
"""

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import Spawned, wait_until  # noqa: F401 (wait_until is re-exported)

DAEMON_BIN = os.environ.get("TRACETORCHD_BIN", "")
PYTHONPATH = os.environ.get("TRACETORCH_PYTHONPATH", "")
PYTHON = os.environ.get("TRACETORCH_PYTHON", "/usr/bin/python3")
TRAIN = str(pathlib.Path(__file__).with_name("live_train.py"))
DEADLINE_S = 90


def require_live_setup():
    if not DAEMON_BIN or not os.path.exists(DAEMON_BIN):
        pytest.skip("TRACETORCHD_BIN is not set (run through ctest)")
    if not PYTHONPATH or not os.path.isdir(os.path.join(PYTHONPATH, "tracetorch")):
        pytest.skip("TRACETORCH_PYTHONPATH does not hold the tracetorch package (agent not built)")


class Daemon:
    """tracetorchd on sockets in a short temporary folder (socket paths must stay short)."""

    def __init__(self, *extra, log_level="warn"):
        self.extra = list(extra)
        self.log_level = log_level
        self.dir = tempfile.mkdtemp(prefix="ttw")
        self.ingest = os.path.join(self.dir, "ingest.sock")
        self.rpc = os.path.join(self.dir, "rpc.sock")
        self.data = os.path.join(self.dir, "data")
        self.log = open(os.path.join(self.dir, "daemon.log"), "ab")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [DAEMON_BIN, "--socket", self.ingest, "--service-socket", self.rpc,
             "--data-dir", self.data, "--snapshot-interval", "1", "--log-level", self.log_level,
             *self.extra],
            stdout=self.log, stderr=self.log)
        wait_until(lambda: os.path.exists(self.rpc) and os.path.exists(self.ingest),
                   "tracetorchd's sockets", deadline_s=30, on_timeout=self.log_text)
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def log_text(self):
        try:
            with open(os.path.join(self.dir, "daemon.log"), "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        env["TRACETORCH_DAEMON"] = self.ingest
        env["TRACETORCH_DAEMON_RPC"] = self.rpc
        env["PYTHONPATH"] = PYTHONPATH
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(extra)
        return env

    def cleanup(self):
        self.stop()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Training:
    """live_train.py streaming to `daemon`, steered by files in the daemon's folder."""

    def __init__(self, daemon, *extra, env=None):
        self.stop_file = os.path.join(daemon.dir, "stop")
        self.nan_file = os.path.join(daemon.dir, "nan")
        self._run = Spawned(
            [PYTHON, TRAIN, "--stop-file", self.stop_file, "--nan-file", self.nan_file, *extra],
            env=daemon.env(**(env or {})), merge_stderr=True)
        self.proc = self._run.proc

    @property
    def output(self):
        return self._run.output

    def steps(self):
        lines = [l for l in self.output.splitlines() if l.startswith("step ")]
        return int(lines[-1].split()[1]) if lines else 0

    def wait_steps(self, n):
        wait_until(lambda: self.steps() >= n or self.proc.poll() is not None,
                   f"training step {n}", deadline_s=DEADLINE_S, on_timeout=lambda: self.output)
        assert self.steps() >= n, self.output

    def poison(self):
        pathlib.Path(self.nan_file).touch()

    def finish(self):
        pathlib.Path(self.stop_file).touch()
        code, _, _ = self._run.wait(timeout=DEADLINE_S)
        assert code == 0, self.output
        return code

    def kill(self):
        self._run.kill()


@pytest.fixture
def live():
    """A started daemon; trainings started with live.train(...) are killed at the end."""
    require_live_setup()
    daemon = Daemon().start()
    started = []

    class Live:
        pass

    ctx = Live()
    ctx.daemon = daemon
    ctx.train = lambda *extra, env=None: started.append(Training(daemon, *extra, env=env)) or started[-1]
    yield ctx
    for t in started:
        t.kill()
    daemon.cleanup()
