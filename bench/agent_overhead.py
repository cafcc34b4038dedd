#!/usr/bin/python3
"""Overhead of the tracetorch agent (TraceSession) on real models, against a plain run.

How to run (not registered with CMake/ctest: it needs the built Python package and takes minutes):

    cmake -S . -B build -G Ninja && ninja -C build tracetorch_python_ext tracetorch_python_package
    PYTHONPATH=build/python /usr/bin/python3 bench/agent_overhead.py            # under 3 minutes
    PYTHONPATH=build/python /usr/bin/python3 bench/agent_overhead.py --quick    # ~1 minute
    ... --models mlp,cnn --budget 60 --json out.json

What it measures, all in one process with torch.set_num_threads(1):
  models   mlp: Linear 784-256-ReLU-Linear 256-10, batch 32
           cnn: 4 conv blocks (3->16->32->64->64, 3x3, ReLU, 2x2 max-pool) + Linear, 3x64x64, batch 16
           resnet18: torchvision.models.resnet18(weights=None), batch 8, 3x112x112 by default
  passes   fwd (under torch.no_grad, as in inference) and fwd+bwd (sum of outputs, grads set to None)
  variants plain            the model alone
           noop-hooks       Python forward pre/post hooks that do nothing on every module: the floor
                            of any Python-level per-module interception (reference)
           traced           TraceSession(model) (statistics on, the default)
           traced-nostats   TraceSession(model, capture_stats=False)
           traced-stream    TraceSession(model, daemon=...) streaming to a tracetorchd that is away
                            (a socket path nobody listens on, as while a daemon is killed and
                            restarted): the hooks only enqueue, the sender retries in the background
                            and drops. With --daemon SOCKET, to a running daemon instead.
           naive            a pure-Python agent doing what the tracetorch-ml library does: per tensor
                            mean/std/min/max/isnan/isinf with .item(), a full backward hook (reference)
Each variant runs on its own deep copy of the model, so hooks never leak into the plain run. Blocks
are timed with the process CPU time (--clock cpu, the default; --clock wall for wall time). After
a warm-up, rounds of timed blocks run INTERLEAVED (plain, then each variant, order rotated per
round); the ratio of a variant is the median over rounds of (variant block / plain block of the same
round), which cancels slow drifts of a shared machine.

Targets (traced/plain with statistics on, forward): <= 1.10 for cnn and resnet18, <= 1.25 for mlp.

Reading the numbers on a shared machine: the noop-hooks column can only be >= 1.0 in truth, so how
far it strays below 1.0 shows the noise of the run (cache and memory-bandwidth contention from other
processes count even in CPU time). cnn and resnet18 blocks are one pass each, so a few rounds carry
+-10% of noise when other jobs run; the 'min' column (fastest blocks) is the steadier estimate.

Where the time goes is reported without a profiler: the overhead per module call (traced - plain,
divided by the module calls of one pass), the share of it that statistics cost (traced vs
traced-nostats), and a per-call timing of a single leaf module called alone (the layer with the
largest output, and the cheapest one) traced and plain.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import gc
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

import torch
import torch.nn as nn

TARGETS = {("mlp", "fwd"): 1.25, ("cnn", "fwd"): 1.10, ("resnet18", "fwd"): 1.10}
VARIANTS = ["plain", "noop-hooks", "traced", "traced-nostats", "traced-stream", "naive"]
# The daemon address of the traced-stream variant (main() sets it).
STREAM_ADDRESS = ""


# ---- models --------------------------------------------------------------------------------------


def make_mlp() -> tuple[nn.Module, torch.Tensor]:
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    return model, torch.randn(32, 784)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        chans = [3, 16, 32, 64, 64]
        self.features = nn.Sequential(*[
            nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2))
            for i in range(4)
        ])
        self.head = nn.Linear(64 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def make_cnn() -> tuple[nn.Module, torch.Tensor]:
    return SmallCNN(), torch.randn(16, 3, 64, 64)


def make_resnet18(size: int) -> tuple[nn.Module, torch.Tensor]:
    import torchvision

    return torchvision.models.resnet18(weights=None), torch.randn(8, 3, size, size)


# ---- reference agents ----------------------------------------------------------------------------


class NoopHooks:
    """Python forward pre/post hooks that do nothing, on every module but the root."""

    def __init__(self, model: nn.Module) -> None:
        self._handles = []
        for name, module in model.named_modules():
            if name:
                self._handles.append(module.register_forward_pre_hook(lambda m, i: None))
                self._handles.append(module.register_forward_hook(lambda m, i, o: None))

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def _naive_stats(t: torch.Tensor) -> dict[str, Any]:
    """What the library computes per tensor (tracetorch-ml utils.compute_tensor_stats)."""
    with torch.no_grad():
        if not t.is_floating_point() or t.numel() == 0:
            return {"mean": None, "std": None, "min": None, "max": None, "nan_count": 0,
                    "inf_count": 0}
        flat = t.flatten().float()
        nan_count = int(torch.isnan(flat).sum().item())
        inf_count = int(torch.isinf(flat).sum().item())
        clean = flat[torch.isfinite(flat)]
        if clean.numel() == 0:
            return {"mean": None, "std": None, "min": None, "max": None,
                    "nan_count": nan_count, "inf_count": inf_count}
        return {
            "mean": float(clean.mean().item()),
            "std": float(clean.std().item()) if clean.numel() > 1 else 0.0,
            "min": float(clean.min().item()),
            "max": float(clean.max().item()),
            "nan_count": nan_count,
            "inf_count": inf_count,
        }


def _tensors(data: Any) -> list[torch.Tensor]:
    if isinstance(data, torch.Tensor):
        return [data]
    if isinstance(data, (tuple, list)):
        return [t for item in data for t in _tensors(item)]
    if isinstance(data, dict):
        return [t for item in data.values() for t in _tensors(item)]
    return []


class NaiveAgent:
    """A pure-Python agent doing the library's per-call work (reference, not a product)."""

    def __init__(self, model: nn.Module) -> None:
        self._handles = []
        self.layers: dict[str, dict[str, Any]] = {}
        self._start: dict[int, float] = {}
        for name, module in model.named_modules():
            if not name:
                continue
            self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._make_post(name)))
            self._handles.append(module.register_full_backward_hook(self._make_bwd(name)))

    def _pre(self, module: nn.Module, inputs: Any) -> None:
        self._start[id(module)] = time.perf_counter()

    def _make_post(self, name: str) -> Callable[..., None]:
        def post(module: nn.Module, inputs: Any, output: Any) -> None:
            start = self._start.pop(id(module), time.perf_counter())
            layer = self.layers.setdefault(name, {"count": 0, "lat": []})
            layer["inputs"] = [_naive_stats(t) for t in _tensors(inputs)]
            layer["outputs"] = [_naive_stats(t) for t in _tensors(output)]
            ms = (time.perf_counter() - start) * 1000.0
            layer["count"] += 1
            layer["latency_ms"] = ms
            layer["has_nan"] = any(o["nan_count"] > 0 for o in layer["outputs"])

        return post

    def _make_bwd(self, name: str) -> Callable[..., None]:
        def bwd(module: nn.Module, grad_in: Any, grad_out: Any) -> None:
            layer = self.layers.setdefault(name, {"count": 0})
            for grad in grad_out:
                if isinstance(grad, torch.Tensor) and grad.is_floating_point():
                    flat = grad.flatten().float()
                    layer["grad_norm"] = float(flat.norm().item())
                    layer["grad_mean"] = float(flat.mean().item())
                    layer["grad_has_nan"] = bool(torch.isnan(flat).any())
                    layer["has_zero_grad"] = bool(torch.all(flat == 0))

        return bwd

    def close(self) -> None:
        for h in self._handles:
            h.remove()


# ---- timing --------------------------------------------------------------------------------------


def make_step(model: nn.Module, x: torch.Tensor, pass_name: str) -> Callable[[], None]:
    if pass_name == "fwd":

        def step() -> None:
            with torch.no_grad():
                model(x)

    else:

        def step() -> None:
            out = model(x)
            out.float().sum().backward()
            for p in model.parameters():
                p.grad = None

    return step


# The clock of the timed blocks (set by --clock). Process CPU time by default: on a shared machine,
# time spent descheduled while other processes run does not count, while every thread of this
# process (the agent's included) does. With torch.set_num_threads(1) it equals wall time on an idle
# machine.
CLOCK: Callable[[], float] = time.process_time


def time_block(step: Callable[[], None], iters: int) -> float:
    """Seconds per iteration over `iters` iterations, with the garbage collector paused."""
    gc.collect()
    gc.disable()
    try:
        start = CLOCK()
        for _ in range(iters):
            step()
        return (CLOCK() - start) / iters
    finally:
        gc.enable()


def count_module_calls(model: nn.Module, x: torch.Tensor) -> int:
    calls = 0

    def hook(m, i, o):
        nonlocal calls
        calls += 1

    handles = [m.register_forward_hook(hook) for n, m in model.named_modules() if n]
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    return calls


class Bench:
    """One (model, pass): a model copy per variant, timed in interleaved rounds."""

    def __init__(self, name: str, factory, pass_name: str, tracetorch_mod, budget_s: float,
                 min_rounds: int) -> None:
        self.name, self.pass_name = name, pass_name
        self.budget_s, self.min_rounds = budget_s, min_rounds
        torch.manual_seed(0)
        base, self.x = factory()
        base.train(pass_name != "fwd")
        self.calls = count_module_calls(base, self.x)
        self.stack = contextlib.ExitStack()
        self.models: dict[str, nn.Module] = {}
        self.steps: dict[str, Callable[[], None]] = {}
        self.errors: dict[str, str] = {}
        self.sessions: dict[str, Any] = {}
        for variant in VARIANTS:
            model = copy.deepcopy(base)
            if variant == "noop-hooks":
                self.stack.callback(NoopHooks(model).close)
            elif variant == "naive":
                self.stack.callback(NaiveAgent(model).close)
            elif variant in ("traced", "traced-nostats", "traced-stream"):
                session = tracetorch_mod.TraceSession(
                    model, capture_stats=(variant != "traced-nostats"),
                    model_name=f"{name}-{variant}",
                    daemon=STREAM_ADDRESS if variant == "traced-stream" else False)
                self.stack.enter_context(session)
                self.sessions[variant] = session
            self.models[variant] = model
            self.steps[variant] = make_step(model, self.x, pass_name)

    def close(self) -> None:
        self.stack.close()

    def run(self) -> dict[str, Any]:
        # Warm-up (allocator, lazy init, hook paths), dropping variants that fail.
        for variant in list(self.steps):
            try:
                for _ in range(2):
                    self.steps[variant]()
            except Exception as e:  # noqa: BLE001 - a reference agent may not support a model.
                self.errors[variant] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
                del self.steps[variant]
        plain_t = time_block(self.steps["plain"], 3)
        iters = max(1, round(0.03 / plain_t))  # Blocks of about 30 ms of plain work.
        variants = list(self.steps)
        per_round = []
        rounds: list[dict[str, float]] = []
        deadline = time.perf_counter() + self.budget_s
        while True:
            t0 = time.perf_counter()
            shift = len(rounds) % len(variants)
            order = variants[shift:] + variants[:shift]
            rounds.append({v: time_block(self.steps[v], iters) for v in order})
            per_round.append(time.perf_counter() - t0)
            if len(rounds) >= self.min_rounds and time.perf_counter() + per_round[-1] > deadline:
                break
            if len(rounds) >= 41:
                break
        result: dict[str, Any] = {
            "model": self.name, "pass": self.pass_name, "rounds": len(rounds), "iters": iters,
            "module_calls": self.calls, "errors": self.errors,
            "ms": {v: 1000 * statistics.median(r[v] for r in rounds) for v in variants},
            "ratio": {v: statistics.median(r[v] / r["plain"] for r in rounds) for v in variants},
            # Noise on a shared machine only adds time: the fastest blocks are the least disturbed.
            "min_ms": {v: 1000 * min(r[v] for r in rounds) for v in variants},
        }
        result["min_ratio"] = {v: result["min_ms"][v] / result["min_ms"]["plain"]
                               for v in variants}
        for variant, session in self.sessions.items():
            result.setdefault("hook_errors", {})[variant] = getattr(session, "hook_errors", None)
        return result

    def leaf_breakdown(self) -> list[dict[str, Any]]:
        """Per-call cost of single leaf modules called alone, traced vs plain (fwd only)."""
        if "traced" not in self.steps:
            return []
        plain_model, traced_model = self.models["plain"], self.models["traced"]
        # Record each leaf's input once (plain model, no tracing).
        inputs: dict[str, torch.Tensor] = {}
        sizes: dict[str, int] = {}
        handles = []
        for name, module in plain_model.named_modules():
            if name and not list(module.children()):

                def hook(m, i, o, name=name):
                    if name not in inputs and i and isinstance(i[0], torch.Tensor):
                        inputs[name] = i[0].detach().clone()
                        sizes[name] = o.numel() if isinstance(o, torch.Tensor) else 0

                handles.append(module.register_forward_hook(hook))
        with torch.no_grad():
            plain_model(self.x)
        for h in handles:
            h.remove()
        if not sizes:
            return []
        largest = max(sizes, key=sizes.get)
        smallest = min(sizes, key=sizes.get)
        out = []
        for name in dict.fromkeys([largest, smallest]):
            plain_leaf = plain_model.get_submodule(name)
            traced_leaf = traced_model.get_submodule(name)
            x = inputs[name]

            def run(m, x=x):
                with torch.no_grad():
                    m(x)

            t_plain = time_block(lambda: run(plain_leaf), 3)
            iters = max(3, round(0.02 / t_plain))
            samples = []
            for _ in range(7):
                a = time_block(lambda: run(plain_leaf), iters)
                b = time_block(lambda: run(traced_leaf), iters)
                samples.append((a, b))
            a = min(s[0] for s in samples)
            b = min(s[1] for s in samples)
            out.append({"layer": name, "type": type(plain_leaf).__name__, "out_elems": sizes[name],
                        "plain_us": a * 1e6, "traced_us": b * 1e6, "overhead_us": (b - a) * 1e6})
        return out


# ---- report --------------------------------------------------------------------------------------


def fmt_ratio(result: dict[str, Any], variant: str, key: str = "ratio") -> str:
    if variant in result["errors"]:
        return "error"
    return f"{result[key][variant]:.3f}x"


def print_report(results: list[dict[str, Any]], breakdowns: dict[str, list]) -> bool:
    all_ok = True
    print("Ratios to plain: median over rounds of paired ratios; 'min' = fastest traced block /")
    print("fastest plain block (less sensitive to other load on the machine).")
    header = (f"{'model':<9} {'pass':<8} {'plain ms':>9} {'noop':>8} {'traced':>8} {'min':>8} "
              f"{'nostats':>8} {'stream':>8} {'naive':>8} {'target':>7}  status")
    print()
    print(header)
    print("-" * len(header))
    for r in results:
        target = TARGETS.get((r["model"], r["pass"]))
        status = ""
        if target is not None:
            ok = "traced" in r["ratio"] and r["ratio"]["traced"] <= target
            all_ok &= ok
            status = "ok" if ok else "MISSED"
        print(f"{r['model']:<9} {r['pass']:<8} {r['ms']['plain']:>9.3f} "
              f"{fmt_ratio(r, 'noop-hooks'):>8} {fmt_ratio(r, 'traced'):>8} "
              f"{fmt_ratio(r, 'traced', 'min_ratio'):>8} "
              f"{fmt_ratio(r, 'traced-nostats'):>8} {fmt_ratio(r, 'traced-stream'):>8} "
              f"{fmt_ratio(r, 'naive'):>8} "
              f"{('<=%.2f' % target) if target else '':>7}  {status}")
    print()
    print("Where the time goes: per module call = (fastest variant block - fastest plain block) /")
    print("module calls of one pass")
    for r in results:
        if "traced" not in r["min_ms"]:
            continue
        ms = r["min_ms"]
        plain = ms["plain"]
        per_call = (ms["traced"] - plain) * 1000 / r["module_calls"]
        nostats = (ms.get("traced-nostats", math.nan) - plain) * 1000 / r["module_calls"]
        noop = (ms.get("noop-hooks", math.nan) - plain) * 1000 / r["module_calls"]
        naive = (ms.get("naive", math.nan) - plain) * 1000 / r["module_calls"]
        print(f"  {r['model']:<9} {r['pass']:<8} {r['module_calls']:>3} calls/pass: traced "
              f"{per_call:7.1f} us/call (no stats {nostats:7.1f}; python no-op hooks {noop:6.1f}; "
              f"naive {naive:8.1f}); rounds={r['rounds']}x{r['iters']}")
        for variant, msg in r["errors"].items():
            print(f"      {variant}: {msg}")
        if any(r.get("hook_errors", {}).values()):
            print(f"      hook_errors: {r['hook_errors']}")
    for model, rows in breakdowns.items():
        for row in rows:
            print(f"  {model:<9} leaf alone: {row['layer']:<18} {row['type']:<12} "
                  f"{row['out_elems']:>8} out elems: plain {row['plain_us']:8.1f} us, traced "
                  f"{row['traced_us']:8.1f} us (+{row['overhead_us']:.1f} us)")
    print()
    print("targets:", "all met" if all_ok else "MISSED (see status)")
    return all_ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="mlp,cnn,resnet18")
    parser.add_argument("--passes", default="fwd,fwd+bwd")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="seconds of timed rounds in all (split evenly); warm-up is extra")
    parser.add_argument("--min-rounds", type=int, default=5)
    parser.add_argument("--resnet-size", type=int, default=112, help="input height and width")
    parser.add_argument("--quick", action="store_true", help="--budget 45 --min-rounds 3")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                        help="cpu: process CPU time (robust to other load; default); wall: wall time")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--daemon", default=None,
                        help="traced-stream streams to this tracetorchd socket (default: a socket "
                             "path nobody listens on, i.e. a daemon that is away)")
    args = parser.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.quick:
        args.budget, args.min_rounds = 45.0, 3
    global STREAM_ADDRESS
    away_dir = tempfile.TemporaryDirectory(prefix="tt-bench-")
    STREAM_ADDRESS = args.daemon or os.path.join(away_dir.name, "away.sock")

    torch.set_num_threads(1)
    try:
        import tracetorch
    except ImportError as e:
        print(f"cannot import tracetorch ({e}); run with PYTHONPATH=<build>/python", file=sys.stderr)
        return 2

    factories = {"mlp": make_mlp, "cnn": make_cnn,
                 "resnet18": lambda: make_resnet18(args.resnet_size)}
    models = [m for m in args.models.split(",") if m]
    passes = [p for p in args.passes.split(",") if p]
    unknown = [m for m in models if m not in factories] + [p for p in passes
                                                          if p not in ("fwd", "fwd+bwd")]
    if unknown:
        parser.error(f"unknown model or pass: {unknown}")
    weights = {"mlp": 1.0, "cnn": 1.0, "resnet18": 2.0}  # resnet18 rounds are long: more time.
    total_weight = sum(weights[m] for m in models) * len(passes)

    print(f"tracetorch {tracetorch.__version__}, torch {torch.__version__}, 1 thread, "
          f"resnet18 input 3x{args.resnet_size}x{args.resnet_size}, budget {args.budget:.0f}s, "
          f"{args.clock} clock")
    started = time.perf_counter()
    results, breakdowns = [], {}
    for model in models:
        for pass_name in passes:
            budget = args.budget * weights[model] / total_weight
            bench = Bench(model, factories[model], pass_name, tracetorch, budget, args.min_rounds)
            try:
                result = bench.run()
                if pass_name == "fwd":
                    breakdowns[model] = bench.leaf_breakdown()
            finally:
                bench.close()
            results.append(result)
            print(f"  {model} {pass_name}: plain {result['ms']['plain']:.3f} ms, traced "
                  f"{fmt_ratio(result, 'traced')}  ({time.perf_counter() - started:.0f}s)",
                  flush=True)
    ok = print_report(results, breakdowns)
    print(f"total {time.perf_counter() - started:.0f}s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"results": results, "leaf_breakdown": breakdowns}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
