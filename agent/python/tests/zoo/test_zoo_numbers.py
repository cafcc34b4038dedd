"""Numbers a user can trust on the zoo's models: statistics of bfloat16/float16 tensors, forward
counts under activation checkpointing, parameter counts of tied weights."""

from __future__ import annotations

import pytest
import torch

import tracetorch as tl
from tracetorch import _C
import zoo_models as zoo

REL = 1e-3  # The bound; the float32 accumulation is far inside it.


def _torch_stats(t: torch.Tensor) -> dict:
    """torch's own statistics of `t`, computed in float32 over its finite elements."""
    x = t.float()
    finite = x[torch.isfinite(x)]
    return {"mean": finite.mean().item(), "std": finite.std(unbiased=False).item(),
            "min": finite.min().item(), "max": finite.max().item(),
            "nan_count": int(torch.isnan(x).sum()), "inf_count": int(torch.isinf(x).sum())}


def _close(got: float, want: float, scale: float) -> bool:
    # Relative to the tensor's own scale: a mean near 0 is judged against its spread.
    return abs(got - want) <= REL * max(abs(want), scale)


def _tensors(dtype):
    g = torch.Generator().manual_seed(7)
    base = torch.randn(64, 48, generator=g)
    yield "contiguous", base.to(dtype)
    yield "transposed", base.to(dtype).t()
    yield "channels_last", torch.randn(4, 8, 16, 16, generator=g).to(dtype).to(
        memory_format=torch.channels_last)
    yield "large", torch.randn(300_000, generator=g).to(dtype)  # Split over threads.
    yield "offset", (torch.randn(5000, generator=g) * 0.01 + 100.0).to(dtype)  # |mean| >> std.
    with_inf = base.clone()
    with_inf[0, :5] = float("-inf")
    with_inf[1, 0] = float("nan")
    yield "nonfinite", with_inf.to(dtype)
    yield "expanded", torch.randn(1, 48, generator=g).to(dtype).expand(64, 48)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_low_precision_statistics_equal_torchs_in_float32(dtype):
    for name, t in _tensors(dtype):
        got = _C.compute_tensor_stats(t)
        want = _torch_stats(t)
        scale = want["std"] if want["std"] > 0 else 1.0
        for key in ("mean", "min", "max"):
            assert _close(got[key], want[key], scale), (name, key, got[key], want[key])
        assert _close(got["std"], want["std"], 0.0), (name, "std", got["std"], want["std"])
        assert got["nan_count"] == want["nan_count"] and got["inf_count"] == want["inf_count"]


def test_autocast_layer_statistics_are_the_bf16_outputs_statistics():
    """Under bf16 autocast the recorded statistics of a Linear's bf16 output are torch's own
    (float32) statistics of that very tensor."""
    case = zoo.BY_NAME["decoder_autocast_bf16"]
    model, planter = zoo.build(case, None)
    seen = {}
    model.blocks[1].mlp.fc.register_forward_hook(lambda m, i, o: seen.update(out=o.detach()))
    with tl.TraceSession(model) as session:
        zoo.run(case, model, planter)
    layer = next(l for l in session.record.layers if l.full_name == "blocks.1.mlp.fc")
    out = layer.outputs[0]
    assert out.dtype == "torch.bfloat16"
    want = _torch_stats(seen["out"])
    for key in ("mean", "std", "min", "max"):
        assert _close(getattr(out.stats, key), want[key], want["std"]), key


def test_forward_count_under_checkpointing_counts_forwards_not_recomputations():
    case = zoo.BY_NAME["decoder_checkpointed"]
    session = zoo.train(case)
    layers = {l.full_name: l for l in session.record.layers}
    steps = case.forward_steps
    for name in ("blocks.0", "blocks.0.attn", "blocks.1.mlp.fc", "ln_f", "head"):
        assert layers[name].forward_count == steps, name
    # The backward of a checkpointed block runs through its recomputation: it is measured.
    for name in ("blocks.0", "blocks.1.mlp.fc", "head"):
        assert layers[name].backward_count == steps, name
    # Each step recomputes both blocks and their children (block, ln1, attn, ln2, mlp, fc, act,
    # proj): counted apart.
    per_block = 8
    assert session.record.metadata.extra["recomputed_calls"] == steps * 2 * per_block
    # Without checkpointing: the same counts, and no recomputation.
    plain = zoo.train(zoo.BY_NAME["decoder_additive_mask_tied"])
    assert {l.full_name: l.forward_count for l in plain.record.layers} == \
        {l.full_name: l.forward_count for l in session.record.layers}
    assert "recomputed_calls" not in plain.record.metadata.extra


def test_tied_weights_are_counted_once():
    case = zoo.BY_NAME["decoder_additive_mask_tied"]
    model, planter = zoo.build(case, None)
    assert model.head.weight is model.tok.weight
    with tl.TraceSession(model) as session:
        zoo.run(case, model, planter)
    layers = {l.full_name: l for l in session.record.layers}
    assert layers["tok"].params == zoo.VOCAB * zoo.WIDTH
    assert layers["head"].params == 0  # Its weight is the embedding's, counted there.
    total = sum(l.params for l in session.record.layers)
    # The model's parameters, each once; nn.MultiheadAttention reads its out_proj's weights without
    # calling the module, so out_proj never runs and is no traced layer.
    never_ran = sum(p.numel() for b in model.blocks for p in b.attn.out_proj.parameters())
    assert "blocks.0.attn.out_proj" not in layers
    assert total == sum(p.numel() for p in model.parameters()) - never_ran
