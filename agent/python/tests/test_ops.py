"""Op-level capture (tracetorch.ops): tl.trace, selectors, save=, intervene=, export/load."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


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
def image():
    torch.manual_seed(1)
    return torch.rand(1, 3, 224, 224)


@pytest.fixture(scope="module")
def resnet_trace(tl, resnet, image):
    return tl.trace(resnet, image)


def test_the_issue_example_runs_as_written(tl, resnet, image):
    model, x = resnet, image
    trace = tl.trace(model, x)
    block = trace["layer3"]
    assert tuple(block.out.shape) == (1, 256, 14, 14)
    relu = next(op for op in trace.ops if op.func_name.startswith("relu"))
    assert (relu.label, relu.func_name, tuple(relu.shape)) == ("relu_1_3", "relu_",
                                                               (1, 64, 112, 112))
    summary = trace.summary()
    assert "conv2d_1_1" in summary and "layer3.1.conv2" in summary
    seen = {}
    handle = model.layer3.register_forward_hook(lambda m, a, out: seen.update(out=out))
    model(x)
    handle.remove()
    assert torch.equal(trace["layer3"].out, seen["out"]) and torch.equal(trace.output, model(x))
    adds = [op.label for op in trace.ops if "add" in op.func_name]
    assert len(adds) == 8
    tl.trace(model, x, save=tl.module("layer3"))
    tl.func("conv2d"), tl.in_module("layer2")


def test_resnet18_ops_are_what_its_code_does(resnet_trace):
    ops = resnet_trace.ops
    assert len(ops) == 69
    convs = [op for op in ops if op.func_name == "conv2d"]
    assert len(convs) == 20
    assert [op.call_index for op in convs] == list(range(1, 21))
    adds = [op for op in ops if op.func_name in ("add", "add_")]
    assert len(adds) == 8
    for add in adds:
        assert add.inplace
        assert add.output_of == []  # A residual add is no module's output.
        assert add.module.startswith("layer") and add.module.count(".") == 1  # A BasicBlock.
        assert len(add.parents) == 2  # bn2 and the identity (or downsample).
    first_add = adds[0]
    assert first_add.label == "add_1_10"
    assert sorted(first_add.parents) == ["batch_norm_3_9", "max_pool2d_1_4"]
    assert "relu_3_11" in first_add.children
    conv1 = resnet_trace["conv2d_1_1"]
    assert conv1.module == "conv1" and conv1.output_of == ["conv1"]
    assert conv1.params == 64 * 3 * 7 * 7
    assert conv1.args["stride"] == [2, 2] and conv1.args["padding"] == [3, 3]
    assert conv1.inputs[0]["source"] == "input:x"
    assert conv1.inputs[1]["source"] == "param:conv1.weight"
    assert conv1.stats is not None and conv1.stats["nan_count"] == 0
    assert conv1.time_ms is not None and conv1.time_ms >= 0
    fc = resnet_trace.ops[-1]
    assert fc.func_name == "linear" and fc.output_of == ["fc", "<root>"]
    assert fc.modules == ["<root>", "fc"]
    # A module used twice in a block is two passes.
    assert resnet_trace["layer1.0.relu:2"].ops[0].label == "relu_3_11"
    assert [p.address for p in resnet_trace.modules][:3] == ["<root>", "conv1", "bn1"]
    assert resnet_trace["layer3"].type == "Sequential"


def test_labels_are_the_same_on_every_run(tl, resnet, image):
    a = tl.trace(resnet, image, save=None)
    b = tl.trace(resnet, torch.rand(1, 3, 224, 224), save=None)
    assert [op.label for op in a.ops] == [op.label for op in b.ops]
    assert [op.parents for op in a.ops] == [op.parents for op in b.ops]


class Shared(nn.Module):
    """A block called twice, a loop over a layer, an in-place op, a kwargs call, a dict output."""

    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)
        self.loop = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x, scale=1.0, bias=None):
        y = self.block(x)
        y = self.block(torch.tanh(y))
        for _ in range(3):
            y = F.relu(self.loop(y))
        y.mul_(scale)
        if bias is not None:
            y = y + bias
        n = y.sum().item()
        return {"logits": self.head(y), "hidden": y, "n": n}


def test_shared_module_loop_inplace_kwargs_and_dict_output(tl):
    torch.manual_seed(0)
    model = Shared().eval()
    x = torch.randn(2, 4)
    bias = torch.randn(4)
    trace = tl.trace(model, x, scale=2.0, bias=bias)
    assert set(trace.output) == {"logits", "hidden", "n"}
    assert torch.equal(trace.output["logits"], model(x, scale=2.0, bias=bias)["logits"])
    assert sorted(trace.inputs) == ["bias", "x"]
    labels = [op.label for op in trace.ops]
    assert labels[:3] == ["linear_1_1", "tanh_1_2", "linear_2_3"]
    assert trace["block:1"].ops[0].label == "linear_1_1"
    assert trace["block:2"].ops[0].label == "linear_2_3"
    with pytest.raises(KeyError):
        trace["block:3"]
    assert [trace[f"loop:{i}"].ops[0].label for i in (1, 2, 3)] == [
        "linear_3_4", "linear_4_6", "linear_5_8"]
    assert [op.func_name for op in trace.ops if op.func_name.startswith("relu")] == ["relu"] * 3
    mul = next(op for op in trace.ops if op.func_name == "mul_")
    assert mul.inplace and mul.label.startswith("mul_1_")
    # Copy-on-write: the relu before the in-place mul_ kept what it produced.
    last_relu = [op for op in trace.ops if op.func_name == "relu"][-1]
    assert torch.equal(last_relu.out * 2.0, mul.out)
    add = next(op for op in trace.ops if op.func_name == "add")
    assert "input:bias" in [i["source"] for i in add.inputs]
    item = next(op for op in trace.ops if op.func_name == "item")
    assert not item.tensor_output and item.out is None
    head = trace["head"]
    assert torch.equal(head.out, trace.output["logits"])
    assert trace["<root>"].out is not None


def test_selectors_and_combinations(tl, resnet_trace):
    def labels(sel):
        return [op.label for op in resnet_trace.select(sel)]

    assert len(labels(tl.func("conv2d"))) == 20
    assert len(labels(tl.func("conv2d") & tl.in_module("layer2"))) == 5
    assert len(labels(tl.in_module("layer2") & ~tl.func("conv2d"))) == 16 - 5
    assert labels(tl.module("layer3")) == ["relu_13_50"]
    assert labels(tl.module("layer1.0.relu:2")) == ["relu_3_11"]
    assert labels(tl.label("conv2d_1_1", "linear_1_69")) == ["conv2d_1_1", "linear_1_69"]
    assert len(labels(tl.func("relu") | tl.func("add"))) == 17 + 8
    sel = tl.func("conv2d") & ~tl.in_module("layer2") | tl.label("x_1_1")
    assert str(tl.Selector(str(sel))) == str(sel)
    assert resnet_trace.select(str(tl.func("linear")))[0].label == "linear_1_69"
    with pytest.raises(ValueError):
        tl.Selector("func(conv2d")
    with pytest.raises(TypeError):
        tl.trace(nn.Identity(), torch.ones(1), save=3)


def test_save_selectors_keep_only_what_they_select(tl, resnet, image):
    none = tl.trace(resnet, image, save=None)
    assert len(none.ops) == 69 and not any(op.saved for op in none.ops)
    assert none["layer3"].out is None and all(op.stats is not None for op in none.ops)
    convs = tl.trace(resnet, image, save=tl.func("conv2d"))
    assert sorted(op.label for op in convs.ops if op.saved) == sorted(
        op.label for op in convs.ops if op.func_name == "conv2d")
    assert all(op.out.shape == op.shape for op in convs.ops if op.saved)
    layer3 = tl.trace(resnet, image, save=tl.module("layer3"))
    assert [op.label for op in layer3.ops if op.saved] == ["relu_13_50"]
    seen = {}
    handle = resnet.layer3.register_forward_hook(lambda m, a, out: seen.update(out=out))
    resnet(image)
    handle.remove()
    assert torch.equal(layer3["layer3"].out, seen["out"])
    both = tl.trace(resnet, image, save=tl.module("layer3") | tl.func("linear"))
    assert [op.label for op in both.ops if op.saved] == ["relu_13_50", "linear_1_69"]


def test_intervene_replaces_outputs_downstream(tl, resnet, image):
    zero = lambda out: torch.zeros_like(out)  # noqa: E731
    trace = tl.trace(resnet, image, intervene={tl.module("layer4"): zero})
    handle = resnet.layer4.register_forward_hook(lambda m, a, out: torch.zeros_like(out))
    expected = resnet(image)
    handle.remove()
    assert torch.allclose(trace.output, expected)
    assert not torch.allclose(trace.output, resnet(image))
    # Func sites at op end; None leaves the output alone; the saved activation is what flowed.
    calls = []
    t2 = tl.trace(resnet, image, intervene={tl.func("conv2d"): lambda out: calls.append(1)})
    assert len(calls) == 20 and torch.equal(t2.output, resnet(image))
    halve = tl.trace(resnet, image, intervene={tl.label("conv2d_1_1"): lambda out: out * 0.5})
    plain = tl.trace(resnet, image, save=tl.label("conv2d_1_1"))
    assert torch.allclose(halve["conv2d_1_1"].out, plain["conv2d_1_1"].out * 0.5)
    assert len(halve.ops) == 69  # The intervention's own ops are not recorded.

    def boom(out):
        raise ValueError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tl.trace(resnet, image, intervene={tl.func("linear"): boom})


def test_export_load_and_activations_round_trip(tl, resnet_trace, tmp_path):
    path = tmp_path / "ops.json"
    resnet_trace.export(str(path))
    doc = json.loads(path.read_text())
    assert doc["format"] == "tracetorch.ops" and doc["version"] == 1
    loaded = tl.load(str(path))
    assert [op.label for op in loaded.ops] == [op.label for op in resnet_trace.ops]
    assert [op.parents for op in loaded.ops] == [op.parents for op in resnet_trace.ops]
    assert [op.module for op in loaded.ops] == [op.module for op in resnet_trace.ops]
    assert [op.args for op in loaded.ops] == [op.args for op in resnet_trace.ops]
    assert loaded["layer3"].out is None and loaded.output is None
    assert loaded.to_json() == resnet_trace.to_json()
    acts = tmp_path / "acts.pt"
    resnet_trace.save_activations(str(acts))
    saved = torch.load(str(acts))
    assert len(saved) == 69 and torch.equal(saved["conv2d_1_1"], resnet_trace["conv2d_1_1"].out)
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "tracetorch.ops", "version": 99}')
    with pytest.raises(ValueError, match="unsupported version"):
        tl.load(str(bad))
    with pytest.raises(FileNotFoundError):
        tl.load(str(tmp_path / "missing.json"))


def test_hooks_are_removed_even_when_the_forward_raises(tl):
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x) @ torch.ones(3, 3)

    model = Bad()
    with pytest.raises(RuntimeError):
        tl.trace(model, torch.ones(1, 2))
    assert not model._forward_hooks and not model.fc._forward_pre_hooks
    trace = tl.trace(model.fc, torch.ones(1, 2))  # No capture left active.
    assert [op.label for op in trace.ops] == ["linear_1_1"]


def test_cli_lists_an_exported_trace(resnet_trace, tmp_path):
    import os
    import subprocess

    binary = os.environ.get("TRACETORCH_BIN")
    if not binary:
        pytest.skip("TRACETORCH_BIN is not set (ctest sets it)")
    path = tmp_path / "ops.json"
    resnet_trace.export(str(path))
    run = subprocess.run([binary, "ops", str(path), "--func", "conv2d", "--in-module", "layer2",
                          "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(run.stdout)
    assert doc["count"] == 5
    assert [op["label"] for op in doc["ops"]] == [
        op.label for op in resnet_trace.select("func('conv2d') & in_module('layer2')")]
    table = subprocess.run([binary, "ops", str(path), "--label", "add_1_10", "--color=never"],
                           capture_output=True, text=True, check=True).stdout
    assert "add_1_10" in table and "layer1.0" in table and "1 of 69 ops" in table


def test_torchscript_models_trace_with_module_containment(tl, resnet, image, resnet_trace):
    scripted = torch.jit.script(resnet)
    trace = tl.trace(scripted, image)
    assert trace.source == "torchscript" and trace.model_name == "ResNet"
    # The same ops, labels, modules and data flow as the eager model.
    assert [op.label for op in trace.ops] == [op.label for op in resnet_trace.ops]
    assert [op.module for op in trace.ops] == [op.module for op in resnet_trace.ops]
    assert [op.parents for op in trace.ops] == [op.parents for op in resnet_trace.ops]
    assert [op.output_of for op in trace.ops if op.func_name == "conv2d"] == [
        op.output_of for op in resnet_trace.ops if op.func_name == "conv2d"]
    assert all(op.output_of == [] for op in trace.ops if op.func_name == "add_")
    assert torch.equal(trace["layer3"].out, resnet_trace["layer3"].out)
    assert torch.equal(trace.output, resnet(image))
    assert len(trace.select(tl.func("conv2d") & tl.in_module("layer2"))) == 5
    only = tl.trace(scripted, image, save=tl.module("layer3"))
    assert [op.label for op in only.ops if op.saved] == ["relu_13_50"]
    # torch.jit.trace output records what the traced graph runs (_convolution for conv2d).
    traced = tl.trace(torch.jit.trace(resnet, image), image)
    assert len([op for op in traced.ops if op.func_name == "_convolution"]) == 20
    assert [op.module for op in traced.ops] == [op.module for op in resnet_trace.ops]


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(3, 3)
        self.other = nn.Linear(3, 3)

    def forward(self, x):
        return self.block(self.other(self.block(x)))


def test_torchscript_shared_module_is_two_passes(tl):
    model = torch.jit.script(Twice())
    trace = tl.trace(model, torch.randn(2, 3))
    assert [op.module for op in trace.ops] == ["block:1", "other", "block:2"]
    assert trace["block:2"].ops[0].label == "linear_3_3"
    assert trace["block:2"].out is not None
    assert trace.ops[-1].output_of == ["block:2", "<root>"]


def test_nan_origin_is_the_op_where_nan_entered(tl):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
    assert tl.trace(model, torch.randn(2, 4)).nan_origin is None
    with torch.no_grad():
        model[2].weight[0, 0] = float("nan")
    trace = tl.trace(model, torch.randn(2, 4))
    assert trace.nan_origin.label == "linear_2_3"
    assert trace["linear_2_3"].stats["nan_count"] > 0
    bad_input = torch.randn(2, 4)
    bad_input[0, 0] = float("inf")
    assert tl.trace(model, bad_input).nan_origin is None  # It came with the input.
