"""What tracing does to a ``torch.compile``'d model, counted and stated (torch >= 2).

A ``TraceSession`` over ``torch.compile(model)`` (or a model with compiled sub-modules) traces every
layer: each traced layer's ``forward`` is wrapped by a call into the native engine, which
TorchDynamo cannot put into a graph, so the compiled graph is split at every traced layer (graph
breaks) and the pieces between them are compiled and run as such. The numbers are those of that
run: statistics and gradients are exact (the engine sees the real tensors between the pieces),
latencies are of the split model, not of the whole compiled graph. Leaving the session restores
every ``forward``; the next call of the model runs its own compiled graph again.

``CompileWatch`` counts, from TorchDynamo's own counters (``torch._dynamo.utils.counters``,
process-wide), the graph breaks and their reasons in TorchDynamo's words while the session's block
ran, and the frames it compiled; the session puts them in the record
(``record.metadata.extra["torch_compile"]``) and says them in one warning line.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, Optional

import torch

_log = logging.getLogger("tracetorch")


def _counters() -> Optional[Any]:
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001 - no TorchDynamo (torch 1.x) or a broken install.
        return None
    return counters


def has_compiled_modules(model: torch.nn.Module) -> bool:
    """True when ``model`` or one of its sub-modules is a ``torch.compile`` wrapper."""
    from tracetorch.hooks import _is_compiled

    return any(_is_compiled(m) for m in model.modules())


class CompileWatch:
    """Graph breaks and compiled frames between start() and finish(). Not thread-safe."""

    def __init__(self) -> None:
        self._breaks: collections.Counter = collections.Counter()
        self._frames: collections.Counter = collections.Counter()

    def start(self) -> None:
        counters = _counters()
        empty = collections.Counter()
        self._breaks = collections.Counter(counters["graph_break"]) if counters else empty
        self._frames = collections.Counter(counters["frames"]) if counters else empty.copy()

    def finish(self) -> dict:
        """{"graph_breaks": N, "reasons": {reason: count}, "frames_compiled": N} since start()."""
        counters = _counters()
        if counters is None:
            return {"graph_breaks": 0, "reasons": {}, "frames_compiled": 0}
        breaks = collections.Counter(counters["graph_break"])
        breaks.subtract(self._breaks)
        frames = collections.Counter(counters["frames"])
        frames.subtract(self._frames)
        reasons = {str(k): int(v) for k, v in breaks.items() if v > 0}
        return {"graph_breaks": sum(reasons.values()), "reasons": reasons,
                "frames_compiled": int(frames.get("ok", 0))}


def _short(reason: str) -> str:
    """A reason's first line and, when TorchDynamo gives one, the first sentence of its
    explanation ("Attempted to call function marked as skipped: Dynamo does not know how to trace
    the builtin `...`")."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    if not lines:
        return reason
    out = lines[0]
    for line in lines[1:]:
        if line.startswith("Explanation:"):
            sentence = line[len("Explanation:"):].strip().split(". ")[0].rstrip(".")
            out = f"{out}: {sentence}"
            break
    return out


def warn(model_name: str, info: dict) -> None:
    """The one line a session over a compiled model says when its block ends."""
    reasons = sorted(info["reasons"].items(), key=lambda kv: -kv[1])
    first = _short(reasons[0][0]) if reasons else "none recorded"
    _log.warning(
        "tracetorch: %s is torch.compile'd: tracing split its graph at every traced layer "
        "(%d graph breaks compiled in this block; torch._dynamo: %s); statistics are exact, "
        "latencies are of the split model; record.metadata.extra['torch_compile'] has the counts",
        model_name, info["graph_breaks"], first)
