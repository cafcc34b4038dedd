"""One definition of "forward passes" (the root model's calls, carried by the record) in every
summary: TraceSession.summary(), `tracetorch summary` on the exported file, a record read back with
load_json, and the C++ door (agent/libtorch/trace_session_test.cc). resnet18's blocks run their
ReLU twice per forward, so a per-layer count would say 6 for 3 steps."""

import torch
import torchvision

import tracetorch
from tracetorch import TraceSession
from tracetorch.storage import load_json


def _panel_value(text: str, key: str) -> str:
    for line in text.splitlines():
        stripped = line.strip(" │|")
        if stripped.startswith(key):
            return stripped[len(key):].strip(" :")
    raise AssertionError(f"no '{key}' in:\n{text}")


def test_forward_passes_are_the_root_calls_in_every_summary(tmp_path, capsys):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None, num_classes=4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([0, 3])
    with TraceSession(model, model_name="resnet18") as session:
        for _ in range(3):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad()
    record = session.record
    assert max(l.forward_count for l in record.layers) == 6  # layer1.0.relu: twice per forward.
    assert session.steps == 3
    assert record.metadata["forward_passes"] == 3
    assert _panel_value(session.summary(), "Forward passes") == "3"

    path = session.export(tmp_path / "trace.json")
    import tracetorch.cli as tcli
    capsys.readouterr()
    tcli.summary_command(str(path))
    assert _panel_value(capsys.readouterr().out, "Forward passes") == "3"

    loaded = load_json(path)
    assert loaded.metadata["forward_passes"] == 3
    by_hand = TraceSession.__new__(TraceSession)  # What the library's tests do with a record.
    by_hand._model_name = "resnet18"
    by_hand._record = loaded
    by_hand._anomalies = []
    assert _panel_value(by_hand.summary(), "Forward passes") == "3"


def test_a_record_without_the_count_uses_its_top_level_layers():
    record = tracetorch.TraceRecord(layers=[
        tracetorch.LayerTrace(name="relu", full_name="layer1.0.relu", type="ReLU", depth=3,
                              forward_count=6),
        tracetorch.LayerTrace(name="conv1", full_name="conv1", type="Conv2d", depth=1,
                              forward_count=3),
    ])
    by_hand = TraceSession.__new__(TraceSession)
    by_hand._model_name = "m"
    by_hand._record = record
    by_hand._anomalies = []
    assert _panel_value(by_hand.summary(), "Forward passes") == "3"
