"""The one absl::Status -> Python exception mapping (agent/python/status_translate.h).

The table is checked through _C._status_to_exception (the mapping itself); then each binding that
fails with a Status is checked to raise through it, with real failures.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tracetorch import _C

# code -> (exception type, errno or None)
TABLE = {
    "INVALID_ARGUMENT": (ValueError, None),
    "OUT_OF_RANGE": (ValueError, None),
    "NOT_FOUND": (FileNotFoundError, errno.ENOENT),
    "ALREADY_EXISTS": (FileExistsError, errno.EEXIST),
    "PERMISSION_DENIED": (PermissionError, errno.EACCES),
    "RESOURCE_EXHAUSTED": (OSError, None),
    "FAILED_PRECONDITION": (RuntimeError, None),
    "UNAVAILABLE": (ConnectionError, None),
    "DEADLINE_EXCEEDED": (TimeoutError, None),
    "UNIMPLEMENTED": (NotImplementedError, None),
    "INTERNAL": (RuntimeError, None),
    "UNKNOWN": (RuntimeError, None),
    "DATA_LOSS": (RuntimeError, None),
    "ABORTED": (RuntimeError, None),
    "CANCELLED": (RuntimeError, None),
    "UNAUTHENTICATED": (RuntimeError, None),
}


@pytest.mark.parametrize("code", sorted(TABLE))
def test_each_code_maps_to_one_exception_type(code):
    exc_type, err = TABLE[code]
    exc = _C._status_to_exception(code, "what went wrong")
    assert type(exc) is exc_type
    assert "what went wrong" in str(exc)
    if err is not None:
        assert exc.errno == err and exc.filename is None
    if exc_type is RuntimeError and code != "FAILED_PRECONDITION":
        assert str(exc) == f"{code}: what went wrong"  # The type does not say the code: the text does.


@pytest.mark.parametrize("code", sorted(TABLE))
def test_a_path_is_the_filename_of_errno_errors_and_a_prefix_otherwise(code):
    exc = _C._status_to_exception(code, "boom", "/data/trace.json")
    if TABLE[code][1] is not None:  # Those with an errno.
        assert exc.filename == "/data/trace.json"
        assert str(exc) == f"[Errno {exc.errno}] boom: '/data/trace.json'"
    else:
        assert str(exc).startswith("/data/trace.json: ") and "boom" in str(exc)
        assert getattr(exc, "filename", None) is None


def test_ok_and_unknown_names_are_not_error_codes():
    for name in ("OK", "NO_SUCH_CODE", ""):
        with pytest.raises(ValueError, match="not an error code"):
            _C._status_to_exception(name, "x")


# ---- the bindings raise through it ---------------------------------------------------------------


def test_failed_precondition_is_runtime_error_in_the_engine():
    engine = _C._SessionEngine()
    engine.start()
    with pytest.raises(RuntimeError, match="already active"):
        engine.start()
    engine.finish(None)


def test_engine_write_to_a_missing_directory_names_the_file(tmp_path: Path):
    engine = _C._SessionEngine()
    engine.start()
    engine.finish(None)
    target = tmp_path / "absent" / "trace.json"
    with pytest.raises(FileNotFoundError) as info:
        engine.write(str(target))
    assert info.value.errno == errno.ENOENT and info.value.filename == str(target)
    # The record API raises the same exception for the same failure.
    with pytest.raises(FileNotFoundError) as again:
        _C.write_trace_file(target, engine.record())
    assert again.value.filename == str(target)


def test_invalid_arguments_are_value_errors():
    with pytest.raises(ValueError):
        _C._parse_daemon_address("tcp://example.org:1")
    with pytest.raises(ValueError):
        _C.Thresholds(exploding_variance_std=-1.0)
    engine = _C._SessionEngine()
    with pytest.raises(ValueError, match="watch_interval_s"):
        engine.start_watch("/tmp/x.json", 0.01)
    with pytest.raises(ValueError, match="line 1"):
        _C.TraceRecord.from_json("{")


def test_declare_layer_errors_use_the_map():
    engine = _C._SessionEngine()
    engine.declare_layer("a", "Linear", "a", 1, 0)
    with pytest.raises(ValueError, match="declared with type"):
        engine.declare_layer("a", "ReLU", "a", 1, 0)  # The same full_name, another type.
