"""Tests of the tracing hook path: TraceSession over real models (forward and backward)."""

from __future__ import annotations

import copy
import inspect
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest
import torch
import torch.nn as nn

import tracetorch
from tracetorch import TraceSession


def layers(session):
    """The record as json.load would give it, layers by full_name."""
    doc = json.loads(session._engine.record_json(0))
    return doc, {layer["full_name"]: layer for layer in doc["layers"]}


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_training_loop_counts_and_latency_aggregates():
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TraceSession(model) as session:
        for _ in range(5):
            opt.zero_grad()
            loss = model(torch.randn(4, 8)).pow(2).mean()
            loss.backward()
            opt.step()
    doc, by_name = layers(session)
    assert [l["full_name"] for l in doc["layers"]] == ["fc1", "act", "fc2"]
    assert session.steps == 5
    assert doc["metadata"]["model_name"] == "MLP"
    assert doc["metadata"]["total_time_ms"] > 0
    assert doc["metadata"]["hook_errors"] == 0
    fc1 = by_name["fc1"]
    assert fc1["type"] == "Linear" and fc1["depth"] == 1 and fc1["params"] == 8 * 16 + 16
    assert by_name["act"]["params"] == 0
    for layer in doc["layers"]:
        assert layer["forward_count"] == 5
        assert layer["backward_count"] == 5
        assert 0 <= layer["latency_ms_min"] <= layer["latency_ms_mean"] <= layer["latency_ms_max"]
        assert layer["bwd_latency_ms_min"] <= layer["bwd_latency_ms_mean"] <= layer["bwd_latency_ms_max"]
        assert layer["bwd_latency_ms"] is not None
        assert layer["fwd_mem_alloc_delta"] is None  # CPU.
    assert fc1["inputs"][0]["shape"] == [4, 8]
    assert fc1["outputs"][0]["dtype"] == "torch.float32"
    assert fc1["outputs"][0]["device"] == "cpu"


def test_statistics_match_torch_and_backward_fields():
    model = MLP()
    x = torch.randn(4, 8)
    with TraceSession(model) as session:
        out = model(x)
        out.sum().backward()
    _, by_name = layers(session)
    h = model.fc1(x).detach()
    stats = by_name["fc1"]["outputs"][0]
    assert stats["mean"] == pytest.approx(h.double().mean().item(), rel=1e-6)
    assert stats["std"] == pytest.approx(h.double().std(unbiased=False).item(), rel=1e-6)
    assert stats["min"] == pytest.approx(h.min().item())
    assert stats["max"] == pytest.approx(h.max().item())
    assert stats["nan_count"] == 0 and stats["inf_count"] == 0
    # act's input is fc1's output: the same numbers.
    assert by_name["act"]["inputs"][0] == stats
    # d(sum(out))/d(out) is all ones: norm sqrt(16), mean 1.
    fc2 = by_name["fc2"]
    assert fc2["grad_norm"] == pytest.approx(4.0)
    assert fc2["grad_mean"] == pytest.approx(1.0)
    # Gradient at fc2's input = W2^T 1, the same as at act's output.
    g = torch.ones(4, 4) @ model.fc2.weight
    assert fc2["grad_in_norm"] == pytest.approx(g.norm().item(), rel=1e-5)
    assert by_name["act"]["grad_norm"] == pytest.approx(g.norm().item(), rel=1e-5)
    # The model input needs no gradient: fc1 has no grad_in, but a backward time.
    assert by_name["fc1"]["grad_in_norm"] is None
    assert by_name["fc1"]["backward_count"] == 1
    assert not fc2["grad_has_nan"] and not fc2["has_zero_grad"]


def test_capture_stats_off_still_counts_nan():
    model = MLP()
    x = torch.randn(4, 8)
    x[0, 0] = float("nan")
    with TraceSession(model, capture_stats=False) as session:
        model(x)
    doc, by_name = layers(session)
    out = by_name["fc1"]["outputs"][0]
    # No statistics (the library's stats=None: no stat keys), but the counts beside them.
    assert "mean" not in out and "std" not in out and "nan_count" not in out
    assert out["nonfinite"] == {"nan_count": 16, "inf_count": 0}  # One NaN row of the batch.
    assert by_name["fc1"]["has_nan"]
    assert doc["metadata"]["nan_origin"]["layer"] == "<input>"
    tensor = session.record.layers[0].outputs[0]
    assert tensor.stats is None and tensor.nan_count == 16 and tensor.inf_count == 0
    clean = MLP()
    with TraceSession(clean, capture_stats=False) as s2:
        clean(torch.randn(2, 8))
    _, by2 = layers(s2)
    assert by2["fc2"]["outputs"][0]["nonfinite"] == {"nan_count": 0, "inf_count": 0}
    assert "mean" not in by2["fc2"]["outputs"][0]


def test_reentry_starts_clean_and_nested_entry_raises():
    model = MLP()
    session = TraceSession(model)
    with session:
        model(torch.randn(2, 8))
        model(torch.randn(2, 8))
        with pytest.raises(RuntimeError):
            session.__enter__()
    assert layers(session)[1]["fc1"]["forward_count"] == 2
    assert "forward" not in model.__dict__ and "forward" not in model.fc1.__dict__
    with session:
        model(torch.randn(2, 8))
    assert layers(session)[1]["fc1"]["forward_count"] == 1
    assert session.steps == 1


def test_inplace_relu_with_grad():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(inplace=True), nn.Linear(8, 2), nn.ReLU(inplace=True))
    x = torch.randn(3, 8, requires_grad=True)
    with TraceSession(model) as session:
        model(x).sum().backward()
    _, by_name = layers(session)
    assert by_name["1"]["backward_count"] == 1
    assert by_name["0"]["backward_count"] == 1
    assert by_name["1"]["outputs"][0]["min"] >= 0
    # ReLU's input statistics are taken before it modified the tensor in place.
    assert by_name["1"]["inputs"][0]["min"] < 0
    assert by_name["0"]["grad_in_norm"] == pytest.approx(x.grad.norm().item(), rel=1e-6)


def test_leaf_input_reused_across_steps():
    # The input's gradient accumulator outlives each step: its hook is installed once and reused.
    model = MLP()
    x = torch.randn(4, 8, requires_grad=True)
    with TraceSession(model) as session:
        for _ in range(4):
            x.grad = None
            model(x).sum().backward()
    _, by_name = layers(session)
    assert by_name["fc1"]["backward_count"] == 4
    assert by_name["fc1"]["grad_in_norm"] == pytest.approx(x.grad.norm().item(), rel=1e-6)
    assert session.hook_errors == 0
    # After the block the accumulator carries no tracing hook: a backward is not recorded.
    model(x).sum().backward()
    assert layers(session)[1]["fc1"]["backward_count"] == 4


def test_kwargs_and_dict_outputs():
    class Inner(nn.Module):
        def forward(self, x, *, scale=None, extra=None):
            return {"out": x * scale, "aux": [extra + 1, (x.sum(),)], "tag": "text"}

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x, scale=torch.full((2,), 3.0), extra=torch.zeros(5))["out"]

    model = Outer()
    with TraceSession(model) as session:
        y = model(torch.ones(2))
    assert torch.equal(y, torch.full((2,), 3.0))
    _, by_name = layers(session)
    inner = by_name["inner"]
    assert [t["shape"] for t in inner["inputs"]] == [[2], [2], [5]]
    assert [t["shape"] for t in inner["outputs"]] == [[2], [5], []]
    assert inner["outputs"][2]["mean"] == pytest.approx(2.0)
    # The wrapper keeps the signature visible, and is gone after the block.
    original = inspect.signature(model.inner.forward)
    with TraceSession(model):
        assert "forward" in model.inner.__dict__
        assert inspect.signature(model.inner.forward) == original
    assert "forward" not in model.inner.__dict__


def test_deepcopy_and_pickle_inside_a_session_copy_the_untraced_model():
    import io
    import pickle

    model = MLP()
    x = torch.randn(3, 8)
    with TraceSession(model) as session:
        clone = copy.deepcopy(model)
        with torch.no_grad():
            clone.fc1.weight.add_(1.0)  # The copy must run its own weights.
        assert not torch.equal(clone(x), model(x))
        assert torch.equal(clone(x), MLP.forward(clone, x))
        buffer = io.BytesIO()
        torch.save(model, buffer)
    # A whole pickled module, not weights: torch >= 2.6 loads weights only unless told otherwise.
    loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)
    assert torch.equal(loaded(x), model(x))
    assert pickle.loads(pickle.dumps(model)).fc2.out_features == 4
    # Only the traced model's calls were recorded.
    assert layers(session)[1]["fc1"]["forward_count"] == 1


def test_shared_module_called_twice_aggregates():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(self.fc(x))

    model = Twice()
    with TraceSession(model) as session:
        for _ in range(3):
            model(torch.randn(2, 4)).sum().backward()
    _, by_name = layers(session)
    assert by_name["fc"]["forward_count"] == 6
    assert by_name["fc"]["backward_count"] == 6
    assert session.steps == 3


def test_model_without_children_traces_the_root():
    model = nn.Linear(3, 2)
    with TraceSession(model) as session:
        model(torch.randn(5, 3)).sum().backward()
    doc, by_name = layers(session)
    assert list(by_name) == ["Linear"]
    root = by_name["Linear"]
    assert root["forward_count"] == 1 and root["backward_count"] == 1
    assert root["params"] == 8
    assert root["outputs"][0]["shape"] == [5, 2]


def test_nan_in_input_names_the_input():
    model = MLP()
    with TraceSession(model) as session:
        model(torch.randn(2, 8))
        bad = torch.randn(2, 8)
        bad[1, 3] = float("nan")
        model(bad)
    doc, _ = layers(session)
    assert doc["metadata"]["nan_origin"] == {"layer": "<input>", "step": 1, "kind": "nan"}
    critical = [a for a in session.anomalies if a.severity.value == "critical"]
    assert len(critical) == 1
    assert critical[0].layer == "<input>"


def test_nan_from_middle_layer_is_the_origin():
    class Log(nn.Module):
        def forward(self, x):
            return torch.log(x)  # NaN for negative inputs.

    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Tanh(), Log()), nn.Linear(4, 2))
    with TraceSession(model) as session:
        for _ in range(3):
            model(torch.randn(8, 4))
    doc, by_name = layers(session)
    origin = doc["metadata"]["nan_origin"]
    assert origin["layer"] == "1.1"
    assert origin["step"] == 0
    assert origin["kind"] == "nan"
    assert by_name["2"]["has_nan"] and by_name["1"]["has_nan"]
    critical = [a for a in session.anomalies if a.severity.value == "critical"]
    assert len(critical) == 1 and critical[0].layer == "1.1"


def test_dead_and_exploding_layers_from_chosen_weights():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.zero_()
        model[1].weight.fill_(1000.0)
        model[1].bias.copy_(torch.tensor([1000.0, -1000.0, 2000.0, -2000.0]))
    with TraceSession(model) as session:
        model(torch.randn(16, 4))
    kinds = {(a.layer, a.type.value) for a in session.anomalies}
    assert ("0", "dead_layer") in kinds
    assert ("1", "exploding_variance") in kinds


def test_outputs_and_grads_bit_identical():
    def run(traced):
        torch.manual_seed(1)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(inplace=True), nn.Dropout(0.2), nn.Linear(16, 3))
        x = torch.randn(5, 8, requires_grad=True)
        if traced:
            with TraceSession(model):
                out = model(x)
                out.sum().backward()
        else:
            out = model(x)
            out.sum().backward()
        return out.detach(), x.grad.clone(), [p.grad.clone() for p in model.parameters()]

    plain, traced = run(False), run(True)
    assert torch.equal(plain[0], traced[0])
    assert torch.equal(plain[1], traced[1])
    for a, b in zip(plain[2], traced[2]):
        assert torch.equal(a, b)


def test_no_grad_and_eval_forward_record_no_backward():
    model = MLP().eval()
    with TraceSession(model) as session:
        with torch.no_grad():
            model(torch.randn(2, 8))
    _, by_name = layers(session)
    assert by_name["fc1"]["forward_count"] == 1
    assert by_name["fc1"]["backward_count"] == 0


def test_user_exception_propagates_and_session_recovers():
    class Boom(nn.Module):
        def forward(self, x):
            raise KeyError("boom")

    model = nn.Sequential(nn.Linear(2, 2), Boom())
    with TraceSession(model) as session:
        with pytest.raises(KeyError):
            model(torch.randn(1, 2))
        with pytest.raises(KeyError):
            model(torch.randn(1, 2))
    _, by_name = layers(session)
    assert by_name["0"]["forward_count"] == 2
    assert "1" not in by_name
    assert session.hook_errors == 0


def _nested(*parts):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype".
        return torch.nested.nested_tensor(list(parts))


def test_nested_tensors_are_described_padded():
    # nn.TransformerEncoder's fast path passes nested tensors between its layers: described by
    # their zero-padded form (agent/stats.h DenseView).
    model = nn.Sequential(nn.Identity())
    with TraceSession(model) as session:
        model(_nested(torch.ones(2, 4), torch.ones(3, 4)))
    assert session.hook_errors == 0
    layer = session.record.layers[0]
    assert layer.inputs[0].shape == [2, 3, 4]
    assert layer.inputs[0].stats.mean == pytest.approx(20 / 24)  # The padding's zeros count.


def test_a_failing_hook_is_counted_and_the_forward_goes_on():
    # A real failure inside the hook path: a nested tensor libtorch cannot pad (a transposed one,
    # on torch 1.13) throws (c10::Error) when described. Both hooks of the call are guarded.
    model = nn.Sequential(nn.Identity())
    nested = _nested(torch.randn(2, 3), torch.randn(3, 3)).transpose(1, 2)
    try:
        nested.to_padded_tensor(0)
        failures = 0  # A torch that pads it: described, no failure.
    except RuntimeError:
        failures = 2
    with TraceSession(model) as session:
        out = model(nested)  # Root and child: two begin_call failures.
        assert out is nested
        model(torch.randn(2))
    assert session.hook_errors == failures
    if failures == 0:
        return
    doc, by_name = layers(session)
    assert doc["metadata"]["hook_errors"] == 2
    assert by_name["0"]["forward_count"] == 1  # The failed call is not recorded; the next one is.
    assert "Hook errors" in session.summary()


def test_in_a_forked_child_the_session_is_inert():
    model = MLP()
    with TraceSession(model) as session:
        model(torch.randn(2, 8))
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # The child: the parent's session records nothing and blocks nothing.
            report = {}
            try:
                torch.set_num_threads(1)  # As DataLoader workers do.
                out = model(torch.randn(2, 8))
                out.sum().backward()
                record = session.record
                report = {"layers": len(record.layers), "model_name": record.metadata.model_name,
                          "steps": session.steps, "hook_errors": session.hook_errors,
                          "active": session._engine.active}
            except BaseException as e:  # noqa: BLE001 - reported to the parent.
                report = {"error": repr(e)}
            finally:
                os.write(write_end, json.dumps(report).encode())
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as f:
            report = json.loads(f.read())
        os.waitpid(pid, 0)
        model(torch.randn(2, 8))
    assert report == {"layers": 0, "model_name": "", "steps": 0, "hook_errors": 0,
                      "active": False}
    assert session.steps == 2
    assert layers(session)[1]["fc1"]["forward_count"] == 2  # The child's forward is not here.


def test_export_summary_and_record_types(tmp_path):
    model = MLP()
    with TraceSession(model, model_name="Tiny") as session:
        model(torch.randn(2, 8))
    path = session.export(tmp_path / "t.json")
    assert path == tmp_path / "t.json"
    doc = json.loads(path.read_text())
    assert doc["metadata"]["model_name"] == "Tiny"
    assert len(doc["layers"]) == 3
    text = session.summary()
    assert "Tiny" in text and "Layers" in text and "Forward passes" in text
    assert isinstance(session.record, tracetorch.TraceRecord)
    assert session.record.layers[0].full_name == "fc1"


def test_thresholds_and_bad_arguments():
    model = MLP()
    with pytest.raises(ValueError):
        TraceSession(model, thresholds={"exploding_variance_std": -1.0})
    with pytest.raises(ValueError):
        TraceSession(model, thresholds={"no_such_field": 1.0})
    with pytest.raises(TypeError):
        TraceSession("not a module")
    # Below the minimum is raised to it, as the library does (and logged), not refused.
    assert TraceSession(model, watch_path="/tmp/x.json", watch_interval_s=0.01)._watch_interval_s == 0.1
    with pytest.raises(ValueError):
        TraceSession(model, watch_path="/tmp/x.json", watch_interval_s=float("nan"))
    session = TraceSession(model, thresholds=tracetorch.Thresholds(high_variance_min=0.0001))
    with session:
        model(torch.randn(4, 8) * 10)
    assert any(a.type.value == "high_variance" for a in session.anomalies)


def test_watch_path_concurrent_reader_sees_no_torn_file(tmp_path):
    path = tmp_path / "watch.json"
    model = MLP()
    reads, errors = [], []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            try:
                reads.append(json.loads(text))
            except ValueError as e:  # A torn read.
                errors.append(e)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        with TraceSession(model, watch_path=path, watch_interval_s=0.1):
            # Train until the reader has seen three in-progress flushes (the deadline only bounds
            # a failure; a loaded machine just takes longer).
            deadline = time.monotonic() + 60
            while (sum(r["metadata"].get("total_time_ms") is None for r in list(reads)) < 3
                   and time.monotonic() < deadline):
                model(torch.randn(4, 8)).sum().backward()
    finally:
        stop.set()
        thread.join()
    assert errors == []
    in_progress = [r for r in reads if r["metadata"].get("total_time_ms") is None]
    assert len(in_progress) >= 3, "fewer than three in-progress flushes were observed"
    final = json.loads(path.read_text())
    assert final["metadata"]["total_time_ms"] is not None
    assert "warnings" in final


DATALOADER_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch, torch.nn as nn
    from torch.utils.data import DataLoader, Dataset
    from tracetorch import TraceSession

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    class DS(Dataset):
        def __len__(self):
            return 16
        def __getitem__(self, i):
            # Workers run the (traced) model: nothing may be recorded from them.
            with torch.no_grad():
                return model(torch.full((4,), float(i)))

    with TraceSession(model, watch_path=sys.argv[1], watch_interval_s=0.1) as session:
        for batch in DataLoader(DS(), batch_size=4, num_workers=2):
            model(batch)
    doc = json.loads(session._engine.record_json(0))
    print(json.dumps({l["full_name"]: l["forward_count"] for l in doc["layers"]}))
    """
)


def test_dataloader_workers_do_not_deadlock_or_record(tmp_path):
    script = tmp_path / "dl.py"
    script.write_text(DATALOADER_SCRIPT)
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "w.json")],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert counts == {"0": 4, "1": 4}  # Only the 4 batches of the parent.
