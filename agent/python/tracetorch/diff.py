"""Trace comparison for CI (the tracetorch-ml library's ``tracetorch.diff``).

    from tracetorch.diff import diff_records

    diff = diff_records(baseline, current, latency_threshold=0.2)
    if diff.has_regressions:
        print(diff.to_json())

The comparison runs in C++ (trace/diff.h); entries come in a deterministic order.
"""

from tracetorch._C import DiffEntry, DiffKind, DiffSeverity, TraceDiff, diff_records

__all__ = ["DiffEntry", "DiffKind", "DiffSeverity", "TraceDiff", "diff_records"]
