"""OpTrace.draw (Graphviz pictures through draw/) and OpTrace.audit (graph checks and replay)."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.nn as nn


@pytest.fixture(scope="module")
def tl():
    import tracetorch

    return tracetorch


@pytest.fixture(scope="module")
def resnet():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).eval()


@pytest.fixture(scope="module")
def resnet_trace(tl, resnet):
    torch.manual_seed(1)
    return tl.trace(resnet, torch.rand(1, 3, 224, 224))


# ---- draw ---------------------------------------------------------------------------------------


def test_draw_renders_every_format_and_collapse(resnet_trace, tmp_path):
    for collapse in ("none", "max", "auto"):
        svg = resnet_trace.draw(collapse=collapse)
        assert isinstance(svg, str) and "<svg" in svg
    if os.environ.get("TRACETORCH_GRAPHVIZ_PLUGINS") == "builtin":
        # A build with Graphviz's plugins linked in (the wheel's; tools/check_torch2 says so):
        # svg and dot only, and png/pdf say so clearly.
        for fmt in ("png", "pdf"):
            with pytest.raises(NotImplementedError, match="draws svg and dot only"):
                resnet_trace.draw(file_format=fmt)
    else:
        png = resnet_trace.draw(file_format="png", direction="LR")
        assert isinstance(png, bytes) and png.startswith(b"\x89PNG")
        pdf = resnet_trace.draw(file_format="pdf", collapse="max")
        assert pdf.startswith(b"%PDF")
    path = tmp_path / "resnet.svg"
    out = resnet_trace.draw(str(path))
    assert path.read_text() == out


# What each format's file starts with (`file` reads the same bytes).
MAGIC = {"svg": b"<?xml", "png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "dot": b"digraph "}


def test_draw_takes_the_format_from_the_extension(resnet_trace, tmp_path):
    # docs/ops.md: trace.draw("resnet.png", collapse="none", direction="LR") is a PNG file.
    builtin = os.environ.get("TRACETORCH_GRAPHVIZ_PLUGINS") == "builtin"
    for fmt, magic in MAGIC.items():
        path = tmp_path / f"resnet.{fmt}"
        if builtin and fmt in ("png", "pdf"):  # Svg and dot only (see the test above).
            with pytest.raises(NotImplementedError, match="draws svg and dot only"):
                resnet_trace.draw(str(path), collapse="max", direction="LR")
            assert not path.exists()
            continue
        out = resnet_trace.draw(str(path), collapse="max", direction="LR")
        data = path.read_bytes()
        assert data.startswith(magic), (fmt, data[:16])
        if fmt in ("png", "pdf"):
            assert out == data
        else:
            assert isinstance(out, str) and out.encode() == data
    gv = tmp_path / "g.gv"
    assert resnet_trace.draw(gv, collapse="max").startswith("digraph ")  # os.PathLike works too.


def test_draw_file_format_wins_over_the_extension(resnet_trace, tmp_path):
    path = tmp_path / "picture.png"
    out = resnet_trace.draw(str(path), collapse="max", file_format="svg")
    assert path.read_bytes().startswith(MAGIC["svg"]) and "<svg" in out


def test_draw_refuses_an_extension_it_cannot_write(resnet_trace, tmp_path):
    for name in ("g.jpeg", "no_extension"):
        with pytest.raises(ValueError, match="give the format by name"):
            resnet_trace.draw(str(tmp_path / name))
        assert not (tmp_path / name).exists()


def test_draw_dot_keeps_the_residual_adds_and_clusters(resnet_trace):
    dot = resnet_trace.draw(collapse="none", file_format="dot")
    assert dot.startswith("digraph G {")
    adds = [op.label for op in resnet_trace.ops if op.func_name.startswith("add")]
    assert len(adds) == 8
    for label in adds:
        assert label in dot
    assert dot.count("subgraph cluster_") == 15
    boxed = resnet_trace.draw(collapse="max", file_format="dot")
    assert "subgraph cluster_" not in boxed and adds[0] not in boxed


def test_draw_one_module(resnet_trace):
    dot = resnet_trace.draw(module="layer2", collapse="none", file_format="dot")
    inside = [op.label for op in resnet_trace.ops if (op.module or "").startswith("layer2")]
    outside = [op.label for op in resnet_trace.ops if (op.module or "").startswith("layer3")]
    assert all(label in dot for label in inside)
    assert not any(f'"{label}' in dot or f"{label}\\n" in dot for label in outside)


def test_draw_bad_options_raise_value_error(resnet_trace):
    with pytest.raises(ValueError, match="none, max, auto"):
        resnet_trace.draw(collapse="all")
    with pytest.raises(ValueError, match="layer9"):
        resnet_trace.draw(module="layer9")
    with pytest.raises(ValueError):
        resnet_trace.draw(file_format="jpeg")


def test_a_loaded_trace_draws_too(tl, resnet_trace, tmp_path):
    path = tmp_path / "ops.json"
    resnet_trace.export(str(path))
    assert "<svg" in tl.load(str(path)).draw()


# ---- audit --------------------------------------------------------------------------------------


class Sick(nn.Module):
    """fc -> relu (dead: weights 0, bias -1) ... and a log of a negative number (NaN)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.out = nn.Linear(4, 2)
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.bias.fill_(-1.0)

    def forward(self, x):
        h = self.act(self.fc(x))
        y = self.out(h + x)
        return torch.log(y - 100.0)


def test_audit_finds_the_planted_nan_and_the_dead_relu(tl):
    model = Sick().eval()
    trace = tl.trace(model, torch.rand(3, 4))
    report = trace.audit()
    assert report.nan_origin is not None
    assert report.nan_origin["label"].startswith("log")
    assert report.nan_origin["module"] == "<root>"
    dead = {d["label"]: d for d in report.dead}
    relu = next(op.label for op in trace.ops if op.func_name.startswith("relu"))
    assert relu in dead and dead[relu]["zero_fraction"] == 1.0
    assert dead[relu]["module"] == "act"
    assert not report.ok
    text = str(report)
    assert "non-finite origin" in text and relu in text
    assert json.loads(report.to_json())["nan_origin"]["label"] == report.nan_origin["label"]


def test_audit_reports_an_almost_dead_relu_with_its_fraction(tl):
    model = nn.Sequential(nn.Linear(1000, 1000), nn.ReLU())
    with torch.no_grad():
        model[0].weight.zero_()
        model[0].bias.fill_(-1.0)
        model[0].bias[:5] = 1.0  # 5 of 1000 alive
    trace = tl.trace(model, torch.rand(1, 1000))
    (d,) = [d for d in trace.audit().dead if d["func"].startswith("relu")]
    assert d["zero_fraction"] == pytest.approx(0.995)


def test_replay_of_resnet18_reproduces_every_op(resnet, resnet_trace):
    bn = resnet_trace["batch_norm_1_2"]  # read in place by the relu_ after it
    before = bn.out.clone()
    report = resnet_trace.audit(resnet)
    assert torch.equal(bn.out, before)  # the replay wrote nothing of the trace
    r = report.replay
    assert r.output_matches and r.perturbed_changes_output
    assert r.differed == []
    assert len(r.replayed) == len(resnet_trace.ops), r.skipped
    assert report.ok, str(report)


def test_replay_catches_a_tampered_saved_output(tl):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    trace = tl.trace(model, torch.rand(2, 8))
    relu = next(op for op in trace.ops if op.func_name.startswith("relu"))
    assert trace.audit(model).replay.differed == []
    with torch.no_grad():
        relu.out.add_(1.0)  # the saved activation, no longer what the op produced
    differed = trace.audit(model).replay.differed
    assert differed and differed[0] == relu.label


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.fc(x)) + torch.rand(x.shape)


def test_random_ops_are_listed_and_the_same_rng_state_reproduces_the_output(tl):
    model = Noisy().train()
    trace = tl.trace(model, torch.rand(4, 8))
    r = trace.audit(model).replay
    assert r.output_matches and r.output_exact
    funcs = {op.label: op.func_name for op in trace.ops}
    assert {funcs[label] for label in r.random} >= {"dropout", "rand"}
    assert r.differed == []


def test_a_constant_model_fails_the_perturbation_check(tl):
    class Constant(nn.Module):
        def forward(self, x):
            return x * 0.0

    model = Constant()
    trace = tl.trace(model, torch.rand(2, 2))
    report = trace.audit(model)
    assert report.replay.perturbed_changes_output is False
    assert not report.ok


class Detached(nn.Module):
    """Two branches; the second is detached before the sum, so its fc gets no gradient."""

    def __init__(self):
        super().__init__()
        self.used = nn.Linear(4, 4)
        self.cut = nn.Linear(4, 4)
        self.dead = nn.Linear(4, 4)
        with torch.no_grad():
            self.dead.weight.zero_()
            self.dead.bias.fill_(-1.0)  # relu(dead(x)) == 0: no gradient reaches dead.*

    def forward(self, x):
        return self.used(x) + self.cut(x).detach() + torch.relu(self.dead(x))


def test_gradient_flow_names_the_detached_branch_and_the_dead_unit(tl):
    torch.manual_seed(0)
    model = Detached()
    model.used.weight.grad = torch.full_like(model.used.weight, 7.0)  # the user's, put back
    trace = tl.trace(model, torch.rand(2, 4))
    report = trace.audit(model, loss_fn=lambda out: out.sum())
    g = report.gradients
    assert g["parameters"] == 6
    assert g["problems"] == {"cut.weight": "none", "cut.bias": "none", "dead.weight": "zero",
                             "dead.bias": "zero"}
    assert g["per_module"] == {"cut": ["cut.weight", "cut.bias"],
                               "dead": ["dead.weight", "dead.bias"]}
    assert torch.equal(model.used.weight.grad, torch.full_like(model.used.weight, 7.0))
    assert not report.ok
    assert "cut.weight (none)" in str(report)
    assert json.loads(report.to_json())["gradients"]["problems"]["dead.bias"] == "zero"
