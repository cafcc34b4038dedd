"""A traced training run for the live-watch end-to-end tests, driven by files (handshakes, no sleeps).

    PYTHONPATH=build/python /usr/bin/python3 live_train.py --stop-file F [--nan-file G] ...

Streams to tracetorchd through TRACETORCH_DAEMON (the agent's environment variable). Trains the
example MLP (TrainNet) one step after another, sleeping --step-delay seconds between steps, until
--stop-file exists (or --max-steps), then leaves the TraceSession (the session ends: finished).
Once --nan-file exists, the weights of blocks.1.fc get a NaN before the next step, so the first
non-finite activation appears at blocks.1.fc (the NaN origin) while its input is still finite.
--slow-ms makes blocks.0 slower on this process (a straggler rank of a job; TRACETORCH_JOB and RANK
name the job and the rank). --hold-after N stops stepping after N steps and keeps the session live
(heartbeats only) until the stop file exists, so that a test sees a fixed step count. Prints "step N" after each step (flushed) so a test can wait for progress.
"""

import argparse
import os
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
        self.delay_s = 0.0  # --slow-ms: a straggler rank.

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.delay_s > 0:
            time.sleep(self.delay_s)
        return self.act(self.fc(x))


class TrainNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(32, 64)
        self.blocks = nn.Sequential(Block(64), Block(64))
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.blocks(self.stem(x))))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--nan-file", default="")
    parser.add_argument("--max-steps", type=int, default=100000)
    parser.add_argument("--min-steps", type=int, default=0, help="steps before the stop file counts")
    parser.add_argument("--step-delay", type=float, default=0.05)
    parser.add_argument("--hold-after", type=int, default=0,
                        help="after this many steps, wait for the stop file without stepping")
    parser.add_argument("--slow-ms", type=float, default=0.0,
                        help="make blocks.0 this much slower per forward (a straggler rank)")
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = TrainNet()
    model.blocks[0].delay_s = args.slow_ms / 1000.0
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(16, 32)
    y = torch.randint(0, 10, (16,))
    poisoned = False

    with tracetorch.TraceSession(model, model_name="TrainNet"):
        step = 0
        while step < args.max_steps:
            if step >= args.min_steps and os.path.exists(args.stop_file):
                break
            if args.hold_after and step >= args.hold_after:
                time.sleep(args.step_delay)  # The session stays live; the agent heartbeats.
                continue
            if args.nan_file and not poisoned and os.path.exists(args.nan_file):
                with torch.no_grad():
                    model.blocks[1].fc.weight[0, 0] = float("nan")
                poisoned = True
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            step += 1
            print(f"step {step}", flush=True)
            time.sleep(args.step_delay)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
