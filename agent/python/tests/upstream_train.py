#!/usr/bin/env python3
"""Trains a small model for three SGD steps under whichever ``tracetorch`` is importable and
exports the trace: the same run for the tracetorch-ml library and for this package.

    PYTHONPATH=<tracetorch-ml wheel or our package> python upstream_train.py OUT.json

test_upstream_torch2.py runs it under both and compares the files.
"""

from __future__ import annotations

import sys

import torch
import torch.nn as nn

from tracetorch import TraceSession


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(32, 32)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))


class Net(nn.Module):
    """Linear, two residual-free blocks, LayerNorm, a head: the shape of the fixtures' TrainNet."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(16, 32)
        self.blocks = nn.Sequential(Block(), Block())
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        return self.head(self.norm(self.blocks(self.stem(x))))


def main() -> int:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]
    session = TraceSession(model, model_name="Net")
    with session:
        for x, y in data:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    session.export(sys.argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
