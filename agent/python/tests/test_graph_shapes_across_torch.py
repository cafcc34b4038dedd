"""tl.trace and ops="on_nan" give the same graphs under torch 2 as under 1.13 on the same models:
op labels and funcs, module passes, data flow, output shapes and dtypes, what selectors pick, the
kept step and the NaN's origin op (graph_shape.py says what is compared).

Runs in the torch 2 job: graph_shape.py runs in this interpreter and, under Debian's
/usr/bin/python3 (torch 1.13), against the main build's package ($TRACETORCH_TORCH1_PYTHONPATH,
tools/check_torch2 sets it to <build>/python); the two documents must be equal but for the torch
version. Under torch 1.13 it is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from torch2_support import needs, needs_torch2

HERE = Path(__file__).resolve().parent
TORCH1_PYTHON = os.environ.get("TRACETORCH_TORCH1_PYTHON", "/usr/bin/python3")


def _shapes(python: str, pythonpath: str) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([python, str(HERE / "graph_shape.py")], env=env, check=True,
                         capture_output=True, text=True, timeout=300)
    return json.loads(out.stdout)


def test_graphs_under_torch2_equal_those_under_torch_1_13():
    needs_torch2()
    torch1_path = os.environ.get("TRACETORCH_TORCH1_PYTHONPATH", "")
    needs(bool(torch1_path) and Path(torch1_path, "tracetorch").is_dir(),
          "TRACETORCH_TORCH1_PYTHONPATH (the 1.13 build's python folder) is not set")
    old = _shapes(TORCH1_PYTHON, torch1_path)
    needs(old["torch"].startswith("1."), f"{TORCH1_PYTHON} has torch {old['torch']}, not 1.x")
    import tracetorch
    new = _shapes(sys.executable, str(Path(tracetorch.__file__).parent.parent))
    assert new["torch"] == torch.__version__
    assert set(new["models"]) == set(old["models"])
    for name in old["models"]:
        a, b = old["models"][name], new["models"][name]
        # Op by op first: a difference names the op, not the whole document.
        assert [o["label"] for o in b["ops"]] == [o["label"] for o in a["ops"]], name
        for op_a, op_b in zip(a["ops"], b["ops"]):
            assert op_b == op_a, f"{name}: op {op_a['label']}"
        assert b["modules"] == a["modules"], name
        assert b["selectors"] == a["selectors"], name
        assert b["on_nan"] == a["on_nan"], name
        assert a["on_nan"]["origin"] is not None, f"{name}: no NaN origin found"
