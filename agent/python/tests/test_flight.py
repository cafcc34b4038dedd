"""The Python door's flight recorder (flight/layout.h): made for every session unless
TRACETORCH_FLIGHT_RECORDER=0, and what the watch file says of it (where the process is, whether it
is stalled). The daemon's side is tested in daemon/ and tests/faults/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import torch
import torch.nn as nn

import tracetorch


def _read_when(path, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = json.loads(path.read_text())
            if predicate(last):
                return last
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"the watch file never matched (last: {last and last.get('metadata')})")


class Sleepy(nn.Module):
    """Sleeps once in its forward when `armed`: the process stops making progress there."""

    def __init__(self):
        super().__init__()
        self.armed = False

    def forward(self, x):
        if self.armed:
            self.armed = False
            time.sleep(1.0)
        return x * 2.0


def test_a_session_has_a_flight_recorder():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    session = tracetorch.TraceSession(model)
    assert session._engine.has_flight_recorder
    with session:
        model(torch.randn(2, 4)).sum().backward()
    assert session.steps == 1


def test_the_recorder_can_be_turned_off():
    code = ("import torch.nn as nn, tracetorch; "
            "print(tracetorch.TraceSession(nn.Linear(2, 2))._engine.has_flight_recorder)")
    env = dict(os.environ, TRACETORCH_FLIGHT_RECORDER="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_the_watch_file_says_where_the_process_is_and_when_it_stalls(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACETORCH_STALL_FLOOR_S", "0.3")
    sleepy = Sleepy()
    model = nn.Sequential(nn.Linear(4, 4), sleepy, nn.Linear(4, 2))
    path = tmp_path / "watch.json"
    x = torch.randn(3, 4)
    seen = {}

    def watch():
        moving = _read_when(path, lambda r: r["metadata"].get("flight_position", "").startswith(
            "step "))
        seen["moving"] = moving["metadata"]
        sleepy.armed = True  # Step 3 sleeps a second in layer "1".
        seen["stalled"] = _read_when(
            path, lambda r: r["metadata"].get("flight_stalled") is True)["metadata"]

    with tracetorch.TraceSession(model, watch_path=path, watch_interval_s=0.1):
        watcher = threading.Thread(target=watch)
        watcher.start()
        while watcher.is_alive():
            model(x).sum().backward()  # The watcher arms the sleep, then waits for the stall.
    assert seen["moving"]["flight_stalled"] is False
    assert seen["stalled"]["flight_position"].endswith(", forward, in 1"), seen["stalled"]
    assert seen["stalled"]["flight_position_age_s"] >= 0.3
