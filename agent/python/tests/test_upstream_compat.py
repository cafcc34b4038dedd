"""What code written against the tracetorch-ml library (0.2) sees: its modules and names, its
object model, its CLI functions and messages, the session internals its tests touch, and where
we are tolerant as it is. Our own tests, written here (the library's test file is run by hand).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import tracetorch
from tracetorch import LayerTrace, TensorInfo, TensorStats, TraceRecord, TraceSession
from tracetorch.storage import export_json, load_json


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def _program() -> str:
    program = os.environ.get("TRACETORCH_BIN")
    if not program:
        pytest.skip("TRACETORCH_BIN is not set (ctest sets it)")
    return program


def _layer(full_name: str, module_type: str = "Linear", latency: float = 1.0) -> LayerTrace:
    return LayerTrace(name=full_name, module_type=module_type, full_name=full_name, depth=0,
                      params=10, latency_ms=latency, latency_ms_mean=latency, forward_count=1)


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    record = TraceRecord(metadata={"model_name": "demo", "total_time_ms": 5.0},
                         layers=[_layer("keep"), _layer("drop", "ReLU", 0.05)])
    return export_json(record, tmp_path / "trace.json")


# ---- modules and names ---------------------------------------------------------------------------


@pytest.mark.parametrize("module, names", [
    ("tracetorch.session", ["TraceSession"]),
    ("tracetorch.collector", ["LayerTrace", "TensorInfo", "TensorStats", "TraceRecord"]),
    ("tracetorch.analyzer", ["Anomaly", "AnomalyType", "AnomalySeverity", "Thresholds",
                             "detect_anomalies", "DEFAULT_THRESHOLDS"]),
    ("tracetorch.diff", ["DiffEntry", "DiffSeverity", "TraceDiff", "diff_records"]),
    ("tracetorch.storage", ["export_json", "load_json"]),
    ("tracetorch.hooks", ["HookManager"]),
    ("tracetorch.utils", ["compute_tensor_stats", "format_bytes", "format_ms", "format_params",
                          "format_shape"]),
    ("tracetorch.cli", ["FilterOptions", "diff_command", "inspect_command", "main",
                        "summary_command", "watch_command"]),
])
def test_every_library_module_has_its_public_names(module, names):
    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"


def test_hook_manager_fills_the_record_it_was_given():
    model = Net()
    record = TraceRecord()
    manager = tracetorch.hooks.HookManager(model, record)
    manager.register()
    manager.enable()
    model(torch.randn(2, 8)).sum().backward()
    model(torch.randn(2, 8))
    manager.disable()
    manager.unregister()
    assert "forward" not in model.fc1.__dict__  # The forward is restored.
    by_name = {layer.full_name: layer for layer in record.layers}
    assert set(by_name) == {"fc1", "act", "fc2"}
    assert by_name["fc1"].forward_count == 2 and by_name["fc1"].backward_count == 1
    assert by_name["fc1"].outputs[0].stats.mean is not None


def test_utils_are_the_native_formatters_and_statistics():
    from tracetorch.utils import compute_tensor_stats, format_bytes, format_ms, format_params

    stats = compute_tensor_stats(torch.tensor([1.0, 2.0, float("nan"), float("inf")]))
    assert stats["mean"] == 1.5 and stats["std"] == 0.5
    assert (stats["nan_count"], stats["inf_count"]) == (1, 1)
    assert compute_tensor_stats(torch.tensor([1, 2]))["mean"] is None
    assert format_params(1_500_000) == "1.5M" and format_ms(81.7) == "81.7ms"
    assert format_bytes(None) == "-" and format_bytes(512) == "512B"
    assert format_bytes(2048) == "2.0KiB" and format_bytes(-1.5 * 2**20) == "-1.50MiB"


# ---- object model ---------------------------------------------------------------------------------


def test_session_tensors_nest_their_stats_and_capture_stats_off_gives_none():
    model = Net()
    with TraceSession(model) as session:
        model(torch.randn(4, 8))
    out = session.record.layers[0].outputs[0]
    assert isinstance(out, TensorInfo) and isinstance(out.stats, TensorStats)
    assert out.stats.mean is not None and out.stats.std > 0
    x = torch.randn(4, 8)
    x[0, 0] = float("nan")
    with TraceSession(model, capture_stats=False) as off:
        model(x)
    out = off.record.layers[0].outputs[0]
    assert out.stats is None
    assert out.nan_count == 16  # Ours: NaN counting goes on without the statistics.
    assert off.record.metadata.nan_origin.layer == "<input>"


def test_layer_defaults_positional_fields_and_float_memory_deltas():
    layer = LayerTrace("fc", "Linear", "blocks.fc", 2, 100)  # The dataclass's field order.
    assert (layer.name, layer.module_type, layer.full_name, layer.depth, layer.params) == (
        "fc", "Linear", "blocks.fc", 2, 100)
    assert layer.latency_ms == 0.0 and layer.bwd_latency_ms == 0.0
    with pytest.raises(TypeError, match="multiple values for argument 'name'"):
        LayerTrace("fc", name="again")
    layer.fwd_mem_alloc_delta = 1024.0
    assert layer.fwd_mem_alloc_delta == 1024.0 and isinstance(layer.fwd_mem_alloc_delta, float)
    layer.record_latency(2.0)
    layer.record_latency(4.0)
    assert (layer.latency_ms, layer.latency_ms_mean, layer.forward_count) == (4.0, 3.0, 2)
    layer.record_backward_latency(1.0)
    assert (layer.bwd_latency_ms, layer.backward_count) == (1.0, 1)


def test_forward_only_session_has_zero_backward_latency():
    model = Net()
    with TraceSession(model) as session:
        model(torch.randn(2, 8))
    fc1 = session.record.layers[0]
    assert fc1.bwd_latency_ms == 0.0 and fc1.backward_count == 0
    assert fc1.bwd_latency_ms_mean is None  # Ours: the aggregates stay "not measured".


# ---- tolerance ------------------------------------------------------------------------------------


def _with_foreign_warning(path: Path) -> Path:
    doc = json.loads(path.read_text())
    doc["warnings"] = [{"type": "drift", "severity": "info", "layer": "keep",
                        "message": "another tool's check", "details": {}}]
    path.write_text(json.dumps(doc))
    return path


def test_load_json_keeps_a_warning_of_unknown_type_and_logs_it(trace_file, caplog):
    _with_foreign_warning(trace_file)
    with caplog.at_level(logging.WARNING, logger="tracetorch"):
        record = load_json(trace_file)
    assert [w.type for w in record.warnings] == ["drift"]  # A plain str: not ours.
    assert '"drift"' in caplog.text
    again = export_json(record, trace_file.with_name("again.json"))
    assert json.loads(again.read_text())["warnings"][0]["type"] == "drift"  # Written back as is.


def test_cli_keeps_a_warning_of_unknown_type_with_a_note(trace_file, capsys):
    from tracetorch.cli import inspect_command

    _with_foreign_warning(trace_file)
    inspect_command(str(trace_file))  # Exit code 0: no SystemExit.
    captured = capsys.readouterr()
    assert "another tool's check" in captured.out
    assert captured.err == (f'tracetorch: note: {trace_file}: warnings of unknown type kept as '
                            f'they are: "drift"\n')


def test_non_json_metadata_values_are_stringified_at_export(tmp_path):
    model = Net()
    with TraceSession(model) as session:
        model(torch.randn(2, 8))
    session.record.metadata["device"] = torch.device("cpu")
    session.record.metadata["run_dir"] = tmp_path
    path = session.export(tmp_path / "t.json")
    metadata = json.loads(path.read_text())["metadata"]
    assert metadata["device"] == "cpu" and metadata["run_dir"] == str(tmp_path)


def test_watch_interval_below_the_minimum_is_clamped_and_logged_once(tmp_path, caplog,
                                                                      monkeypatch):
    monkeypatch.setattr("tracetorch.session._clamp_logged", False)
    with caplog.at_level(logging.WARNING, logger="tracetorch"):
        session = TraceSession(Net(), watch_path=tmp_path / "w.json", watch_interval_s=0.01)
        TraceSession(Net(), watch_path=tmp_path / "w.json", watch_interval_s=0.02)
    assert session._watch_interval_s == 0.1 and session.watch_interval_s == 0.1
    assert caplog.text.count("below the minimum") == 1


# ---- session internals and summary ---------------------------------------------------------------


def test_session_internals_as_the_library_names_them():
    model = Net()
    session = TraceSession(model, model_name="tiny")
    assert session._model is model and session._model_name == "tiny"
    assert isinstance(session._record, TraceRecord) and session._anomalies == []
    with session:
        session._model(torch.randn(2, 8))
    assert session._record is session.record and len(session._record.layers) == 3
    assert session._anomalies == session.anomalies


def test_summary_of_a_session_filled_in_by_hand():
    fc = _layer("fc", latency=2.0)
    fc.bwd_latency_ms = 0.5
    fc.bwd_latency_ms_mean = 0.5
    fc.bwd_latency_ms_max = 0.5
    fc.backward_count = 1
    fc.fwd_mem_alloc_delta = 5 * 2**20
    fc.fwd_mem_reserved_delta = 8 * 2**20
    session = TraceSession.__new__(TraceSession)
    session._model_name = "m"
    session._record = TraceRecord(layers=[fc, _layer("act", "ReLU", 0.1)])
    session._anomalies = []
    lines = session.summary().splitlines()
    assert "Model: m" in lines
    assert "Layers traced: 2" in lines
    assert "Forward passes: 1" in lines
    assert any(line.startswith("Slowest backward: fc") for line in lines)
    assert any(line.startswith("Heaviest fwd mem: fc (+5.00MiB alloc, +8.00MiB reserved)")
               for line in lines)


def test_live_summary_keeps_the_library_lines():
    model = Net()
    with TraceSession(model) as session:
        model(torch.randn(2, 8)).sum().backward()
        model(torch.randn(2, 8))
    text = session.summary()
    assert "Layers traced: 3\n" in text and "Forward passes: 2\n" in text
    assert "Slowest backward: " in text


# ---- the command line -----------------------------------------------------------------------------


def test_cli_functions_print_what_the_program_prints(trace_file, capsys):
    from tracetorch.cli import FilterOptions, inspect_command, summary_command

    program = _program()
    for args, call in [
        (["inspect", str(trace_file)], lambda: inspect_command(str(trace_file))),
        (["summary", str(trace_file)], lambda: summary_command(str(trace_file))),
        (["inspect", str(trace_file), "--type", "Linear", "--json"],
         lambda: inspect_command(str(trace_file), filter_opts=FilterOptions(module_type="Linear"),
                                 json_output=True)),
    ]:
        call()
        ours = capsys.readouterr()
        theirs = subprocess.run([program, *args], capture_output=True, text=True, check=True,
                                env={**os.environ, "NO_COLOR": "1"})
        assert ours.out == theirs.stdout, args
        assert ours.err == theirs.stderr == ""


def test_cli_filter_with_no_match_says_so(trace_file, capsys):
    from tracetorch.cli import FilterOptions, inspect_command

    inspect_command(str(trace_file), filter_opts=FilterOptions(min_latency_ms=100.0))
    assert "No layers matched the filter." in capsys.readouterr().out


def test_cli_exit_codes_are_system_exit(trace_file, tmp_path, capsys):
    from tracetorch.cli import diff_command, inspect_command

    slower = TraceRecord(metadata={"model_name": "demo"},
                         layers=[_layer("keep", latency=10.0), _layer("drop", "ReLU", 0.05)])
    slower_path = export_json(slower, tmp_path / "slower.json")
    diff_command(str(trace_file), str(trace_file))  # No regression: returns.
    with pytest.raises(SystemExit) as regressed:
        diff_command(str(trace_file), str(slower_path))
    assert regressed.value.code == 1
    capsys.readouterr()
    with pytest.raises(SystemExit) as missing:
        inspect_command(str(tmp_path / "nope.json"))
    assert missing.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tracetorch: ") and "nope.json" in err


def test_cli_watch_waits_then_stops_on_ctrl_c(tmp_path, capsys, monkeypatch):
    from tracetorch.cli import watch_command

    sleeps = []

    def fake_sleep(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("tracetorch.cli.time.sleep", fake_sleep)
    path = tmp_path / "later.json"
    watch_command(str(path), interval=0.25)  # Ctrl+C ends it with exit code 0.
    out = capsys.readouterr().out
    assert out.count(f"Waiting for {path} to appear... (Ctrl+C to exit)") == 1
    assert out.endswith("Stopped watching.\n")
    assert sleeps == [0.25, 0.25]


def test_python_dash_m_tracetorch_behaves_as_the_program(trace_file, tmp_path):
    program = _program()
    env = {**os.environ, "NO_COLOR": "1"}
    for args in (["summary", str(trace_file)], ["inspect", str(tmp_path / "nope.json")],
                 ["--version"], ["bogus"]):
        ours = subprocess.run([sys.executable, "-m", "tracetorch", *args], capture_output=True,
                              text=True, env=env)
        theirs = subprocess.run([program, *args], capture_output=True, text=True, env=env)
        assert (ours.returncode, ours.stdout, ours.stderr) == (
            theirs.returncode, theirs.stdout, theirs.stderr), args


def test_daemon_subcommands_run_the_program(tmp_path):
    program = _program()
    env = {**os.environ, "TRACETORCH_BIN": program}
    address = f"unix://{tmp_path}/none.sock"
    ours = subprocess.run([sys.executable, "-m", "tracetorch", "sessions", "--remote", address],
                          capture_output=True, text=True, env=env)
    theirs = subprocess.run([program, "sessions", "--remote", address], capture_output=True,
                            text=True)
    assert ours.returncode == theirs.returncode == 2
    assert ours.stderr == theirs.stderr and "cannot reach tracetorchd" in ours.stderr
