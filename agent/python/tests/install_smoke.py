"""An installed tracetorch traces a training step (tools/check_agent_install runs it; not pytest).

    python install_smoke.py EXPECTED_DIR

Checks that `import tracetorch` loads the extension from under EXPECTED_DIR (the venv's
site-packages, or a build's python/ folder: not another copy on the path), then traces three
training steps of a small model and a fourth with a NaN made by one layer, and checks what the
record says: every layer's forward and backward counts, statistics, and the NaN origin (that layer,
that step); then shows the exported trace with tracetorch.cli.summary_command (the views run in
every build, agent-only ones included); then takes one forward apart with `tl.trace` (the ops,
their modules and data flow) and draws it as svg (Graphviz, bundled in the wheel). Prints one line
and exits 0, or raises. It is also the newest torch's smoke test (tools/check_torch_newest).
"""

import contextlib
import io
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn


class Scale(nn.Module):
    """Multiplies by `factor`: a NaN factor makes a NaN in this layer."""

    def __init__(self) -> None:
        super().__init__()
        self.factor = 1.0

    def forward(self, x):
        return x * self.factor


def main() -> None:
    expected = os.path.realpath(sys.argv[1])
    import tracetorch
    from tracetorch import TraceSession

    where = os.path.realpath(tracetorch._C.__file__)
    if not where.startswith(expected + os.sep):
        raise SystemExit(f"install_smoke: tracetorch._C came from {where}, not from {expected}")
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Scale(), nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with TraceSession(model) as session:
        for step in range(4):
            if step == 3:
                model[2].factor = float("nan")
            optimizer.zero_grad()
            model(torch.randn(32, 8)).sum().backward()
            optimizer.step()
    from tracetorch.cli import summary_command

    shown = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        with open(session.export(os.path.join(tmp, "trace.json"))) as f:
            doc = json.load(f)
        with contextlib.redirect_stdout(shown):
            summary_command(os.path.join(tmp, "trace.json"))
    if "Sequential" not in shown.getvalue():
        raise SystemExit(f"install_smoke: summary_command printed {shown.getvalue()!r}")
    by_name = {layer["full_name"]: layer for layer in doc["layers"]}
    for name in ("0", "1", "2", "3"):
        layer = by_name[name]
        if layer["forward_count"] != 4 or layer["backward_count"] != 4:
            raise SystemExit(f"install_smoke: layer {name}: {layer['forward_count']} forward, "
                             f"{layer['backward_count']} backward (want 4 and 4)")
    if by_name["0"]["outputs"][0].get("mean") is None:
        raise SystemExit("install_smoke: no statistics recorded for layer 0")
    origin = doc["metadata"]["nan_origin"]
    if origin is None or origin["layer"] != "2" or origin["step"] != 3:
        raise SystemExit(f"install_smoke: NaN origin {origin}, want layer 2 at step 3")
    model[2].factor = 1.0
    trace = tracetorch.trace(model, torch.randn(2, 8))
    funcs = [op.func_name for op in trace.ops]
    if funcs != ["linear", "relu", "mul", "linear"]:
        raise SystemExit(f"install_smoke: tl.trace recorded {funcs}")
    if [op.module for op in trace.ops] != ["0", "1", "2", "3"] or \
            trace.ops[3].parents != [trace.ops[2].label]:
        raise SystemExit(f"install_smoke: tl.trace modules/parents wrong: {trace.ops}")
    svg = trace.draw()
    if "<svg" not in svg or "linear" not in svg:
        raise SystemExit("install_smoke: trace.draw() did not give an svg of the graph")
    print(f"install_smoke: ok (torch {torch.__version__}, tracetorch._C from {where})")


if __name__ == "__main__":
    main()
