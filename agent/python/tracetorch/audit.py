"""Audit a capture: is the trace healthy, and does it agree with the model?

    report = trace.audit()        # graph checks: non-finite origin, dead activations
    report = trace.audit(model)   # and the replay checks
    print(report); report.to_json(); report.ok

Graph checks come from the core (trace/op_audit.h, the same as ``tracetorch audit ops.json``):
where non-finite trouble that mattered entered, with its module (trace/nonfinite.h: a NaN
anywhere, or an Inf outside a mask that reached a module's or the model's output, walked back to
the first op whose inputs carried none; an attention mask's -inf that softmax absorbs is none);
ops whose output is all zero and that are an activation or read one. With saved activations the dead check is
exact: an activation (or its direct consumer) whose saved output is at least ``dead_threshold``
zeros is listed with its zero fraction.

Replay (needs the model, and the trace's saved activations):

1. output: the model run again on the traced inputs, with the CPU RNG state the traced forward
   started from, under no_grad, returns ``trace.output`` (exactly; within ``rtol``/``atol`` is
   reported as such).
2. ops: every op whose inputs are all at hand (saved outputs of its parents, the graph's inputs,
   the model's parameters and buffers) is called again through the dispatcher
   (``torch.ops.aten.<name>.<overload>``, by the schema's argument names; what an in-place op
   writes is cloned first, so that the replay changes nothing of the trace) and must reproduce its saved output: exactly, or
   within the tolerance (``tolerated``). Random ops (dropout in train mode, rand, bernoulli, ...)
   cannot reproduce their draw, nor can empty/empty_like their uninitialized memory: they are
   listed as ``random``, not compared. Ops that cannot be
   rebuilt (a parent not saved, an argument that does not round-trip through JSON) are counted
   as ``skipped`` with the reason.
3. perturbation: the model run on slightly changed inputs must not return the same output, so
   that check 1 cannot pass vacuously. What is changed depends on the inputs, and the report says
   which (``replay.perturbation``): floating inputs are scaled and shifted ("input"); without
   them, one token of the first integer input (token ids) is replaced by another id found in the
   same input, or by its neighbour ("token"); without either, the output of the model's first
   ``nn.Embedding`` is scaled and shifted ("embedding"); a model none of these reach is "not
   applicable", which is no failure.

Gradient flow (needs the model and ``loss_fn``, output -> scalar loss): the traced call is run
again with grad and the loss backpropagated; parameters with no gradient (a detached branch, an
unused module), an all-zero, a non-finite or a vanishing one are listed per module. The capture
itself records no backward; this is the backward of the same call.

The RNG check covers the CPU generator only (a model that draws on CUDA is reported as it
compares). Not thread-safe: the replay sets and restores the global RNG state.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

from tracetorch import _C

__all__ = ["AuditReport", "ReplayReport", "audit"]

_RANDOM = ("dropout", "dropout_", "feature_dropout", "alpha_dropout", "feature_alpha_dropout",
           "native_dropout", "bernoulli", "bernoulli_", "rand", "rand_like", "randn", "randn_like",
           "randint", "randint_like", "randperm", "normal", "normal_", "uniform_", "multinomial",
           "rrelu", "rrelu_", "poisson", "exponential_", "geometric_", "cauchy_", "log_normal_",
           "random_",
           # Not random, but uninitialized memory: nothing to compare either.
           "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided")


class ReplayReport:
    """What the replay found. ``differed``: labels of ops whose replay did not reproduce them."""

    def __init__(self) -> None:
        self.output_matches: Optional[bool] = None  # None: nothing to compare (no output).
        self.output_exact: Optional[bool] = None
        self.perturbed_changes_output: Optional[bool] = None  # None: not applicable.
        # What the perturbation changed: "input", "token", "embedding" or "not applicable".
        self.perturbation: Optional[str] = None
        self.replayed: List[str] = []
        self.exact: int = 0
        self.tolerated: List[str] = []
        self.differed: List[str] = []
        self.random: List[str] = []
        self.skipped: Dict[str, str] = {}
        self.rtol = 0.0
        self.atol = 0.0
        self.seconds = 0.0

    @property
    def ok(self) -> bool:
        return (self.output_matches is not False and self.perturbed_changes_output is not False
                and not self.differed)

    def to_dict(self) -> Dict[str, Any]:
        return {"output_matches": self.output_matches, "output_exact": self.output_exact,
                "perturbed_changes_output": self.perturbed_changes_output,
                "perturbation": self.perturbation,
                "replayed": len(self.replayed), "exact": self.exact,
                "tolerated": self.tolerated, "differed": self.differed, "random": self.random,
                "skipped": self.skipped, "rtol": self.rtol, "atol": self.atol,
                "seconds": self.seconds}


class AuditReport:
    """The report ``trace.audit()`` returns; prints as a short table, ``to_json()`` for tools."""

    def __init__(self, graph: Dict[str, Any], dead: List[Dict[str, Any]],
                 replay: Optional[ReplayReport],
                 gradients: Optional[Dict[str, Any]] = None):
        self.model_name: str = graph["model_name"]
        self.ops: int = graph["ops"]
        self.nan_origin: Optional[Dict[str, Any]] = graph["nan_origin"]
        self.nan_input: Optional[str] = graph["nan_input"]
        self.nonfinite_ops: int = graph["nonfinite_ops"]
        self.dead = dead
        self.replay = replay
        self.gradients = gradients  # With loss_fn: the gradient flow (see _gradient_flow).

    @property
    def ok(self) -> bool:
        return (self.nan_origin is None and self.nan_input is None and not self.dead
                and (self.replay is None or self.replay.ok)
                and (self.gradients is None or not self.gradients["problems"]))

    def to_dict(self) -> Dict[str, Any]:
        return {"model_name": self.model_name, "ops": self.ops, "nan_origin": self.nan_origin,
                "nan_input": self.nan_input, "nonfinite_ops": self.nonfinite_ops,
                "dead": self.dead, "replay": None if self.replay is None else self.replay.to_dict(),
                "gradients": self.gradients,
                "ok": self.ok}

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __str__(self) -> str:
        lines = [f"Audit of {self.model_name}: {self.ops} ops"]
        o = self.nan_origin
        if o is not None:
            lines.append(f"  non-finite origin  {o['label']} in {o['module'] or '-'} ({o['func']}): "
                         f"NaN {o['nan_count']}, Inf {o['inf_count']}; "
                         f"{self.nonfinite_ops} ops non-finite")
        elif self.nan_input is not None:
            lines.append(f"  non-finite origin  the input {self.nan_input}")
        elif self.nonfinite_ops:
            lines.append(f"  non-finite origin  none ({self.nonfinite_ops} "
                         f"op{'s' if self.nonfinite_ops != 1 else ''} held only masks or -inf "
                         "that was absorbed)")
        else:
            lines.append("  non-finite origin  none (every output finite)")
        lines.append(f"  dead outputs       {len(self.dead) or 'none'}")
        for d in self.dead:
            after = "" if d["after"] == d["label"] else f"  (after {d['after']})"
            lines.append(f"    {d['label']} in {d['module'] or '-'}  "
                         f"{100 * d['zero_fraction']:5.1f}% zero{after}")
        g = self.gradients
        if g is not None:
            lines.append(f"  gradient flow      {g['parameters']} parameters, "
                         f"{len(g['problems'])} without a healthy gradient")
            for module, names in g["per_module"].items():
                lines.append(f"    {module or '<root>'}: " + ", ".join(
                    f"{n} ({g['problems'][n]})" for n in names))
        r = self.replay
        if r is None:
            lines.append("  replay             not run (trace.audit(model) replays)")
            return "\n".join(lines)

        def yes(v: Optional[bool], good: str, bad: str) -> str:
            return "n/a" if v is None else (good if v else bad)

        exact = "" if r.output_exact in (None, True) else " (within tolerance)"
        lines.append("  replay output      " + yes(r.output_matches, "matches" + exact, "DIFFERS"))
        how = f" ({r.perturbation})" if r.perturbation else ""
        if r.perturbation == "not applicable":
            lines.append("  perturbed input    not applicable (no floating or integer input, "
                         "no Embedding)")
        else:
            lines.append("  perturbed input    " + yes(r.perturbed_changes_output,
                                                        "changes the output" + how,
                                                        "SAME OUTPUT (check 1 is vacuous)" + how))
        lines.append(f"  replayed ops       {len(r.replayed)} ({r.exact} exact, "
                     f"{len(r.tolerated)} within rtol={r.rtol:g} atol={r.atol:g}), "
                     f"{len(r.differed)} differed, {len(r.random)} random, "
                     f"{len(r.skipped)} skipped, {r.seconds * 1000:.0f} ms")
        if r.differed:
            lines.append("    differed: " + ", ".join(r.differed[:12])
                         + (" ..." if len(r.differed) > 12 else ""))
        if r.random:
            lines.append("    random (not compared): " + ", ".join(r.random[:12]))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"AuditReport({self.model_name}, ok={self.ok})"


# ---- Helpers ------------------------------------------------------------------------------------


def _flat(x: Any, out: List[torch.Tensor]) -> List[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for e in x:
            _flat(e, out)
    elif isinstance(x, dict):
        for e in x.values():
            _flat(e, out)
    return out


def _compare(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> Optional[bool]:
    """True: equal; False: within tolerance; None: differs."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return None
    if torch.equal(a, b):
        return True
    if a.is_floating_point() or a.is_complex():
        if torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
            return False
    return None


def _compare_all(a: List[torch.Tensor], b: List[torch.Tensor], rtol: float,
                 atol: float) -> Optional[bool]:
    if len(a) != len(b):
        return None
    result: Optional[bool] = True
    for x, y in zip(a, b):
        c = _compare(x, y, rtol, atol)
        if c is None:
            return None
        result = result and c
    return result


def _overload(op_name: str) -> Any:
    ns, _, rest = op_name.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload or "default")


def _autocast(trace: Any) -> contextlib.ExitStack:
    """The autocast regions the traced call ran in (torch.autocast), entered again."""
    stack = contextlib.ExitStack()
    for device, dtype in (getattr(trace, "_autocast", None) or {}).items():
        stack.enter_context(torch.autocast(device, dtype=dtype))
    return stack


def _run(model: Any, call: Tuple[tuple, dict], rng: Optional[torch.Tensor],
         trace: Any = None) -> Any:
    saved = torch.get_rng_state()
    try:
        if rng is not None:
            torch.set_rng_state(rng)
        with torch.no_grad(), _autocast(trace):
            return model(*call[0], **call[1])
    finally:
        torch.set_rng_state(saved)


def _shifted(x: torch.Tensor) -> torch.Tensor:
    scale = x.detach().abs().mean().item() if x.numel() else 0.0
    return x.detach() * 1.01 + 0.01 * (scale if scale > 0 else 1.0)


def _perturb(x: Any) -> Any:
    """Floating tensors scaled and shifted, the rest as it was."""
    if isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()):
        return _shifted(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_perturb(e) for e in x)
    if isinstance(x, dict):
        return {k: _perturb(v) for k, v in x.items()}
    return x


def _is_ids(x: Any) -> bool:
    return (isinstance(x, torch.Tensor) and x.numel() > 0 and not x.is_floating_point()
            and not x.is_complex() and x.dtype != torch.bool)


def _change_token(x: torch.Tensor, vocab: Optional[int]) -> torch.Tensor:
    """``x`` with its first element replaced by another id: one found elsewhere in ``x`` (so a
    valid one), else its neighbour (below the vocabulary size when it is known)."""
    flat = x.detach().reshape(-1)
    first = int(flat[0])
    others = flat[flat != first]
    if others.numel():
        new = int(others[0])
    elif vocab is not None and vocab > 1:
        new = (first + 1) % vocab
    else:
        new = first + 1 if first < 1 else first - 1
    out = flat.clone()
    out[0] = new
    return out.reshape(x.shape)


def _first_ids(x: Any, vocab: Optional[int], done: List[bool]) -> Any:
    """``x`` with one token of its first integer tensor changed (``done[0]`` says whether)."""
    if done[0]:
        return x
    if _is_ids(x):
        done[0] = True
        return _change_token(x, vocab)
    if isinstance(x, (list, tuple)):
        return type(x)(_first_ids(e, vocab, done) for e in x)
    if isinstance(x, dict):
        return {k: _first_ids(v, vocab, done) for k, v in x.items()}
    return x


def _any(x: Any, test: Callable[[torch.Tensor], bool]) -> bool:
    return any(test(t) for t in _flat(x, []))


def _perturbed_run(model: Any, call: Tuple[tuple, dict], rng: Optional[torch.Tensor],
                   trace: Any) -> Tuple[str, Any]:
    """("input" | "token" | "embedding", output of the perturbed run), or ("not applicable",
    None): see the module docstring."""
    floating = _any(call, lambda t: t.is_floating_point() or t.is_complex())
    if floating:
        return "input", _run(model, (_perturb(call[0]), _perturb(call[1])), rng, trace)
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    if _any(call, _is_ids):
        vocab = embeddings[0].num_embeddings if embeddings else None
        done = [False]
        args = _first_ids(call[0], vocab, done)
        kwargs = _first_ids(call[1], vocab, done)
        return "token", _run(model, (args, kwargs), rng, trace)
    if embeddings:
        handle = embeddings[0].register_forward_hook(lambda m, i, o: _shifted(o))
        try:
            return "embedding", _run(model, call, rng, trace)
        finally:
            handle.remove()
    return "not applicable", None


class _Replayer:
    def __init__(self, trace: Any, model: Any, rtol: float, atol: float):
        self.trace = trace
        self.doc = trace._doc
        self.rtol, self.atol = rtol, atol
        named = dict(model.named_parameters())
        named.update(dict(model.named_buffers()))
        self.params = [named.get(p["name"]) for p in self.doc["params"]]

    def tensor(self, source: Dict[str, Any]) -> Tuple[Optional[torch.Tensor], str]:
        kind, i = source["kind"], source["index"]
        if kind == "op":
            saved = self.trace._saved.get(i)
            if not saved or source["output"] >= len(saved) or saved[source["output"]] is None:
                return None, f"the output of {self.doc['ops'][i]['label']} was not saved"
            return saved[source["output"]], ""
        if kind == "input":
            if i < len(self.trace._input_list):
                return self.trace._input_list[i], ""
            return None, "a graph input is missing"
        if kind == "param":
            t = self.params[i]
            if t is None:
                return None, f"the model has no {self.doc['params'][i]['name']}"
            return t, ""
        return None, "a tensor made outside the traced ops"

    def call(self, op: Dict[str, Any]) -> Tuple[Optional[List[torch.Tensor]], str]:
        try:
            fn = _overload(op["op_name"])
        except (AttributeError, RuntimeError) as e:
            return None, f"no dispatcher op {op['op_name']}: {e}"
        # Only what the op writes is cloned: the trace's tensors stay as they were.
        written = {a.name for a in fn._schema.arguments
                   if a.alias_info is not None and a.alias_info.is_write}
        tensors: Dict[str, List[torch.Tensor]] = {}
        for k, inp in enumerate(op["inputs"]):
            t, why = self.tensor(inp["source"])
            if t is None:
                return None, why
            name = inp["arg"] or f"arg{k}"
            tensors.setdefault(name, []).append(
                t.detach().clone() if name in written or not inp["arg"] else t.detach())
        values = {a["name"]: a["value"] for a in op["args"]}
        kwargs: Dict[str, Any] = {}
        for arg in fn._schema.arguments:
            if arg.name in tensors:
                ts = tensors.pop(arg.name)
                is_list = isinstance(arg.type, torch.ListType) or "[]" in str(arg.type)
                kwargs[arg.name] = ts if is_list else ts[0]
            elif arg.name in values:
                v = values.pop(arg.name)
                if isinstance(v, str) and v.startswith("<"):
                    return None, f"argument {arg.name} was kept as {v}"
                kwargs[arg.name] = v
        if tensors or values:
            return None, f"arguments not in the schema: {sorted(list(tensors) + list(values))}"
        try:
            with torch.no_grad(), _autocast(self.trace):
                # The overload's own callable: it takes every argument by its schema name
                # ("self" included, which OpOverload.__call__ would take for itself).
                out = fn._op(**kwargs)
        except Exception as e:  # noqa: BLE001 -- any failure of the op is a skip, with its text
            return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        return _flat(out, []), ""

    def run(self, report: ReplayReport) -> None:
        for i, op in enumerate(self.doc["ops"]):
            if not op["tensor_output"]:
                continue
            saved = self.trace._saved.get(i)
            if not saved or any(t is None for t in saved):
                report.skipped[op["label"]] = "its output was not saved"
                continue
            if op["func_name"] in _RANDOM:
                report.random.append(op["label"])
                continue
            out, why = self.call(op)
            if out is None:
                report.skipped[op["label"]] = why
                continue
            report.replayed.append(op["label"])
            c = _compare_all(out, list(saved), self.rtol, self.atol)
            if c is True:
                report.exact += 1
            elif c is False:
                report.tolerated.append(op["label"])
            else:
                report.differed.append(op["label"])


def _dead_from_tensors(trace: Any, graph_dead: List[Dict[str, Any]],
                       threshold: float) -> List[Dict[str, Any]]:
    """Exact zero fractions of the saved activations (and their direct consumers)."""
    doc = trace._doc
    found: Dict[int, Dict[str, Any]] = {d["op"]: d for d in graph_dead}
    for i, op in enumerate(doc["ops"]):
        saved = trace._saved.get(i)
        if not saved or saved[0] is None or saved[0].numel() == 0:
            continue
        after = op["label"] if _C._is_activation(op["func_name"]) else next(
            (doc["ops"][p]["label"] for p in op["parents"]
             if _C._is_activation(doc["ops"][p]["func_name"])), None)
        if after is None:
            continue
        frac = float((saved[0] == 0).float().mean().item())
        if frac >= threshold:
            module = "" if op["module_pass"] < 0 else trace._address(op["module_pass"])
            found[i] = {"op": i, "label": op["label"], "func": op["func_name"], "module": module,
                        "nan_count": 0, "inf_count": 0, "zero_fraction": frac, "after": after}
    return [found[i] for i in sorted(found)]


def _gradient_flow(model: torch.nn.Module, trace: Any, loss_fn: Callable[[Any], torch.Tensor],
                   vanishing: float) -> Dict[str, Any]:
    """Runs the traced call again with grad (same inputs, same RNG state), ``loss_fn(output)``
    backward, and names every parameter whose gradient is missing ("none": detached or unused),
    all zero ("zero"), non-finite ("nan") or below ``vanishing`` in max-abs ("vanishing"),
    grouped by module. The model's own .grad values are put back afterwards."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    kept = [p.grad for _, p in params]
    for _, p in params:
        p.grad = None
    saved_rng = torch.get_rng_state()
    try:
        if trace._rng_state is not None:
            torch.set_rng_state(trace._rng_state)
        with torch.enable_grad():
            with _autocast(trace):
                loss = loss_fn(model(*trace._call[0], **trace._call[1]))
            loss.backward()
        problems: Dict[str, str] = {}
        for name, p in params:
            if p.grad is None:
                problems[name] = "none"
            elif not torch.isfinite(p.grad).all():
                problems[name] = "nan"
            elif not p.grad.any():
                problems[name] = "zero"
            elif p.grad.abs().max().item() < vanishing:
                problems[name] = "vanishing"
    finally:
        torch.set_rng_state(saved_rng)
        for (_, p), g in zip(params, kept):
            p.grad = g
    per_module: Dict[str, List[str]] = {}
    for name in problems:
        per_module.setdefault(name.rpartition(".")[0], []).append(name)
    return {"parameters": len(params), "problems": problems, "per_module": per_module,
            "vanishing": vanishing}


def audit(trace: Any, model: Optional[torch.nn.Module] = None, dead_threshold: float = 0.99,
          rtol: float = 1e-5, atol: float = 1e-6,
          loss_fn: Optional[Callable[[Any], torch.Tensor]] = None,
          vanishing: float = 1e-10) -> AuditReport:
    """The report of ``trace`` (an OpTrace); with ``model`` the replay checks too, and with
    ``loss_fn`` (output -> scalar loss) the gradient flow of the traced call."""
    import time

    graph = json.loads(_C._audit_op_graph(trace._graph))
    dead = _dead_from_tensors(trace, graph["dead"], dead_threshold)
    replay: Optional[ReplayReport] = None
    if model is not None:
        replay = ReplayReport()
        replay.rtol, replay.atol = rtol, atol
        start = time.perf_counter()
        call = getattr(trace, "_call", None)
        if call is not None and trace.output is not None:
            fresh = _run(model, call, getattr(trace, "_rng_state", None), trace)
            c = _compare_all(_flat(fresh, []), _flat(trace.output, []), rtol, atol)
            replay.output_matches = c is not None
            replay.output_exact = c is True
            replay.perturbation, moved = _perturbed_run(model, call,
                                                        getattr(trace, "_rng_state", None), trace)
            if replay.perturbation != "not applicable":
                replay.perturbed_changes_output = _compare_all(
                    _flat(moved, []), _flat(trace.output, []), 0.0, 0.0) is not True
        _Replayer(trace, model, rtol, atol).run(replay)
        replay.seconds = time.perf_counter() - start
    gradients = None
    if model is not None and loss_fn is not None and getattr(trace, "_call", None) is not None:
        gradients = _gradient_flow(model, trace, loss_fn, vanishing)
    return AuditReport(graph, dead, replay, gradients)
