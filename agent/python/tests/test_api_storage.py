"""tracetorch.storage: load_json / save_json against the upstream fixtures and on bad input."""

from __future__ import annotations

import errno
import json
import math
import os
from pathlib import Path

import pytest

from tracetorch import LayerTrace, TensorInfo, TensorStats, TraceRecord
from tracetorch.storage import export_json, load_json, save_json

UPSTREAM_TRACES = ["example_trace.json", "train_trace.json", "train_trace_perturbed.json"]


@pytest.mark.parametrize("name", UPSTREAM_TRACES)
def test_upstream_trace_loads_and_to_dict_equals_the_file(load_upstream, name):
    record, raw = load_upstream(name)
    assert len(record.layers) == len(raw["layers"])
    assert record.metadata.model_name == raw["metadata"]["model_name"]
    assert record.to_dict() == raw


def test_upstream_train_trace_attribute_access(train_record):
    assert [layer.full_name for layer in train_record.layers] == [
        "stem", "blocks.0.fc", "blocks.0.act", "blocks.0", "blocks.1.fc", "blocks.1.act",
        "blocks.1", "blocks", "norm", "drop", "head",
    ]
    stem = train_record.layers[0]
    assert (stem.type, stem.depth, stem.params, stem.forward_count) == ("Linear", 1, 2112, 20)
    assert stem.backward_count == 20
    assert stem.latency_ms_mean == pytest.approx(0.03457165001350404, rel=1e-12)
    assert stem.grad_in_norm is None and stem.fwd_mem_alloc_delta is None
    out = stem.outputs[0]
    assert out.shape == [16, 64] and out.dtype == "torch.float32" and out.device == "cpu"
    assert out.stats.std == pytest.approx(0.5656893849372864, rel=1e-12)
    assert out.nan_count == 0 and out.inf_count == 0
    md = train_record.metadata
    assert md.pytorch_version == "1.13.0a0" and md.cuda_available is False
    assert md.total_time_ms == pytest.approx(81.70521500005634)
    assert md["cuda_version"] == "N/A"  # Dict access, as the library's metadata dict.


def test_example_trace_int_input_has_null_stats(load_upstream):
    record, _ = load_upstream("example_trace.json")
    ids = record.layers[0].inputs[0]
    assert ids.dtype == "torch.int64" and ids.stats is not None and ids.stats.mean is None


@pytest.mark.parametrize("name", UPSTREAM_TRACES)
def test_save_then_load_gives_the_same_record(load_upstream, tmp_path: Path, name):
    record, _ = load_upstream(name)
    out = save_json(record, tmp_path / "nested" / "dir" / name)
    assert out == tmp_path / "nested" / "dir" / name and isinstance(out, Path)
    with out.open(encoding="utf-8") as f:
        assert json.load(f) == record.to_dict()
    again = load_json(out)
    assert again == record
    assert again.to_dict() == record.to_dict()


def test_save_accepts_str_paths_and_indent(tmp_path: Path, train_record):
    path = str(tmp_path / "one_line.json")
    assert export_json(train_record, path, indent=0) == Path(path)
    text = Path(path).read_text(encoding="utf-8")
    assert text.count("\n") <= 1 and json.loads(text) == train_record.to_dict()


def test_save_is_atomic_and_leaves_no_temporary_files(tmp_path: Path, train_record):
    path = tmp_path / "trace.json"
    path.write_text("old contents", encoding="utf-8")
    save_json(train_record, path)
    assert os.listdir(tmp_path) == ["trace.json"]
    assert load_json(path) == train_record


def test_non_finite_values_are_written_as_null(tmp_path: Path):
    record = TraceRecord(layers=[LayerTrace(full_name="x", latency_ms=math.inf, outputs=[
        TensorInfo([4], "torch.float32", "cpu", stats=TensorStats(mean=math.nan, nan_count=4))])])
    path = save_json(record, tmp_path / "nan.json")
    text = path.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text)
    assert loaded == record.to_dict()
    assert loaded["layers"][0]["latency_ms"] is None
    assert loaded["layers"][0]["outputs"][0]["mean"] is None


def test_loader_accepts_python_nan_tokens(tmp_path: Path):
    path = tmp_path / "py.json"
    path.write_text(json.dumps({"metadata": {"model_name": "M"}, "layers": [{
        "name": "fc", "type": "Linear", "inputs": [], "outputs": [{
            "shape": [2], "dtype": "torch.float32", "device": "cpu", "mean": math.nan,
            "std": math.inf, "min": None, "max": None, "nan_count": 1, "inf_count": 1}]}],
        "warnings": []}), encoding="utf-8")
    assert "NaN" in path.read_text(encoding="utf-8")
    out = load_json(path).layers[0].outputs[0].stats
    assert math.isnan(out.mean) and out.std == math.inf


# ---- errors --------------------------------------------------------------------------------------


def test_missing_file_is_file_not_found_error(tmp_path: Path):
    missing = tmp_path / "absent.json"
    with pytest.raises(FileNotFoundError) as info:
        load_json(missing)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == str(missing)


def test_malformed_json_is_value_error_with_line_and_column(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "metadata": {},\n  "layers": [1,,2]\n}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3, column \d+") as info:
        load_json(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "contents, pattern",
    [
        ("", "empty|line"),
        ("[1, 2]", "object|expected"),
        ('{"metadata": {}, "layers": [{"name": "a", "type": "T", "outputs": [{"shape": [1.5]}]}]}',
         r"layers\[0\]\.outputs\[0\]\.shape"),
    ],
)
def test_wrong_documents_are_value_errors(tmp_path: Path, contents, pattern):
    path = tmp_path / "wrong.json"
    path.write_text(contents, encoding="utf-8")
    with pytest.raises(ValueError, match=pattern):
        load_json(path)


def test_directory_is_an_error_not_a_crash(tmp_path: Path):
    with pytest.raises((ValueError, IsADirectoryError)):
        load_json(tmp_path)


def test_save_into_a_file_path_parent_is_an_os_error(tmp_path: Path, train_record):
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(OSError):  # The parent "directory" is a file.
        save_json(train_record, blocker / "trace.json")


def test_save_into_read_only_directory_is_permission_error(unprivileged, unprivileged_dir: Path,
                                                            train_record):
    def check():
        writable = unprivileged_dir / "writable"
        locked = unprivileged_dir / "locked"
        writable.mkdir()
        locked.mkdir(mode=0o500)
        locked.chmod(0o500)  # mkdir's mode is masked by the umask.
        save_json(train_record, writable / "trace.json")  # The control: this user can write.
        with pytest.raises(PermissionError) as info:
            save_json(train_record, locked / "trace.json")
        assert info.value.errno == errno.EACCES
        assert info.value.filename == str(locked / "trace.json")
        assert os.listdir(locked) == []

    unprivileged(check)


def test_save_rejects_non_records(tmp_path: Path):
    with pytest.raises(TypeError, match="TraceRecord"):
        save_json({"metadata": {}}, tmp_path / "x.json")
    with pytest.raises(TypeError):
        load_json(12)


def test_truncated_documents_never_crash(upstream_dir: Path):
    text = (upstream_dir / "train_trace.json").read_text(encoding="utf-8")
    for cut in range(0, len(text) - 1, max(1, len(text) // 397)):
        with pytest.raises(ValueError):
            TraceRecord.from_json(text[:cut])
