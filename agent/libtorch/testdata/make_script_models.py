"""Scripts the TorchScript models used by the libtorch front door's tests, examples and benchmark.

Run with Debian's python3-torch (/usr/bin/python3): make_script_models.py OUTPUT_DIR
Writes:
  resnet_small.pt      stem conv, blocks = Sequential(Block, Block) with a residual add in each
                       Block.forward, a head = Sequential(Linear, ReLU, Linear); eval mode.
  resnet_small_nan.pt  the same model whose blocks.1.conv1 weight holds a NaN.
  resnet_bench.pt      the ResNet-style model of bench_libtorch.cc (train mode, bigger).
  log_block.pt         stem Linear, a LogBlock (Linear, then log(x[:, :1] + 2) * h in its forward:
                       NaN exactly when the input's first column is below -2), head Linear;
                       the ops="on_nan" test plants a NaN at a chosen step through its input.
"""

import os
import sys

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, channels: int, batch_norm: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.conv2(y)
        return torch.relu(y + x)  # The residual add.


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.Sequential(Block(8, batch_norm=True), Block(8))
        self.head = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = self.blocks(x)
        x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


class BenchNet(nn.Module):
    """Same shape as bench_libtorch.cc's C++ model: stem, 4 residual blocks, pool, fc."""

    def __init__(self, channels: int = 32, blocks: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(channels, batch_norm=True) for _ in range(blocks)])
        self.fc = nn.Linear(channels, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = self.blocks(x)
        x = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class LogBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return torch.log(x[:, :1] + 2.0) * h  # NaN born here, inside the block's own code.


class LogNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(4, 4)
        self.block = LogBlock()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.stem(x)
        return self.head(self.block(x) + s)


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: make_script_models.py OUTPUT_DIR", file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = SmallNet().eval()
    torch.jit.script(model).save(os.path.join(out, "resnet_small.pt"))
    with torch.no_grad():
        model.blocks[1].conv1.weight[0, 0, 0, 0] = float("nan")
    torch.jit.script(model).save(os.path.join(out, "resnet_small_nan.pt"))
    torch.manual_seed(1)
    torch.jit.script(BenchNet().train()).save(os.path.join(out, "resnet_bench.pt"))
    torch.manual_seed(2)
    torch.jit.script(LogNet().train()).save(os.path.join(out, "log_block.pt"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
