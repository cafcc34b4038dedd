"""TensorBoard's own reader reads back exactly what `tracetorch export --tensorboard` and
`tracetorchd --tensorboard-dir` wrote (report/tensorboard/). Run by tools/check_tensorboard with an
interpreter that has `tensorboard` from pip:

    TRACETORCH_BUILD=build PYTHON_WITH_TENSORBOARD -m pytest tests/tensorboard

The traced runs use the agent's interpreter (TRACETORCH_AGENT_PYTHON, default /usr/bin/python3,
which has torch) and the build's Python package; this interpreter only reads.
  1. A trace file of a real run: every scalar `export --json` lists is read back bit for bit, and
     each layer's latency equals the trace file's (read with Python's json: shortest round-trip).
  2. A live run streaming to tracetorchd --tensorboard-dir: the daemon's event file holds every
     per-step value `export --remote latest --json` lists for the finished session, exactly, each
     once; the anomalies text is there.
"""

import glob
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TRACETORCH_BUILD", ROOT / "build")).resolve()
TRACETORCH = BUILD / "cli" / "tracetorch"
TRACETORCHD = BUILD / "daemon" / "server" / "tracetorchd"
AGENT_PYTHON = os.environ.get("TRACETORCH_AGENT_PYTHON", "/usr/bin/python3")
TRAIN = ROOT / "tests" / "cli" / "report_train.py"


def agent_env(**extra):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def read_back(logdir):
    """{tag: {step: value}} of every scalar TensorBoard reads in `logdir`, and the texts."""
    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={
        event_accumulator.TENSORS: 0, event_accumulator.SCALARS: 0})
    acc.Reload()
    scalars, texts = {}, {}
    for tag in acc.Tags()["tensors"]:
        for e in acc.Tensors(tag):
            value = tensor_util.make_ndarray(e.tensor_proto)
            if value.dtype.kind in "SO":
                texts.setdefault(tag, []).append(value.item().decode())
                continue
            steps = scalars.setdefault(tag, {})
            assert e.step not in steps, f"{tag} step {e.step} twice"
            steps[e.step] = value.item()
    return scalars, texts


def expected(listing):
    out = {}
    for s in listing["scalars"]:
        out.setdefault(s["tag"], {})[s["step"]] = s["value"]
    return out


@pytest.fixture
def work():
    d = tempfile.mkdtemp(prefix="tbcheck")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


def train(out, *extra, env=None):
    p = subprocess.run([AGENT_PYTHON, str(TRAIN), "--out", str(out), *extra],
                       env=env or agent_env(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def export(*args, env=None):
    p = subprocess.run([str(TRACETORCH), "export", *args, "--json"], env=env or agent_env(),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_trace_file_reads_back_exactly(work):
    train(work / "run.json", "--steps", "12", "--nan-at", "8")
    listing = export("--tensorboard", str(work / "logs"), str(work / "run.json"))
    want = expected(listing)
    got, texts = read_back(work / "logs")
    assert got == want  # Every tag, step and value, bit for bit (doubles compare exactly).
    trace = json.loads((work / "run.json").read_text())
    last = max(l["forward_count"] for l in trace["layers"]) - 1
    for layer in trace["layers"]:
        if layer["forward_count"] > 0:
            assert got[f"layers/{layer['full_name']}/latency_ms"] == {last: layer["latency_ms"]}
    assert got["layers/blocks.0.ff/non_finite"][last] == 1.0
    assert "NaN origin:** blocks.0.ff" in texts["anomalies"][0]
    print(f"{sum(len(v) for v in got.values())} scalars over {len(got)} tags read back exactly")


def test_the_daemon_writes_a_live_session_as_it_arrives(work):
    rpc = work / "rpc.sock"
    ingest = work / "ingest.sock"
    log = open(work / "daemon.log", "wb")
    daemon = subprocess.Popen(
        [str(TRACETORCHD), "--socket", str(ingest), "--service-socket", str(rpc),
         "--data-dir", str(work / "data"), "--snapshot-interval", "1",
         "--tensorboard-dir", str(work / "live"), "--log-level", "info"],
        stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while not (rpc.exists() and ingest.exists()):
            assert time.monotonic() < deadline, (work / "daemon.log").read_text()
            time.sleep(0.05)
        env = agent_env(TRACETORCH_DAEMON=str(ingest), TRACETORCH_DAEMON_RPC=str(rpc))
        train(work / "run.json", "--steps", "40", "--nan-at", "30", env=env)
        listing = export("--tensorboard", str(work / "fetched"), "--remote", str(rpc), "latest",
                         env=env)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        log.close()
    runs = glob.glob(str(work / "live" / "*"))
    assert len(runs) == 1, (work / "daemon.log").read_text()
    got, texts = read_back(runs[0])
    want = expected(listing)
    per_step = {t: v for t, v in want.items()
                if t.rsplit("/", 1)[-1] in ("latency_ms", "activation_std", "grad_norm", "non_finite")}
    assert len(per_step["layers/blocks.0.ff/latency_ms"]) == 40
    for tag, points in per_step.items():
        assert got.get(tag) == points, tag
    assert got["layers/head/nan_count"] == want["layers/head/nan_count"]
    assert "blocks.0.ff" in texts["anomalies"][0]
    # And what `export --remote` wrote reads back exactly too.
    fetched, _ = read_back(work / "fetched")
    assert fetched == want
    print(f"daemon: {sum(len(v) for v in got.values())} scalars read back exactly")
