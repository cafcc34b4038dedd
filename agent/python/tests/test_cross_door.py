"""Two doors, one engine: the same session through the Python door and the libtorch door gives the
same record.

The scenario: a small model with a block whose own code makes a NaN (log of its input + 2) when
the input's first column is below -2 (the stem before it is the identity); four training steps (forward, ``out.sum().backward()``, no
optimiser) with deterministic inputs, the NaN planted at step 2; ``ops="on_nan"``; every block
streamed to a real tracetorchd. The Python door traces the eager model
(``tracetorch.TraceSession``); the libtorch door (``tracetorch::TraceSession``, through
``agent/libtorch/testdata/door_driver.cc``) traces the same model scripted with ``torch.jit.script``
and loaded by libtorch, run by the interpreter without the graph executor's rewrites.

Both records are exported and compared whole after normalising only what must differ:
timings (latencies, total time, op times), what names the door itself (the interpreter's and the
platform's version strings, the libtorch door's ``front_door``) and the op graph's ``source``
("eager" / "cpp"). Everything else, values included, must be equal: layers, counts, shapes,
statistics, gradients, anomalies, the NaN origin and its op, the kept op graph, the stream's
``dropped_events``, ``hook_errors``. The daemon must hold both sessions with the op graph.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from polling import poll

from tracetorch import TraceSession

DRIVER = os.environ.get("TRACETORCH_LIBTORCH_DRIVER")
DAEMON_BIN = os.environ.get("TRACETORCHD_BIN")
CLI_BIN = os.environ.get("TRACETORCH_BIN")

STEPS = 4
NAN_STEP = 2

pytestmark = pytest.mark.skipif(
    not DRIVER or not DAEMON_BIN or not CLI_BIN,
    reason="TRACETORCH_LIBTORCH_DRIVER / TRACETORCHD_BIN / TRACETORCH_BIN not set (run via ctest)")


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        # A tensor, not a Python number: eager Python passes a number to aten::add as a wrapped
        # 0-dim tensor (add.Tensor), TorchScript as a Scalar (add.Scalar), a difference of the
        # front ends that would show in the op graph.
        self.register_buffer("shift", torch.tensor(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return torch.log(x + self.shift) * h  # NaN born here, inside the block's own code.


class Net(nn.Module):
    """stem -> block -> head, with no code of the root's own between them: in a TorchScript
    model such an op names no module, and the libtorch door leaves it in the pass of the module
    before it (README, libtorch front door), where the eager door puts it in the root's."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        with torch.no_grad():  # The identity: the planted value reaches the block as it is.
            self.stem.weight.copy_(torch.eye(4))
            self.stem.bias.zero_()
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.stem(x)))


def step_input(step: int) -> torch.Tensor:
    """door_driver.cc's StepInput, value for value."""
    x = ((torch.arange(12, dtype=torch.float32) + float(step)) * 0.37).sin() + 1.5
    x = x.reshape(3, 4)
    if step == NAN_STEP:
        x[:, 0] = -5.0
    return x


# ---- normalising --------------------------------------------------------------------------------

_TIMING_KEYS = {"latency_ms", "latency_ms_min", "latency_ms_max", "latency_ms_mean",
                "bwd_latency_ms", "bwd_latency_ms_min", "bwd_latency_ms_max",
                "bwd_latency_ms_mean", "total_time_ms", "time_ms"}
# What names the door and its process, not the session.
_DOOR_METADATA = {"pytorch_version", "python_version", "platform", "cuda_version", "front_door"}


def _drop_timings(value):
    if isinstance(value, dict):
        return {k: ("<time>" if k in _TIMING_KEYS and v is not None else _drop_timings(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_drop_timings(v) for v in value]
    return value


def normalise(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    for key in _DOOR_METADATA:
        doc["metadata"].pop(key, None)
    if doc.get("op_graph"):
        doc["op_graph"]["source"] = "<door>"
    return _drop_timings(doc)


def _first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in {'python' if k in a else 'libtorch'}"
            d = _first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} (python) != {b!r} (libtorch)"


# ---- the daemon ---------------------------------------------------------------------------------


@pytest.fixture
def daemon():
    root = Path(tempfile.mkdtemp(prefix="ttx-", dir="/tmp"))  # Short: socket paths <= 107 bytes.
    sock, rpc = str(root / "d.sock"), str(root / "tracetorchd-rpc.sock")

    def cli(*args):
        return subprocess.run([CLI_BIN, *args, "--remote", rpc], capture_output=True, text=True,
                              timeout=20)

    proc = subprocess.Popen([DAEMON_BIN, "--socket", sock, "--data-dir", str(root / "data"),
                             "--snapshot-interval", "0.2", "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        poll(lambda: cli("sessions", "--json").returncode == 0, 15, "tracetorchd to answer")
        yield root, sock, cli
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


# ---- the test -----------------------------------------------------------------------------------


def test_both_doors_record_the_same_session(daemon):
    root, sock, cli = daemon
    torch.manual_seed(0)
    model = Net().train()
    script_path = root / "net.pt"
    torch.jit.script(model).save(str(script_path))

    # The Python door, on the eager model.
    with TraceSession(model, model_name="Net", ops="on_nan", daemon=sock) as session:
        for step in range(STEPS):
            model(step_input(step)).sum().backward()
    python_doc = json.loads(session.export(root / "python.json").read_text())
    python_sid = session.daemon_stats["session_id"]

    # The libtorch door, on the same model scripted.
    libtorch_path = root / "libtorch.json"
    run = subprocess.run([DRIVER, str(script_path), str(libtorch_path), "--daemon", sock,
                          "--ops", "on_nan", "--steps", str(STEPS), "--nan-step", str(NAN_STEP),
                          "--model-name", "Net"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    libtorch_doc = json.loads(libtorch_path.read_text())

    # What the scenario must show in each, before comparing them.
    for doc in (python_doc, libtorch_doc):
        origin = doc["metadata"]["nan_origin"]
        assert origin["layer"] == "block" and origin["step"] == NAN_STEP
        assert origin["op_func"] == "log" and origin["op_module"] == "block"
        assert doc["op_graph"]["step"] == NAN_STEP
        assert doc["metadata"]["dropped_events"] == 0  # A real daemon took everything.
        assert doc["metadata"]["hook_errors"] == 0
        assert [layer["forward_count"] for layer in doc["layers"]] == [STEPS] * 4
    assert python_doc["op_graph"]["source"] == "eager"
    assert libtorch_doc["op_graph"]["source"] == "cpp"

    if os.environ.get("CROSS_DOOR_DUMP"):
        Path(os.environ["CROSS_DOOR_DUMP"]).mkdir(exist_ok=True)
        shutil.copy(root / "python.json", os.environ["CROSS_DOOR_DUMP"])
        shutil.copy(libtorch_path, os.environ["CROSS_DOOR_DUMP"])
    difference = _first_difference(normalise(python_doc), normalise(libtorch_doc))
    assert difference is None, difference

    # The daemon holds both sessions, each with its op graph and the origin that names its op.
    ids = [s["session_id"] for s in json.loads(cli("sessions", "--json").stdout)]
    assert python_sid in ids and len(ids) == 2, ids

    def snapshot(sid):
        out = root / f"{sid}.json"
        r = cli("snapshot", sid, "-o", str(out))
        if r.returncode != 0:
            return None
        doc = json.loads(out.read_text())
        return doc if "op_graph" in doc and doc["metadata"].get("nan_origin", {}).get("op") \
            else None

    for sid in ids:
        doc = poll(lambda: snapshot(sid), 10, f"session {sid}'s op graph at the daemon")
        assert doc["metadata"]["nan_origin"]["op"] == python_doc["metadata"]["nan_origin"]["op"]
        assert doc["op_graph"]["step"] == NAN_STEP
