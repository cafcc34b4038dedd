"""Trace data structures (the tracetorch-ml library's ``tracetorch.collector``).

All are bindings of the C++ structs of trace/record.h; see their docstrings.
"""

from tracetorch._C import LayerTrace, NanOrigin, TensorInfo, TensorStats, TraceMetadata, TraceRecord

__all__ = ["LayerTrace", "NanOrigin", "TensorInfo", "TensorStats", "TraceMetadata", "TraceRecord"]
