"""The model zoo of the non-finite tests: models people train today, built from torch and
torchvision alone (no downloads), small enough for CI on two cores, each with one planted fault.

A `Case` is a model, its batches, its loss and how it trains (steps, gradient accumulation,
clipping, bf16 autocast, evaluation only). `train(case, fault, **session)` runs it under a
`TraceSession` with the fault planted (or none) and returns the session. A `Fault` says what is
planted where and at which forward step (the trace's step: one per call of the root model), and
what the trace must name: the layer, the op, its module and the step.

Faults are planted without touching the models' code:
- an op after a module's own forward (`Fault.module`), at one step: the module's forward is
  replaced, on the instance, by one that runs the original and then the fault's function on its
  output, so that the fault's ops run inside that module's call (as a bug in its code would);
- a parameter set to NaN after the optimizer step that precedes the fault's step.

Written for torch 1.13 and 2.x alike: where an API or a code path differs (the fast path of
nn.TransformerEncoder), the tests branch on what ran, never skip.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
import torchvision

import tracetorch as tl

VOCAB, WIDTH, HEADS, SEQ, BATCH = 48, 32, 4, 12, 3


# ---- Faults --------------------------------------------------------------------------------------


def _log_negative(h: torch.Tensor) -> torch.Tensor:
    return h + torch.log(-h.abs() - 1.0)  # The log of a negative: NaN everywhere.


def _sqrt_negative(h: torch.Tensor) -> torch.Tensor:
    return h + torch.sqrt(-h.abs() - 1.0)


def _bf16_overflow(h: torch.Tensor) -> torch.Tensor:
    assert h.dtype == torch.bfloat16, h.dtype  # Under autocast: the Linear's output is bf16.
    return h + torch.exp(h * 100.0)  # exp overflows bf16 above ~88.7: +Inf.


def _nan_in_backward(h: torch.Tensor) -> torch.Tensor:
    # The classic: log guarded by `where`. The forward is finite (log(0) = -inf is dropped by the
    # where), the backward is 0 * inf = NaN at every h <= 0.
    return torch.where(h > 0, torch.log(h * (h > 0)), torch.zeros_like(h))


@dataclass
class Fault:
    kind: str  # "log_negative", "sqrt_negative", "bf16_overflow", "grad_nan", "poisoned_param".
    step: int  # The forward step (root call) where it first shows.
    module: str = ""  # Where an op fault runs (a module path).
    param: str = ""  # poisoned_param: the parameter set to NaN.
    # What the trace must name.
    layer: str = ""
    op_func: str = ""
    op_module: str = ""
    backward: bool = False
    is_nan: bool = True

    @property
    def fn(self) -> Callable[[torch.Tensor], torch.Tensor]:
        return {"log_negative": _log_negative, "sqrt_negative": _sqrt_negative,
                "bf16_overflow": _bf16_overflow, "grad_nan": _nan_in_backward}[self.kind]


class _Planter:
    """Plants a fault into a model: an op fault wraps its module's forward on the instance (before
    any session wraps it), a parameter fault is applied after an optimizer step."""

    def __init__(self, model: nn.Module, fault: Optional[Fault]) -> None:
        self.fault = fault
        self.step = -1  # The forward step now running.
        self.model = model
        if fault is None or fault.kind == "poisoned_param":
            return
        module = model.get_submodule(fault.module)
        original = module.forward
        planter = self

        def forward(*args, **kwargs):
            out = original(*args, **kwargs)
            if planter.step == fault.step:
                out = fault.fn(out)
            return out

        module.forward = forward

    def poison_if_due(self, next_forward_step: int) -> None:
        f = self.fault
        if f is None or f.kind != "poisoned_param" or next_forward_step != f.step:
            return
        with torch.no_grad():
            self.model.get_parameter(f.param).view(-1)[0] = float("nan")


# ---- Models --------------------------------------------------------------------------------------


class MLP(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.proj(self.act(self.fc(x)))


class Block(nn.Module):
    """A pre-norm GPT block: causal self-attention through nn.MultiheadAttention, GELU MLP,
    residual adds."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x, mask):
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        return x + self.mlp(self.ln2(x))


class Decoder(nn.Module):
    """A small GPT: token and position embeddings, causal blocks, final norm, a head tied to the
    token embedding. `mask`: "additive" (0 / -inf, built as every GPT builds it) or "bool"."""

    def __init__(self, mask: str = "additive", tied: bool = True, layers: int = 2,
                 checkpointed: bool = False, vocab: int = VOCAB, width: int = WIDTH,
                 heads: int = HEADS, seq: int = SEQ) -> None:
        super().__init__()
        self.mask_kind = mask
        self.checkpointed = checkpointed
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        if tied:
            self.head.weight = self.tok.weight

    def forward(self, idx):
        t = idx.shape[1]
        if self.mask_kind == "additive":
            mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        else:
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for block in self.blocks:
            if self.checkpointed and torch.is_grad_enabled():
                x = torch.utils.checkpoint.checkpoint(block, x, mask, use_reentrant=True)
            else:
                x = block(x, mask)
        return self.head(self.ln_f(x))


class Encoder(nn.Module):
    """nn.TransformerEncoder over a projected sequence, with a causal mask from
    nn.Transformer.generate_square_subsequent_mask and a key padding mask; classifies the first
    position (never padded)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(8, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=2 * WIDTH, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(WIDTH, 5)

    def forward(self, x, padding, causal: bool = True):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if causal else None
        h = self.encoder(self.inp(x), mask=mask, src_key_padding_mask=padding)
        return self.head(h[:, 0])


class Seq2Seq(nn.Module):
    """An encoder-decoder nn.Transformer with source/target embeddings and a causal target mask."""

    def __init__(self) -> None:
        super().__init__()
        self.src = nn.Embedding(VOCAB, WIDTH)
        self.tgt = nn.Embedding(VOCAB, WIDTH)
        self.transformer = nn.Transformer(WIDTH, HEADS, num_encoder_layers=1,
                                          num_decoder_layers=1, dim_feedforward=2 * WIDTH,
                                          dropout=0.0, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.head(self.transformer(self.src(src), self.tgt(tgt), tgt_mask=mask))


class PackedLSTM(nn.Module):
    """An LSTM over packed variable-length sequences (padding index 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, WIDTH, padding_idx=0)
        self.lstm = nn.LSTM(WIDTH, WIDTH, batch_first=True)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, idx, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(idx), lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=idx.shape[1])
        return self.head(torch.tanh(self.proj(h)))


class Expert(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)

    def forward(self, x):
        return self.out(F.gelu(self.fc(x)))


class MoE(nn.Module):
    """Top-k routing: integer expert indices from topk, tokens gathered per expert, their
    weighted outputs index_add-ed back, and a load count by scatter_add for the balance loss."""

    def __init__(self, d: int, experts: int = 4, k: int = 2) -> None:
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, experts)
        self.experts = nn.ModuleList([Expert(d) for _ in range(experts)])

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        probs = self.router(flat).softmax(-1)
        weights, index = probs.topk(self.k, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = (index == e).nonzero(as_tuple=True)
            y = expert(flat[token]) * weights[token, slot].unsqueeze(-1)
            out = out.index_add(0, token, y)
        load = torch.zeros(len(self.experts)).scatter_add(
            0, index.reshape(-1), torch.ones(index.numel()))
        balance = (load / index.numel() * probs.mean(0)).sum() * len(self.experts)
        return out.reshape(x.shape), balance


class MoEModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.moe = MoE(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, idx):
        h, balance = self.moe(self.tok(idx))
        return self.head(h), balance


# ---- Batches and losses --------------------------------------------------------------------------


def _gen(step: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 + step)


def _tokens(step: int, low: int = 0) -> torch.Tensor:
    return torch.randint(low, VOCAB, (BATCH, SEQ), generator=_gen(step))


def _lm_batch(step: int):
    idx = _tokens(step)
    return (idx,), {}, torch.roll(idx, -1, dims=1)


def _lm_loss(out, target):
    return F.cross_entropy(out.reshape(-1, VOCAB).float(), target.reshape(-1))


def _padding() -> torch.Tensor:
    pad = torch.zeros(BATCH, SEQ, dtype=torch.bool)
    pad[1, SEQ - 4:] = True  # The second sequence is 4 shorter.
    return pad


def _encoder_batch(step: int):
    g = _gen(step)
    x = torch.randn(BATCH, SEQ, 8, generator=g)
    return (x, _padding()), {}, torch.randint(0, 5, (BATCH,), generator=g)


def _encoder_eval_batch(step: int):
    args, kwargs, target = _encoder_batch(step)
    return args, {"causal": False}, target


def _seq2seq_batch(step: int):
    src, tgt = _tokens(step), _tokens(step + 500)
    return (src, tgt), {}, torch.roll(tgt, -1, dims=1)


def _lstm_batch(step: int):
    idx = _tokens(step, low=1)
    lengths = torch.tensor([SEQ, SEQ - 5, SEQ - 2])
    for i, n in enumerate(lengths.tolist()):
        idx[i, n:] = 0
    return (idx, lengths), {}, torch.roll(idx, -1, dims=1)


def _lstm_loss(out, target):
    return F.cross_entropy(out.reshape(-1, VOCAB), target.reshape(-1), ignore_index=0)


def _moe_loss(out, target):
    logits, balance = out
    return _lm_loss(logits, target) + 0.01 * balance


def _image_batch(step: int):
    # Batch 4: resnet18's last BatchNorm sees 1x1 maps, and over 2 values per channel its
    # gradients blow the weights up within a step (the trace says so: exploding variance).
    g = _gen(step)
    return (torch.randn(4, 3, 32, 32, generator=g),), {}, torch.randint(0, 10, (4,), generator=g)


def _class_loss(out, target):
    return F.cross_entropy(out, target)


# ---- Cases ---------------------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    build: Callable[[], nn.Module]
    batch: Callable[[int], Tuple[tuple, dict, Any]]
    loss: Callable[[Any, Any], torch.Tensor]
    fault: Fault
    optimizer_steps: int = 4
    accumulate: int = 1  # Forward/backward passes per optimizer step.
    clip: Optional[float] = None
    bf16: bool = False  # torch.autocast("cpu", dtype=torch.bfloat16) around forward and loss.
    train: bool = True  # False: eval() and no_grad, forward only (one "optimizer step" = a call).
    lr: float = 0.01
    additive_mask: bool = False  # A layer receives a 0 / -inf mask (the healthy run checks it).

    @property
    def forward_steps(self) -> int:
        return self.optimizer_steps * self.accumulate


def _decoder_fault(kind: str, module: str, step: int, op_func: str, **kw) -> Fault:
    return Fault(kind, step, module=module, layer=module, op_func=op_func, op_module=module, **kw)


CASES: List[Case] = [
    Case("decoder_additive_mask_tied", lambda: Decoder("additive", tied=True), _lm_batch,
         _lm_loss, _decoder_fault("log_negative", "blocks.1.mlp", 2, "log"), additive_mask=True),
    Case("decoder_bool_mask", lambda: Decoder("bool", tied=False), _lm_batch, _lm_loss,
         _decoder_fault("grad_nan", "blocks.0.mlp", 1, "log", backward=True)),
    Case("transformer_encoder", Encoder, _encoder_batch, _class_loss,
         Fault("poisoned_param", 2, param="encoder.layers.1.linear1.weight",
               layer="encoder.layers.1.linear1", op_func="linear",
               op_module="encoder.layers.1.linear1"), additive_mask=True),
    # Evaluation with a key padding mask: nn.TransformerEncoder's fast path (nested tensors and a
    # fused layer op) where the torch version takes it.
    Case("transformer_encoder_eval_fastpath", Encoder, _encoder_eval_batch, _class_loss,
         Fault("poisoned_param", 1, param="encoder.layers.1.linear1.weight",
               layer="encoder.layers.1", op_func="_transformer_encoder_layer_fwd",
               op_module="encoder.layers.1"),
         optimizer_steps=3, train=False),
    Case("transformer_seq2seq", Seq2Seq, _seq2seq_batch, _lm_loss,
         _decoder_fault("sqrt_negative", "transformer.decoder.layers.0.linear2", 2, "sqrt"),
         additive_mask=True),
    Case("lstm_packed", PackedLSTM, _lstm_batch, _lstm_loss,
         _decoder_fault("sqrt_negative", "proj", 1, "sqrt")),
    Case("moe_top2", MoEModel, _lm_batch, _moe_loss,
         _decoder_fault("log_negative", "moe.experts.2", 2, "log")),
    Case("decoder_checkpointed", lambda: Decoder("additive", checkpointed=True), _lm_batch,
         _lm_loss, _decoder_fault("log_negative", "blocks.1.mlp", 2, "log"), additive_mask=True),
    Case("decoder_accumulate_clip", lambda: Decoder("additive"), _lm_batch, _lm_loss,
         # Two passes per optimizer step: the weight poisoned after optimizer step 1 is read at
         # forward step 4.
         Fault("poisoned_param", 4, param="blocks.0.mlp.fc.weight", layer="blocks.0.mlp.fc",
               op_func="linear", op_module="blocks.0.mlp.fc"),
         optimizer_steps=3, accumulate=2, clip=0.5, additive_mask=True),
    Case("decoder_autocast_bf16", lambda: Decoder("additive"), _lm_batch, _lm_loss,
         _decoder_fault("bf16_overflow", "blocks.1.mlp.fc", 2, "exp", is_nan=False), bf16=True,
         additive_mask=True),
    Case("resnet18", lambda: torchvision.models.resnet18(num_classes=10), _image_batch,
         _class_loss,
         Fault("poisoned_param", 1, param="layer3.0.conv1.weight", layer="layer3.0.conv1",
               op_func="conv2d", op_module="layer3.0.conv1"), optimizer_steps=3, lr=1e-3),
    Case("vit", lambda: torchvision.models.VisionTransformer(
        image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
        num_classes=10), _image_batch, _class_loss,
         _decoder_fault("log_negative", "encoder.layers.encoder_layer_1.mlp", 2, "log"),
         optimizer_steps=3),
]

BY_NAME = {c.name: c for c in CASES}


def build(case: Case, fault: Optional[Fault]) -> Tuple[nn.Module, _Planter]:
    torch.manual_seed(0)
    model = case.build()
    if not case.train:
        model.eval()
    return model, _Planter(model, fault)


def _autocast(case: Case):
    if case.bf16:
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def run(case: Case, model: nn.Module, planter: _Planter) -> None:
    """The case's training (or evaluation) loop; the caller wraps it in a session."""
    opt = torch.optim.SGD(model.parameters(), lr=case.lr) if case.train else None
    step = 0
    for _ in range(case.optimizer_steps):
        if opt is not None:
            opt.zero_grad()
        for _ in range(case.accumulate):
            planter.poison_if_due(step)
            planter.step = step
            args, kwargs, target = case.batch(step)
            if not case.train:
                with torch.no_grad():
                    model(*args, **kwargs)
                step += 1
                continue
            with _autocast(case):
                loss = case.loss(model(*args, **kwargs), target)
            (loss / case.accumulate).backward()
            step += 1
        if opt is not None:
            if case.clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), case.clip)
            opt.step()


def train(case: Case, fault: Optional[Fault] = None, **session_kwargs) -> tl.TraceSession:
    model, planter = build(case, fault)
    with tl.TraceSession(model, model_name=case.name, **session_kwargs) as session:
        run(case, model, planter)
    session.zoo_model = model  # For the tests' own checks.
    return session


def first_inputs(case: Case) -> Tuple[tuple, dict]:
    args, kwargs, _ = case.batch(0)
    return args, kwargs
