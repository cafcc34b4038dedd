"""A small training loop for test_daemon_stream.py, run as its own process.

Prints, one per line and flushed: "session ID" once the daemon stream has a session, "step I" after
each step, "synced I N" when asked to wait for the stream to catch up, "done SECONDS" (the training
loop's duration) and, after the block, "stats JSON" with the stream's counters.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch


class Noise(torch.utils.data.Dataset):
    """Runs the traced model's first layer in the loader workers: a forked child must record nothing."""

    def __init__(self, layer: torch.nn.Module, n: int, width: int) -> None:
        self.layer = layer
        self.n = n
        self.width = width

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(self.width, generator=g)
        with torch.no_grad():
            self.layer(x.unsqueeze(0))
        return x, torch.randn(4, generator=g)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--daemon", default=None)
    p.add_argument("--model-name", default="StreamNet")
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--sleep-ms", type=float, default=0.0)
    p.add_argument("--sync-at", type=int, default=-1)
    p.add_argument("--wait-connects", type=int, default=0)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--record", default=None)
    a = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(a.width, a.width), torch.nn.ReLU(), torch.nn.Linear(a.width, 4)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def batches():
        if a.workers > 0:
            ds = Noise(model[0], a.steps * a.batch, a.width)
            loader = torch.utils.data.DataLoader(ds, batch_size=a.batch, num_workers=a.workers)
            yield from loader
        else:
            for _ in range(a.steps):
                yield torch.randn(a.batch, a.width), torch.randn(a.batch, 4)

    def train(session) -> float:
        announced = False
        start = time.perf_counter()
        for i, (x, y) in enumerate(batches()):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            if a.sleep_ms:
                time.sleep(a.sleep_ms / 1000.0)
            if not announced:
                sid = (session.daemon_stats or {}).get("session_id")
                if sid:
                    print("session", sid, flush=True)
                    announced = True
            if i == a.sync_at:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    st = session.daemon_stats
                    if st["connected"] and st["sent_events"] == st["enqueued_events"]:
                        break
                    time.sleep(0.005)
                if not announced:
                    print("session", session.daemon_stats["session_id"], flush=True)
                    announced = True
                print("synced", i, session.daemon_stats["sent_events"], flush=True)
            print("step", i, flush=True)
        return time.perf_counter() - start

    import tracetorch

    session = tracetorch.TraceSession(model, model_name=a.model_name, daemon=a.daemon)
    with session:
        elapsed = train(session)
        print("done", elapsed, flush=True)
        deadline = time.monotonic() + 10
        while a.wait_connects and time.monotonic() < deadline:
            if (session.daemon_stats or {}).get("connects", 0) >= a.wait_connects and \
                    session.daemon_stats["connected"]:
                break
            time.sleep(0.01)
    if a.record:
        session.export(a.record)
    print("stats", json.dumps(session.daemon_stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
