#!/usr/bin/python3
"""Pictures and replay of op graphs: the issue's targets, median of 3 runs each.

    PYTHONPATH=build/python /usr/bin/python3 bench/draw_audit_bench.py [--layers N]

  resnet18 draw svg      OpTrace.draw(collapse=...) of torchvision resnet18      target <= 300 ms
  transformer draw svg   a TransformerEncoder traced to ~2,000 ops, collapse none and auto:
                         Graphviz's dot must not take minutes (big graphs use bounded effort,
                         draw/op_graph_dot.h)
  resnet18 replay        trace.audit(model) with every activation saved         target <= 1 s

One process, one thread; the times include the view, the layout and the rendering (and for the
replay the fresh forward, the perturbed forward and the op-by-op replay).
"""

import argparse
import statistics
import time

import torch
import torch.nn as nn


def median_ms(fn, runs=3):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), min(times), max(times)


def report(name, result, target=None):
    med, lo, hi = result
    extra = f"  (target <= {target} ms)" if target else ""
    print(f"{name:<40} median {med:8.1f} ms  [{lo:.1f} .. {hi:.1f}]{extra}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=48)
    args = parser.parse_args()

    import torchvision

    import tracetorch as tl

    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(weights=None).eval()
    trace = tl.trace(resnet, torch.rand(1, 3, 224, 224))
    print(f"resnet18: {len(trace.ops)} ops")
    for collapse in ("auto", "none", "max"):
        report(f"resnet18 draw svg collapse={collapse}",
               median_ms(lambda: trace.draw(collapse=collapse)), 300)
    report("resnet18 draw png collapse=auto", median_ms(lambda: trace.draw(file_format="png")))
    report("resnet18 replay (audit with model)", median_ms(lambda: trace.audit(resnet)), 1000)
    r = trace.audit(resnet).replay
    print(f"  replayed {len(r.replayed)} ops, {r.exact} exact, {len(r.tolerated)} tolerated, "
          f"{len(r.differed)} differed, {len(r.skipped)} skipped")

    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0)
    encoder = nn.TransformerEncoder(layer, num_layers=args.layers, enable_nested_tensor=False)
    encoder.eval()
    big = tl.trace(encoder, torch.rand(16, 2, 64))
    print(f"transformer: {args.layers} layers, {len(big.ops)} ops")
    report("transformer draw svg collapse=auto", median_ms(lambda: big.draw(collapse="auto")))
    report("transformer draw svg collapse=none",
           median_ms(lambda: big.draw(collapse="none"), runs=1 if len(big.ops) > 3000 else 3))


if __name__ == "__main__":
    main()
