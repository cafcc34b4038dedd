#!/usr/bin/env python3
"""What tracing costs a torch.compile'd model (torch >= 2): a training step (forward, backward,
SGD) of a small transformer-style MLP stack on the CPU, timed as

    eager           the model, untraced
    compiled        torch.compile(model) (Inductor), untraced
    compiled+trace  torch.compile(model) inside TraceSession (the graph split at every traced
                    layer: tracetorch/compiled.py)
    eager+trace     the model inside TraceSession

in interleaved rounds after warm-up (compilation excluded), median per step with the range, and
the ratios compiled+trace / compiled and eager+trace / eager; plus the graph breaks TorchDynamo
counted in the traced block.

    PYTHONPATH=<build>/python python bench/compile_overhead.py [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from tracetorch import TraceSession


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d: int = 256, blocks: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block(d) for _ in range(blocks)))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.blocks(x))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=64)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    base = Net()
    x, y = torch.randn(a.batch, 256), torch.randint(0, 10, (a.batch,))
    eager = copy.deepcopy(base)
    compiled_inner = copy.deepcopy(base)
    compiled = torch.compile(compiled_inner)
    variants = {
        "eager": (eager, None),
        "compiled": (compiled, None),
        "compiled+trace": (compiled, TraceSession(compiled)),
        "eager+trace": (eager, TraceSession(eager)),
    }
    opts = {id(m): torch.optim.SGD(m.parameters(), lr=1e-3) for m in (eager, compiled)}

    def run(name: str, steps: int) -> float:
        model, session = variants[name]
        opt = opts[id(model)]
        if session is not None:
            session.__enter__()
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()
        elapsed = (time.perf_counter() - t0) / steps
        if session is not None:
            session.__exit__(None, None, None)
        return elapsed * 1e3

    t0 = time.perf_counter()
    for name in variants:  # Warm-up: compilation (whole and split graphs) happens here.
        run(name, 2)
    print(f"warm-up (compilation) {time.perf_counter() - t0:.1f} s")
    times = {name: [] for name in variants}
    ratios = {"compiled+trace / compiled": [], "eager+trace / eager": [],
              "compiled / eager": []}
    for r in range(a.rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        got = {name: run(name, a.steps) for name in order}
        for name, ms in got.items():
            times[name].append(ms)
        ratios["compiled+trace / compiled"].append(got["compiled+trace"] / got["compiled"])
        ratios["eager+trace / eager"].append(got["eager+trace"] / got["eager"])
        ratios["compiled / eager"].append(got["compiled"] / got["eager"])
    print(f"torch {torch.__version__}, Net 4x256 MLP blocks, batch {a.batch}, one thread, "
          f"{a.rounds} rounds x {a.steps} steps")
    for name, ts in times.items():
        print(f"  {name:16s} {statistics.median(ts):8.3f} ms/step ({min(ts):.3f}-{max(ts):.3f})")
    for name, rs in ratios.items():
        print(f"  {name:26s} {statistics.median(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})")
    info = variants["compiled+trace"][1].record.metadata.extra.get("torch_compile", {})
    print(f"  graph breaks in the last traced block: {info.get('graph_breaks')}; "
          f"reasons: {list(info.get('reasons', {}))[:3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
