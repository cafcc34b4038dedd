"""A training run that meets one fault at step FAULT_STEP, for test_flight_faults.py.

    python fault_train.py FAULT   (deadlock | sigstop | segv | sigkill | alloc | gloo_hang | none)

It streams to the daemon in $TRACETORCH_DAEMON with a flight recorder (TRACETORCH_* environment as
a user sets it). When it reaches its fault it writes one byte to the file descriptor $FAULT_FD (the
test's handshake), then:
  deadlock   the forward of layer "2" deadlocks: a helper thread holds a native mutex and waits for
             the GIL, while the main thread waits for the mutex holding the GIL;
  sigstop    layer "2"'s backward (a custom autograd Function) sleeps; the test SIGSTOPs the
             process there, later SIGCONTs it, and the run finishes;
  segv       layer "2"'s forward calls a native op that writes through a null pointer;
  sigkill    layer "2"'s forward sleeps; the test SIGKILLs the process;
  alloc      layer "2"'s forward calls a native op whose allocation fails where it may not throw:
             std::terminate, SIGABRT;
  gloo_hang  two ranks (RANK, WORLD_SIZE, MASTER_ADDR/PORT set by the test) train with gloo and
             all-reduce their gradients after each backward; rank HANG_RANK sleeps in layer "2"'s
             forward, the other (after 0.2 s more work in that layer) blocks in the next
             all-reduce;
  none       no fault: a healthy run (no stall, no bundle).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time

import torch
import torch.nn as nn

import tracetorch

FAULT = sys.argv[1]
FAULT_STEP = 5
STEPS = int(os.environ.get("FAULT_STEPS", "40"))
LIB = os.environ["FAULT_OPS_LIB"]
HANDSHAKE = int(os.environ.get("FAULT_FD", "-1"))


def handshake() -> None:
    if HANDSHAKE >= 0:
        os.write(HANDSHAKE, b"x")


class SlowBackward(torch.autograd.Function):
    """Identity whose backward signals the test, then sleeps (the test stops the process there)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        handshake()
        time.sleep(1.0)
        return grad


class Fault(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.step = -1

    def forward(self, x):
        if self.step == FAULT_STEP:
            fault = FAULT
            if fault == "gloo_hang":
                hangs = int(os.environ["RANK"]) == int(os.environ["HANG_RANK"])
                fault = "sleep" if hangs else "work"
            if fault == "deadlock":
                deadlock()
            elif fault == "sigstop":
                return SlowBackward.apply(x)
            elif fault == "segv":
                handshake()
                ctypes.CDLL(LIB).tt_segv()
            elif fault in ("sigkill", "sleep"):
                handshake()
                time.sleep(600)
            elif fault == "work":
                # The rank that does not hang works 0.2 s longer in this step before it reaches
                # the all-reduce, so that it stops moving well after the hung rank did, whatever
                # the scheduler does to either.
                time.sleep(0.2)
            elif fault == "alloc":
                handshake()
                ctypes.CDLL(LIB).tt_alloc_abort()
        return x * 1.0


def deadlock() -> None:
    released = ctypes.CDLL(LIB)  # Calls release the GIL.
    holding = ctypes.PyDLL(LIB)  # Calls keep it.
    locked = threading.Event()

    def helper() -> None:
        released.tt_mutex_lock()
        locked.set()
        time.sleep(0.2)  # Gives the GIL away; then needs it back, which the main thread holds.
        released.tt_mutex_unlock()

    threading.Thread(target=helper, name="fault-helper", daemon=True).start()
    locked.wait()
    handshake()
    holding.tt_mutex_lock()  # Waits for the helper's mutex, holding the GIL: neither goes on.


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    distributed = FAULT == "gloo_hang"
    if distributed:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    fault = Fault()
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), fault, nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    with tracetorch.TraceSession(model, model_name="FaultNet"):
        for step in range(STEPS):
            fault.step = step
            loss = model(x).square().mean()
            loss.backward()
            if distributed:
                for p in model.parameters():
                    dist.all_reduce(p.grad)
            opt.step()
            opt.zero_grad()
    print("done", flush=True)


if __name__ == "__main__":
    main()
