"""One address per daemon: the daemon commands of README.md and docs/daemon.md work as printed (TRACETORCH_DAEMON names
the daemon for tracetorchd, the agent and the tools), any name of the agents' socket works with
--remote (the daemon hands a gRPC client's connection to its service), and a tool that finds no
daemon says where it looked and how to point it at one."""

import json
import os
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import BIN, run, wait_until
from live_daemon import DAEMON_BIN, PYTHON, PYTHONPATH, TRAIN, require_live_setup


@pytest.fixture
def folder():
    d = tempfile.mkdtemp(prefix="tta")  # Short: socket paths hold 107 bytes.
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "TRACETORCH_DAEMON", "TRACETORCH_DAEMON_RPC")}
    env.update(extra)
    return env


class _Daemon:
    def __init__(self, folder, args, env):
        self.log_path = os.path.join(folder, "daemon.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([DAEMON_BIN, *args], stdout=log, stderr=log, env=env)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)


def _train(env, steps=3):
    r = subprocess.run([PYTHON, TRAIN, "--stop-file", "/nonexistent", "--max-steps", str(steps)],
                       env=dict(env, PYTHONPATH=PYTHONPATH, PYTHONDONTWRITEBYTECODE="1"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_readmes_daemon_commands_work_as_printed(folder):
    require_live_setup()
    # README.md, docs/daemon.md: export TRACETORCH_DAEMON=$tt/tracetorchd.sock; tracetorchd --data-dir ... &;
    # python train.py; tracetorch sessions; tracetorch snapshot latest -o run.json; inspect.
    env = _env(TRACETORCH_DAEMON=os.path.join(folder, "tracetorchd.sock"))
    daemon = _Daemon(folder, ["--data-dir", os.path.join(folder, "data")], env)
    try:
        wait_until(lambda: os.path.exists(env["TRACETORCH_DAEMON"]), "the daemon's socket",
                   deadline_s=30, on_timeout=daemon.log)
        _train(env)
        listed = wait_until(
            lambda: (lambda r: r.returncode == 0 and "finished" in r.stdout and r)(
                run("sessions", env=env)),
            "a finished session in `tracetorch sessions`", deadline_s=30, on_timeout=daemon.log)
        assert "TrainNet" in listed.stdout
        out = os.path.join(folder, "run.json")
        r = run("snapshot", "latest", "-o", out, env=env)
        assert r.returncode == 0, r.stderr
        r = run("inspect", out, env=env)
        assert r.returncode == 0 and "TrainNet" in r.stdout, r.stderr
    finally:
        daemon.stop()


def test_any_name_of_the_agents_socket_reaches_the_service(folder):
    require_live_setup()
    sock = os.path.join(folder, "x", "d.sock")  # Not tracetorchd.sock: no name to map.
    daemon = _Daemon(folder, ["--socket", sock, "--data-dir", os.path.join(folder, "data")], _env())
    try:
        wait_until(lambda: os.path.exists(sock), "the daemon's socket", deadline_s=30,
                   on_timeout=daemon.log)
        _train(_env(TRACETORCH_DAEMON=sock))
        for address in (sock, f"unix://{sock}", f"unix:{sock}",
                        os.path.join(folder, "x", "tracetorchd-rpc.sock")):
            r = wait_until(
                lambda: (lambda r: r.returncode == 0 and r)(
                    run("sessions", "--remote", address, "--json", env=_env())),
                f"sessions --remote {address}", deadline_s=30, on_timeout=daemon.log)
            sessions = json.loads(r.stdout)
            assert [s["model"] for s in sessions] == ["TrainNet"], r.stdout
        # A second tool on the same socket while an agent streams there: both work.
        r = run("snapshot", "latest", "--remote", sock, env=_env())
        assert r.returncode == 0 and '"TrainNet"' in r.stdout, r.stderr
        assert "frame" not in daemon.log().lower(), daemon.log()  # Never parsed as agent frames.
    finally:
        daemon.stop()


def test_no_daemon_at_the_default_address_says_where_it_looked(folder):
    runtime = os.path.join(folder, "run")
    r = run("sessions", env=_env(XDG_RUNTIME_DIR=runtime))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert f"{runtime}/tracetorch/tracetorchd.sock" in line
    assert "--remote" in line and "TRACETORCH_DAEMON" in line, line
    r = run("sessions", env=_env(TRACETORCH_DAEMON=os.path.join(folder, "none.sock")))
    assert r.returncode == 2 and "from $TRACETORCH_DAEMON" in r.stderr, r.stderr
