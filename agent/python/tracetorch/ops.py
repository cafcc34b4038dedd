"""Op-level capture: take one forward pass apart to the operation.

    import tracetorch as tl
    trace = tl.trace(model, x)                     # every op, every activation kept
    trace["layer3"].out                            # a module's output (what a forward hook sees)
    [op.label for op in trace.ops if op.func_name == "conv2d"]
    tl.trace(model, x, save=tl.func("conv2d"))     # keep only the conv outputs
    tl.trace(model, x, intervene={tl.module("layer2"): lambda out: out * 0})
    trace.export("ops.json"); tl.load("ops.json")  # the graph without tensors

What an op is: one call of a tensor operation at the level the model's code wrote it (a torch
function, a Tensor method, an operator, an ``F.*`` call), seen through the dispatcher
(at::RecordFunction) by the native recorder (agent/ops/op_recorder.h): ``linear``, not the
``addmm`` inside it; in-place ops are ops (``relu_``, ``add_``). Shape queries (``x.shape``,
``x.size()``) are not ops; ``x.item()`` is an op with ``tensor_output`` False.

Labels are ``<func>_<n>_<i>``: the n-th call of that function, the i-th op of the forward, both
1-based (``conv2d_1_1``, ``relu_1_3``; the in-place "relu_" labels as "relu"). A module called
more than once is one pass per call, addressed "block:1", "block:2" (just "block" when it ran
once); the model itself is "<root>".

Selectors (``func``, ``module``, ``in_module``, ``label``, combined with ``|``, ``&``, ``~``) are the
core's (trace/op_select.h); they drive ``save=`` and ``intervene=`` while capturing and
``trace.select(...)`` afterwards.

Saved activations are references to the tensors the ops returned (no copy), except when a later
in-place op overwrote one: then the recorder kept a copy (detached) of what the op produced.
An intervention's result is written into the op's output in place (``copy_`` under no_grad) so
that the rest of the forward sees it, and the saved tensor is the output after it. The op's
statistics are of the output after an intervention made when the op ended (func, label and
in_module sites), before one made when a module pass ended (module sites). Only ops with one
tensor output are intervened on at op end. An output that is a view of a tensor saved earlier is
not copied before an in-place write to it.

TorchScript models (``torch.jit.script`` / ``torch.jit.trace`` output) trace too: their module
passes come from the interpreter's module hierarchy instead of forward hooks. There a pass ends
when an op runs outside it, its output is taken to be the last op it ran, its ``params`` are not
counted, and two consecutive calls of the same module with no other module's op between them are
one pass.

Not thread-safe: trace one model at a time per thread. The recorder never raises into the
forward; an exception an intervention raised is raised by ``trace`` after the forward.
"""

from __future__ import annotations

import inspect
import os
import json
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch

from tracetorch import _C, hooks

__all__ = [
    "Op",
    "OpTrace",
    "ModulePass",
    "Selector",
    "func",
    "in_module",
    "label",
    "load",
    "module",
    "trace",
]


# ---- Selectors ----------------------------------------------------------------------------------


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Selector:
    """A predicate over the ops of a forward pass, in the core's printed form.

    Combine with ``|`` (either), ``&`` (both) and ``~`` (not). ``Selector("func('conv2d')")``
    parses the printed form (ValueError when it does not parse); ``str(s)`` gives it back.
    """

    __slots__ = ("_text",)

    def __init__(self, text: str):
        self._text = _C._parse_selector(text)

    def __or__(self, other: "Selector") -> "Selector":
        return Selector(f"({self._text}) | ({_as_selector(other)._text})")

    def __and__(self, other: "Selector") -> "Selector":
        return Selector(f"({self._text}) & ({_as_selector(other)._text})")

    def __invert__(self) -> "Selector":
        return Selector(f"~({self._text})")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"tl.Selector({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Selector) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


def _as_selector(s: Union[Selector, str]) -> Selector:
    if isinstance(s, Selector):
        return s
    if isinstance(s, str):
        return Selector(s)
    raise TypeError(f"expected a tracetorch selector or its printed form, got {type(s).__name__}")


def func(name: str) -> Selector:
    """Ops of that function ("conv2d"; "relu" also matches the in-place "relu_")."""
    return Selector(f"func({_quote(name)})")


def module(address: str) -> Selector:
    """The op whose output is the output of a pass of that module ("layer3", "layer3:2")."""
    return Selector(f"module({_quote(address)})")


def in_module(address: str) -> Selector:
    """Every op run inside a pass of that module, nested ones too ("layer2", "layer2:1")."""
    return Selector(f"in_module({_quote(address)})")


def label(*labels: str) -> Selector:
    """The op(s) with these labels ("relu_1_3")."""
    if not labels:
        return Selector("none")
    return Selector(" | ".join(f"label({_quote(x)})" for x in labels))


# ---- The trace ----------------------------------------------------------------------------------


def _flatten(obj: Any, out: List[torch.Tensor], depth: int = 0) -> List[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif depth < 16 and isinstance(obj, (list, tuple)):
        for x in obj:
            _flatten(x, out, depth + 1)
    elif depth < 16 and isinstance(obj, dict):
        for x in obj.values():
            _flatten(x, out, depth + 1)
    return out


def _named_tensors(name: str, obj: Any, out: List[Tuple[str, torch.Tensor]], depth: int = 0):
    if isinstance(obj, torch.Tensor):
        out.append((name, obj))
    elif depth < 16 and isinstance(obj, (list, tuple)):
        for i, x in enumerate(obj):
            _named_tensors(f"{name}.{i}", x, out, depth + 1)
    elif depth < 16 and isinstance(obj, dict):
        for k, x in obj.items():
            _named_tensors(f"{name}.{k}", x, out, depth + 1)


_KIND_PREFIX = {"input": "input", "param": "param"}


class Op:
    """One op of a trace. Plain attributes (see OpNode in trace/op_graph.h):

    label, func_name, op_name, index (1-based), call_index, module (the address of the innermost
    module pass that ran it), modules (every enclosing pass, outermost first), inputs (dicts:
    arg, source, shape, dtype, device), args (name -> value), outputs (dicts: shape, dtype,
    device and statistics), shape / dtype (of the first output), stats (of the first output),
    parents / children (labels), output_of (addresses of the passes whose output it is), params,
    inplace, tensor_output, time_ms, saved; ``out`` / ``tensor``: the saved output (a tuple when
    the op returned several tensors), None when not saved.
    """

    def __init__(self, trace: "OpTrace", i: int, d: Dict[str, Any]):
        self._trace = trace
        self._i = i
        self.label: str = d["label"]
        self.func_name: str = d["func_name"]
        self.op_name: str = d["op_name"]
        self.index: int = d["index"]
        self.call_index: int = d["call_index"]
        self.module_pass: int = d["module_pass"]
        self.args: Dict[str, Any] = {a["name"]: a["value"] for a in d["args"]}
        self.outputs: List[Dict[str, Any]] = d["outputs"]
        self.params: int = d["params"]
        self.inplace: bool = d["inplace"]
        self.tensor_output: bool = d["tensor_output"]
        self.time_ms: Optional[float] = d["time_ms"]
        self.saved: bool = d["saved"]
        self._d = d

    @property
    def module(self) -> Optional[str]:
        return self._trace._address(self.module_pass) if self.module_pass >= 0 else None

    @property
    def modules(self) -> List[str]:
        out = []
        p = self.module_pass
        while p >= 0:
            out.append(self._trace._address(p))
            p = self._trace._modules[p]["parent"]
        return out[::-1]

    @property
    def inputs(self) -> List[Dict[str, Any]]:
        out = []
        for x in self._d["inputs"]:
            t = dict(x["tensor"])
            t["arg"] = x["arg"]
            t["source"] = self._trace._source_name(x["source"])
            out.append(t)
        return out

    @property
    def shape(self) -> Optional[torch.Size]:
        return torch.Size(self.outputs[0]["shape"]) if self.outputs else None

    @property
    def dtype(self) -> Optional[str]:
        return self.outputs[0]["dtype"] if self.outputs else None

    @property
    def stats(self) -> Optional[Dict[str, Any]]:
        """mean/std/min/max/nan_count/inf_count of the first output; only the counts (the moments
        None) for a graph recorded with NaN/Inf counts only (TraceSession(ops="on_nan"))."""
        if not self.outputs:
            return None
        out = self.outputs[0]
        if "mean" in out:
            keys = ("mean", "std", "min", "max", "nan_count", "inf_count")
            return {k: out[k] for k in keys}
        if "nonfinite" in out:
            return {"mean": None, "std": None, "min": None, "max": None,
                    "nan_count": out["nonfinite"]["nan_count"],
                    "inf_count": out["nonfinite"]["inf_count"]}
        return None

    @property
    def parents(self) -> List[str]:
        return [self._trace._ops[p].label for p in self._d["parents"]]

    @property
    def children(self) -> List[str]:
        return [self._trace._ops[c].label for c in self._d["children"]]

    @property
    def output_of(self) -> List[str]:
        return [self._trace._address(p) for p in self._d["output_of"]]

    @property
    def out(self) -> Any:
        saved = self._trace._saved.get(self._i)
        if not saved:
            return None
        return saved[0] if len(saved) == 1 else tuple(saved)

    tensor = out

    def __repr__(self) -> str:
        shape = tuple(self.shape) if self.shape is not None else None
        return f"Op({self.label}, module={self.module!r}, shape={shape})"


class ModulePass:
    """One call of a module: address ("layer3", "block:2", "<root>"), path, type, pass_index,
    params (its direct parameters), ``ops`` (what it ran, nested passes' ops too), ``out`` (its
    output: a tensor, or a tuple when it returned several; None when the ops that produced it
    were not saved), ``inputs`` (its input tensors where the trace has them, else None)."""

    def __init__(self, trace: "OpTrace", i: int, d: Dict[str, Any]):
        self._trace = trace
        self._i = i
        self._d = d
        self.path: str = d["path"]
        self.type: str = d["type"]
        self.pass_index: int = d["pass"]
        self.params: int = d["params"]

    @property
    def address(self) -> str:
        return self._trace._address(self._i)

    @property
    def ops(self) -> List[Op]:
        first, last = self._d["first_op"], self._d["last_op"]
        return [] if first < 0 else self._trace._ops[first : last + 1]

    @property
    def out(self) -> Any:
        outs = [self._trace._tensor_of(s) for s in self._d["outputs"]]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def inputs(self) -> List[Optional[torch.Tensor]]:
        return [self._trace._tensor_of(s) for s in self._d["inputs"]]

    def __repr__(self) -> str:
        return f"ModulePass({self.address}, {self.type}, ops={len(self.ops)})"


class OpTrace:
    """The op graph of one forward pass, with the activations that were saved.

    ``ops`` in execution order; ``trace[address_or_label]``; ``output`` (what the model returned;
    None for a loaded trace); ``nan_origin`` (an Op or None); ``modules`` (the passes, in the order they began); ``inputs`` (name
    -> tensor, for a captured trace); ``select(selector)``; ``summary()``; ``export(path)``;
    ``save_activations(path)``; ``draw(...)`` (a Graphviz picture); ``audit(model=None)`` (a
    health report and, with the model, a replay: tracetorch/audit.py).
    """

    def __init__(self, graph: Any, saved: Dict[int, List[Optional[torch.Tensor]]], output: Any,
                 inputs: Dict[str, torch.Tensor]):
        self._graph = graph
        self._doc = json.loads(graph.to_json(0))
        self._saved = saved
        self.output = output
        self.inputs = inputs
        self._input_list = list(inputs.values())
        self._modules = self._doc["modules"]
        self._pass_count: Dict[str, int] = {}
        for m in self._modules:
            self._pass_count[m["path"]] = self._pass_count.get(m["path"], 0) + 1
        self._ops = [Op(self, i, d) for i, d in enumerate(self._doc["ops"])]
        self._by_label = {op.label: op for op in self._ops}
        self._passes = [ModulePass(self, i, d) for i, d in enumerate(self._modules)]
        # Set by trace() for the replay: the call's (args, kwargs) and the CPU RNG state before.
        self._call: Optional[Tuple[tuple, dict]] = None
        self._rng_state: Optional[torch.Tensor] = None

    # -- lookups
    @property
    def ops(self) -> List[Op]:
        return list(self._ops)

    @property
    def modules(self) -> List[ModulePass]:
        return list(self._passes)

    @property
    def model_name(self) -> str:
        return self._doc["model_name"]

    @property
    def source(self) -> str:
        return self._doc["source"]

    @property
    def nan_origin(self) -> Optional[Op]:
        """The first op whose inputs were finite and whose output held NaN/Inf, or None."""
        i = self._doc["nan_origin"]
        return None if i is None else self._ops[i]

    def __len__(self) -> int:
        return len(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self._ops)

    def __getitem__(self, key: Union[str, int]) -> Union[Op, ModulePass]:
        if isinstance(key, int):
            return self._ops[key]
        p = self._find_pass(key)
        if p is not None:
            return self._passes[p]
        if key in self._by_label:
            return self._by_label[key]
        raise KeyError(f"no module pass or op {key!r} in this trace")

    def __contains__(self, key: str) -> bool:
        return self._find_pass(key) is not None or key in self._by_label

    def select(self, selector: Union[Selector, str]) -> List[Op]:
        """The ops the selector matches, in execution order."""
        return [self._ops[i] for i in self._graph.select(str(_as_selector(selector)))]

    # -- output
    def summary(self) -> str:
        """A table of the ops: label, module, output shape, parameters, time."""
        rows = [("label", "module", "shape", "params", "ms")]
        for op in self._ops:
            shape = "x".join(str(d) for d in op.shape) if op.shape is not None else "-"
            if op.shape is not None and len(op.shape) == 0:
                shape = "scalar"
            ms = f"{op.time_ms:.3f}" if op.time_ms is not None else "-"
            rows.append((op.label, op.module or "-", shape, str(op.params or "") or "-", ms))
        widths = [max(len(r[c]) for r in rows) for c in range(5)]
        lines = [f"{self.model_name} ({self.source}): {len(self._ops)} ops, "
                 f"{len(self._passes)} module passes, "
                 f"{sum(1 for op in self._ops if op.saved)} saved"]
        for r in rows:
            lines.append("  ".join(r[c].ljust(widths[c]) if c < 2 else r[c].rjust(widths[c])
                                   for c in range(5)).rstrip())
        return "\n".join(lines)

    def export(self, path: str) -> None:
        """Writes the graph (no tensors) as versioned JSON (trace/op_graph_json.h)."""
        self._graph.write(str(path))

    def draw(self, path: Optional[str] = None, collapse: str = "auto",
             module: Optional[str] = None, file_format: Optional[str] = None,
             direction: str = "TB") -> Union[str, bytes]:
        """A picture of the graph, laid out by Graphviz's libraries (draw/op_graph_dot.h).

        ``collapse``: "none" (every op, modules as nested clusters), "max" (each top-level module
        one box) or "auto" (at most ~80 nodes, repeated identical blocks folded "xN").
        ``module``: draw only that module pass ("layer2", "block:2") with its inputs and outputs
        as the boundary. ``file_format``: "svg", "png", "pdf" or "dot" (the graph before
        layout); by default the one ``path``'s extension names ("g.png" is a PNG), else svg.
        ``direction``: "TB" or "LR". Returns the picture (str for svg and dot, bytes for png and
        pdf) and writes it to ``path`` when given. The same code as ``tracetorch graph``.
        Raises ValueError for an unknown option, module or extension, OSError when ``path``
        cannot be written.
        """
        return _C._draw_op_graph(self._graph, collapse, module or "", file_format or "",
                                 direction, None if path is None else os.fspath(path))

    def audit(self, model: Optional[torch.nn.Module] = None, dead_threshold: float = 0.99,
              rtol: float = 1e-5, atol: float = 1e-6,
              loss_fn: Optional[Callable[[Any], torch.Tensor]] = None) -> Any:
        """The health report (tracetorch.audit.AuditReport): non-finite origin, dead
        activations; with ``model`` (the one traced) the replay: the output again from the same
        inputs and RNG state, every op with saved inputs re-run through the dispatcher, and a
        perturbed input that must change the output; with ``loss_fn`` (output -> scalar) the
        gradient flow: parameters with no, zero, NaN or vanishing gradients, per module."""
        from tracetorch.audit import audit as _audit

        return _audit(self, model, dead_threshold=dead_threshold, rtol=rtol, atol=atol,
                      loss_fn=loss_fn)

    def save_activations(self, path: str) -> None:
        """torch.save of a dict label -> saved output (a tuple for several outputs)."""
        acts = {op.label: op.out for op in self._ops if op.out is not None}
        torch.save(acts, path)

    def to_json(self, indent: int = 1) -> str:
        return self._graph.to_json(indent)

    def __repr__(self) -> str:
        return f"OpTrace({self.model_name}, {len(self._ops)} ops)"

    # -- internals
    def _address(self, p: int) -> str:
        m = self._modules[p]
        if m["path"] == "":
            return "<root>"
        return m["path"] if self._pass_count[m["path"]] <= 1 else f"{m['path']}:{m['pass']}"

    def _find_pass(self, address: str) -> Optional[int]:
        path, n = address, 1
        if address == "<root>":
            path = ""
        elif ":" in address:
            head, _, tail = address.rpartition(":")
            if tail.isdigit():
                path, n = head, int(tail)
        for i, m in enumerate(self._modules):
            if m["path"] == path and m["pass"] == n:
                return i
        return None

    def _source_name(self, s: Dict[str, Any]) -> str:
        kind, i = s["kind"], s["index"]
        if kind == "op":
            return self._ops[i].label
        if kind == "input":
            return "input:" + self._doc["inputs"][i]["name"]
        if kind == "param":
            return "param:" + self._doc["params"][i]["name"]
        return "other"

    def _tensor_of(self, s: Dict[str, Any]) -> Optional[torch.Tensor]:
        if s["kind"] == "op":
            saved = self._saved.get(s["index"])
            if saved and s["output"] < len(saved):
                return saved[s["output"]]
            return None
        if s["kind"] == "input" and s["index"] < len(self._input_list):
            return self._input_list[s["index"]]
        return None


# ---- Capture ------------------------------------------------------------------------------------

_ALL = object()


def _input_names(model: torch.nn.Module, n: int) -> List[str]:
    try:
        params = [p.name for p in inspect.signature(model.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input.{i}" for i in range(n)]


def trace(model: torch.nn.Module, *args: Any, save: Any = _ALL,
          intervene: Optional[Dict[Union[Selector, str], Callable[[torch.Tensor], Any]]] = None,
          stats: bool = True, **kwargs: Any) -> OpTrace:
    """Runs ``model(*args, **kwargs)`` once and records every op it ran.

    save: which activations to keep — every one by default, None for none (structure and
    statistics of every op are recorded either way), or a selector. intervene: {selector: fn};
    the output of each op the selector matches is replaced by ``fn(output)`` (None: left as is)
    while the forward runs. stats: output statistics (mean, std, min, max, NaN/Inf counts).
    Grad mode is the caller's. Raises RuntimeError when another capture is active on this thread
    or when an intervention raised (after the forward).
    """
    if save is _ALL:
        save_text: Optional[str] = "all"
    elif save is None:
        save_text = None
    else:
        save_text = str(_as_selector(save))
    sites: List[str] = []
    fns: List[Callable[[torch.Tensor], Any]] = []
    for sel, fn in (intervene or {}).items():
        if not callable(fn):
            raise TypeError(f"intervene[{sel}] is not callable")
        sites.append(str(_as_selector(sel)))
        fns.append(fn)
    callback = (lambda site, out: fns[site](out)) if fns else None
    scripted = isinstance(model, torch.jit.ScriptModule)
    recorder = _C._OpRecorder(save_text, bool(stats), sites, callback, scripted)
    model_type = getattr(model, "original_name", None) if scripted else type(model).__name__
    recorder.set_model(model_type or type(model).__name__, "torchscript" if scripted else "eager")

    named: List[Tuple[str, torch.Tensor]] = []
    for name, a in zip(_input_names(model, len(args)), args):
        _named_tensors(name, a, named)
    for k, v in kwargs.items():
        _named_tensors(k, v, named)
    inputs: Dict[str, torch.Tensor] = {}
    for name, t in named:
        recorder.add_input(name, t)
        inputs[name] = t
    for name, p in model.named_parameters():
        recorder.add_parameter(name, p, False)
    for name, b in model.named_buffers():
        recorder.add_parameter(name, b, True)

    handles = []
    if not scripted:
        for path, mod in model.named_modules():
            handles.extend(_hook(recorder, path, mod))
    rng_state = torch.get_rng_state()
    recorder.start()
    try:
        if scripted:  # The interpreter's module hierarchy gives the passes inside the root.
            root = recorder.push_module("", model_type or "", [t for _, t in named], 0)
            output = model(*args, **kwargs)
            recorder.pop_module(root, _flatten(output, []))
        else:
            output = model(*args, **kwargs)
        recorder.set_outputs(_flatten(output, []))
    finally:
        recorder.stop()
        for h in handles:
            h.remove()
    if recorder.hook_errors and recorder.first_error.startswith("intervene"):
        raise RuntimeError(f"an intervention failed: {recorder.first_error}")
    if recorder.hook_errors:
        warnings.warn(f"tracetorch: {recorder.hook_errors} op capture error(s), the trace may miss "
                      f"ops; the first: {recorder.first_error}", RuntimeWarning, stacklevel=2)
    result = OpTrace(recorder.graph(), dict(recorder.saved_all()), output, inputs)
    result._call = (args, kwargs)  # For the replay (trace.audit): the same call, the same RNG,
    result._rng_state = rng_state  # the same autocast.
    result._autocast = _autocast_state()
    return result


def _autocast_state() -> Dict[str, Any]:
    """{device_type: dtype} of the autocast regions active now (torch.autocast)."""
    state: Dict[str, Any] = {}
    for device in ("cpu", "cuda"):
        try:  # torch >= 2.4 takes the device type.
            enabled = torch.is_autocast_enabled(device)
            dtype = torch.get_autocast_dtype(device) if enabled else None
        except (TypeError, AttributeError):  # torch 1.13 .. 2.3.
            enabled = (torch.is_autocast_cpu_enabled() if device == "cpu"
                       else torch.is_autocast_enabled())
            dtype = (torch.get_autocast_cpu_dtype() if device == "cpu"
                     else torch.get_autocast_gpu_dtype()) if enabled else None
        if enabled:
            state[device] = dtype
    return state


def _hook(recorder: Any, path: str, mod: torch.nn.Module) -> list:
    """Opens a module pass when ``mod`` is called and closes it with its output.

    Through an instance-level ``forward`` (hooks.intercept_forward), not module hooks: torch 2
    turns ``nn.TransformerEncoderLayer``'s fused fast path off for a hooked module, and the trace
    must show the kernels the untraced model runs. A ScriptModule's forward cannot be replaced: it
    gets forward hooks."""
    type_name = type(mod).__name__
    params = sum(p.numel() for p in mod.parameters(recurse=False))

    def pre(_layer, _is_root, args, _kwargs):
        return recorder.push_module(path, type_name, _flatten(args, []), params)

    def post(token, output):
        recorder.pop_module(token, _flatten(output, []))

    def abort(token):
        recorder.pop_module(token, [])

    if not isinstance(mod, torch.jit.ScriptModule):
        return [hooks.intercept_forward(mod, pre, post, abort, None)]
    open_passes: List[int] = []

    def pre_hook(_module, args):
        open_passes.append(pre(None, False, args, None))

    def post_hook(_module, _args, output):
        if open_passes:
            post(open_passes.pop(), output)

    return [mod.register_forward_pre_hook(pre_hook), mod.register_forward_hook(post_hook)]


def load(path: str) -> OpTrace:
    """Reads a graph ``OpTrace.export`` wrote (no tensors: ``out`` is None everywhere)."""
    return OpTrace(_C._read_op_graph(str(path)), {}, None, {})
