#!/usr/bin/env python3
"""One rank of a two-process DistributedDataParallel run on the CPU (gloo), for
test_torch2_models.py. The rank comes from the environment (RANK, WORLD_SIZE, as torchrun sets
them); the session streams to the daemon at argv[2] as that rank. The same seeded model trains
three steps untraced, then three steps traced from the same weights on the same data: the losses
must be bit-identical (tracing changes nothing) and the final weights the same on both ranks.
Prints one JSON line: rank, session id, losses, a weight checksum, the record's layers.

    RANK=0 WORLD_SIZE=2 python ddp_train.py INIT_FILE DAEMON_SOCKET
"""

from __future__ import annotations

import copy
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from tracetorch import TraceSession


def steps(model, opt, data):
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main() -> int:
    init_file, socket = sys.argv[1], sys.argv[2]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    torch.manual_seed(0)  # The same initial weights on every rank.
    base = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    g = torch.Generator().manual_seed(100 + rank)  # Each rank its own shard of data.
    data = [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g))
            for _ in range(3)]

    plain = DDP(copy.deepcopy(base))
    plain_losses = steps(plain, torch.optim.SGD(plain.parameters(), lr=0.1), data)

    traced = DDP(copy.deepcopy(base))
    with TraceSession(traced, model_name="DDPNet", daemon=socket) as session:
        traced_losses = steps(traced, torch.optim.SGD(traced.parameters(), lr=0.1), data)
    checksum = float(sum(p.double().sum() for p in traced.parameters()))
    plain_checksum = float(sum(p.double().sum() for p in plain.parameters()))
    record = session.record
    print(json.dumps({
        "rank": rank,
        "session_id": session.daemon_stats["session_id"],
        "dropped_events": session.daemon_stats["dropped_events"],
        "hook_errors": session.hook_errors,
        "plain_losses": plain_losses, "traced_losses": traced_losses,
        "checksum": checksum, "plain_checksum": plain_checksum,
        "layers": {l.full_name: [l.forward_count, l.backward_count, l.outputs[0].stats.mean]
                   for l in record.layers},
    }), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
