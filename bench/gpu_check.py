#!/usr/bin/env python3
"""The agent's figures on one device, in one run (bench/gpu_check.sh builds the extension and runs
this; see there). Needs the built package on PYTHONPATH.

    python3 bench/gpu_check.py --device cuda --out DIR      # the GPU half (torch with CUDA)
    python3 bench/gpu_check.py --device cpu --out DIR       # the CPU half (any machine)

Checks, each reported as figures plus "ok": true/false/null (null: not measurable on this device):
  overhead     resnet50 training steps (SGD), traced/plain with statistics on, median over
               interleaved rounds. cuda: bf16 autocast, batch 64, 224x224, target <= 1.05; cpu: a
               smoke-sized run (batch 2, 64x64) whose ratio is reported, not judged.
  no_sync      cuda: traced steps under torch.cuda.set_sync_debug_mode("error"): a host sync in
               our hooks raises there, and the hooks count what raises (hook_errors); ok when no
               exception reached the step and hook_errors stayed 0.
  memory       cuda: per layer, fwd_mem_alloc_delta / bwd_mem_alloc_delta of the record against
               torch.cuda.memory_allocated() differences measured by hand around the same layer
               calls (a small MLP, one step); ok when they agree exactly.
  latency      a large Linear layer: the record's latency against the same layer timed by hand
               (cuda: CUDA events, ok within 25% or 0.05 ms; cpu: perf_counter, reported, ok when
               the record has a latency: host clocks on a shared machine are too noisy to judge).
  nan_origin   a NaN made by one layer at step 3: the record's nan_origin names that layer and
               step.
  deferred     cpu: the same NaN run with TRACETORCH_DEFERRED_STATS=1 (the deferred-collection
               route): same origin, every sample collected, none in flight at the end.
  ops_on_nan   a causal decoder (SDPA; cuda: 6x512, seq 256, batch 16, bf16 autocast) under
               TraceSession(ops="on_nan"): a NaN planted in block 1 at the 4th traced step is
               found at its op (mul in blocks.1); a clean step's cost against the plain step is
               reported, not judged.
Writes DIR/gpu_check.json and DIR/gpu_check.md and prints the markdown. Exit 0 when every check
that could run is ok, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

import tracetorch
from tracetorch import TraceSession


# ---- resnet50, defined here (torchvision is not on every node) -------------------------------

class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * 4
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            stage = []
            for i in range(blocks):
                stage.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * 4
            layers.append(nn.Sequential(*stage))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Scale(nn.Module):
    """x * factor: a NaN factor makes this layer the NaN's origin."""

    def __init__(self) -> None:
        super().__init__()
        self.factor = 1.0

    def forward(self, x):
        return x * self.factor


# ---- helpers ------------------------------------------------------------------------------------

def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def record_doc(session: TraceSession) -> dict:
    return json.loads(session._engine.record_json(0))


def by_name(doc: dict) -> dict:
    return {layer["full_name"]: layer for layer in doc["layers"]}


def train_step(model, opt, x, target, device: str, bf16: bool) -> None:
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=bf16):
        out = model(x)
    loss = nn.functional.cross_entropy(out.float(), target)
    loss.backward()
    opt.step()


# ---- checks -------------------------------------------------------------------------------------

def check_overhead(device: str, rounds: int) -> dict:
    big = device == "cuda"
    batch, size = (64, 224) if big else (2, 64)
    torch.manual_seed(0)
    model = ResNet50().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, size, size, device=device).to(memory_format=torch.channels_last)
    target = torch.randint(0, 1000, (batch,), device=device)
    steps = 10 if big else 1

    def block(traced: bool) -> float:
        if traced:
            session = TraceSession(model)
            session.__enter__()
        sync(device)
        start = time.perf_counter()
        for _ in range(steps):
            train_step(model, opt, x, target, device, bf16=big)
        sync(device)
        elapsed = time.perf_counter() - start
        if traced:
            session.__exit__(None, None, None)
            errors.append(session.hook_errors)
        return elapsed / steps

    errors: list = []
    for traced in (False, True):  # Warm-up: cuDNN autotuning, allocator, first traced session.
        block(traced)
    ratios, plain_ms, traced_ms = [], [], []
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        times = {t: block(t) for t in order}
        ratios.append(times[True] / times[False])
        plain_ms.append(times[False] * 1e3)
        traced_ms.append(times[True] * 1e3)
    ratio = statistics.median(ratios)
    return {
        "model": f"resnet50, batch {batch}, {size}x{size}" + (", bf16 autocast" if big else ""),
        "plain_ms_per_step": round(statistics.median(plain_ms), 3),
        "traced_ms_per_step": round(statistics.median(traced_ms), 3),
        "ratio": round(ratio, 4),
        "rounds": rounds,
        "hook_errors": max(errors) if errors else 0,
        "target": 1.05 if big else None,
        "ok": (ratio <= 1.05 and max(errors) == 0) if big else (max(errors) == 0),
    }


def check_no_sync(device: str) -> dict:
    if device != "cuda":
        return {"ok": None, "why": "needs CUDA"}
    torch.manual_seed(0)
    model = ResNet50(classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 3, 64, 64, device="cuda")
    target = torch.randint(0, 10, (8,), device="cuda")
    train_step(model, opt, x, target, "cuda", bf16=True)  # Warm-up outside the check.
    raised = None
    with TraceSession(model) as session:
        train_step(model, opt, x, target, "cuda", bf16=True)  # First step: hooks attach.
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                train_step(model, opt, x, target, "cuda", bf16=True)
        except RuntimeError as e:
            raised = str(e).splitlines()[0]
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
    return {"steps": 3, "exception": raised, "hook_errors": session.hook_errors,
            "ok": raised is None and session.hook_errors == 0}


def check_memory(device: str) -> dict:
    if device != "cuda":
        return {"ok": None, "why": "needs CUDA (the caching allocator's counters)"}
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).cuda()
    x = torch.randn(256, 1024, device="cuda", requires_grad=True)
    model(x).sum().backward()  # Warm-up: the allocator's pools and cuBLAS workspaces.
    model.zero_grad(set_to_none=True)

    # By hand: memory_allocated() around each layer's forward, and between the gradient reaching a
    # layer's output and the gradient at its input (tensor hooks on both).
    fwd, bwd, marks = {}, {}, {}

    def run_by_hand():
        h = x
        outs = []
        for i, layer in enumerate(model):
            before = torch.cuda.memory_allocated()
            h_in = h
            h = layer(h)
            fwd[str(i)] = torch.cuda.memory_allocated() - before
            outs.append((i, h_in, h))
        for i, h_in, h_out in outs:
            h_out.register_hook(lambda g, i=i: marks.__setitem__(i, torch.cuda.memory_allocated()))
            h_in.register_hook(lambda g, i=i: bwd.__setitem__(
                str(i), torch.cuda.memory_allocated() - marks[i]))
        h.sum().backward()

    run_by_hand()
    model.zero_grad(set_to_none=True)
    with TraceSession(model) as session:
        model(x).sum().backward()
    doc = by_name(record_doc(session))
    rows, ok = [], True
    for name in ("0", "1", "2"):
        traced_f = doc[name]["fwd_mem_alloc_delta"]
        traced_b = doc[name]["bwd_mem_alloc_delta"]
        rows.append({"layer": name, "fwd_by_hand": fwd[name], "fwd_traced": traced_f,
                     "bwd_by_hand": bwd.get(name), "bwd_traced": traced_b})
        ok = ok and traced_f == fwd[name] and traced_b == bwd.get(name)
    return {"layers": rows, "ok": ok}


def check_latency(device: str) -> dict:
    torch.manual_seed(0)
    n = 4096 if device == "cuda" else 512
    layer = nn.Linear(n, n).to(device)
    model = nn.Sequential(layer)
    x = torch.randn(n, n, device=device)
    with torch.no_grad():
        for _ in range(3):
            layer(x)
        sync(device)
        reps = 20
        if device == "cuda":
            times = []
            for _ in range(reps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                layer(x)
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        else:
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                layer(x)
                times.append((time.perf_counter() - t0) * 1e3)
        by_hand = statistics.mean(times)  # The record keeps the mean: like with like.
        with TraceSession(model) as session:
            for _ in range(reps):
                model(x)
        sync(device)
    traced = by_name(record_doc(session))["0"]["latency_ms_mean"]
    if device == "cuda":
        ok = traced is not None and abs(traced - by_hand) <= max(0.25 * by_hand, 0.05)
    else:  # Host clocks on a shared CPU: the figures are reported, only their presence judged.
        ok = traced is not None and traced > 0
    return {"layer": f"Linear({n}, {n}) on {n}x{n}", "by_hand_mean_ms": round(by_hand, 4),
            "by_hand_median_ms": round(statistics.median(times), 4),
            "traced_mean_ms": None if traced is None else round(traced, 4),
            "clock": "CUDA events" if device == "cuda" else "perf_counter", "ok": ok}


def nan_run(device: str) -> dict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), Scale(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with TraceSession(model) as session:
        for step in range(5):
            model[2].factor = float("nan") if step == 3 else 1.0
            opt.zero_grad(set_to_none=True)
            model(torch.randn(8, 16, device=device)).sum().backward()
            opt.step()
    doc = record_doc(session)
    origin = doc["metadata"].get("nan_origin")
    counts = {name: (l["forward_count"], l["backward_count"]) for name, l in by_name(doc).items()}
    return {"origin": origin, "counts": counts, "metadata": doc["metadata"],
            "hook_errors": session.hook_errors}


def check_nan_origin(device: str) -> dict:
    run = nan_run(device)
    origin = run["origin"]
    ok = origin is not None and origin["layer"] == "2" and origin["step"] == 3
    return {"injected": {"layer": "2", "step": 3}, "recorded": origin,
            "hook_errors": run["hook_errors"], "ok": ok and run["hook_errors"] == 0}


def check_deferred(device: str) -> dict:
    if device != "cpu":
        return {"ok": None, "why": "the CPU mode of the deferred route (CUDA samples always take it)"}
    os.environ["TRACETORCH_DEFERRED_STATS"] = "1"
    try:
        run = nan_run("cpu")
    finally:
        del os.environ["TRACETORCH_DEFERRED_STATS"]
    md = run["metadata"]
    origin = run["origin"]
    ok = (origin is not None and origin["layer"] == "2" and origin["step"] == 3 and
          all(c == (5, 5) for c in run["counts"].values()) and
          md.get("results_in_flight") == 0 and md.get("results_abandoned") == 0)
    return {"recorded": origin, "counts": run["counts"],
            "results_in_flight": md.get("results_in_flight"),
            "results_abandoned": md.get("results_abandoned"), "ok": ok}


class DecoderBlock(nn.Module):
    """Pre-norm causal self-attention (SDPA) and a GELU MLP; `poison` multiplies the MLP's input
    by NaN, so this block's `mul` is where the NaN enters."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.poison = False

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=2))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        h = self.ln2(x)
        if self.poison:
            h = h * float("nan")
        return x + self.mlp(h)


class GpuDecoder(nn.Module):
    """A causal decoder on token ids: embedding, DecoderBlocks, a vocabulary head."""

    def __init__(self, vocab: int, d: int, heads: int, blocks: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(DecoderBlock(d, heads) for _ in range(blocks))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


def check_ops_on_nan(device: str) -> dict:
    """TraceSession(model, ops="on_nan") on a transformer: the op where a NaN planted at step 3 in
    block 1 entered, and the cost of a clean step against the plain step (bf16 autocast on cuda)."""
    big = device == "cuda"
    vocab, d, heads, blocks, batch, seq = (32000, 512, 8, 6, 16, 256) if big else (
        512, 64, 4, 2, 4, 32)
    torch.manual_seed(0)
    model = GpuDecoder(vocab, d, heads, blocks).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab, (batch, seq + 1), device=device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=big):
            logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.float().reshape(-1, vocab),
                                           ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()

    def timed(n: int) -> float:
        sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        sync(device)
        return (time.perf_counter() - t0) / n * 1e3

    n = 10 if big else 2
    step()  # Warm-up.
    plain_ms = timed(n)
    with TraceSession(model, ops="on_nan") as session:
        step()
        clean_ms = timed(n)
        for s in range(4):
            model.blocks[1].poison = s == 3
            step()
    model.blocks[1].poison = False
    origin = session.record.metadata.nan_origin
    got = None if origin is None else {"op": origin.op, "op_func": origin.op_func,
                                       "op_module": origin.op_module, "step": origin.step}
    ok = (got is not None and got["op_func"] == "mul" and got["op_module"] == "blocks.1"
          and session.hook_errors == 0)
    return {"model": f"decoder {blocks}x{d}, seq {seq}, batch {batch}" +
                     (", bf16 autocast" if big else ""),
            "plain_ms_per_step": round(plain_ms, 3), "on_nan_clean_ms_per_step": round(clean_ms, 3),
            "ratio": round(clean_ms / plain_ms, 4), "recorded": got,
            "ops_stats": session.ops_stats, "hook_errors": session.hook_errors, "ok": ok}


def markdown(result: dict) -> str:
    lines = [f"### gpu_check: {result['device']} (torch {result['torch']}, {result['gpu']})", "",
             "| check | figures | ok |", "|---|---|---|"]
    for name, check in result["checks"].items():
        figures = {k: v for k, v in check.items() if k != "ok"}
        lines.append(f"| {name} | `{json.dumps(figures, sort_keys=True)}` | {check['ok']} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=None,
                        help="overhead rounds (default: 7 on cuda, 1 on cpu)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: --device cuda, but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    if args.device == "cpu":
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    rounds = args.rounds or (7 if args.device == "cuda" else 1)
    checks = {}
    for name, fn in (("nan_origin", check_nan_origin), ("deferred", check_deferred),
                     ("latency", check_latency), ("memory", check_memory),
                     ("no_sync", check_no_sync), ("ops_on_nan", check_ops_on_nan)):
        checks[name] = fn(args.device)
    checks["overhead"] = check_overhead(args.device, rounds)
    result = {
        "device": args.device,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "no GPU",
        "tracetorch_C": tracetorch._C.__file__,
        "checks": checks,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_check.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    text = markdown(result)
    (args.out / "gpu_check.md").write_text(text)
    print(text)
    return 0 if all(c["ok"] is not False for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
