"""tracetorch-ml's behaviours that need torch >= 2, against the library itself.

Under torch 2 the library (0.2) also registers ``register_full_backward_pre_hook`` and so records
backward latency (``bwd_latency_ms`` and its min/mean/max, ``backward_count``); on torch 1.13 it
cannot. This package records them on both. Here the same three training steps run under the
library (imported from its wheel, $TRACETORCH_ML_WHEEL, in a subprocess: it has our import name)
and under this package, and the two traces must agree on everything but timings: the layers and
their order, counts, shapes, dtypes and devices, activation statistics, gradients (norm, mean,
NaN, all-zero, at the inputs), and which backward fields are set. Then the library's own
backward-latency tests (its TestBackwardLatency, restated) run against this package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from torch2_support import needs, needs_torch2

HERE = Path(__file__).resolve().parent
TOL = 1e-5


def _run(pythonpath: str, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, str(HERE / "upstream_train.py"), str(out)], env=env,
                   check=True, timeout=300)
    return json.loads(out.read_text())


def _close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    needs_torch2()
    wheel = os.environ.get("TRACETORCH_ML_WHEEL", "")
    needs(bool(wheel) and Path(wheel).is_file(),
          "TRACETORCH_ML_WHEEL (tracetorch-ml 0.2.0's wheel) is not set")
    tmp = tmp_path_factory.mktemp("upstream")
    import tracetorch
    ours = _run(str(Path(tracetorch.__file__).parent.parent), tmp / "ours.json")
    theirs = _run(wheel, tmp / "theirs.json")
    assert "nan_origin" not in theirs["metadata"]  # It is the library, not us.
    return ours, theirs


def test_the_same_layers_in_the_same_order(both):
    ours, theirs = both
    assert [l["full_name"] for l in ours["layers"]] == [l["full_name"] for l in theirs["layers"]]
    for a, b in zip(ours["layers"], theirs["layers"]):
        for key in ("name", "type", "depth", "params", "forward_count", "backward_count"):
            assert a[key] == b[key], (a["full_name"], key)


def test_backward_latency_is_recorded_by_both(both):
    ours, theirs = both
    for a, b in zip(ours["layers"], theirs["layers"]):
        assert b["backward_count"] == 3, b["full_name"]  # The library's torch >= 2 behaviour.
        for layer in (a, b):
            assert layer["bwd_latency_ms"] > 0, layer["full_name"]
            lo, mean, hi = (layer["bwd_latency_ms_min"], layer["bwd_latency_ms_mean"],
                            layer["bwd_latency_ms_max"])
            assert lo is not None and lo <= mean <= hi, layer["full_name"]


def test_statistics_and_gradients_agree(both):
    ours, theirs = both
    for a, b in zip(ours["layers"], theirs["layers"]):
        for key in ("grad_norm", "grad_mean", "grad_in_norm", "grad_in_mean"):
            assert _close(a.get(key), b.get(key)), (a["full_name"], key, a.get(key), b.get(key))
        for key in ("grad_has_nan", "has_zero_grad", "grad_in_has_nan", "has_nan", "has_inf"):
            assert a.get(key) == b.get(key), (a["full_name"], key)
        for side in ("inputs", "outputs"):
            assert len(a[side]) == len(b[side]), (a["full_name"], side)
            for ta, tb in zip(a[side], b[side]):
                assert (ta["shape"], ta["dtype"], ta["device"]) == \
                       (tb["shape"], tb["dtype"], tb["device"]), (a["full_name"], side)
                for key in ("mean", "std", "min", "max"):
                    assert _close(ta[key], tb[key]), (a["full_name"], side, key, ta[key], tb[key])
                for key in ("nan_count", "inf_count"):
                    assert ta[key] == tb[key], (a["full_name"], side, key)
        for key in ("fwd_mem_alloc_delta", "bwd_mem_alloc_delta"):  # CPU: both None.
            assert a.get(key) is None and b.get(key) is None


# ---- the library's TestBackwardLatency, against this package ---------------------------------


class SimpleModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(10, 20)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(20, 5)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


class RepeatedForwardModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(10, 10)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x))


def test_backward_latency_populated_after_backward():
    from tracetorch import TraceSession
    model = SimpleModel()
    session = TraceSession(model)
    with session:
        model(torch.randn(4, 10, requires_grad=True)).sum().backward()
    linear = next(l for l in session.record.layers if l.module_type == "Linear")
    assert linear.backward_count >= 1 and linear.bwd_latency_ms > 0
    assert linear.bwd_latency_ms_min <= linear.bwd_latency_ms_mean <= linear.bwd_latency_ms_max


def test_backward_latency_zero_without_backward():
    from tracetorch import TraceSession
    model = SimpleModel()
    session = TraceSession(model)
    with session:
        model(torch.randn(4, 10))
    for layer in session.record.layers:
        assert layer.backward_count == 0 and layer.bwd_latency_ms == 0.0
        assert layer.bwd_latency_ms_mean is None


def test_backward_latency_aggregates_across_steps():
    from tracetorch import TraceSession
    model = RepeatedForwardModel()
    session = TraceSession(model)
    with session:
        for _ in range(3):
            model(torch.randn(4, 10, requires_grad=True)).sum().backward()
    for layer in session.record.layers:
        assert layer.backward_count == 3 and (layer.bwd_latency_ms_mean or 0) > 0
