#!/usr/bin/python3
"""The Python rows of bench/overhead_table.py: one workload, plain against traced, by two clocks.

    PYTHONPATH=build/python /usr/bin/python3 bench/counted.py WORKLOAD --wall [--rounds R]
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=DIR/cg.out \\
        /usr/bin/python3 bench/counted.py WORKLOAD --count N --region-lib build/bench/lib...so

Workloads (torch.set_num_threads(1); every variant on its own deep copy of the model):
  fwd-mlp, fwd-cnn, fwd-resnet18   a forward under torch.no_grad; traced: inside one
                                   TraceSession(model) opened before timing (statistics on);
                                   also a third variant, hooks: a no-op Python forward pre-hook
                                   and hook on every module, the floor of any tool that watches
                                   each module from Python
  first-cnn                        the CNN's forward; traced: `with TraceSession(model): model(x)`,
                                   a fresh session opened and closed around each forward
  ops-resnet18                     resnet18 1x3x224x224 forward under no_grad; traced:
                                   tl.trace(model, x), every op recorded, every activation kept
  on_nan-cnn                       a training step (zero_grad, forward, cross-entropy, backward,
                                   SGD) of the CNN, batch 16; traced: TraceSession(model,
                                   ops="on_nan")
The models are bench/agent_overhead.py's (MLP 784-256-10 b32, 4-conv CNN b16 3x64x64, resnet18
b8 3x112x112).

--wall: after a warm-up, rounds of `steps` steps per variant, interleaved with the order reversed
every round, timed by the process's CPU time with the garbage collector paused; prints JSON with
the median over rounds of traced/plain and its range (fwd-*: also hooks/plain, "hooks_ratio").
--count: meant to run under callgrind with --instr-atstart=no (see bench/callgrind_region.cc):
after an uninstrumented warm-up step, instrumentation starts, each variant runs one step
(translation and lazy initialisation), then each variant's N steps are one region, dumped as
WORKLOAD/VARIANT.
overhead_table.py reads the dumps: instructions per step, traced against plain.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import functools
import gc
import importlib.util
import json
import os
import statistics
import sys
from typing import Callable

import torch
import torch.nn as nn

import tracetorch as tl

WORKLOADS = ["fwd-mlp", "fwd-cnn", "fwd-resnet18", "first-cnn", "ops-resnet18", "on_nan-cnn"]
# Steps per timed block for --wall: blocks of a few milliseconds at least.
WALL_STEPS = {"fwd-mlp": 50, "fwd-cnn": 5, "fwd-resnet18": 1, "first-cnn": 5,
              "ops-resnet18": 1, "on_nan-cnn": 2}


@functools.cache
def _models():
    """bench/agent_overhead.py, loaded once: its model builders and its timed block (one definition
    of each model and of how a block is timed)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agent_overhead.py")
    spec = importlib.util.spec_from_file_location("agent_overhead", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build(workload: str, stack: contextlib.ExitStack) -> dict[str, Callable[[], None]]:
    """The steps of a workload, {"plain": f, "traced": f}, and for fwd-* "hooks": f (the floor);
    sessions and hooks live on `stack`."""
    models = _models()
    torch.manual_seed(0)
    kind, name = workload.split("-", 1)
    if kind == "ops":
        import torchvision

        base, x = torchvision.models.resnet18(weights=None).eval(), torch.rand(1, 3, 224, 224)
    elif name == "resnet18":
        base, x = models.make_resnet18(112)
    else:
        base, x = {"mlp": models.make_mlp, "cnn": models.make_cnn}[name]()
    # Every variant a deep copy: the original's tensors were allocated differently (the CNN's plain
    # forward ran slower than a copy's, traced or not).
    plain, traced = copy.deepcopy(base), copy.deepcopy(base)

    def fwd(m: nn.Module) -> Callable[[], None]:
        def step() -> None:
            with torch.no_grad():
                m(x)
        return step

    if kind == "fwd":
        plain.eval()
        traced.eval()
        stack.enter_context(tl.TraceSession(traced, daemon=False))
        hooked = copy.deepcopy(plain)
        for mod in hooked.modules():
            stack.callback(mod.register_forward_pre_hook(lambda m, a: None).remove)
            stack.callback(mod.register_forward_hook(lambda m, a, o: None).remove)
        return {"plain": fwd(plain), "traced": fwd(traced), "hooks": fwd(hooked)}

    if kind == "first":
        plain.eval()
        traced.eval()

        def plain_step() -> None:
            with torch.no_grad():
                plain(x)

        def traced_step() -> None:
            with tl.TraceSession(traced, daemon=False), torch.no_grad():
                traced(x)
        return {"plain": plain_step, "traced": traced_step}

    if kind == "ops":
        def plain_fwd() -> None:
            with torch.no_grad():
                plain(x)

        def traced_fwd() -> None:
            with torch.no_grad():
                tl.trace(traced, x)
        return {"plain": plain_fwd, "traced": traced_fwd}

    if kind == "on_nan":
        y = torch.randint(0, 10, (x.shape[0],))
        loss_fn = nn.CrossEntropyLoss()
        stack.enter_context(tl.TraceSession(traced, ops="on_nan", daemon=False))

        def train(m: nn.Module) -> Callable[[], None]:
            opt = torch.optim.SGD(m.parameters(), lr=1e-4)

            def step() -> None:
                opt.zero_grad(set_to_none=True)
                loss_fn(m(x), y).backward()
                opt.step()
            return step
        return {"plain": train(plain), "traced": train(traced)}
    raise ValueError(f"unknown workload {workload!r}; one of {', '.join(WORKLOADS)}")


def wall(workload: str, rounds: int) -> dict:
    with contextlib.ExitStack() as stack:
        steps = build(workload, stack)
        for f in steps.values():  # Warm-up: allocator, lazy init, hook paths.
            for _ in range(3):
                f()
        n = WALL_STEPS[workload]
        times: dict[str, list[float]] = {v: [] for v in steps}
        order = list(steps)
        for r in range(rounds):
            for v in (order if r % 2 == 0 else order[::-1]):
                times[v].append(_models().time_block(steps[v], n))
    ratios = [t / p for t, p in zip(times["traced"], times["plain"])]
    out = {"workload": workload, "rounds": rounds, "steps_per_block": n,
           "plain_ms": statistics.median(times["plain"]) * 1e3,
           "traced_ms": statistics.median(times["traced"]) * 1e3,
           "ratio": statistics.median(ratios), "ratio_min": min(ratios),
           "ratio_max": max(ratios)}
    if "hooks" in times:  # The floor, by the same clock in the same rounds.
        out["hooks_ratio"] = statistics.median(
            h / p for h, p in zip(times["hooks"], times["plain"]))
    return out


def count(workload: str, n: int, region_lib: str) -> None:
    lib = ctypes.CDLL(region_lib)
    lib.tt_cg_dump.argtypes = [ctypes.c_char_p]
    if not lib.tt_cg_running():
        sys.exit("counted.py --count runs under valgrind --tool=callgrind --instr-atstart=no")
    with contextlib.ExitStack() as stack:
        steps = build(workload, stack)
        for f in steps.values():
            f()
        lib.tt_cg_start()
        for f in steps.values():
            f()
        gc.collect()
        gc.disable()
        for v, f in steps.items():
            lib.tt_cg_zero()
            for _ in range(n):
                f()
            lib.tt_cg_dump(f"{workload}/{v}".encode())
        gc.enable()
        lib.tt_cg_stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=WORKLOADS)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--wall", action="store_true", help="interleaved CPU-time rounds")
    mode.add_argument("--count", type=int, metavar="N", help="N steps per callgrind region")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--region-lib", help="libtracetorch_callgrind_region.so (with --count)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.wall:
        print(json.dumps(wall(args.workload, args.rounds)))
    else:
        if not args.region_lib:
            ap.error("--count needs --region-lib")
        count(args.workload, args.count, args.region_lib)


if __name__ == "__main__":
    main()
