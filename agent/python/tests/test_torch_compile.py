"""Tracing a torch.compile'd model (torch >= 2; skipped on 1.13): every layer traced with exact
numbers, the graph breaks tracing causes counted in TorchDynamo's own words and stated, never a
crash, and the compiled model whole again after the session (tracetorch/compiled.py).

The tests compile with backend="aot_eager" (TorchDynamo and AOTAutograd, the forward and backward
graphs, without Inductor's C++ code generation, which takes minutes on two cores): what tracing
does to a compiled model happens in TorchDynamo. bench/compile_overhead.py measures the cost with
Inductor.
"""

from __future__ import annotations

import copy
import logging

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tracetorch import TraceSession
from torch2_support import needs_torch2


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 2 * d)
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(8, 16)
        self.blocks = nn.Sequential(Block(16), Block(16))
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def _train(model, data, session_model=None):
    """Three SGD steps; traced when session_model is given. Returns (losses, session)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    session = TraceSession(session_model) if session_model is not None else None
    losses = []
    if session is not None:
        session.__enter__()
    try:
        for x, y in data:
            opt.zero_grad()
            loss = F.cross_entropy(session_model(x) if session_model is not None else model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        if session is not None:
            session.__exit__(None, None, None)
    return losses, session


@pytest.fixture
def setup():
    needs_torch2()
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = Net()
    data = [(torch.randn(6, 8), torch.randint(0, 4, (6,))) for _ in range(3)]
    return eager, data


def test_compiled_model_is_traced_layer_by_layer_with_exact_numbers(setup, caplog):
    eager, data = setup
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend="aot_eager")
    _, eager_session = _train(eager, data, session_model=eager)
    with caplog.at_level(logging.WARNING, logger="tracetorch"):
        losses, session = _train(model, data, session_model=compiled)
    assert session.hook_errors == 0
    ours = {l.full_name: l for l in session.record.layers}
    ref = {l.full_name: l for l in eager_session.record.layers}
    # The layers are named as the eager model's: the two traces diff.
    assert list(ours) == list(ref)
    assert "_orig_mod" not in " ".join(ours)
    for name, layer in ref.items():
        got = ours[name]
        assert (got.forward_count, got.backward_count) == (layer.forward_count,
                                                           layer.backward_count), name
        a, b = got.outputs[0].stats, layer.outputs[0].stats
        for key in ("mean", "std", "min", "max"):
            assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-5, abs=1e-6), (name, key)
        assert got.grad_norm == pytest.approx(layer.grad_norm, rel=1e-5), name
    # Stated: the graph breaks tracing caused, with TorchDynamo's reasons, in the record and in
    # one warning line.
    info = session.record.metadata.extra["torch_compile"]
    assert info["graph_breaks"] > 0 and info["reasons"] and info["frames_compiled"] > 0
    assert sum(info["reasons"].values()) == info["graph_breaks"]
    lines = [r.getMessage() for r in caplog.records if "torch.compile'd" in r.getMessage()]
    assert len(lines) == 1 and f"{info['graph_breaks']} graph breaks compiled" in lines[0]


def test_compiled_model_is_whole_again_after_the_session(setup):
    eager, data = setup
    compiled = torch.compile(eager, backend="aot_eager")
    x = data[0][0]
    before = compiled(x)
    with TraceSession(compiled):
        compiled(x)
    from torch._dynamo.utils import counters
    breaks = sum(counters["graph_break"].values())
    after = compiled(x)  # Our wrappers are gone: no new graph break, the same result.
    assert sum(counters["graph_break"].values()) == breaks
    assert torch.equal(after, before)
    assert "forward" not in eager.__dict__ and all(
        "forward" not in m.__dict__ for m in eager.modules())


def test_a_compiled_submodule_is_named_as_the_eager_one(setup):
    eager, data = setup
    eager.blocks = torch.compile(eager.blocks, backend="aot_eager")
    with TraceSession(eager) as session:
        eager(data[0][0]).sum().backward()
    names = [l.full_name for l in session.record.layers]
    assert "blocks.0.fc1" in names and "blocks" in names
    types = {l.full_name: l.module_type for l in session.record.layers}
    assert types["blocks"] == "Sequential"  # The compiled module's own type, not the wrapper's.
    assert not any("_orig_mod" in n for n in names)
    assert session.hook_errors == 0
    assert session.record.metadata.extra["torch_compile"]["graph_breaks"] > 0
