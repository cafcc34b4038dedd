"""Trace data structures (the tracetorch-ml library's ``tracetorch.collector``).

All are bindings of the C++ structs of trace/record.h, with the library's constructors, keyword
arguments, defaults and ``to_dict()``; see their docstrings. Lists they hold (``record.layers``,
``layer.outputs``) are copies: to change one, assign the list back.
"""

from tracetorch._C import LayerTrace, NanOrigin, TensorInfo, TensorStats, TraceMetadata, TraceRecord

__all__ = ["LayerTrace", "NanOrigin", "TensorInfo", "TensorStats", "TraceMetadata", "TraceRecord"]
