"""TraceSession(model, ops="on_nan"): the op where a NaN entered, found live in a training loop.

The daemon test needs the daemon and the CLI from the build (TRACETORCHD_BIN, TRACETORCH_BIN, set by
ctest); it is skipped without them. Waits are polls with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from polling import poll
import torch
import torch.nn as nn

import tracetorch as tl
from tracetorch import TraceSession

DAEMON_BIN = os.environ.get("TRACETORCHD_BIN")
CLI_BIN = os.environ.get("TRACETORCH_BIN")
POISON_STEP = 3


class Block(nn.Module):
    """A residual block whose log goes NaN when poisoned: inside the block, not at a boundary."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.shift = 1.0

    def forward(self, x):
        h = torch.relu(self.conv1(x))
        h = torch.log(h + self.shift)  # shift < 0: log of a negative, NaN.
        return self.conv2(h) + x


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block = Block()
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        h = self.block(self.stem(x))
        return self.head(h.mean(dim=(2, 3)))


def train(session_kwargs, steps=6, poison=POISON_STEP):
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: the weights stay finite.
    x = torch.rand(2, 3, 8, 8)
    with TraceSession(model, **session_kwargs) as session:
        for step in range(steps):
            model.block.shift = -1e4 if step == poison else 1.0
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
    return session


def test_names_the_op_and_step_where_the_nan_entered(tmp_path):
    session = train({"ops": "on_nan"})
    origin = session.record.metadata.nan_origin
    assert origin is not None
    assert origin.step == POISON_STEP
    assert origin.layer == "block"  # The layer trace: the block's output is the first NaN layer.
    assert origin.op_func == "log" and origin.op.startswith("log_")
    assert origin.op_module == "block"
    assert session.ops_stats == {"recorded_steps": POISON_STEP + 1, "skipped_steps": 0,
                                 "kept_step": POISON_STEP}
    graph = session.op_graph
    assert graph is not None
    assert graph.nan_origin is not None and graph.nan_origin.label == origin.op
    # The graph is the whole step's forward, with module containment and no tensors.
    funcs = [op.func_name for op in graph.ops]
    assert funcs.count("conv2d") == 3 and "log" in funcs and "linear" in funcs
    assert all(op.out is None for op in graph.ops)
    log = graph[origin.op]
    assert log.module == "block"
    assert [graph[p].func_name for p in log.parents] == ["add"]  # h + shift: finite, negative.
    assert log.stats["nan_count"] > 0

    # Persisted: the record's "op_graph" member is the op graph document; our readers read it.
    path = session.export(tmp_path / "trace.json")
    doc = json.loads(path.read_text())
    assert doc["op_graph"]["format"] == "tracetorch.ops" and doc["op_graph"]["step"] == POISON_STEP
    assert doc["metadata"]["nan_origin"]["op"] == origin.op
    assert doc["metadata"]["nan_origin"]["op_module"] == "block"
    loaded = tl.load(str(path))
    assert loaded.nan_origin.label == origin.op and len(loaded.ops) == len(graph.ops)
    back = tl.load_json(str(path))
    assert back.metadata.nan_origin.op == origin.op
    assert back.op_graph_json == session.record.op_graph_json
    # The record holds the graph; op_graph_json is its document, and setting one reads it.
    assert json.loads(back.op_graph_json) == doc["op_graph"]
    back.op_graph_json = ""
    assert back.op_graph_json == "" and "op_graph" not in back.to_dict()
    back.op_graph_json = session.record.op_graph_json
    assert back.op_graph_json == session.record.op_graph_json
    with pytest.raises(ValueError):
        back.op_graph_json = '{"format": "x"}'
    assert back.op_graph_json == session.record.op_graph_json  # Unchanged by the refused text.


def test_clean_steps_keep_no_graph(tmp_path):
    session = train({"ops": "on_nan"}, steps=4, poison=-1)
    assert session.record.metadata.nan_origin is None
    assert session.record.op_graph_json == "" and session.op_graph is None
    assert session.ops_stats["recorded_steps"] == 4 and session.ops_stats["kept_step"] is None
    doc = json.loads(session.export(tmp_path / "clean.json").read_text())
    assert "op_graph" not in doc


def test_works_without_statistics():
    # capture_stats=False turns off the layer statistics; the op recorder only counts NaN/Inf
    # anyway, so the origin op is found the same way.
    session = train({"ops": "on_nan", "capture_stats": False})
    assert session.record.metadata.nan_origin.op_func == "log"
    assert session.record.metadata.nan_origin.step == POISON_STEP


def test_off_by_default_and_bad_values_refused():
    session = train({})
    assert session.ops is None and session.ops_stats is None
    assert session.record.metadata.nan_origin.op == ""
    assert session.record.op_graph_json == ""
    assert TraceSession(Net(), ops="off").ops is None
    for bad in ("always", "ON_NAN", 1, True):
        with pytest.raises(ValueError, match='ops must be "on_nan", "off" or None'):
            TraceSession(Net(), ops=bad)


def test_tl_trace_inside_the_session_skips_that_step():
    torch.manual_seed(0)
    model = Net()
    x = torch.rand(2, 3, 8, 8)
    with TraceSession(model, ops="on_nan") as session:
        model(x)
        trace = tl.trace(model, x, save=None)
    assert len(trace.ops) > 0
    assert session.ops_stats["recorded_steps"] == 1 and session.ops_stats["skipped_steps"] == 1
    assert session.hook_errors == 0


@pytest.mark.skipif(not CLI_BIN, reason="TRACETORCH_BIN not set (run via ctest)")
def test_cli_ops_and_inspect_read_a_training_trace(tmp_path):
    session = train({"ops": "on_nan"})
    op = session.record.metadata.nan_origin.op
    path = session.export(tmp_path / "trace.json")
    r = subprocess.run([CLI_BIN, "ops", str(path), "--func", "log"], capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert op in r.stdout
    r = subprocess.run([CLI_BIN, "inspect", str(path)], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert "NaN origin op" in r.stdout and f"{op} (origin)" in r.stdout
    clean = train({"ops": "on_nan"}, steps=2, poison=-1).export(tmp_path / "clean.json")
    r = subprocess.run([CLI_BIN, "ops", str(clean)], capture_output=True, text=True, timeout=20)
    assert r.returncode != 0 and "without an op graph" in r.stderr


@pytest.mark.skipif(not DAEMON_BIN or not CLI_BIN,
                    reason="TRACETORCHD_BIN / TRACETORCH_BIN not set (run via ctest)")
def test_streamed_to_the_daemon_and_kept_across_a_restart():
    root = Path(tempfile.mkdtemp(prefix="ttn-", dir="/tmp"))  # Short: socket paths <= 107 bytes.
    sock, rpc, data = str(root / "d.sock"), str(root / "tracetorchd-rpc.sock"), root / "data"

    def cli(*args):
        return subprocess.run([CLI_BIN, *args, "--remote", rpc], capture_output=True, text=True,
                              timeout=20)

    def start():
        proc = subprocess.Popen([DAEMON_BIN, "--socket", sock, "--data-dir", str(data),
                                 "--snapshot-interval", "0.2", "--log-level", "warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        poll(lambda: cli("sessions", "--json").returncode == 0, 15, "tracetorchd to answer")
        return proc

    def stop(proc):
        proc.terminate()
        proc.wait(10)

    proc = start()
    try:
        session = train({"ops": "on_nan", "daemon": sock})
        sid = session.daemon_stats["session_id"]
        op = session.record.metadata.nan_origin.op
        assert sid and op.startswith("log_")

        def snapshot():
            out = root / "snap.json"
            r = cli("snapshot", sid, "-o", str(out))
            if r.returncode != 0:
                return None
            doc = json.loads(out.read_text())
            return doc if doc["metadata"].get("nan_origin", {}).get("op") and \
                "op_graph" in doc else None

        doc = poll(snapshot, 10, "the snapshot to carry the origin op and the op graph")
        assert doc["metadata"]["nan_origin"]["op"] == op
        assert doc["metadata"]["nan_origin"]["op_module"] == "block"
        assert doc["op_graph"]["step"] == POISON_STEP
        r = subprocess.run([CLI_BIN, "inspect", str(root / "snap.json")], capture_output=True,
                           text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        assert f"{op} (origin)" in r.stdout

        # The daemon persisted it: a restarted daemon still has it.
        poll(lambda: any(data.rglob("*.json")), 10, "the daemon to persist the session")
        stop(proc)
        proc = start()
        doc = poll(snapshot, 10, "the restored snapshot")
        assert doc["metadata"]["nan_origin"]["op"] == op
    finally:
        stop(proc)
        shutil.rmtree(root, ignore_errors=True)
