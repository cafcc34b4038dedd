"""A traced training run of a small causal decoder for the report and TensorBoard tests.

    PYTHONPATH=build/python /usr/bin/python3 report_train.py --out trace.json [--steps N]
        [--nan-at STEP] [--perturb X]

Token ids in, an embedding, two blocks of an nn.TransformerEncoderLayer under a causal mask (a
boolean one: an additive -inf mask made in forward() is itself reported as an Inf origin, op
`full`, by the agent today), a LayerNorm and a head over the vocabulary; cross-entropy on next tokens, SGD. Traced
with ops="on_nan" and streaming to tracetorchd when TRACETORCH_DAEMON names one (the agent's
environment variable). --nan-at puts a NaN into blocks.0.ff's weight before that step, so the
first non-finite value appears there (the NaN origin, with its op graph). --perturb scales the
head's weights (a diff against an unperturbed run reports regressions). Prints "step N" per step.
"""

import argparse
import sys

import torch
from torch import nn

import tracetorch

VOCAB, WIDTH, SEQ = 50, 32, 12


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.TransformerEncoderLayer(WIDTH, nhead=4, dim_feedforward=64, dropout=0.0,
                                               batch_first=True)
        self.ff = nn.Linear(WIDTH, WIDTH)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.ff(self.attn(x, src_mask=mask)))


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1)  # True: may not attend.
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.norm(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--nan-at", type=int, default=-1)
    parser.add_argument("--perturb", type=float, default=1.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Decoder()
    with torch.no_grad():
        model.head.weight.mul_(args.perturb)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    tokens = torch.randint(0, VOCAB, (8, SEQ + 1))
    with tracetorch.TraceSession(model, model_name="TinyDecoder", ops="on_nan") as session:
        for step in range(args.steps):
            if step == args.nan_at:
                with torch.no_grad():
                    model.blocks[0].ff.weight[0, 0] = float("nan")
            opt.zero_grad()
            logits = model(tokens[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            print(f"step {step + 1}", flush=True)
    session.export(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
