"""Helpers and formatters (the tracetorch-ml library's ``tracetorch.utils``).

The statistics are those the tracer records (one fused C++ pass, agent/stats.h) and the formatters
are the ones the ``tracetorch`` command prints with (trace/format.h).

    compute_tensor_stats(torch.randn(100))["std"]   # ~1.0
    format_params(1_500_000) == "1.5M"; format_bytes(None) == "-"
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

from tracetorch import _C
from tracetorch._C import format_bytes, format_ms, format_params, format_shape

__all__ = [
    "compute_tensor_stats",
    "format_bytes",
    "format_ms",
    "format_params",
    "format_shape",
    "is_inf",
    "is_nan",
]


def compute_tensor_stats(tensor: torch.Tensor, *, sample_threshold: int = 1_000_000) -> dict[str, Any]:
    """{'mean', 'std', 'min', 'max', 'nan_count', 'inf_count'} of ``tensor``.

    mean/std (population)/min/max are over the finite elements, None for non-float or empty
    tensors; the counts cover every element. Computed exactly over every element, however large:
    ``sample_threshold`` (the library's subsampling bound) is accepted and has no effect.
    """
    if sample_threshold <= 0:
        raise ValueError(f"sample_threshold must be positive, got {sample_threshold}")
    return _C.compute_tensor_stats(tensor)


def is_nan(value: Optional[float]) -> bool:
    """True when ``value`` is a float NaN (None is not)."""
    return value is not None and math.isnan(value)


def is_inf(value: Optional[float]) -> bool:
    """True when ``value`` is +/-Inf (None is not)."""
    return value is not None and math.isinf(value)
