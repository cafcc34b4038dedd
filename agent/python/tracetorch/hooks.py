"""Module interception (the tracetorch-ml library's ``tracetorch.hooks``).

    record = TraceRecord()
    manager = HookManager(model, record)
    manager.register()
    manager.enable()
    model(x).sum().backward()
    manager.disable()       # record.layers now holds the trace
    manager.unregister()

``TraceSession`` is built on it; use the manager directly only to trace without a session.

While registered, each child module's ``forward`` (the root's too) is replaced by a thin wrapper
that hands the call's arguments and result to the native engine (``tracetorch._C``), which flattens
the tensors, computes statistics in one fused pass per distinct tensor, times the call and attaches
C++ autograd hooks for the backward pass. ``unregister()`` restores every ``forward`` exactly as it
was. Keyword arguments are traced too (torch 1.13's module hooks cannot see them), and so are
in-place operations under autograd (``nn.ReLU(inplace=True)``), which torch's full backward hooks
refuse. The wrapper keeps the original's signature visible to ``inspect`` (``__wrapped__``).

The manager writes into ``record`` when it is disabled (and when it is unregistered while
enabled): ``record.layers`` is replaced by the trace's layers, in the order they first completed a
forward pass (children before parents).
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Optional

import torch

from tracetorch import _C
from tracetorch._C import TraceRecord

__all__ = ["HookManager"]


class _TracedForward:
    """The instance-level ``forward`` installed on a traced module.

    A small callable object rather than a closure so that copying the model while it is traced
    stays correct: ``copy.deepcopy`` gives the copy its own untraced forward (not this wrapper,
    which would run the ORIGINAL module's forward), and pickling stores the untraced forward too.
    """

    __slots__ = ("_pre", "_post", "_abort", "_original", "_module", "_layer_id", "_is_root",
                 "_previous", "__dict__")

    def __init__(self, pre: Any, post: Any, abort: Any, module: torch.nn.Module, original: Any,
                 layer_id: Any, is_root: bool, previous: Any) -> None:
        self._pre = pre
        self._post = post
        self._abort = abort
        self._original = original
        self._module = module
        self._layer_id = layer_id
        self._is_root = is_root
        self._previous = previous  # The module's own instance-level forward, if it had one.
        try:
            functools.update_wrapper(self, original)  # __wrapped__, __name__, __doc__ for inspect.
        except (AttributeError, TypeError):
            self.__wrapped__ = original

    def __call__(self, *args, **kwargs):
        call = self._pre(self._layer_id, self._is_root, args, kwargs)
        try:
            output = self._original(*args, **kwargs)
        except BaseException:
            self._abort(call)
            raise
        self._post(call, output)
        return output

    def __deepcopy__(self, memo):
        new_module = memo.get(id(self._module))
        if self._previous is not None:
            return copy.deepcopy(self._previous, memo)
        if new_module is None:  # The wrapper copied on its own: behave like the original.
            return self._original
        return type(new_module).forward.__get__(new_module)

    def __reduce__(self):
        if self._previous is not None:
            return (_identity, (self._previous,))
        return (_class_forward, (self._module,))


def _identity(value: Any) -> Any:
    return value


def _class_forward(module: torch.nn.Module) -> Any:
    return type(module).forward.__get__(module)


def _optimized_module_class() -> Any:
    """torch.compile's wrapper class (torch >= 2), or None."""
    eval_frame = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    return getattr(eval_frame, "OptimizedModule", None)


def _is_compiled(module: torch.nn.Module) -> bool:
    cls = _optimized_module_class()
    return cls is not None and isinstance(module, cls)


def _uncompiled(module: torch.nn.Module) -> torch.nn.Module:
    """The module a ``torch.compile`` wrapper compiles (``_orig_mod``), else ``module``."""
    return module._orig_mod if _is_compiled(module) else module


def _named_layers(model: torch.nn.Module) -> list:
    """(full name, module) of every module under ``model``, as ``named_modules`` (each once, the
    root excluded), except that a ``torch.compile``'d module's inner module (``_orig_mod``) is not a
    layer of its own and is left out of the names below it: the layers of ``torch.compile(model)``
    are named as those of ``model``, so that the two traces diff."""
    out, seen = [], {id(model)}

    def walk(module: torch.nn.Module, prefix: str) -> None:
        for name, child in module._modules.items():
            if child is None:
                continue
            if name == "_orig_mod" and _is_compiled(module):
                if id(child) not in seen:
                    seen.add(id(child))
                    walk(child, prefix)
                continue
            if id(child) in seen:
                continue
            seen.add(id(child))
            full = prefix + name
            out.append((full, child))
            walk(child, full + ".")

    walk(model, "")
    return out


def _direct_params(module: torch.nn.Module, seen: set) -> int:
    """Elements of the module's own parameters not counted for an earlier module: a parameter
    shared by several modules (tied weights) counts for the first that owns it, in named_modules
    order, as ``model.parameters()`` lists it, so the layers add up to the model."""
    total = 0
    for p in module.parameters(recurse=False):
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


class _ForwardHandle:
    """Restores one module's ``forward`` (the ``RemovableHandle`` of this interception)."""

    __slots__ = ("_module", "_had_own", "_previous")

    def __init__(self, module: torch.nn.Module, had_own: bool, previous: Any) -> None:
        self._module = module
        self._had_own = had_own
        self._previous = previous

    def remove(self) -> None:
        if self._module is None:
            return
        if self._had_own:
            object.__setattr__(self._module, "forward", self._previous)
        else:
            self._module.__dict__.pop("forward", None)
        self._module = None


def intercept_forward(module: torch.nn.Module, pre: Any, post: Any, abort: Any, layer_id: Any,
                      is_root: bool = False) -> _ForwardHandle:
    """Replaces ``module.forward`` by a wrapper until the returned handle's ``remove()``.

    Each call runs ``token = pre(layer_id, is_root, args, kwargs)``, then the forward, then
    ``post(token, output)`` (``abort(token)`` instead when the forward raises). Unlike module hooks,
    the wrapper sees keyword arguments and leaves the module's hook dictionaries empty, so torch's
    fused paths that refuse hooked modules (``nn.TransformerEncoderLayer``'s fast path under
    torch 2) still run. Not for ``torch.jit.ScriptModule``s (their forward is not replaceable).
    """
    had_own = "forward" in module.__dict__
    previous = module.__dict__.get("forward")
    wrapper = _TracedForward(pre, post, abort, module, module.forward, layer_id, is_root, previous)
    object.__setattr__(module, "forward", wrapper)
    return _ForwardHandle(module, had_own, previous)


class HookManager:
    """Intercepts every module call of ``model`` and records the trace into ``record``.

    Args:
        model: the ``torch.nn.Module``. Child modules are recorded as layers (a model without
            children records the root itself).
        record: the ``TraceRecord`` whose ``layers`` the manager fills.
        capture_stats: compute mean/std/min/max of every input and output (NaN/Inf are counted
            either way).
        engine: the native engine to record with (``TraceSession`` passes its own); by default
            one of the manager's own.

    Repeated forwards within one enable()..disable() are aggregated per module (latency
    min/max/mean and forward_count accumulate; the latest tensors are kept). ``_hooks`` holds one
    removable handle per intercepted ``forward``.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        record: TraceRecord,
        *,
        capture_stats: bool = True,
        engine: Optional[Any] = None,
    ) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self._model = model
        self._record = record
        self._capture_stats = bool(capture_stats)
        self._engine = engine if engine is not None else _C._SessionEngine(
            capture_stats=self._capture_stats)
        self._hooks: list = []
        self._active = False
        self._started_here = False  # enable() started the engine (standalone use).

    @property
    def active(self) -> bool:
        return self._active

    def register(self) -> None:
        """Intercepts ``forward`` of every module (declaring the children as layers)."""
        if self._hooks:
            return
        engine = self._engine
        children = _named_layers(self._model)
        targets = []
        seen: set = set()  # Parameters already counted (tied weights count once).
        root_params = _direct_params(_uncompiled(self._model), seen)
        if children:
            targets.append((self._model, -1, True))
            for full_name, module in children:
                inner = _uncompiled(module)  # A compiled module is recorded as what it compiles.
                layer_id = engine.declare_layer(
                    full_name.rsplit(".", 1)[-1],
                    type(inner).__name__,
                    full_name,
                    full_name.count(".") + 1,
                    _direct_params(inner, seen),
                )
                targets.append((module, layer_id, False))
        else:
            inner = _uncompiled(self._model)
            name = type(inner).__name__
            layer_id = engine.declare_layer(name, name, name, 0, root_params)
            targets.append((self._model, layer_id, True))
        for module, layer_id, is_root in targets:
            if isinstance(module, torch.jit.ScriptModule):
                continue  # Compiled modules keep their forward; they are traced as a whole.
            self._hooks.append(intercept_forward(module, engine.pre, engine.post, engine.abort,
                                                 layer_id, is_root))

    def unregister(self) -> None:
        """Restores every ``forward`` (after disable() if the manager is still enabled)."""
        if self._active:
            self.disable()
        while self._hooks:
            self._hooks.pop().remove()

    def reset(self) -> None:
        """Forgets what was recorded: the next enable() starts a clean trace (it always does)."""
        if not self._active:
            self._record.layers = []

    def enable(self) -> None:
        """Starts recording (a clean trace)."""
        if self._active:
            return
        if not self._engine.active:
            self._engine.start()
            self._started_here = True
        self._active = True

    def disable(self) -> None:
        """Stops recording and writes the trace's layers into ``record``."""
        if not self._active:
            return
        self._active = False
        if self._started_here:
            self._started_here = False
            self._engine.finish(None)
        self._engine.fill_layers(self._record)
