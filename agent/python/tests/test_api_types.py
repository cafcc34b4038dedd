"""The record types of the tracetorch package: attributes, defaults, to_dict, conversions, errors."""

from __future__ import annotations

import copy
import enum
import json
import math
import re
from pathlib import Path

import pytest

import tracetorch
from tracetorch import (
    Anomaly,
    AnomalySeverity,
    AnomalyType,
    DiffEntry,
    DiffKind,
    DiffSeverity,
    LayerTrace,
    NanOrigin,
    TensorInfo,
    TensorStats,
    Thresholds,
    TraceMetadata,
    TraceRecord,
)

LAYER_KEYS = [
    "name", "type", "full_name", "depth", "params", "inputs", "outputs", "latency_ms",
    "latency_ms_min", "latency_ms_max", "latency_ms_mean", "forward_count", "has_nan", "has_inf",
    "grad_norm", "grad_mean", "grad_has_nan", "has_zero_grad", "grad_in_norm", "grad_in_mean",
    "grad_in_has_nan", "bwd_latency_ms", "bwd_latency_ms_min", "bwd_latency_ms_max",
    "bwd_latency_ms_mean", "backward_count", "fwd_mem_alloc_delta", "fwd_mem_reserved_delta",
    "bwd_mem_alloc_delta", "bwd_mem_reserved_delta",
]
OPTIONAL_FLOAT_KEYS = [
    "latency_ms", "latency_ms_min", "latency_ms_max", "latency_ms_mean", "grad_norm", "grad_mean",
    "grad_in_norm", "grad_in_mean", "bwd_latency_ms", "bwd_latency_ms_min", "bwd_latency_ms_max",
    "bwd_latency_ms_mean",
]
OPTIONAL_INT_KEYS = [
    "fwd_mem_alloc_delta", "fwd_mem_reserved_delta", "bwd_mem_alloc_delta",
    "bwd_mem_reserved_delta",
]


# ---- package surface -----------------------------------------------------------------------------


def test_package_exports_the_library_api():
    for name in [
        "TraceRecord", "LayerTrace", "TensorStats", "Anomaly", "AnomalySeverity", "AnomalyType",
        "Thresholds", "detect_anomalies", "diff_records", "TraceDiff", "DiffSeverity",
        "TraceSession", "storage", "__version__",
    ]:
        assert hasattr(tracetorch, name), name
    assert set(tracetorch.__all__) <= set(dir(tracetorch))
    # The library's submodules resolve to the same objects.
    from tracetorch import analyzer, collector, diff, storage

    assert analyzer.detect_anomalies is tracetorch.detect_anomalies
    assert collector.TraceRecord is TraceRecord
    assert diff.diff_records is tracetorch.diff_records
    assert storage.load_json is tracetorch.load_json
    assert TensorInfo is not TensorStats  # As the library: a tensor entry holds its stats.


def test_version_matches_the_cmake_project_version(repo_root: Path):
    cmake = (repo_root / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"project\(tracetorch VERSION ([0-9.]+)", cmake)
    assert match, "project() version not found in CMakeLists.txt"
    assert tracetorch.__version__ == match.group(1)


# ---- enums ---------------------------------------------------------------------------------------


def test_enum_values_are_the_json_spellings():
    assert AnomalySeverity.WARNING.value == "warning"
    assert AnomalySeverity.CRITICAL.value == "critical"
    assert AnomalySeverity.INFO.value == "info"
    assert [t.value for t in AnomalyType] == [
        "nan_activation", "inf_activation", "dead_layer", "exploding_variance", "high_variance",
        "empty_output", "zero_gradient", "nan_gradient", "rank_divergence",
    ]
    assert {s.value for s in DiffSeverity} == {"info", "warning", "critical"}
    assert DiffKind.LATENCY_REGRESSION.value == "latency_regression"
    assert len(DiffKind) == 9


def test_enums_are_str_enums_like_the_library():
    for cls in (AnomalySeverity, AnomalyType, DiffSeverity, DiffKind):
        assert issubclass(cls, enum.Enum) and issubclass(cls, str)
    assert AnomalySeverity.WARNING == "warning"
    assert AnomalySeverity("critical") is AnomalySeverity.CRITICAL
    assert json.dumps([AnomalyType.DEAD_LAYER]) == '["dead_layer"]'
    with pytest.raises(ValueError):
        AnomalySeverity("fatal")


# ---- TensorStats, TensorInfo --------------------------------------------------------------------


def test_tensor_info_nests_its_stats_as_the_library_does():
    stats = TensorStats(mean=0.5, std=1.25, min=-2.0, max=3.0, nan_count=1, inf_count=2)
    t = TensorInfo([16, 64], "torch.float32", "cpu", stats=stats)
    assert t.shape == [16, 64]
    assert (t.dtype, t.device) == ("torch.float32", "cpu")
    assert (t.stats.mean, t.stats.std, t.stats.min, t.stats.max) == (0.5, 1.25, -2.0, 3.0)
    assert (t.stats.nan_count, t.stats.inf_count) == (1, 2)
    assert (t.nan_count, t.inf_count) == (1, 2)  # Ours: the counts, with or without stats.
    assert stats.to_dict() == {"mean": 0.5, "std": 1.25, "min": -2.0, "max": 3.0,
                               "nan_count": 1, "inf_count": 2}
    # The JSON layout keeps the statistics flattened into the tensor entry.
    assert t.to_dict() == {
        "shape": [16, 64], "dtype": "torch.float32", "device": "cpu", "mean": 0.5, "std": 1.25,
        "min": -2.0, "max": 3.0, "nan_count": 1, "inf_count": 2,
    }
    assert TensorStats() == TensorStats(None, None, None, None, 0, 0)


def test_tensor_without_stats_has_no_stat_keys():
    t = TensorInfo([3], "torch.int64", "cpu")
    assert t.stats is None
    assert t.nan_count == 0 and t.inf_count == 0
    assert t.to_dict() == {"shape": [3], "dtype": "torch.int64", "device": "cpu"}
    assert TensorInfo([3], "torch.int64").device == ""
    t.stats = TensorStats(std=2.0)  # A copy: assign to change it.
    assert t.to_dict()["std"] == 2.0 and t.to_dict()["mean"] is None
    t.stats = None
    assert "std" not in t.to_dict()


def test_tensor_non_finite_stat_is_written_as_null():
    t = TensorInfo([2], "torch.float32", "cpu",
                   stats=TensorStats(mean=math.nan, std=math.inf, nan_count=2))
    assert math.isnan(t.stats.mean)  # Kept in memory...
    d = t.to_dict()
    assert d["mean"] is None and d["std"] is None and d["nan_count"] == 2  # ...null in JSON.


def test_tensor_rejects_negative_counts():
    with pytest.raises(ValueError, match="nan_count"):
        TensorStats(nan_count=-1)
    s = TensorStats()
    with pytest.raises(ValueError, match="inf_count must be >= 0"):
        s.inf_count = -3


# ---- LayerTrace ----------------------------------------------------------------------------------


def test_layer_defaults_are_none_where_unknown():
    layer = LayerTrace()
    # The library's defaults: the latest latencies of a layer that never ran are 0.0.
    assert layer.latency_ms == 0.0 and layer.bwd_latency_ms == 0.0
    for key in OPTIONAL_FLOAT_KEYS + OPTIONAL_INT_KEYS:
        if key not in ("latency_ms", "bwd_latency_ms"):
            assert getattr(layer, key) is None, key
    assert layer.forward_count == 0 and layer.backward_count == 0
    assert layer.has_nan is False and layer.grad_has_nan is False
    assert layer.inputs == [] and layer.outputs == []
    d = layer.to_dict()
    assert list(d) == LAYER_KEYS
    assert d["latency_ms"] == 0.0 and d["bwd_latency_ms"] == 0.0
    assert all(d[key] is None for key in OPTIONAL_FLOAT_KEYS + OPTIONAL_INT_KEYS
               if key not in ("latency_ms", "bwd_latency_ms"))


def test_layer_keyword_constructor_sets_every_field():
    values = {
        "name": "fc", "type": "Linear", "full_name": "blocks.0.fc", "depth": 3, "params": 4160,
        "inputs": [TensorInfo([16, 64], "torch.float32", "cpu", TensorStats(mean=0.0, std=1.0))],
        "outputs": [TensorInfo([16, 64], "torch.float32", "cpu", TensorStats(mean=0.1, std=0.3))],
        "latency_ms": 0.5, "latency_ms_min": 0.25, "latency_ms_max": 1.5, "latency_ms_mean": 0.75,
        "forward_count": 20, "has_nan": True, "has_inf": True, "grad_norm": 0.125,
        "grad_mean": -0.5, "grad_has_nan": True, "has_zero_grad": True, "grad_in_norm": 2.0,
        "grad_in_mean": 0.0625, "grad_in_has_nan": True, "bwd_latency_ms": 0.1,
        "bwd_latency_ms_min": 0.05, "bwd_latency_ms_max": 0.2, "bwd_latency_ms_mean": 0.125,
        "backward_count": 19, "fwd_mem_alloc_delta": 1024, "fwd_mem_reserved_delta": 2048,
        "bwd_mem_alloc_delta": -512, "bwd_mem_reserved_delta": 0,
    }
    assert sorted(values) == sorted(LAYER_KEYS)
    layer = LayerTrace(**values)
    for key, value in values.items():
        assert getattr(layer, key) == value, key
    assert layer.module_type == "Linear"  # The library's attribute name.
    d = layer.to_dict()
    assert d["outputs"] == [values["outputs"][0].to_dict()]
    assert {k: v for k, v in d.items() if k not in ("inputs", "outputs")} == {
        k: v for k, v in values.items() if k not in ("inputs", "outputs")
    }
    assert LayerTrace.from_dict(d) == layer


def test_layer_constructor_rejects_unknown_and_mistyped_arguments():
    with pytest.raises(TypeError, match="unexpected keyword argument 'latency'"):
        LayerTrace(latency=1.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'to_dict'"):
        LayerTrace(to_dict=1)
    with pytest.raises(TypeError):
        LayerTrace(forward_count="many")


def test_layer_lists_are_copies_and_assignment_writes_back():
    layer = LayerTrace(outputs=[TensorInfo([1], "torch.float32", stats=TensorStats(mean=1.0))])
    outputs = layer.outputs
    outputs[0].stats = TensorStats(mean=5.0)
    assert layer.outputs[0].stats.mean == 1.0  # The list holds copies...
    layer.outputs = outputs  # ...and assigning it back writes them.
    assert layer.outputs[0].stats.mean == 5.0


def test_layer_value_semantics():
    a = LayerTrace(full_name="fc", latency_ms=1.0)
    b = copy.deepcopy(a)
    assert a == b and a is not b
    b.latency_ms = 2.0
    assert a != b and a.latency_ms == 1.0


# ---- metadata ------------------------------------------------------------------------------------


def test_metadata_attributes_dict_access_and_extra_keys():
    md = TraceMetadata(model_name="Net", total_time_ms=12.5, dropped_events=3)
    assert md.model_name == "Net" and md.total_time_ms == 12.5
    assert md.cuda_version == "N/A" and md.active_device == "cpu" and md.cuda_available is False
    assert md["model_name"] == "Net" and md.get("dropped_events") == 3
    assert md.get("missing", "x") == "x" and "missing" not in md and "model_name" in md
    with pytest.raises(KeyError):
        md["missing"]
    md["tags"] = {"run": [1, 2]}
    md["model_name"] = "Renamed"  # A modelled key sets the attribute.
    assert md.model_name == "Renamed"
    assert md.extra == {"dropped_events": 3, "tags": {"run": [1, 2]}}
    d = md.to_dict()
    assert d["dropped_events"] == 3 and d["tags"] == {"run": [1, 2]}
    assert d["model_name"] == "Renamed"
    assert dict(md.items()) == d and list(md) == list(d) and len(md) == len(d)


def test_metadata_stringifies_non_json_values_and_rejects_nan():
    md = TraceMetadata()
    md["path"] = Path("/runs/a")  # As the library's export: str() of what JSON cannot hold.
    assert md["path"] == "/runs/a" and md.to_dict()["path"] == "/runs/a"
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        md["nan"] = math.nan  # Strict JSON: no NaN token.
    with pytest.raises(ValueError, match="modelled metadata field"):
        md.extra = {"model_name": "x"}


def test_nan_origin():
    origin = NanOrigin("blocks.1.fc", step=4, kind="inf")
    assert (origin.layer, origin.step, origin.kind, origin.is_nan) == ("blocks.1.fc", 4, "inf", False)
    assert origin.to_dict() == {"layer": "blocks.1.fc", "step": 4, "kind": "inf"}
    assert NanOrigin.MODEL_INPUT == "<input>"
    md = TraceMetadata()
    assert md.nan_origin is None
    md.nan_origin = origin
    assert md.to_dict()["nan_origin"] == {"layer": "blocks.1.fc", "step": 4, "kind": "inf"}
    md.nan_origin = {"layer": "<input>", "step": 0, "kind": "nan"}  # The JSON form works too.
    assert md.nan_origin == NanOrigin("<input>", 0, "nan")
    md.nan_origin = None
    assert "nan_origin" not in md.to_dict()
    with pytest.raises(ValueError, match="kind must be 'nan' or 'inf'"):
        NanOrigin("x", kind="neg")


# ---- Anomaly -------------------------------------------------------------------------------------


def test_anomaly_attributes_and_to_dict():
    a = Anomaly(AnomalyType.HIGH_VARIANCE, AnomalySeverity.INFO, "head",
                "High activation variance: std=26.53", {"std": 26.53})
    assert a.type is AnomalyType.HIGH_VARIANCE and a.severity is AnomalySeverity.INFO
    assert a.type.value == "high_variance"
    assert a.details == {"std": 26.53}
    assert a.to_dict() == {
        "type": "high_variance", "severity": "info", "layer": "head",
        "message": "High activation variance: std=26.53", "details": {"std": 26.53},
    }
    # Readable as the library's warning dicts.
    assert a["message"] == a.message and a.get("type") == "high_variance"


def test_anomaly_accepts_strings_and_every_detail_type():
    details = {"n": None, "b": True, "i": 7, "f": 0.5, "s": "x", "l": ["a", "b"]}
    a = Anomaly("nan_activation", "critical", "<input>", "NaN", details)
    assert a.type is AnomalyType.NAN_ACTIVATION and a.severity is AnomalySeverity.CRITICAL
    assert a.details == details
    assert type(a.details["b"]) is bool and type(a.details["i"]) is int
    assert list(a.to_dict()["details"]) == list(details)  # Order is kept.
    assert Anomaly.from_dict(a.to_dict()) == a


def test_anomaly_rejects_bad_values():
    with pytest.raises(ValueError, match="'fatal' is not a valid AnomalySeverity"):
        Anomaly("dead_layer", "fatal")
    with pytest.raises(TypeError):
        Anomaly(3, "warning")
    a = Anomaly("dead_layer", "warning")
    with pytest.raises(TypeError, match=r"details\['x'\]: unsupported value of type dict"):
        a.details = {"x": {"nested": 1}}
    with pytest.raises(TypeError, match="details must be a dict"):
        a.details = [1, 2]
    with pytest.raises(ValueError, match="out of int64 range"):
        a.details = {"big": 2**70}
    assert a.details == {}  # Failed assignments left it unchanged.


# ---- Thresholds ----------------------------------------------------------------------------------


def test_thresholds_defaults_and_keywords():
    t = Thresholds()
    assert (t.dead_layer_mean, t.dead_layer_std) == (1e-6, 1e-6)
    assert (t.exploding_variance_std, t.high_variance_min, t.variance_spike_ratio) == (100.0, 10.0, 10.0)
    t2 = Thresholds(exploding_variance_std=50.0, high_variance_min=5.0)
    assert t2.exploding_variance_std == 50.0 and t2.high_variance_min == 5.0 and t2 != t
    assert Thresholds() == t
    assert Thresholds(1e-5).dead_layer_mean == 1e-5  # Positional, as the library's dataclass.
    with pytest.raises(TypeError):
        Thresholds(dead_layer=1.0)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"dead_layer_mean": -1.0}, "dead_layer_mean"),
        ({"dead_layer_std": math.nan}, "dead_layer_std"),
        ({"exploding_variance_std": math.inf}, "exploding_variance_std"),
        ({"high_variance_min": 200.0}, "high_variance_min"),  # >= exploding_variance_std
        ({"variance_spike_ratio": 1.0}, "variance_spike_ratio"),  # must be > 1
    ],
)
def test_thresholds_validation_raises_value_error_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Thresholds(**kwargs)


def test_thresholds_changed_after_construction_are_checked_on_use(train_record):
    t = Thresholds()
    t.variance_spike_ratio = 0.5
    with pytest.raises(ValueError, match="variance_spike_ratio"):
        t.validate()
    with pytest.raises(ValueError, match="variance_spike_ratio"):
        tracetorch.detect_anomalies(train_record, t)


# ---- DiffEntry -----------------------------------------------------------------------------------


def test_diff_entry():
    e = DiffEntry("warning", "latency_regression", "stem", "Latency regression", {"relative": 0.5})
    assert e.severity is DiffSeverity.WARNING and e.kind is DiffKind.LATENCY_REGRESSION
    assert e.kind == "latency_regression"  # A str, as in the library.
    assert e.to_dict() == {
        "severity": "warning", "kind": "latency_regression", "layer": "stem",
        "message": "Latency regression", "details": {"relative": 0.5},
    }
    with pytest.raises(ValueError, match="not a valid DiffKind"):
        e.kind = "slower"


# ---- TraceRecord ---------------------------------------------------------------------------------


def test_record_from_library_style_dicts():
    record = TraceRecord(
        metadata={"model_name": "Net", "total_time_ms": 3.5, "custom": "kept"},
        layers=[{"name": "fc", "type": "Linear", "inputs": [], "outputs": []}],
        warnings=[{"type": "empty_output", "severity": "warning", "layer": "fc",
                   "message": "No output captured from Linear"}],
    )
    assert record.metadata.model_name == "Net" and record.metadata["custom"] == "kept"
    fc = record.layers[0]
    assert fc.full_name == "fc"  # Defaults to name, as the library's loader does.
    assert fc.latency_ms == 0.0 and fc.forward_count == 0  # Never ran: the library's 0.0.
    assert record.warnings[0].type is AnomalyType.EMPTY_OUTPUT
    assert record.find_layer("fc") == fc and record.find_layer("nope") is None


def test_record_metadata_is_live_and_lists_are_copies():
    record = TraceRecord(layers=[LayerTrace(full_name="a")])
    record.metadata.model_name = "Live"
    record.metadata["dropped_events"] = 5
    assert record.to_dict()["metadata"]["model_name"] == "Live"
    assert record.to_dict()["metadata"]["dropped_events"] == 5
    layers = record.layers
    layers[0].full_name = "b"
    assert record.layers[0].full_name == "a"
    record.layers = layers
    assert record.layers[0].full_name == "b"
    # A held layer stays valid after the record's list is replaced (no dangling references).
    held = record.layers[0]
    record.layers = []
    assert held.full_name == "b"


def test_record_json_round_trip_and_dict_round_trip():
    record = TraceRecord(metadata={"model_name": "Net"},
                         layers=[LayerTrace(name="fc", full_name="fc", latency_ms=0.5,
                                            outputs=[TensorInfo([2, 3], "torch.float32", "cpu",
                                                                TensorStats(mean=0.0, std=1.0))])],
                         warnings=[Anomaly("dead_layer", "warning", "fc", "dead")])
    text = record.to_json()
    assert json.loads(text) == record.to_dict()
    assert TraceRecord.from_json(text) == record
    assert TraceRecord.from_dict(record.to_dict()) == record
    assert "\n" not in record.to_json(indent=0)


def test_record_parse_errors_are_value_errors():
    with pytest.raises(ValueError, match=r"line \d+, column \d+"):
        TraceRecord.from_json('{"metadata": {},\n "layers": [}')
    with pytest.raises(ValueError, match=r"layers\[0\]"):
        TraceRecord.from_dict({"metadata": {}, "layers": [{"name": "x", "type": "T",
                                                            "outputs": [{"shape": "big"}]}]})
    with pytest.raises(TypeError):
        TraceRecord(layers="not a list")
    with pytest.raises(TypeError):
        TraceRecord(metadata=42)
    with pytest.raises(ValueError, match="indent"):
        TraceRecord().to_json(indent=-1)
