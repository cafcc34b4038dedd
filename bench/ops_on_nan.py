#!/usr/bin/python3
"""Cost of TraceSession(model, ops="on_nan") in a training loop while no NaN appears.

How to run (not registered with CMake/ctest: it needs the built Python package and takes minutes):

    ninja -C build tracetorch_python_ext tracetorch_python_package
    PYTHONPATH=build/python /usr/bin/python3 bench/ops_on_nan.py              # ~3 minutes
    PYTHONPATH=build/python /usr/bin/python3 bench/ops_on_nan.py --rounds 3 --models cnn

What it measures, all in one process with torch.set_num_threads(1):
  models   cnn: 4 conv blocks (3->16->32->64->64, 3x3, ReLU, 2x2 max-pool) + Linear, batch 16, 3x64x64
           resnet18: torchvision.models.resnet18(weights=None), batch 4, 3x112x112
  a step   zero_grad, forward, cross-entropy loss, backward, SGD step
  variants plain      the model alone
           session    inside TraceSession(model) (statistics on, the default)
           ops        inside TraceSession(model, ops="on_nan"): each step's forward also recorded op
                      by op (NaN/Inf counts per op output, no tensors kept), dropped at its end
Each variant trains its own deep copy of the model (the sessions stay open for the whole run).
Rounds of timed blocks run INTERLEAVED (order rotated per round), timed with the process CPU time;
the ratio of a variant is the median over rounds of (variant block / plain block of the same round)
with its range. Target (issue 11): ops/plain <= 1.10.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import statistics
import time

import torch
import torch.nn as nn

import tracetorch as tl

VARIANTS = ["plain", "session", "ops"]
TARGET = 1.10


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


def make(name: str):
    if name == "cnn":
        return SmallCNN(), torch.randn(16, 3, 64, 64), torch.randint(0, 10, (16,))
    import torchvision

    return (torchvision.models.resnet18(weights=None), torch.randn(4, 3, 112, 112),
            torch.randint(0, 1000, (4,)))


def run(name: str, rounds: int, steps: int) -> dict:
    torch.manual_seed(0)
    base, x, y = make(name)
    models = {v: copy.deepcopy(base) for v in VARIANTS}
    opts = {v: torch.optim.SGD(models[v].parameters(), lr=1e-4) for v in VARIANTS}
    loss_fn = nn.CrossEntropyLoss()

    def step(v: str) -> None:
        opts[v].zero_grad(set_to_none=True)
        loss_fn(models[v](x), y).backward()
        opts[v].step()

    with contextlib.ExitStack() as stack:
        sessions = {
            "session": stack.enter_context(tl.TraceSession(models["session"], daemon=False)),
            "ops": stack.enter_context(tl.TraceSession(models["ops"], ops="on_nan",
                                                       daemon=False)),
        }
        for v in VARIANTS:  # Warm-up.
            for _ in range(3):
                step(v)
        times = {v: [] for v in VARIANTS}
        for r in range(rounds):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            for v in order:
                t0 = time.process_time()
                for _ in range(steps):
                    step(v)
                times[v].append((time.process_time() - t0) / steps)
        ops_stats = sessions["ops"].ops_stats
        hook_errors = {v: s.hook_errors for v, s in sessions.items()}
    out = {"model": name, "rounds": rounds, "steps_per_block": steps,
           "plain_ms_median": statistics.median(times["plain"]) * 1e3,
           "ops_stats": ops_stats, "hook_errors": hook_errors}
    for v in ("session", "ops"):
        ratios = [a / b for a, b in zip(times[v], times["plain"])]
        out[v] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    ops_over_session = [a / b for a, b in zip(times["ops"], times["session"])]
    out["ops_over_session"] = statistics.median(ops_over_session)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="cnn,resnet18")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5, help="training steps per timed block")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    results = []
    print(f"{'model':10} {'plain ms/step':>13} {'session/plain':>22} {'ops/plain':>22} "
          f"{'ops/session':>11}")
    for name in args.models.split(","):
        r = run(name, args.rounds, args.steps)
        results.append(r)
        cell = lambda d: f"{d['median']:.3f} ({d['min']:.3f}-{d['max']:.3f})"  # noqa: E731
        verdict = "ok" if r["ops"]["median"] <= TARGET else f"MISSED (target {TARGET})"
        print(f"{name:10} {r['plain_ms_median']:13.1f} {cell(r['session']):>22} "
              f"{cell(r['ops']):>22} {r['ops_over_session']:11.3f}  {verdict}  "
              f"ops_stats={r['ops_stats']} hook_errors={r['hook_errors']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
