#!/usr/bin/env python3
"""The shape of the op graphs tracetorch records for a few fixed models, as JSON on stdout.

    PYTHONPATH=<build>/python python3 agent/python/tests/graph_shape.py

Run under two torches (test_graph_shapes_across_torch.py runs it under Debian's 1.13 and compares
with what the torch 2 interpreter records in-process): what a user reads off a graph must not
change with the torch version. For each model, ``tl.trace`` gives every op's label, func_name,
innermost module pass, enclosing passes, parents, children, the passes it is the output of and its
output shape and dtype; every module pass's address, type and ops; what a few selectors pick; and
``TraceSession(ops="on_nan")`` with a NaN planted at one op of one step gives the kept step, the
origin op (label, func, module) and the kept graph's labels. Timings, statistics and pointers are
not part of the shape.

The models are written with ops that both versions have (no F.scaled_dot_product_attention, no
nn.MultiheadAttention: their insides differ across versions by design): an MLP with dropout, a
residual CNN with batch norm, and a causal decoder block on token ids with a -inf mask.
"""

from __future__ import annotations

import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import tracetorch as tl
from tracetorch import TraceSession

from install_smoke import Scale  # x * factor: a NaN factor plants a NaN.


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


class ResBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(h)) + x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.block = ResBlock(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(8, 10)

    def forward(self, x):
        h = self.block(self.block(F.relu(self.stem(x))))  # The block runs twice: two passes.
        return self.head(torch.flatten(self.pool(h), 1))


class CausalAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Decoder(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 16) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalAttention(d, 2)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


def models():
    """(name, model, input, selectors) for each model, seeded the same in every process."""
    torch.manual_seed(0)
    out = [("mlp", MLP().eval(), torch.randn(4, 16),
            [tl.func("linear"), tl.module("fc2"), ~tl.func("linear")])]
    torch.manual_seed(0)
    out.append(("cnn", CNN().eval(), torch.randn(2, 3, 8, 8),
                [tl.func("conv2d") | tl.func("relu"), tl.in_module("block:2"),
                 tl.module("block:1") & tl.func("relu")]))
    torch.manual_seed(0)
    out.append(("decoder", Decoder().eval(), torch.randint(0, 50, (2, 6)),
                [tl.func("softmax"), tl.in_module("attn"), tl.func("layer_norm") | tl.module("mlp")]))
    return out


def op_shape(op) -> dict:
    return {
        "label": op.label, "func": op.func_name, "module": op.module, "modules": op.modules,
        "parents": op.parents, "children": op.children, "output_of": op.output_of,
        "shape": None if op.shape is None else list(op.shape), "dtype": op.dtype,
        "inplace": op.inplace, "tensor_output": op.tensor_output,
    }


def graph_shape(trace) -> dict:
    return {
        "ops": [op_shape(op) for op in trace.ops],
        "modules": [{"address": m.address, "type": m.type, "ops": [o.label for o in m.ops]}
                    for m in trace.modules],
    }


class Poison(nn.Module):
    """Wraps a model: at step `at`, the first op of the wrapped forward's output is multiplied by
    NaN inside a child module, so the origin is an op we know."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.scale = Scale()

    def forward(self, x):
        return self.scale(self.inner(x))


def on_nan_shape(model: nn.Module, x) -> dict:
    wrapped = Poison(model)
    with TraceSession(wrapped, ops="on_nan") as session:
        with torch.no_grad():
            for step in range(3):
                wrapped.scale.factor = float("nan") if step == 1 else 1.0
                wrapped(x)
    origin = session.record.metadata.nan_origin
    graph = session.op_graph
    return {
        "ops_stats": session.ops_stats,
        "origin": None if origin is None else {
            "op": origin.op, "op_func": origin.op_func, "op_module": origin.op_module,
            "step": origin.step, "layer": origin.layer},
        "labels": [op.label for op in graph.ops] if graph is not None else None,
    }


def main() -> int:
    out = {"torch": torch.__version__, "models": {}}
    for name, model, x, selectors in models():
        trace = tl.trace(model, x)
        shape = graph_shape(trace)
        shape["selectors"] = {str(s): [op.label for op in trace.select(s)] for s in selectors}
        shape["on_nan"] = on_nan_shape(model, x)
        out["models"][name] = shape
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
