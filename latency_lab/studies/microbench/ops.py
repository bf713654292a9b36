"""Notebook 04's ops: the seed trace's ops as functions of keyword arguments (``OPS``: each with its place
in one Llama forward step and its argument shapes from the model's sizes), the sizes for a size label
(``size_tokens``, ``dims``), the table of shapes per size, and each op's seeded inputs (``make_inputs``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ...core.parameters import Params
from .rows import ShapeRow


# The ops, each with keyword arguments only (``executors.prepare`` calls fn(**kwargs)).
def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def silu(x):
    return F.silu(x)


def linear(x, w):
    return F.linear(x, w)


def matmul(a, b):
    return torch.matmul(a, b)


def embedding(ids, w):
    return F.embedding(ids, w)


def triu(x):
    return torch.triu(x, diagonal=1)


def rms_norm(x, w, eps: float):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@dataclass(frozen=True)
class Dims:
    """The seed model's sizes that the ops are shaped by, for ``tokens`` tokens per sequence."""

    batch: int
    tokens: int
    hidden: int
    intermediate: int
    head_dim: int
    vocab: int
    eps: float
    rope_theta: float


@dataclass(frozen=True)
class Op:
    fn: Callable
    where: str  # where the op sits in one Llama forward step
    shapes: Callable[[Dims], dict]  # argument name -> shape (or a scalar)
    float32: bool = False  # the model runs it in float32 whatever the dtype


OPS: dict[str, Op] = {
    "add": Op(
        add,
        "residual add: hidden + attention or MLP output",
        lambda d: {"a": (d.batch, d.tokens, d.hidden), "b": (d.batch, d.tokens, d.hidden)},
    ),
    "mul": Op(
        mul,
        "SwiGLU: silu(gate) * up",
        lambda d: {"a": (d.batch, d.tokens, d.intermediate), "b": (d.batch, d.tokens, d.intermediate)},
    ),
    "silu": Op(silu, "SwiGLU activation on the gate projection", lambda d: {"x": (d.batch, d.tokens, d.intermediate)}),
    "linear": Op(
        linear,
        "MLP gate / up projection (hidden -> intermediate)",
        lambda d: {"x": (d.batch, d.tokens, d.hidden), "w": (d.intermediate, d.hidden)},
    ),
    "matmul": Op(
        matmul,
        "rotary embedding: inv_freq @ position_ids (float32, as in HF Llama)",
        lambda d: {"a": (d.batch, d.head_dim // 2, 1), "b": (d.batch, 1, d.tokens)},
        float32=True,
    ),
    "embedding": Op(
        embedding,
        "token embedding lookup (vocab x hidden table)",
        lambda d: {"ids": (d.batch, d.tokens), "w": (d.vocab, d.hidden)},
    ),
    "triu": Op(
        triu, "causal mask: triu of a full (tokens x tokens) min-value matrix", lambda d: {"x": (d.tokens, d.tokens)}
    ),
    "rms_norm": Op(
        rms_norm,
        "RMSNorm-like: x * rsqrt(mean(x^2) + eps) * w",
        lambda d: {"x": (d.batch, d.tokens, d.hidden), "w": (d.hidden,), "eps": d.eps},
    ),
}


def size_tokens(label: str, seq_len: int) -> int:
    """Tokens per sequence of a size label: 'seed' is ``seq_len``, '<k>x' is k times it."""
    return seq_len if label == "seed" else int(label[:-1]) * seq_len


def dims(cfg: dict, tokens: int, batch: int = 1) -> Dims:
    """The op sizes from a model config (``model_config.config_dict``)."""
    return Dims(
        batch=batch,
        tokens=tokens,
        hidden=cfg["hidden_size"],
        intermediate=cfg["intermediate_size"],
        head_dim=cfg["head_dim"],
        vocab=cfg["vocab_size"],
        eps=cfg["rms_norm_eps"],
        rope_theta=cfg["rope_theta"],
    )


def shape_table(cfg: dict, params: Params) -> list[ShapeRow]:
    """One row per size label (``rows.ShapeRow``): its tokens and every selected op's argument shapes."""
    rows = []
    for label in params.sizes:
        d = dims(cfg, size_tokens(label, params.seq_len), params.batch_size)
        rows.append(ShapeRow(label, d.tokens, {op: describe_shapes(OPS[op].shapes(d)) for op in params.ops}))
    return rows


def describe_shapes(shapes: dict) -> str:
    """'a=1x6x2048, eps=1e-05' for an op's argument shapes."""
    return ", ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in shapes.items())


def make_inputs(op: str, d: Dims, dtype: str, device: str, seed: int) -> dict:
    """Keyword arguments of ``op`` at sizes ``d``: seeded random values on ``device``, except the
    ones the model feeds it (token ids, positions, the causal mask's fill value)."""
    spec = OPS[op]
    gen = torch.Generator(device=device).manual_seed(seed)
    dt = torch.float32 if spec.float32 else getattr(torch, dtype)
    shapes = spec.shapes(d)

    def randn(shape, scale=1.0):
        return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dt)

    if op == "matmul":  # rotary inverse frequencies (llama3 scaling left out: same cost) and positions
        inv_freq = 1.0 / (d.rope_theta ** (torch.arange(0, d.head_dim, 2, device=device, dtype=dt) / d.head_dim))
        return {
            "a": inv_freq.expand(shapes["a"][:2]).unsqueeze(-1).contiguous(),
            "b": torch.arange(d.tokens, device=device, dtype=dt).expand(shapes["b"]).contiguous(),
        }
    if op == "embedding":
        return {"ids": torch.randint(0, d.vocab, shapes["ids"], generator=gen, device=device), "w": randn(shapes["w"])}
    if op == "triu":
        return {"x": torch.full(shapes["x"], torch.finfo(dt).min, device=device, dtype=dt)}
    if op == "linear":
        return {"x": randn(shapes["x"]), "w": randn(shapes["w"], d.hidden**-0.5)}
    return {k: v if not isinstance(v, tuple) else randn(v) for k, v in shapes.items()}
