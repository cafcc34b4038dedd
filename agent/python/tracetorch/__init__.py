"""tracetorch: a forensic trace console for PyTorch models.

A drop-in for the tracetorch-ml library's Python API, with the work done in C++ (the ``_C``
extension): tracing hooks, statistics, aggregation, JSON, anomaly detection and trace diffs.

    import torch
    from tracetorch import TraceSession, detect_anomalies
    from tracetorch.storage import load_json

    with TraceSession(model) as session:
        model(torch.randn(32, 784))
    session.export("trace.json")
    record = load_json("trace.json")
    for anomaly in detect_anomalies(record):
        print(anomaly.severity.value, anomaly.layer, anomaly.message)

The record types (TraceRecord, LayerTrace, TensorStats, Anomaly, TraceDiff, ...) are bindings of
the C++ structs in trace/record.h; ``to_dict()`` on any of them gives the JSON layout.
"""

# torch first: it loads libtorch and libc10, which the extension links but, installed from a wheel,
# does not find on its own (the wheel carries every library but torch's).
import torch  # noqa: F401

from tracetorch._C import (
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
    TraceDiff,
    TraceMetadata,
    TraceRecord,
    detect_anomalies,
    diff_records,
)
from tracetorch import ops, storage
from tracetorch.ops import OpTrace, Selector, func, in_module, label, load, module, trace
from tracetorch.session import TraceSession
from tracetorch.storage import export_json, load_json, save_json

# Kept equal to project(tracetorch VERSION ...) in the top-level CMakeLists.txt (a test checks).
__version__ = "0.1.0"

__all__ = [
    "Anomaly",
    "AnomalySeverity",
    "AnomalyType",
    "DiffEntry",
    "DiffKind",
    "DiffSeverity",
    "LayerTrace",
    "NanOrigin",
    "OpTrace",
    "Selector",
    "TensorInfo",
    "TensorStats",
    "Thresholds",
    "TraceDiff",
    "TraceMetadata",
    "TraceRecord",
    "TraceSession",
    "__version__",
    "detect_anomalies",
    "diff_records",
    "export_json",
    "func",
    "in_module",
    "label",
    "load",
    "load_json",
    "module",
    "ops",
    "save_json",
    "storage",
    "trace",
]
