"""Shared helpers for the end-to-end tests of the `tracetorch` binary: running it to completion
(run), running it in the background with its output collected (Spawned), and waiting for what a
process shows (wait_until). live_daemon.py builds the daemon and the traced training on these.

The binary and the fixtures come from the environment (tests/CMakeLists.txt sets them):
  TRACETORCH_BIN       path of the built `tracetorch`
  TRACETORCH_FIXTURES  tests/fixtures/upstream
"""

import json
import os
import pathlib
import subprocess
import threading
import time

import pytest


def _require_env(name):
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set; run these tests through ctest", returncode=2)
    return value


BIN = _require_env("TRACETORCH_BIN")
FIXTURES = pathlib.Path(_require_env("TRACETORCH_FIXTURES"))


def fixture(name):
    return str(FIXTURES / name)


def load_fixture(name):
    with open(FIXTURES / name) as f:
        return json.load(f)


def clean_env(**extra):
    """The environment without NO_COLOR (so tests control it), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(extra)
    return env


NOBODY = 65534


def run(*args, env=None, cwd=None, timeout=60, as_nobody=False):
    """Runs tracetorch with stdout and stderr piped; returns CompletedProcess (text).

    as_nobody: when this test runs as root, the binary runs as nobody (uid and gid 65534, no
    supplementary groups), so that file permissions hold for it as they do for a user."""
    drop = {}
    if as_nobody and os.geteuid() == 0:
        drop = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    return subprocess.run(
        [BIN, *args],
        capture_output=True,
        text=True,
        env=env if env is not None else clean_env(),
        cwd=cwd,
        timeout=timeout,
        **drop,
    )


def wait_until(predicate, what, deadline_s=90, on_timeout=None):
    """Polls `predicate` until it returns something truthy and returns that; fails the test with
    `what` (and on_timeout(), if given) after `deadline_s` seconds."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    detail = on_timeout() if on_timeout else ""
    pytest.fail(f"timed out waiting for {what}\n{detail}")


class Spawned:
    """A process running in the background, its stdout collected by a reader thread (and its
    stderr with it when merge_stderr; else piped apart, read after it exits)."""

    def __init__(self, argv, env=None, merge_stderr=False):
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
            env=env if env is not None else clean_env())
        self._lock = threading.Lock()
        self._out = b""
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        while True:
            data = self.proc.stdout.read1(65536)
            if not data:
                return
            with self._lock:
                self._out += data

    @property
    def output(self):
        with self._lock:
            return self._out.decode(errors="replace")

    def wait_for(self, text, count=1, deadline_s=60):
        """Waits until `text` occurs `count` times in the output; returns the output. Fails at
        once when the process exits without showing it."""
        wait_until(lambda: self.output.count(text) >= count or self.proc.poll() is not None,
                   f"{text!r} x{count}", deadline_s=deadline_s,
                   on_timeout=lambda: "output so far:\n" + self.output)
        out = self.output
        assert out.count(text) >= count, f"exited before {text!r} x{count}; output:\n{out}"
        return out

    def wait(self, timeout=60):
        """Waits for the process to exit; returns (exit code, stdout, stderr)."""
        code = self.proc.wait(timeout=timeout)
        self._thread.join(timeout=10)
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        return code, self.output, err

    def stop(self, sig, timeout=60):
        """Sends `sig` and waits for the exit; returns (exit code, stdout, stderr)."""
        self.proc.send_signal(sig)
        return self.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def background():
    """background(kind, *args, **kw) starts kind(*args, **kw) (Spawned or a subclass) and returns
    it; those still running at the end of the test are killed."""
    started = []
    yield lambda kind, *a, **kw: started.append(kind(*a, **kw)) or started[-1]
    for p in started:
        p.kill()


def parse_plain_tree(output):
    """Parses the plain layer tree of `inspect` into {full_name: line}.

    Each tree line is "<guides><+-- or \\-- ><name> ..."; guides are 4 columns per level. The full
    name is rebuilt from the names of the enclosing lines, so this checks the nesting itself.
    """
    lines = output.splitlines()
    start = lines.index("Layers") + 1
    stack = []
    result = {}
    for line in lines[start:]:
        if not line:
            break
        marker = max(line.find("+-- "), line.find("\\-- "))
        assert marker >= 0 and marker % 4 == 0, f"not a tree line: {line!r}"
        assert set(line[:marker]) <= {" ", "|"}, f"bad guides: {line!r}"
        depth = marker // 4
        name = line[marker + 4 :].split(" ", 1)[0]
        del stack[depth:]
        assert len(stack) == depth, f"line nested under nothing: {line!r}"
        stack.append(name)
        result[".".join(stack)] = line
    return result


@pytest.fixture
def tmp(tmp_path):
    return tmp_path
