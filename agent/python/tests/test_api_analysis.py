"""detect_anomalies and diff_records against what the tracetorch-ml library reported."""

from __future__ import annotations

import collections
import json

import pytest

from tracetorch import (
    AnomalySeverity,
    AnomalyType,
    DiffKind,
    DiffSeverity,
    LayerTrace,
    TensorInfo,
    TensorStats,
    Thresholds,
    TraceDiff,
    TraceRecord,
    detect_anomalies,
    diff_records,
)


def _approx_dicts(items):
    """Floats compared with a relative tolerance of 1e-9; everything else exactly."""

    def approx(value):
        if isinstance(value, float):
            return pytest.approx(value, rel=1e-9)
        if isinstance(value, dict):
            return {k: approx(v) for k, v in value.items()}
        if isinstance(value, list):
            return [approx(v) for v in value]
        return value

    return [approx(item) for item in items]


@pytest.mark.parametrize(
    "name", ["example_trace.json", "train_trace.json", "train_trace_perturbed.json"]
)
def test_detect_anomalies_equals_the_files_warnings(load_upstream, name):
    record, raw = load_upstream(name)
    found = detect_anomalies(record)
    assert [a.to_dict() for a in found] == _approx_dicts(raw["warnings"])
    assert found == record.warnings


def test_perturbed_trace_findings(perturbed_record):
    found = detect_anomalies(perturbed_record)
    assert [(a.type, a.severity, a.layer) for a in found] == [
        (AnomalyType.HIGH_VARIANCE, AnomalySeverity.INFO, "head"),
        (AnomalyType.EXPLODING_VARIANCE, AnomalySeverity.WARNING, "head"),
    ]
    assert found[0].message == "High activation variance: std=26.53"
    assert found[1].details["ratio"] == pytest.approx(50.9, rel=1e-3)


def test_detect_anomalies_ignores_existing_warnings(train_record):
    train_record.warnings = []
    assert len(detect_anomalies(train_record)) == 1


def test_thresholds_change_what_is_found(perturbed_record):
    # head's output std is 26.53: above a lowered exploding threshold it is exploding, not high.
    found = detect_anomalies(perturbed_record,
                             Thresholds(exploding_variance_std=20.0, high_variance_min=5.0))
    head = [(a.type, a.severity) for a in found if a.layer == "head"]
    assert (AnomalyType.EXPLODING_VARIANCE, AnomalySeverity.WARNING) in head
    assert (AnomalyType.HIGH_VARIANCE, AnomalySeverity.INFO) not in head
    # A spike ratio above head's x50.9 silences the spike.
    quiet = detect_anomalies(perturbed_record, Thresholds(variance_spike_ratio=60.0))
    assert [a.type for a in quiet] == [AnomalyType.HIGH_VARIANCE]


def test_detect_anomalies_on_constructed_record():
    record = TraceRecord(layers=[
        LayerTrace(full_name="dead", type="ReLU",
                   outputs=[TensorInfo([4], "torch.float32", "cpu", stats=TensorStats(mean=0.0, std=0.0))]),
        LayerTrace(full_name="nan", type="Linear", has_nan=True,
                   outputs=[TensorInfo([4], "torch.float32", "cpu", stats=TensorStats(nan_count=4))]),
        LayerTrace(full_name="empty", type="Identity"),
        LayerTrace(full_name="zero_grad", type="Linear", has_zero_grad=True, grad_norm=0.0,
                   outputs=[TensorInfo([4], "torch.float32", "cpu", stats=TensorStats(mean=1.0, std=1.0))]),
    ])
    found = {(a.layer, a.type.value, a.severity.value) for a in detect_anomalies(record)}
    assert ("dead", "dead_layer", "warning") in found
    assert ("nan", "nan_activation", "critical") in found
    assert ("empty", "empty_output", "warning") in found
    assert ("zero_grad", "zero_gradient", "warning") in found


def test_detect_anomalies_rejects_bad_arguments(train_record):
    with pytest.raises(TypeError):
        detect_anomalies({"layers": []})
    with pytest.raises(TypeError):
        detect_anomalies(train_record, {"dead_layer_mean": 1.0})


# ---- diff ----------------------------------------------------------------------------------------


def test_diff_train_vs_perturbed_matches_the_library(load_upstream, upstream_dir):
    train, _ = load_upstream("train_trace.json")
    perturbed, _ = load_upstream("train_trace_perturbed.json")
    with (upstream_dir / "diff_train_vs_perturbed.json").open(encoding="utf-8") as f:
        expected = json.load(f)  # What `tracetorch diff --json` printed (exit code 1).
    diff = diff_records(train, perturbed)
    assert isinstance(diff, TraceDiff)
    assert diff.warning_count == 26 and diff.critical_count == 0 and diff.has_regressions
    assert (diff.baseline_model, diff.current_model) == ("TrainNet", "TrainNet")
    d = diff.to_dict()
    assert {k: v for k, v in d.items() if k != "entries"} == {
        k: v for k, v in expected.items() if k != "entries"
    }

    # The library's entry order changed from run to run; compare as multisets.
    def key(entry):
        return (entry["kind"], entry["layer"], entry["severity"], entry["message"])

    assert sorted(map(key, d["entries"])) == sorted(map(key, expected["entries"]))
    by_key = {key(e): e for e in expected["entries"]}
    for entry in d["entries"]:
        assert _approx_dicts([entry["details"]]) == [by_key[key(entry)]["details"]]
    kinds = collections.Counter(e.kind for e in diff.entries)
    assert kinds[DiffKind.ACTIVATION_STD_CHANGE] == 11 and kinds[DiffKind.NEW_ANOMALY] == 2


def test_diff_is_deterministic_and_serialises(train_record, perturbed_record):
    a = diff_records(train_record, perturbed_record)
    b = diff_records(train_record, perturbed_record)
    assert [e.to_dict() for e in a.entries] == [e.to_dict() for e in b.entries]
    assert json.loads(a.to_json()) == a.to_dict()
    assert a.entries[0].to_dict() == a.to_dict()["entries"][0]


def test_diff_identical_records_has_no_entries(train_record):
    diff = diff_records(train_record, train_record)
    assert diff.entries == [] and not diff.has_regressions
    assert diff.warning_count == 0 and diff.critical_count == 0


def test_diff_thresholds(train_record, perturbed_record):
    loose = diff_records(train_record, perturbed_record, latency_threshold=100.0,
                         grad_norm_threshold=100.0, std_threshold=100.0)
    assert {e.kind for e in loose.entries} <= {DiffKind.NEW_ANOMALY, DiffKind.RESOLVED_ANOMALY}
    with pytest.raises(TypeError):
        diff_records(train_record, perturbed_record, 0.5)  # Thresholds are keyword-only.


@pytest.mark.parametrize("kwargs", [{"latency_threshold": -0.1}, {"std_threshold": float("nan")},
                                    {"grad_norm_threshold": float("inf")}])
def test_diff_rejects_invalid_thresholds(train_record, kwargs):
    with pytest.raises(ValueError):
        diff_records(train_record, train_record, **kwargs)


def test_diff_layer_changes_and_shape_change():
    base = TraceRecord(metadata={"model_name": "A"}, layers=[
        LayerTrace(full_name="fc", outputs=[TensorInfo([2, 4], "torch.float32")]),
        LayerTrace(full_name="gone")])
    curr = TraceRecord(metadata={"model_name": "B"}, layers=[
        LayerTrace(full_name="fc", outputs=[TensorInfo([2, 8], "torch.float32")]),
        LayerTrace(full_name="new")])
    diff = diff_records(base, curr)
    kinds = [(e.kind, e.layer, e.severity) for e in diff.entries]
    assert (DiffKind.SHAPE_CHANGE, "fc", DiffSeverity.CRITICAL) in kinds
    assert (DiffKind.LAYER_REMOVED, "gone", DiffSeverity.WARNING) in kinds
    assert (DiffKind.LAYER_ADDED, "new", DiffSeverity.WARNING) in kinds
    assert diff.critical_count == 1 and diff.to_dict()["current_model"] == "B"
