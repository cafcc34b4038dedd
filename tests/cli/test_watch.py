"""End-to-end: `tracetorch watch` on a file that appears, is replaced atomically, turns invalid for a
moment, and a Ctrl+C (SIGINT) or SIGTERM that ends it with exit code 0."""

import os
import signal
import subprocess
import time

import pytest

from conftest import BIN, Spawned, clean_env, fixture

TIMEOUT_S = 20


class Watch(Spawned):
    """A running `tracetorch watch ARGS...`."""

    def __init__(self, *args, env=None):
        super().__init__([BIN, "watch", *args], env=env)

    def wait_for(self, text, count=1):
        return super().wait_for(text, count, deadline_s=TIMEOUT_S)

    def stop(self, sig):
        return super().stop(sig, timeout=TIMEOUT_S)


@pytest.fixture
def watches(background):
    return lambda *args, **kw: background(Watch, *args, **kw)


def replace_atomically(path, text):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read(name):
    with open(fixture(name)) as f:
        return f.read()


def test_watch_missing_file_then_created_replaced_and_interrupted(tmp_path, watches):
    path = str(tmp_path / "trace.json")
    w = watches(path, "--interval", "0.1")
    w.wait_for(f"Waiting for {path} to appear... (Ctrl+C to exit)")

    replace_atomically(path, read("example_trace.json"))
    w.wait_for("SimpleTransformer")
    w.wait_for("No anomalies detected")

    replace_atomically(path, read("train_trace.json"))
    w.wait_for("Variance spike: std increased from 0.07 to 0.99")
    w.wait_for("+-- blocks (Sequential)")

    # A moment of invalid content: the last frame stays, a one-line notice is added.
    replace_atomically(path, '{"metadata": {"model_name": ')
    out = w.wait_for("(showing the last good version)")
    notice = [l for l in out.splitlines() if "(showing the last good version)" in l]
    assert len(notice) == 1
    assert notice[0].startswith(f"notice: {path}: line 1, column "), notice[0]

    replace_atomically(path, read("train_trace_perturbed.json"))
    w.wait_for("Watching ", count=3)
    w.wait_for("High activation variance: std=26.53")

    code, out, err = w.stop(signal.SIGINT)
    assert code == 0, err
    assert err == ""
    assert "\x1b" not in out  # Piped: no escape codes, no screen clearing.
    # Appended frames are separated by a blank line.
    assert out.count("\n\nWatching ") == 3
    frames = out.split("\n\nWatching ")
    assert "SimpleTransformer" in frames[1] and "TrainNet" not in frames[1]
    assert "TrainNet" in frames[2]


def test_watch_sees_in_place_rewrites(tmp_path, watches):
    path = str(tmp_path / "trace.json")
    text = read("train_trace.json")
    with open(path, "w") as f:
        f.write(text)
    w = watches(path, "--interval", "0.1")
    w.wait_for("TrainNet")
    # A non-atomic writer: truncate, write half, then the rest. The half-written file is seen as
    # invalid (the last good frame stays, with a notice); the rest completes it.
    with open(path, "w") as f:
        f.write(text[: len(text) // 2].replace("TrainNet", "TrainNeu"))
        f.flush()
        w.wait_for("(showing the last good version)")
        f.write(text[len(text) // 2 :])
    w.wait_for("TrainNeu")
    code, _, _ = w.stop(signal.SIGINT)
    assert code == 0


def test_watch_sigterm_exits_0(tmp_path, watches):
    path = str(tmp_path / "trace.json")
    replace_atomically(path, read("example_trace.json"))
    w = watches(path, "--interval", "0.1")
    w.wait_for("SimpleTransformer")
    code, _, err = w.stop(signal.SIGTERM)
    assert code == 0, err


def test_watch_sigint_while_waiting_for_file(tmp_path, watches):
    # An hour between polls: the watch can only end within stop()'s timeout if the signal cuts
    # the wait short.
    w = watches(str(tmp_path / "never.json"), "--interval", "3600")
    w.wait_for("Waiting for")
    code, out, _ = w.stop(signal.SIGINT)
    assert code == 0
    assert out.count("Waiting for") == 1  # Said once.
    assert out.endswith("Stopped watching.\n")  # tracetorch-ml's last words.


def test_watch_applies_filters(tmp_path, watches):
    path = str(tmp_path / "trace.json")
    replace_atomically(path, read("train_trace.json"))
    w = watches(path, "--interval", "0.1", "--type", "Linear", "--filter", "blocks.*")
    out = w.wait_for("11 (2 shown)")
    code, out, _ = w.stop(signal.SIGINT)
    assert code == 0
    assert "fc (Linear)" in out and "GELU" not in out


def test_watch_rejects_bad_interval(tmp_path):
    r = subprocess.run([BIN, "watch", str(tmp_path / "t.json"), "--interval", "-1"],
                       capture_output=True, text=True, env=clean_env(), timeout=TIMEOUT_S)
    assert r.returncode == 2
    assert r.stderr.startswith("tracetorch: --interval must be") and r.stderr.count("\n") == 1


def test_watch_on_a_terminal_redraws_in_place(tmp_path):
    import pty
    import select

    path = str(tmp_path / "trace.json")
    replace_atomically(path, read("example_trace.json"))
    master, slave = pty.openpty()
    proc = subprocess.Popen([BIN, "watch", path, "--interval", "0.1"], stdout=slave,
                            stderr=subprocess.PIPE, env=clean_env())
    os.close(slave)
    out = b""

    def read_until(text):
        nonlocal out
        deadline = time.monotonic() + TIMEOUT_S
        while text not in out and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                out += os.read(master, 65536)
        assert text in out, out.decode(errors="replace")

    try:
        read_until(b"SimpleTransformer")
        replace_atomically(path, read("train_trace.json"))
        read_until(b"TrainNet")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=TIMEOUT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    clear = b"\x1b[H\x1b[2J"
    assert out.count(clear) == 2  # One per frame: cleared, not appended.
    assert out.index(clear, 1) < out.index(b"TrainNet")
    assert "├── ".encode() in out  # A terminal gets the rich style.
