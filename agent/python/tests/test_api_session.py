"""The record API on traces produced by TraceSession: export -> load_json -> the same record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import tracetorch
from tracetorch import (
    Anomaly,
    AnomalySeverity,
    AnomalyType,
    LayerTrace,
    TensorInfo,
    TensorStats,
    TraceRecord,
    TraceSession,
    detect_anomalies,
    diff_records,
)
from tracetorch.storage import load_json, save_json


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _run(model: nn.Module, steps: int = 3, backward: bool = True) -> TraceSession:
    with TraceSession(model) as session:
        for _ in range(steps):
            out = model(torch.randn(5, 8))
            if backward:
                out.sum().backward()
    return session


def test_export_then_load_json_gives_the_session_record(tmp_path: Path):
    session = _run(_model())
    path = tmp_path / "trace.json"
    assert session.export(path) == path
    record = session.record
    assert isinstance(record, TraceRecord)
    loaded = load_json(path)
    assert loaded.to_dict() == record.to_dict()
    with path.open(encoding="utf-8") as f:
        assert json.load(f) == record.to_dict()
    # save_json of the same record writes the same document.
    again = save_json(record, tmp_path / "again.json")
    assert load_json(again).to_dict() == record.to_dict()


def test_session_record_has_the_library_layout():
    record = _run(_model(), steps=3).record
    assert [layer.full_name for layer in record.layers] == ["0", "1", "2"]
    fc = record.layers[0]
    assert isinstance(fc, LayerTrace)
    assert (fc.name, fc.type, fc.depth, fc.params) == ("0", "Linear", 1, 8 * 16 + 16)
    assert fc.forward_count == 3 and fc.backward_count == 3
    assert fc.latency_ms is not None and fc.latency_ms_min <= fc.latency_ms_mean <= fc.latency_ms_max
    assert fc.grad_norm is not None and fc.grad_norm > 0
    assert fc.fwd_mem_alloc_delta is None  # CPU run.
    out = fc.outputs[0]
    assert isinstance(out, TensorInfo) and isinstance(out.stats, TensorStats)
    assert out.shape == [5, 16] and out.dtype == "torch.float32" and out.device == "cpu"
    assert out.stats.std > 0 and out.stats.nan_count == 0 and out.nan_count == 0
    md = record.metadata
    assert md.model_name == "Sequential" and md.pytorch_version == torch.__version__
    assert md.total_time_ms is not None and md.total_time_ms > 0
    assert set(record.to_dict()["layers"][0]) >= {"grad_in_norm", "bwd_latency_ms_mean"}


def test_session_statistics_match_torch():
    model = _model()
    x = torch.randn(5, 8)
    with TraceSession(model) as session:
        y = model[0](x)  # Expected output of the first layer (same weights, same input).
        model(x)
    out = session.record.layers[0].outputs[0].stats
    assert out.mean == pytest.approx(y.mean().item(), rel=1e-5, abs=1e-7)
    assert out.std == pytest.approx(y.std(unbiased=False).item(), rel=1e-4)
    assert out.min == pytest.approx(y.min().item()) and out.max == pytest.approx(y.max().item())


def test_session_warnings_equal_detect_anomalies_on_the_record():
    model = _model()
    with torch.no_grad():
        model[2].weight.mul_(1000.0)  # An exploding/high-variance output in the last layer.
    session = _run(model, steps=2, backward=False)
    record = session.record
    found = detect_anomalies(record)
    assert found == record.warnings
    assert all(isinstance(a, Anomaly) for a in session.anomalies)
    assert [a.to_dict() for a in session.anomalies] == [a.to_dict() for a in found]
    assert any(a.layer == "2" and a.type in (AnomalyType.HIGH_VARIANCE,
                                             AnomalyType.EXPLODING_VARIANCE) for a in found)


def test_nan_input_is_reported_with_api_types():
    model = _model()
    with TraceSession(model) as session:
        x = torch.randn(5, 8)
        x[0, 0] = math.nan
        model(x)
    critical = [a for a in session.anomalies if a.severity is AnomalySeverity.CRITICAL]
    assert critical, session.anomalies
    assert session.record.layers[0].has_nan
    assert session.record.to_dict()["layers"][0]["outputs"][0]["nan_count"] > 0


def test_diff_of_two_sessions(tmp_path: Path):
    base = _run(_model(), steps=2).record
    bigger = _model()
    with torch.no_grad():
        bigger[0].weight.mul_(10.0)
    current = _run(bigger, steps=2).record
    diff = diff_records(base, current, latency_threshold=1e9)  # Timing noise is not the point.
    assert any(e.kind == "activation_std_change" and e.layer == "0" for e in diff.entries)
    assert diff_records(base, base).entries == []


def test_record_is_one_object_refilled_by_each_block():
    # As the library's: `record` (also `_record`) is the same TraceRecord for the session's life.
    model = _model()
    session = _run(model, steps=1)
    record = session.record
    assert record is session.record and record is session._record
    assert record.layers[0].forward_count == 1
    with session:
        model(torch.randn(5, 8))
        model(torch.randn(5, 8))
    assert record.layers[0].forward_count == 2  # Refilled in place by the next block.
    assert tracetorch.TraceSession is TraceSession
