"""TRACETORCH_DEFERRED_STATS=1: CPU samples take the deferred route CUDA samples take (statistics
by ATen reductions into a small tensor, collected at the next step, a snapshot or the session's
end) and the record is the one the direct route gives, up to rounding."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn

from tracetorch import TraceSession


def run(steps: int):
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 2))
    xs = [torch.randn(5, 6) for _ in range(steps)]
    with TraceSession(model) as session:
        for x in xs:
            model(x).sum().backward()
        middle = json.loads(session._engine.record_json(0))  # A snapshot mid-session.
    return middle, json.loads(session._engine.record_json(0))


def comparable(doc):
    """The layers without timings (those differ from run to run)."""
    out = {}
    for layer in doc["layers"]:
        out[layer["full_name"]] = {
            "forward_count": layer["forward_count"],
            "backward_count": layer["backward_count"],
            "outputs": layer["outputs"],
            "inputs": layer["inputs"],
        }
    return out


def assert_same_up_to_rounding(got, want, path="record"):
    """Equal, except floats within 1e-5 (relative): the deferred route reduces with ATen
    operators, the direct one with the fused CPU kernel."""
    if isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7), path
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for key in want:
            assert_same_up_to_rounding(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_up_to_rounding(g, w, f"{path}[{i}]")
    else:
        assert got == want, path


def test_deferred_route_gives_the_direct_record(monkeypatch):
    monkeypatch.delenv("TRACETORCH_DEFERRED_STATS", raising=False)
    _, direct = run(3)
    monkeypatch.setenv("TRACETORCH_DEFERRED_STATS", "1")
    middle, deferred = run(3)
    assert "results_in_flight" not in direct["metadata"]
    # Every sample was queued; the snapshot collected those finished (all, on CPU).
    assert middle["metadata"]["results_in_flight"] == 0
    assert deferred["metadata"]["results_in_flight"] == 0
    assert deferred["metadata"]["results_abandoned"] == 0
    assert_same_up_to_rounding(comparable(deferred), comparable(direct))
    assert comparable(deferred)["0"]["forward_count"] == 3
    assert deferred["metadata"]["hook_errors"] == 0
