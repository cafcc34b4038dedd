#!/usr/bin/python3
"""Cost of op-level capture (tl.trace) on resnet18, against a plain forward.

How to run (not registered with ctest: it needs the built Python package and takes ~1 minute):

    cmake -S . -B build -G Ninja && ninja -C build tracetorch_python_ext tracetorch_python_package
    PYTHONPATH=build/python /usr/bin/python3 bench/ops_overhead.py [--reps 5] [--json out.json]

What it measures, in one process with torch.set_num_threads(1), under torch.no_grad():
  model    torchvision.models.resnet18(weights=None).eval(), input 1x3x224x224
  variants plain        model(x)
           full         tl.trace(model, x): every op's metadata and statistics, every activation kept
           save=None    tl.trace(model, x, save=None): metadata and statistics only
           save=conv2d  tl.trace(model, x, save=tl.func("conv2d"))
Timing: wall clock. After a warm-up, rounds run the variants INTERLEAVED (order rotated per round);
a variant's ratio is the median over rounds of (variant / plain of the same round), which cancels
slow drifts of a shared machine; --reps rounds (at least 3).

Memory: tracemalloc does not see tensor storage, so the extra memory a capture keeps is measured as
the bytes of the distinct storages the returned trace holds (its saved activations, copies made for
copy-on-write included), plus the growth of the peak RSS (VmHWM of /proc/self/status, reset with
/proc/self/clear_refs once the model is built) over the first run of each variant in a fresh
subprocess; the extra peak of a capture is its growth minus plain's (plain's growth is the
forward's own transient activations). getrusage's ru_maxrss is no use here: a child inherits its
parent's peak. Targets (issue 11): full <= x1.5, save=None <= x1.2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def build():
    import torch
    import torchvision

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    x = torch.rand(1, 3, 224, 224)
    return torch, model, x


def variants(tl):
    return {
        "plain": None,
        "full": {},
        "save=None": {"save": None},
        "save=conv2d": {"save": tl.func("conv2d")},
    }


def kept_bytes(trace) -> int:
    seen = {}
    for op in trace.ops:
        out = op.out
        for t in (out if isinstance(out, tuple) else (out,)):
            if t is not None:
                s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
                seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def run_once(torch, tl, model, x, kwargs):
    with torch.no_grad():
        if kwargs is None:
            return model(x)
        return tl.trace(model, x, **kwargs)


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def peak_rss_child(name: str) -> None:
    """Runs one variant in this (fresh) process and prints its peak RSS growth in KiB."""
    import tracetorch as tl

    torch, model, x = build()
    with open("/proc/self/clear_refs", "w") as f:  # Resets VmHWM (the peak RSS) to VmRSS.
        f.write("5")
    before = _status_kib("VmHWM")  # No warm-up: a first run each.
    keep = run_once(torch, tl, model, x, variants(tl)[name])
    after = _status_kib("VmHWM")
    print(json.dumps({"variant": name, "peak_rss_growth_kib": after - before}))
    del keep


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        peak_rss_child(args.child)
        return 0
    import tracetorch as tl

    torch, model, x = build()
    vs = variants(tl)
    names = list(vs)
    for name in names:  # Warm-up.
        run_once(torch, tl, model, x, vs[name])
    times = {n: [] for n in names}
    for r in range(max(3, args.reps)):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            t0 = time.perf_counter()
            result = run_once(torch, tl, model, x, vs[name])
            times[name].append(time.perf_counter() - t0)
            del result
    ratios = {n: statistics.median(t / p for t, p in zip(times[n], times["plain"]))
              for n in names}
    report = {"model": "resnet18 1x3x224x224, 1 thread, no_grad", "rounds": len(times["plain"]),
              "plain_ms": statistics.median(times["plain"]) * 1e3, "variants": {}}
    for name in names:
        entry = {"median_ms": statistics.median(times[name]) * 1e3, "ratio": ratios[name]}
        if vs[name] is not None:
            entry["kept_bytes"] = kept_bytes(run_once(torch, tl, model, x, vs[name]))
        child = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                               text=True, check=True)
        entry["peak_rss_growth_kib"] = json.loads(child.stdout.strip().splitlines()[-1])[
            "peak_rss_growth_kib"]
        report["variants"][name] = entry
    conv_bytes = sum(op.shape.numel() * 4 for op in tl.trace(model, x, save=None).ops
                     if op.func_name == "conv2d")
    report["conv2d_outputs_bytes"] = conv_bytes
    print(f"{report['model']}: plain {report['plain_ms']:.1f} ms (median of "
          f"{report['rounds']} rounds)")
    print(f"{'variant':<12} {'ms':>8} {'ratio':>7} {'kept MiB':>9} {'peak RSS +MiB':>14} "
          f"{'vs plain':>9}")
    plain_peak = report["variants"]["plain"]["peak_rss_growth_kib"]
    for name, e in report["variants"].items():
        kept = e.get("kept_bytes")
        e["extra_peak_vs_plain_kib"] = e["peak_rss_growth_kib"] - plain_peak
        print(f"{name:<12} {e['median_ms']:8.1f} {e['ratio']:7.2f} "
              f"{(kept / 2**20 if kept is not None else 0):9.1f} "
              f"{e['peak_rss_growth_kib'] / 1024:14.1f} "
              f"{e['extra_peak_vs_plain_kib'] / 1024:9.1f}")
    print(f"(the 20 conv2d outputs are {conv_bytes / 2**20:.1f} MiB)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
