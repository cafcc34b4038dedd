#!/usr/bin/python3
"""Cost of tracing a GPT-style decoder's training step: plain / TraceSession / ops="on_nan".

How to run (not registered with CMake/ctest: it needs the built Python package and takes minutes):

    ninja -C build tracetorch_python_ext tracetorch_python_package
    PYTHONPATH=build/python /usr/bin/python3 bench/decoder_step.py                 # 3 runs, ~2 min
    PYTHONPATH=build/python /usr/bin/python3 bench/decoder_step.py --callgrind     # + instructions

The model is the zoo's causal decoder (agent/python/tests/zoo/zoo_models.py: token and position
embeddings, pre-norm blocks with nn.MultiheadAttention and the additive -inf causal mask, GELU MLP,
residual adds, a tied head) at a bench size: vocab 512, width 128, 4 heads, 4 blocks, sequence 64,
batch 8. A step is zero_grad, forward, cross-entropy, backward, SGD step, with
torch.set_num_threads(1). Every mask's -inf is in every step: the op recording must not stop at
them (ops_stats says how many steps it recorded).

Time: each run is one process in which the three variants train their own copy of the model,
their timed blocks INTERLEAVED (order rotated per round), timed with the process CPU time; a run's
ratio is the median over rounds of (variant block / plain block of the same round). The result is
the median of the runs' ratios with their range (--runs, at least 3). Targets (issue 22):
session/plain <= 1.05, ops/plain <= 1.10.

Instructions (--callgrind): the same steps counted by valgrind --tool=callgrind, the machine's
noise out of the picture. Each variant runs in its own process twice, with A and B timed steps
(same warm-up); (count_B - count_A) / (B - A) is its instructions per step, and the ratios are
those of the variants. `perf stat -e instructions` is not supported on the development machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agent" / "python" / "tests" / "zoo"))
import zoo_models  # noqa: E402  (the zoo's decoder, at a bench size)

import tracetorch as tl  # noqa: E402

VARIANTS = ["plain", "session", "ops"]
TARGETS = {"session": 1.05, "ops": 1.10}
SIZE = {"vocab": 512, "width": 128, "heads": 4, "seq": 64}
LAYERS, BATCH = 4, 8


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return zoo_models.Decoder("additive", tied=True, layers=LAYERS, **SIZE)


def batch():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, SIZE["vocab"], (BATCH, SIZE["seq"]), generator=g)
    return idx, torch.roll(idx, -1, dims=1)


class Trainer:
    """One variant: its own model, optimizer and (for the traced ones) open session."""

    def __init__(self, variant: str, stack: contextlib.ExitStack) -> None:
        self.model = make_model()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-4)
        self.session = None
        if variant != "plain":
            kwargs = {"ops": "on_nan"} if variant == "ops" else {}
            self.session = stack.enter_context(tl.TraceSession(self.model, daemon=False,
                                                               **kwargs))
        self.x, self.y = batch()

    def step(self) -> None:
        self.opt.zero_grad(set_to_none=True)
        logits = self.model(self.x)
        F.cross_entropy(logits.reshape(-1, SIZE["vocab"]), self.y.reshape(-1)).backward()
        self.opt.step()


def one_run(rounds: int, steps: int) -> dict:
    """The three variants interleaved in this process: their ratios over plain."""
    with contextlib.ExitStack() as stack:
        trainers = {v: Trainer(v, stack) for v in VARIANTS}
        for t in trainers.values():  # Warm-up.
            for _ in range(2):
                t.step()
        times = {v: [] for v in VARIANTS}
        for r in range(rounds):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            for v in order:
                t0 = time.process_time()
                for _ in range(steps):
                    trainers[v].step()
                times[v].append((time.process_time() - t0) / steps)
        ops = trainers["ops"].session
        out = {"plain_ms": statistics.median(times["plain"]) * 1e3,
               "ops_stats": ops.ops_stats, "nan_origin": ops.record.metadata.nan_origin is not None,
               "hook_errors": {v: trainers[v].session.hook_errors for v in ("session", "ops")}}
    for v in ("session", "ops"):
        out[v] = statistics.median(a / b for a, b in zip(times[v], times["plain"]))
    out["ops_over_session"] = statistics.median(
        a / b for a, b in zip(times["ops"], times["session"]))
    return out


def fixed_steps(variant: str, steps: int) -> None:
    """For callgrind: one variant, 2 warm-up steps, then `steps` steps."""
    with contextlib.ExitStack() as stack:
        t = Trainer(variant, stack)
        for _ in range(2 + steps):
            t.step()


def spread(values) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def callgrind(steps_a: int, steps_b: int) -> dict:
    per_step = {}
    for v in VARIANTS:
        counts = []
        for steps in (steps_a, steps_b):
            with tempfile.TemporaryDirectory() as d:
                r = subprocess.run(
                    ["valgrind", "--tool=callgrind", f"--callgrind-out-file={d}/cg.out",
                     sys.executable, __file__, "--variant", v, "--steps", str(steps)],
                    capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
            m = re.search(r"Collected : (\d+)", r.stderr)
            if r.returncode != 0 or m is None:
                raise RuntimeError(f"callgrind failed for {v}: {r.stderr[-2000:]}")
            counts.append(int(m.group(1)))
        per_step[v] = (counts[1] - counts[0]) / (steps_b - steps_a)
        print(f"  callgrind {v:8} {per_step[v] / 1e6:10.1f} M instructions/step", flush=True)
    return {v: per_step[v] / per_step["plain"] for v in ("session", "ops")} | {
        "plain_minstr": per_step["plain"] / 1e6, "ops_over_session": per_step["ops"] /
        per_step["session"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4, help="training steps per timed block")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.variant:
        fixed_steps(args.variant, args.steps)
        return
    if args.one:
        print(json.dumps(one_run(args.rounds, args.steps)))
        return
    runs = []
    for i in range(max(3, args.runs)):
        r = subprocess.run([sys.executable, __file__, "--one", "--rounds", str(args.rounds),
                            "--steps", str(args.steps)], capture_output=True, text=True,
                           check=True)
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
        x = runs[-1]
        print(f"run {i + 1}: plain {x['plain_ms']:.1f} ms/step, session/plain {x['session']:.3f}, "
              f"ops/plain {x['ops']:.3f}, ops/session {x['ops_over_session']:.3f}, "
              f"ops_stats={x['ops_stats']} hook_errors={x['hook_errors']}", flush=True)
    result = {"runs": runs}
    print(f"\ndecoder {LAYERS}x{SIZE['width']}, seq {SIZE['seq']}, batch {BATCH}, "
          f"{len(runs)} runs of {args.rounds} rounds x {args.steps} steps, median (range):")
    print(f"  plain ms/step   {spread([x['plain_ms'] for x in runs])}")
    for v in ("session", "ops"):
        med = statistics.median(x[v] for x in runs)
        verdict = "ok" if med <= TARGETS[v] else f"MISSED (target {TARGETS[v]})"
        print(f"  {v + '/plain':15} {spread([x[v] for x in runs])}  target <= {TARGETS[v]}: "
              f"{verdict}")
    print(f"  ops/session     {spread([x['ops_over_session'] for x in runs])}")
    if args.callgrind:
        print("instructions (callgrind, 2 vs 6 timed steps per variant):", flush=True)
        cg = callgrind(2, 6)
        result["callgrind"] = cg
        print(f"  session/plain {cg['session']:.3f}, ops/plain {cg['ops']:.3f}, "
              f"ops/session {cg['ops_over_session']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
