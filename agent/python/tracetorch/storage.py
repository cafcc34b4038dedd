"""Reading and writing trace files (the tracetorch-ml library's ``tracetorch.storage``).

The work is done by the C++ reader and writer (trace/json.h): files are written atomically and in
strict JSON (a non-finite value becomes ``null``); the reader accepts the library's files,
including Python's ``NaN``/``Infinity`` tokens and files of older versions.

    from tracetorch.storage import load_json, save_json

    record = load_json("trace.json")
    save_json(record, "out/trace.json")   # -> Path("out/trace.json")
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tracetorch import _C
from tracetorch._C import TraceRecord

__all__ = ["export_json", "load_json", "save_json"]

_log = logging.getLogger("tracetorch")


def load_json(path: str | os.PathLike[str]) -> TraceRecord:
    """Loads a trace file.

    Raises:
        FileNotFoundError: the file does not exist (``.filename`` is set).
        PermissionError: the file cannot be opened.
        ValueError: the file is empty, not JSON (the message names the line and column) or not a
            trace (the message names the field, e.g. ``layers[2].outputs[0].shape``).

    Warnings of a type this version does not know (another tool's checks) are kept as they are,
    and logged through the ``tracetorch`` logger.
    """
    record = _C.read_trace_file(path)
    note = _C._describe_unknown_anomaly_types(record)
    if note:
        _log.warning("tracetorch: %s: %s", os.fspath(path), note)
    return record


def save_json(record: TraceRecord, path: str | os.PathLike[str], *, indent: int = 2) -> Path:
    """Writes ``record`` to ``path`` atomically and returns the path.

    Missing parent directories are created, as the library does. A reader of ``path`` sees the
    previous file or the new one, never a partial one. ``indent=0`` writes one line.

    Raises:
        PermissionError, FileNotFoundError (with ``.filename``), OSError (disk full, quota),
        RuntimeError (other I/O failures).
        TypeError: ``record`` is not a TraceRecord.
    """
    if not isinstance(record, TraceRecord):
        raise TypeError(f"record must be a TraceRecord, not {type(record).__name__}")
    filepath = Path(path)
    filepath.parent.mkdir(parents=True, exist_ok=True)
    _C.write_trace_file(filepath, record, indent)
    return filepath


# The library's name for save_json.
export_json = save_json
