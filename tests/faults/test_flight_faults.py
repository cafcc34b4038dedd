"""The flight recorder against real faults (the reliability suite, ctest -L reliability).

A real tracetorchd (stall floor 1 s, read every 50 ms) and a traced training run (fault_train.py)
that meets one fault at step 5 of its loop: a forward deadlocked on a lock and the GIL, a process
SIGSTOPped in a backward, a SIGSEGV in a native op, a SIGKILL, an abort from an allocation failure,
and a two-rank gloo job where one rank hangs in a layer while the other blocks in the next
all-reduce. Each test checks the state and the position the daemon reports, the forensic bundle
(its ring holds the steps up to the fault) and what `tracetorch forensics` prints; the run writes
a handshake byte when it reaches the fault, so nothing waits on a fixed sleep.

Detection times (daemon-side: from the position's last move, by the process's own clock, to the
daemon's stall; from the handshake to the session's end and its bundle) are appended to
$FAULT_REPORT (one JSON line per test) when set.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

DAEMON_BIN = os.environ.get("TRACETORCHD_BIN")
CLI_BIN = os.environ.get("TRACETORCH_BIN")
OPS_LIB = os.environ.get("FAULT_OPS_LIB")
PYTHONPATH = os.environ.get("TRACETORCH_PYTHONPATH")
PYTHON = os.environ.get("TRACETORCH_PYTHON", sys.executable)
SCRIPT = Path(__file__).with_name("fault_train.py")
REPORT = os.environ.get("FAULT_REPORT")
STALL_FLOOR_S = 1.0

pytestmark = pytest.mark.skipif(
    not (DAEMON_BIN and CLI_BIN and OPS_LIB and PYTHONPATH),
    reason="TRACETORCHD_BIN, TRACETORCH_BIN, FAULT_OPS_LIB, TRACETORCH_PYTHONPATH (run via ctest)")


def poll(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.02)
    pytest.fail(f"timed out after {timeout}s waiting for {what() if callable(what) else what} "
                f"(last: {last!r})")


def report(name: str, **figures) -> None:
    if REPORT:
        with open(REPORT, "a") as f:
            f.write(json.dumps({"test": name, **figures}) + "\n")


class Daemon:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = str(root / "d.sock")
        self.rpc = str(root / "tracetorchd-rpc.sock")
        self.proc = subprocess.Popen(
            [DAEMON_BIN, "--socket", self.socket, "--data-dir", str(root / "data"),
             "--stall-floor", str(STALL_FLOOR_S), "--stall-poll", "0.05", "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        poll(lambda: self.cli("sessions", "--json", check=False).returncode == 0, 15,
             "tracetorchd to answer")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def cli(self, *args, check=True, remote=None):
        r = subprocess.run([CLI_BIN, *args, "--remote", remote or self.rpc], capture_output=True,
                           text=True, timeout=30)
        if check:
            assert r.returncode == 0, r.stderr
        return r

    def sessions(self):
        return json.loads(self.cli("sessions", "--json").stdout)

    def only_session(self):
        s = self.sessions()
        return s[0] if len(s) == 1 else None

    def forensics(self, sid, *extra):
        return json.loads(self.cli("forensics", sid, "--json", *extra).stdout)


@pytest.fixture
def root():
    path = Path(tempfile.mkdtemp(prefix="ttf-", dir="/tmp"))  # Socket paths <= 107 bytes.
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(root):
    d = Daemon(root)
    yield d
    d.stop()


def _no_core_dumps() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # A crashing run writes no core file.


class Run:
    """fault_train.py FAULT streaming to `daemon`; `handshake()` waits for its fault."""

    def __init__(self, fault: str, daemon: Daemon, env: dict | None = None) -> None:
        self.read_end, write_end = os.pipe()
        environment = dict(os.environ)
        environment.update({
            "PYTHONPATH": PYTHONPATH, "TRACETORCH_DAEMON": daemon.socket,
            "FAULT_OPS_LIB": OPS_LIB, "FAULT_FD": str(write_end), "PYTHONDONTWRITEBYTECODE": "1",
        })
        environment.pop("PYTHONFAULTHANDLER", None)
        environment.update(env or {})
        self.proc = subprocess.Popen([PYTHON, str(SCRIPT), fault], env=environment,
                                     pass_fds=(write_end,), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=_no_core_dumps)
        os.close(write_end)
        self.at_fault_ns = 0

    def handshake(self, timeout: float = 60) -> None:
        ready, _, _ = select.select([self.read_end], [], [], timeout)
        assert ready, "the run never reached its fault: " + self.stderr_so_far()
        assert os.read(self.read_end, 1) == b"x", "the run ended before its fault: " + \
            self.stderr_so_far()
        self.at_fault_ns = time.time_ns()

    def stderr_so_far(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        return self.proc.stderr.read().decode(errors="replace")[-2000:]

    def reap(self) -> int:
        """Only once the daemon has read the exit: the status lives in the zombie until then."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        os.close(self.read_end)
        return self.proc.returncode


def assert_ring_up_to_the_fault(bundle, last_step=5):
    spans = bundle.get("spans", [])
    assert spans, "the bundle has no ring"
    steps = sorted({int(s.get("step", 0)) for s in spans})
    assert steps[-1] == last_step, steps
    # The steps before the fault are whole: every layer's forward and backward.
    for step in range(max(0, last_step - 3), last_step):
        names = {(s["layer"], s.get("backward", False)) for s in spans if int(s.get("step", 0)) == step}
        for layer in ("0", "1", "2", "3"):
            assert (layer, False) in names and (layer, True) in names, (step, layer, names)
    # The fault step's forward got as far as the layers before the fault.
    at_fault = {s["layer"] for s in spans if int(s.get("step", 0)) == last_step and not s.get("backward")}
    assert {"0", "1"} <= at_fault, at_fault


def wait_aborted_with_bundle(daemon, run, signal_name):
    start = time.monotonic()
    s = poll(lambda: (x := daemon.only_session()) and x["state"] == "aborted"
             and x.get("flight", {}).get("bundles", 0) >= 1 and x, 30,
             lambda: f"an aborted session with a bundle ({daemon.sessions()})")
    seen_s = time.monotonic() - start
    assert s["flight"]["exit"] == f"killed by {signal_name}" or \
        s["flight"]["exit"].startswith(f"killed by {signal_name} ("), s["flight"]
    forensics = daemon.forensics(s["session_id"])
    bundle = forensics["bundles"][-1]
    assert bundle["reason"] == "aborted"
    return s, forensics, bundle, seen_s


@pytest.mark.parametrize("fault, signal_name", [("segv", "SIGSEGV"), ("alloc", "SIGABRT"),
                                                ("sigkill", "SIGKILL")])
def test_a_process_that_dies_leaves_its_position_ring_and_exit(daemon, fault, signal_name):
    run = Run(fault, daemon)
    run.handshake()
    if fault == "sigkill":
        os.kill(run.proc.pid, signal.SIGKILL)
    s, forensics, bundle, seen_s = wait_aborted_with_bundle(daemon, run, signal_name)
    assert run.reap() == -getattr(signal, signal_name)
    flight = bundle["snapshot"]["session"]["flight"]
    assert flight["position"] == "step 5, forward, in 2", flight
    assert_ring_up_to_the_fault(bundle)
    ended_ns = int(s["ended_unix_ns"])
    written_ns = int(bundle["written_unix_ns"])
    report(f"dies_{fault}", aborted_after_s=(ended_ns - run.at_fault_ns) / 1e9,
           bundle_after_s=(written_ns - run.at_fault_ns) / 1e9, cli_saw_it_after_s=seen_s)
    # What a person reads.
    text = daemon.cli("forensics", s["session_id"]).stdout
    assert f"killed by {signal_name}" in text and "step 5, forward, in 2" in text, text


def test_a_deadlocked_forward_is_stalled_with_its_stacks(daemon):
    run = Run("deadlock", daemon)
    run.handshake()
    s = poll(lambda: (x := daemon.only_session()) and x["state"] == "stalled" and x, 30,
             lambda: f"a stalled session ({daemon.sessions()})")
    flight = s["flight"]
    assert flight["position"] == "step 5, forward, in 2", flight
    stall_after_s = (int(flight["stalled_since_unix_ns"]) - run.at_fault_ns) / 1e9
    bundle = poll(lambda: next((b for b in daemon.forensics(s["session_id"]).get("bundles", [])
                                if b["reason"] == "stalled"), None), 30, "the stall's bundle")
    stacks = {t["tool"]: t for t in bundle.get("stacks", [])}
    assert "eu-stack" in stacks, bundle.get("stacks")
    if shutil.which("eu-stack"):
        text = stacks["eu-stack"].get("text", "")
        threads = text.split("TID ")[1:]
        assert threads, text
        # The main thread (listed first) waits for the native lock, called from Python (ctypes);
        # another thread waits for the GIL (PyEval_RestoreThread) that the main thread holds.
        assert "pthread_mutex_lock" in threads[0] and "_PyEval_EvalFrameDefault" in threads[0], text
        assert any("PyEval_RestoreThread" in t for t in threads[1:]), text
    assert_ring_up_to_the_fault(bundle)
    report("deadlock", stalled_after_fault_s=stall_after_s, floor_s=STALL_FLOOR_S,
           bundle_after_s=(int(bundle["written_unix_ns"]) - run.at_fault_ns) / 1e9)
    text = daemon.cli("sessions").stdout
    assert "stalled" in text and "step 5, forward, in 2" in text, text
    os.kill(run.proc.pid, signal.SIGKILL)
    wait_aborted_with_bundle(daemon, run, "SIGKILL")
    run.reap()


def test_a_process_stopped_in_its_backward_is_stalled_then_recovers(daemon):
    run = Run("sigstop", daemon)
    run.handshake()
    os.kill(run.proc.pid, signal.SIGSTOP)
    stopped_ns = time.time_ns()
    s = poll(lambda: (x := daemon.only_session()) and x["state"] == "stalled" and x, 30,
             lambda: f"a stalled session ({daemon.sessions()})")
    assert s["flight"]["position"] == "step 5, backward, in 2", s["flight"]
    stalled_since = int(s["flight"]["stalled_since_unix_ns"])
    stall_after_s = (stalled_since - run.at_fault_ns) / 1e9
    bundle = poll(lambda: next((b for b in daemon.forensics(s["session_id"]).get("bundles", [])
                                if b["reason"] == "stalled"), None), 30, "the stall's bundle")
    # The ring holds step 5's whole forward and its backward up to layer 2.
    spans = bundle["spans"]
    assert {(sp["layer"], sp.get("backward", False)) for sp in spans if int(sp.get("step", 0)) == 5} >= \
        {("0", False), ("1", False), ("2", False), ("3", False), ("3", True)}
    os.kill(run.proc.pid, signal.SIGCONT)
    resumed_ns = time.time_ns()
    s = poll(lambda: (x := daemon.only_session()) and x["state"] in ("live", "finished") and x, 30,
             "the session to recover")
    recovered_after_s = (time.time_ns() - resumed_ns) / 1e9
    out, err = run.proc.communicate(timeout=60)
    assert run.proc.returncode == 0, err
    final = poll(lambda: (x := daemon.only_session()) and x["state"] == "finished" and x, 30,
                 "a finished session")
    assert final["flight"]["stalls"] == 1
    report("sigstop_backward", stalled_after_fault_s=stall_after_s,
           stalled_after_stop_s=(stalled_since - stopped_ns) / 1e9,
           recovered_seen_after_cont_s=recovered_after_s)
    os.close(run.read_end)


def test_a_healthy_run_raises_no_stall_and_leaves_no_bundle(daemon):
    run = Run("none", daemon, env={"FAULT_STEPS": "30"})
    out, err = run.proc.communicate(timeout=120)
    assert run.proc.returncode == 0, err.decode()
    s = poll(lambda: (x := daemon.only_session()) and x["state"] == "finished" and x, 30,
             "a finished session")
    assert s["flight"]["recorder"] and s["flight"]["stalls"] == 0
    assert s["flight"]["bundles"] == 0
    assert daemon.forensics(s["session_id"]).get("bundles", []) == []
    os.close(run.read_end)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_gloo_job_names_the_rank_that_hung_first(root):
    # One daemon per rank, as on two nodes; the job view asks both.
    daemons = []
    for name in ("a", "b"):
        (root / name).mkdir()
        daemons.append(Daemon(root / name))
    try:
        port = free_port()
        runs = []
        for rank in (0, 1):
            runs.append(Run("gloo_hang", daemons[rank], env={
                "RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "HANG_RANK": "1", "TRACETORCH_JOB": "gloo-job",
                "FAULT_STEPS": "1000"}))
        runs[1].handshake(timeout=120)
        remotes = f"{daemons[0].rpc},{daemons[1].rpc}"

        def job():
            r = subprocess.run([CLI_BIN, "forensics", "--job", "gloo-job", "--remote", remotes,
                                "--json"], capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        view = poll(lambda: (j := job()) and all(
            r["session"].get("flight", {}).get("stalled") for r in j["ranks"]) and
            len(j["ranks"]) == 2 and j, 60, "both ranks stalled")
        first = view["ranks"][view["first_stopped"]]["session"]
        assert first["identity"]["rank"] == 1, view
        assert first["flight"]["position"] == "step 5, forward, in 2", first["flight"]
        other = view["ranks"][1 - view["first_stopped"]]["session"]["flight"]
        # Rank 0 worked 0.2 s longer, then went through its backward into the all-reduce.
        assert int(other["since_unix_ns"]) - int(first["flight"]["since_unix_ns"]) >= 200e6
        assert other["position"].startswith("step 5, backward"), other
        stalled = [int(r["session"]["flight"]["stalled_since_unix_ns"]) for r in view["ranks"]]
        report("gloo_hang", rank1_stalled_after_fault_s=(
            int(first["flight"]["stalled_since_unix_ns"]) - runs[1].at_fault_ns) / 1e9,
            both_stalled_after_fault_s=(max(stalled) - runs[1].at_fault_ns) / 1e9,
            rank0_stopped_after_rank1_s=(int(other["since_unix_ns"]) -
                                         int(first["flight"]["since_unix_ns"])) / 1e9)
        text = subprocess.run([CLI_BIN, "forensics", "--job", "gloo-job", "--remote", remotes],
                              capture_output=True, text=True, timeout=30).stdout
        assert "Stopped first: rank 1, step 5, forward, in 2" in text, text
        trace = root / "job.json"
        r = subprocess.run([CLI_BIN, "forensics", "--job", "gloo-job", "--remote", remotes,
                            "--perfetto", str(trace)], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        events = json.loads(trace.read_text())["traceEvents"]
        assert {e["pid"] for e in events if e["ph"] == "X"} == {0, 1}
        for run in runs:
            run.reap()
    finally:
        for d in daemons:
            d.stop()
