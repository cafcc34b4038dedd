"""The model zoo (zoo_models.py): a healthy run of every model raises no warning or critical
anomaly, and every planted fault is located exactly (layer, op, module, step) through the
embedded record, the exported file, `tracetorch inspect` and a real daemon.

The CLI and daemon checks need the programs from the build (TRACETORCH_BIN, TRACETORCHD_BIN, set
by ctest); without them those parts are skipped. Waits are polls with deadlines.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import torch

import tracetorch as tl
import zoo_models as zoo

CLI_BIN = os.environ.get("TRACETORCH_BIN")
DAEMON_BIN = os.environ.get("TRACETORCHD_BIN")
CASES = [pytest.param(c, id=c.name) for c in zoo.CASES]


def _serious(anomalies):
    return [a for a in anomalies if a.severity.value in ("warning", "critical")]


def _describe(anomalies):
    return "\n".join(f"{a.severity.value} {a.layer}: {a.message}" for a in anomalies)


def _poll(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def daemon():
    """A real tracetorchd on a temporary socket for the module's faulty runs; None without the
    binaries."""
    if not DAEMON_BIN or not CLI_BIN:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="ttz-", dir="/tmp"))  # Short: socket paths <= 107 bytes.
    sock, rpc = str(root / "d.sock"), str(root / "tracetorchd-rpc.sock")
    proc = subprocess.Popen([DAEMON_BIN, "--socket", sock, "--data-dir", str(root / "data"),
                             "--snapshot-interval", "0.2", "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cli(*args):
        return subprocess.run([CLI_BIN, *args, "--remote", rpc], capture_output=True, text=True,
                              timeout=30)

    try:
        _poll(lambda: cli("sessions", "--json").returncode == 0, 15, "tracetorchd to answer")
        yield {"sock": sock, "cli": cli, "root": root}
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


# ---- Healthy runs --------------------------------------------------------------------------------


def _justified(case, model, anomalies):
    """The warnings a healthy run of `case` raises for a reason the test checks here, each one
    real: they are what the model does, not false alarms."""
    if case.name != "vit":
        return []
    # torchvision's VisionTransformer initialises its classification head to zeros: at step 0
    # the gradient of everything before the head is exactly zero, and zero_gradient (sticky, as
    # tracetorch-ml's) says so. Only those layers, only that check.
    fresh, _ = zoo.build(case, None)
    assert not fresh.heads.head.weight.any(), "torchvision's ViT head is no longer zero-init"
    return [a for a in anomalies if a.type.value == "zero_gradient"
            and not a.layer.startswith("heads")]


@pytest.mark.parametrize("case", CASES)
def test_healthy_run_raises_no_false_alarm_and_its_audit_is_ok(case):
    session = zoo.train(case, None, ops="on_nan")
    record = session.record
    justified = _justified(case, session.zoo_model, session.anomalies)
    serious = [a for a in _serious(session.anomalies) if a not in justified]
    assert not serious, _describe(serious)
    assert record.metadata.nan_origin is None
    assert session.op_graph is None
    assert session.hook_errors == 0, record.metadata.extra
    # ops="on_nan" was not captured by a harmless -inf: it recorded every step.
    assert session.ops_stats["recorded_steps"] == case.forward_steps
    assert session.steps == case.forward_steps
    assert record.layers, "no layer traced"
    if case.additive_mask:
        masked = [l for l in record.layers if any(t.is_mask for t in l.inputs)]
        assert masked, "no layer received a mask: the case does not test what it should"

    # The audit of the trained model (eval mode): graph checks and replay are clean, and the
    # perturbation reached the output through what the model takes.
    model = session.zoo_model
    model.eval()
    report = _traced(case, model).audit(model)
    assert report.ok, str(report)
    assert report.replay.perturbed_changes_output is True, str(report)
    args, _ = zoo.first_inputs(case)
    assert report.replay.perturbation == ("input" if args[0].is_floating_point() else "token")


# ---- Planted faults ------------------------------------------------------------------------------


def _expected_fault(case, session):
    """The case's fault, with the fast path's own location where the torch version took it."""
    fault = case.fault
    if case.name == "transformer_encoder_eval_fastpath":
        traced = {l.full_name for l in session.record.layers}
        if "encoder.layers.1.linear1" in traced:  # This version declined the fast path.
            return zoo.Fault(fault.kind, fault.step, param=fault.param,
                             layer="encoder.layers.1.linear1", op_func="linear",
                             op_module="encoder.layers.1.linear1")
    return fault


def _check_origin(origin, fault, where):
    assert origin is not None, f"{where}: no origin"
    get = (lambda k: origin[k]) if isinstance(origin, dict) else (lambda k: getattr(origin, k))
    assert get("layer") == fault.layer, where
    assert get("step") == fault.step, where
    assert get("op_func") == fault.op_func, where
    assert get("op_module") == fault.op_module, where
    assert get("op").startswith(fault.op_func + "_"), where
    kind = "nan" if fault.is_nan else "inf"
    assert get("kind") == kind, where
    backward = origin.get("pass") == "backward" if isinstance(origin, dict) else origin.backward
    assert backward == fault.backward, where


@pytest.mark.parametrize("case", CASES)
def test_planted_fault_is_located_exactly(case, daemon, tmp_path):
    kwargs = {"ops": "on_nan"}
    if daemon is not None:
        kwargs["daemon"] = daemon["sock"]
    session = zoo.train(case, case.fault, **kwargs)
    fault = _expected_fault(case, session)
    record = session.record

    # The embedded record, and its one critical finding on the origin layer.
    origin = record.metadata.nan_origin
    _check_origin(origin, fault, "record")
    critical = [a for a in session.anomalies if a.severity.value == "critical"
                and a.details.get("origin") == fault.layer]
    assert critical, _describe(session.anomalies)
    assert critical[0].details["op"] == origin.op
    graph = session.op_graph
    assert graph is not None and graph.nan_origin is not None
    assert graph.nan_origin.label == origin.op and graph.nan_origin.func_name == fault.op_func
    assert session.ops_stats["kept_step"] == fault.step

    # The exported file.
    path = session.export(tmp_path / f"{case.name}.json")
    doc = json.loads(path.read_text())
    _check_origin(doc["metadata"]["nan_origin"], fault, "exported file")
    assert doc["op_graph"]["step"] == fault.step

    # tracetorch inspect.
    if CLI_BIN:
        r = subprocess.run([CLI_BIN, "inspect", str(path)], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        assert f"{fault.layer} at step {fault.step}" in r.stdout, r.stdout
        assert f"{origin.op} ({fault.op_func}) in {fault.op_module}" in r.stdout, r.stdout
        assert f"{origin.op} (origin)" in r.stdout, r.stdout

    # A real daemon: its snapshot of the streamed session.
    if daemon is not None:
        sid = session.daemon_stats["session_id"]
        snap = daemon["root"] / f"{case.name}-snap.json"

        def snapshot():
            r = daemon["cli"]("snapshot", sid, "-o", str(snap))
            if r.returncode != 0:
                return None
            d = json.loads(snap.read_text())
            o = d["metadata"].get("nan_origin")
            return d if o and o.get("op") and "op_graph" in d else None

        d = _poll(snapshot, 15, "the daemon's snapshot to carry the origin and its op")
        _check_origin(d["metadata"]["nan_origin"], fault, "daemon snapshot")
        assert d["op_graph"]["step"] == fault.step
        found = [w for w in d["warnings"] if w["severity"] == "critical"
                 and w.get("details", {}).get("origin") == fault.layer]
        assert found, d["warnings"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in (
    "decoder_additive_mask_tied", "decoder_bool_mask", "transformer_encoder", "moe_top2")])
def test_the_layer_trace_alone_names_layer_and_step(case):
    """Without ops: the layer trace (the same rule) names the layer and the step."""
    session = zoo.train(case, case.fault)
    origin = session.record.metadata.nan_origin
    fault = case.fault
    assert origin is not None and origin.layer == fault.layer and origin.step == fault.step
    assert origin.backward == fault.backward and origin.op == ""


# ---- The audit -----------------------------------------------------------------------------------


def _traced(case, model):
    args, kwargs = zoo.first_inputs(case)
    with zoo._autocast(case):
        return tl.trace(model, *args, **kwargs)


@pytest.mark.parametrize("case", CASES)
def test_audit_names_the_planted_fault(case):
    fault = case.fault
    model, planter = zoo.build(case, fault)
    model.eval()
    if fault.kind == "poisoned_param":
        planter.poison_if_due(fault.step)
    planter.step = fault.step
    trace = _traced(case, model)
    if fault.backward:  # Born in the backward: the graph is clean, the gradient flow is not.
        report = trace.audit(model, loss_fn=lambda out: out.float().sum())
        assert not report.ok and report.nan_origin is None, str(report)
        assert any(p.startswith(fault.module + ".") for p in report.gradients["problems"]), \
            str(report)
        return
    report = trace.audit(model)
    assert not report.ok, str(report)
    want = _expected_fault(case, _FakeSession(model, trace))
    assert report.nan_origin is not None, str(report)
    assert report.nan_origin["func"] == want.op_func, str(report)
    assert report.nan_origin["module"] == want.op_module, str(report)


class _FakeSession:
    """What _expected_fault reads, from a single traced call: the modules that ran."""

    def __init__(self, model, trace):
        class _Layer:
            def __init__(self, name):
                self.full_name = name

        class _Record:
            pass

        self.record = _Record()
        self.record.layers = [_Layer(m.path) for m in trace.modules]


def test_audit_of_inputs_that_cannot_be_perturbed_is_not_applicable():
    class Constant(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, flag: torch.Tensor):
            return self.w * 2

    model = Constant()
    report = tl.trace(model, torch.tensor([True])).audit(model)
    assert report.replay.perturbation == "not applicable"
    assert report.replay.perturbed_changes_output is None
    assert report.ok, str(report)
    assert "not applicable" in str(report)


def test_audit_perturbs_an_embedding_output_when_inputs_are_not_tensors():
    class Lookup(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5, 4)

        def forward(self, flag: torch.Tensor):
            return self.emb.weight[:2].sum() + self.emb(torch.tensor([1, 2])).sum() * flag

    torch.manual_seed(0)
    model = Lookup()
    report = tl.trace(model, torch.tensor(True)).audit(model)
    assert report.replay.perturbation == "embedding"
    assert report.replay.perturbed_changes_output is True
