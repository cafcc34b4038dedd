"""Models as people train them with torch 2, traced: a causal decoder on token ids using
F.scaled_dot_product_attention, nn.TransformerEncoder on its fast path (with a padding mask, so
nested tensors), autocast bf16 on the CPU, and two-process DDP (gloo) with each rank streaming as
its rank to one daemon. Each checks what a user reads off the trace against what the model did.

The SDPA test needs torch >= 2 (it is skipped on 1.13); the others run under both torches.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tracetorch as tl
from tracetorch import TraceSession
from torch2_support import needs, needs_torch2

HERE = Path(__file__).resolve().parent


def layers(session) -> dict:
    return {l.full_name: l for l in session.record.layers}


# ---- a causal decoder with F.scaled_dot_product_attention ----------------------------------------


class SdpaAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(d, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class SdpaDecoder(nn.Module):
    def __init__(self, vocab: int = 64, d: int = 32, blocks: int = 2) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            nn.ModuleDict({"ln1": nn.LayerNorm(d), "attn": SdpaAttention(d, 4),
                           "ln2": nn.LayerNorm(d),
                           "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(),
                                                nn.Linear(4 * d, d))})
            for _ in range(blocks))
        self.head = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.blocks:
            x = x + blk["attn"](blk["ln1"](x))
            x = x + blk["mlp"](blk["ln2"](x))
        return self.head(x)


def _decoder_steps(model, data, traced: bool):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, session = [], None
    ctx = TraceSession(model) if traced else None
    if ctx is not None:
        session = ctx.__enter__()
    try:
        for ids in data:
            opt.zero_grad()
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return losses, session


def test_sdpa_decoder_trains_traced_exactly_as_untraced():
    needs_torch2()
    torch.manual_seed(0)
    data = [torch.randint(0, 64, (4, 17)) for _ in range(3)]
    torch.manual_seed(1)
    plain = SdpaDecoder()
    torch.manual_seed(1)
    traced = SdpaDecoder()
    plain_losses, _ = _decoder_steps(plain, data, traced=False)
    traced_losses, session = _decoder_steps(traced, data, traced=True)
    assert traced_losses == plain_losses  # Bit-identical: tracing changes nothing.
    assert session.hook_errors == 0 and session.steps == 3
    by_name = layers(session)
    for name in ("emb", "blocks.0.attn", "blocks.0.attn.qkv", "blocks.1.mlp.1", "head"):
        assert by_name[name].forward_count == 3 and by_name[name].backward_count == 3, name
    attn = by_name["blocks.1.attn"]
    assert attn.outputs[0].shape == [4, 16, 32] and attn.grad_norm > 0
    ids = by_name["emb"].inputs[0]
    assert ids.dtype == "torch.int64" and ids.stats.nan_count == 0
    # A healthy model raises no false alarm.
    assert [a for a in session.anomalies if "nan" in str(a.type).lower()
            or "inf" in str(a.type).lower()] == []


def test_sdpa_is_one_op_and_a_corrupt_embedding_row_is_found():
    needs_torch2()
    torch.manual_seed(0)
    model = SdpaDecoder().eval()
    ids = torch.randint(0, 64, (2, 9))
    trace = tl.trace(model, ids)
    sdpa = [op for op in trace.ops if op.func_name == "scaled_dot_product_attention"]
    assert [op.module for op in sdpa] == ["blocks.0.attn", "blocks.1.attn"]
    assert list(sdpa[0].shape) == [2, 4, 9, 8]
    # A NaN row in the embedding table (a corrupt checkpoint): ops="on_nan" names the lookup.
    with torch.no_grad():
        model.emb.weight[int(ids[1, 4])] = float("nan")
    with TraceSession(model, ops="on_nan") as session, torch.no_grad():
        model(ids)
    origin = session.record.metadata.nan_origin
    assert origin is not None and origin.op_func == "embedding" and origin.op_module == "emb"


# ---- nn.TransformerEncoder's fast path -----------------------------------------------------------


def _encoder():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.1,
                                       batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True).eval()


def test_transformer_encoder_fast_path_is_kept_and_traced():
    model = _encoder()
    x = torch.randn(3, 10, 32)
    pad = torch.zeros(3, 10, dtype=torch.bool)
    pad[1, 6:] = True  # Padding: the fast path runs the layers on nested tensors.
    pad[2, 3:] = True
    with torch.no_grad():
        plain = model(x, src_key_padding_mask=pad)
        with TraceSession(model) as session:
            out = model(x, src_key_padding_mask=pad)
        trace = tl.trace(model, x, src_key_padding_mask=pad)
    assert torch.equal(out, plain)  # The same kernels ran: nothing slowed down or changed.
    assert session.hook_errors == 0
    # The fast path was taken under tracing: the fused encoder-layer kernel is an op, per layer.
    fused = [op for op in trace.ops if op.func_name == "_transformer_encoder_layer_fwd"]
    assert [op.module for op in fused] == ["layers.0", "layers.1"], [o.func_name for o in trace.ops]
    by_name = layers(session)
    for name in ("layers.0", "layers.1"):
        assert by_name[name].forward_count == 1
    # The fused kernel bypasses the sub-modules: they did not run, and the trace does not say they
    # did.
    for name in ("layers.0.self_attn", "layers.0.linear1", "layers.1.norm2"):
        assert name not in by_name or by_name[name].forward_count == 0, name
    # The encoder's output is what the model returned (padded back to a dense tensor).
    enc_out = by_name["layers.1"].outputs
    assert enc_out, "the last layer's output was not recorded"


def test_transformer_encoder_training_path_records_the_sublayers():
    model = _encoder().train()
    x = torch.randn(3, 10, 32)
    with TraceSession(model) as session:
        model(x).sum().backward()
    assert session.hook_errors == 0
    by_name = layers(session)
    for name in ("layers.0.self_attn", "layers.0.linear1", "layers.1.norm2"):
        assert by_name[name].forward_count == 1 and by_name[name].backward_count == 1, name


# ---- autocast bf16 on the CPU --------------------------------------------------------------------


def test_autocast_bf16_on_cpu_records_bf16_with_exact_statistics():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 8 * 8, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    seen = {}
    model[3].register_forward_hook(lambda m, i, o: seen.__setitem__("fc", o.detach().clone()))
    with TraceSession(model) as session:
        for _ in range(2):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(x)
            F.cross_entropy(out.float(), y).backward()
            opt.step()
    assert session.hook_errors == 0
    by_name = layers(session)
    fc = by_name["3"]
    assert fc.outputs[0].dtype == "torch.bfloat16" and seen["fc"].dtype == torch.bfloat16
    # Autocast casts inside the op: the conv takes the float32 batch and gives bf16 onwards.
    assert by_name["0"].inputs[0].dtype == "torch.float32"
    assert by_name["0"].outputs[0].dtype == fc.inputs[0].dtype == "torch.bfloat16"
    ref = seen["fc"].double()
    stats = fc.outputs[0].stats
    assert stats.mean == pytest.approx(ref.mean().item(), rel=1e-6, abs=1e-9)
    assert stats.max == pytest.approx(ref.max().item()) and stats.min == pytest.approx(ref.min().item())
    assert fc.backward_count == 2 and fc.grad_norm is not None and math.isfinite(fc.grad_norm)


# ---- two-process DDP on the CPU, each rank streaming as its rank ---------------------------------


def test_ddp_two_ranks_stream_as_their_ranks_to_one_daemon(tmp_path):
    daemon_bin, cli_bin = os.environ.get("TRACETORCHD_BIN"), os.environ.get("TRACETORCH_BIN")
    needs(bool(daemon_bin and cli_bin), "TRACETORCHD_BIN / TRACETORCH_BIN not set (run via ctest)")
    if not torch.distributed.is_available():
        pytest.skip("this torch was built without torch.distributed")
    from test_daemon_stream import Daemon, poll
    root = Path(tempfile.mkdtemp(prefix="ttd-", dir="/tmp"))
    daemon = Daemon(root)
    daemon.start()
    try:
        init = tmp_path / "init"
        procs = []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                       TRACETORCH_JOB="ddp-test", MASTER_ADDR="127.0.0.1")
            env.pop("TRACETORCH_DAEMON", None)
            procs.append(subprocess.Popen(
                [sys.executable, str(HERE / "ddp_train.py"), str(init), daemon.socket],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
        results = []
        for p in procs:
            out, err = p.communicate(timeout=180)
            assert p.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
        r0, r1 = sorted(results, key=lambda r: r["rank"])
        for r in (r0, r1):
            assert r["traced_losses"] == r["plain_losses"], r["rank"]
            assert r["plain_checksum"] == r["checksum"] and r["hook_errors"] == 0
            assert r["dropped_events"] == 0
            assert r["layers"]["module.0"][:2] == [3, 3] and r["layers"]["module.2"][:2] == [3, 3]
        assert r0["checksum"] == r1["checksum"]  # The gradients were all-reduced.
        assert r0["layers"]["module.0"][2] != r1["layers"]["module.0"][2]  # Each its own data.
        ids = {r0["session_id"]: 0, r1["session_id"]: 1}

        def finished():
            ss = [s for s in daemon.sessions() if s["session_id"] in ids]
            return len(ss) == 2 and all(s["state"] == "finished" for s in ss) and ss

        for s in poll(finished, 15, "both ranks' sessions to finish"):
            assert s["rank"] == ids[s["session_id"]] and s["world_size"] == 2
            assert s["job_id"] == "ddp-test" and s["model"] == "DDPNet"
            assert s["dropped_events"] == 0 and s["events"] > 0
    finally:
        daemon.stop()
        import shutil
        shutil.rmtree(root, ignore_errors=True)
