"""A small traced training run: the example behind `tools/demo`.

    PYTHONPATH=build/python /usr/bin/python3 examples/train.py --out trace.json [--perturb 50]
        [--steps N] [--step-delay SECONDS]

Trains a little MLP on synthetic data for a few SGD steps inside a TraceSession, prints the session
summary and exports the trace. With TRACETORCH_DAEMON set (a tracetorchd socket) the run also
streams to the daemon. --perturb scales the head's weights before training, which a diff against
an unperturbed run reports as regressions and new anomalies.
"""

import argparse
import sys
import time

import torch
from torch import nn

import tracetorch


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class TrainNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.blocks = nn.Sequential(Block(64), Block(64))
        self.norm = nn.LayerNorm(64)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(self.norm(self.blocks(self.stem(x)))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to export the trace (JSON)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--perturb", type=float, default=1.0, help="scale head.weight by this")
    parser.add_argument("--step-delay", type=float, default=0.0,
                        help="seconds to sleep after each step (to watch the run live)")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TrainNet()
    with torch.no_grad():
        model.head.weight.mul_(args.perturb)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))

    with tracetorch.TraceSession(model, model_name="TrainNet") as session:
        for _ in range(args.steps):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            if args.step_delay > 0:
                time.sleep(args.step_delay)
    print(session.summary())
    path = session.export(args.out)
    print(f"trace written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
