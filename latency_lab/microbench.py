"""Op microbenchmarks: the seed's single ``add`` in isolation, generalised to the ops its trace
shows (pointwise ops, linear, matmul, embedding, triu, an RMSNorm-like composite), at the seed
model's shapes for its tokens and at multiples of them, through every executor.

Each (op, size, executor) is one row: per-call time from ``timing.event_timer``, kernels per call
from ``timing.profile_kernels``, the first call's seconds and the output against eager's; an
executor that is unavailable or fails is a row with its reason.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from . import registry, timing
from .model import compare_to_eager
from .parameters import Params
from .reference import SEED_SINGLE_ADD_H100

PROFILE_STEPS = 5  # profiled calls per row: kernels per call is exact, so a few suffice
CPU_THREADS = 1  # intra-op threads while measuring on a CPU (see ``intra_op_threads``)


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
    "add": Op(add, "residual add: hidden + attention or MLP output",
              lambda d: {"a": (d.batch, d.tokens, d.hidden), "b": (d.batch, d.tokens, d.hidden)}),
    "mul": Op(mul, "SwiGLU: silu(gate) * up",
              lambda d: {"a": (d.batch, d.tokens, d.intermediate), "b": (d.batch, d.tokens, d.intermediate)}),
    "silu": Op(silu, "SwiGLU activation on the gate projection",
               lambda d: {"x": (d.batch, d.tokens, d.intermediate)}),
    "linear": Op(linear, "MLP gate / up projection (hidden -> intermediate)",
                 lambda d: {"x": (d.batch, d.tokens, d.hidden), "w": (d.intermediate, d.hidden)}),
    "matmul": Op(matmul, "rotary embedding: inv_freq @ position_ids (float32, as in HF Llama)",
                 lambda d: {"a": (d.batch, d.head_dim // 2, 1), "b": (d.batch, 1, d.tokens)}, float32=True),
    "embedding": Op(embedding, "token embedding lookup (vocab x hidden table)",
                    lambda d: {"ids": (d.batch, d.tokens), "w": (d.vocab, d.hidden)}),
    "triu": Op(triu, "causal mask: triu of a full (tokens x tokens) min-value matrix",
               lambda d: {"x": (d.tokens, d.tokens)}),
    "rms_norm": Op(rms_norm, "RMSNorm-like: x * rsqrt(mean(x^2) + eps) * w",
                   lambda d: {"x": (d.batch, d.tokens, d.hidden), "w": (d.hidden,), "eps": d.eps}),
}


def size_tokens(label: str, seq_len: int) -> int:
    """Tokens per sequence of a size label: 'seed' is ``seq_len``, '<k>x' is k times it."""
    return seq_len if label == "seed" else int(label[:-1]) * seq_len


def dims(cfg: dict, tokens: int, batch: int = 1) -> Dims:
    """The op sizes from a model config (``model.config_dict``)."""
    return Dims(batch=batch, tokens=tokens, hidden=cfg["hidden_size"], intermediate=cfg["intermediate_size"],
                head_dim=cfg["head_dim"], vocab=cfg["vocab_size"], eps=cfg["rms_norm_eps"],
                rope_theta=cfg["rope_theta"])


def shape_table(cfg: dict, params: Params) -> list[dict]:
    """One row per size label: its tokens and every selected op's argument shapes."""
    rows = []
    for label in params.sizes:
        d = dims(cfg, size_tokens(label, params.seq_len), params.batch_size)
        rows.append({"size": label, "tokens": d.tokens,
                     **{op: describe_shapes(OPS[op].shapes(d)) for op in params.ops}})
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
        return {"a": inv_freq.expand(shapes["a"][:2]).unsqueeze(-1).contiguous(),
                "b": torch.arange(d.tokens, device=device, dtype=dt).expand(shapes["b"]).contiguous()}
    if op == "embedding":
        return {"ids": torch.randint(0, d.vocab, shapes["ids"], generator=gen, device=device), "w": randn(shapes["w"])}
    if op == "triu":
        return {"x": torch.full(shapes["x"], torch.finfo(dt).min, device=device, dtype=dt)}
    if op == "linear":
        return {"x": randn(shapes["x"]), "w": randn(shapes["w"], d.hidden ** -0.5)}
    return {k: v if not isinstance(v, tuple) else randn(v) for k, v in shapes.items()}


@contextmanager
def intra_op_threads(device: str):
    """On a CPU, measure with ``CPU_THREADS`` intra-op threads, in eager ops and in Inductor's C++
    kernels alike: at these sizes threads buy nothing, and on a shared machine an OpenMP barrier
    waiting for a descheduled thread adds milliseconds per call. Inductor bakes its thread count into
    the kernels it caches, keyed by its ``cpp.threads`` setting, not by ``torch.get_num_threads()``,
    so that setting is patched too."""
    if device.startswith("cuda"):
        yield torch.get_num_threads()
        return
    from torch._inductor import config as inductor_config

    before = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    try:
        with inductor_config.patch({"cpp.threads": CPU_THREADS}):
            yield CPU_THREADS
    finally:
        torch.set_num_threads(before)


def measure(executor: registry.Executor, op: str, kwargs: dict, reference: torch.Tensor, params: Params) -> dict:
    """One row: build ``executor`` on ``op``, check its first output against eager's, time it and
    count its kernels; unavailable or failing executors keep their reason."""
    prepared = registry.prepare(executor, OPS[op].fn, kwargs, params.device)
    metrics = {"first_call_s": prepared.first_call_s}
    if prepared.ok:
        try:
            metrics.update(compare_to_eager(prepared.output, reference, params.dtype))
            prepared.output = None  # under CUDA graphs the next call overwrites it anyway
            wall = timing.event_timer(prepared.fn, kwargs, params.device, params.warmup, params.iters,
                                      params.repeats)
            kernels = timing.profile_kernels(prepared.fn, kwargs, params.device, PROFILE_STEPS)
            metrics.update(
                ms_per_call=wall["median"], iqr_ms=wall["iqr"], q1_ms=wall["q1"], q3_ms=wall["q3"],
                noisy=wall["noisy"], method=wall["method"],
                blocks_ms=wall["blocks_ms"], kernels_per_call=kernels.get("kernels_per_step"),
                kernel_ms_per_call=kernels.get("kernel_ms_per_step"), kernel_reason=kernels.get("reason"),
                top_kernels=[k["name"] for k in kernels.get("top_kernels", [])[:3]],
                host_overhead_ms=timing.seed_table_row(wall["median"], kernels.get("kernel_ms_per_step"),
                                                       kernels.get("kernels_per_step"))["cpu_overhead_ms"])
        except Exception as e:  # a failure while timing is a row, not a crash
            prepared.fail(e, "timing")
    return prepared.row(**metrics)


def run_size(op: str, label: str, cfg: dict, params: Params, log: Callable = print) -> list[dict]:
    """Rows of every selected executor for ``op`` at size ``label``, with overhead against eager."""
    d = dims(cfg, size_tokens(label, params.seq_len), params.batch_size)
    kwargs = make_inputs(op, d, params.dtype, params.device, params.seed)
    reference = OPS[op].fn(**kwargs).clone()
    rows = []
    for ex in registry.selected(params.executors):
        row = {"op": op, "size": label, "tokens": d.tokens, **measure(ex, op, kwargs, reference, params)}
        rows.append(row)
        ms = (f"{row['ms_per_call']:.4f} ms per call, first call {row['first_call_s']:.2f} s"
              if row.get("ms_per_call") is not None else row["reason"])
        log(f"{op:10s} {label:5s} {ex.name:30s} {row['status']:12s} {ms}")
    del kwargs, reference
    gc.collect()  # compiled objects hold reference cycles; one collection per op and size
    if params.is_cuda:
        torch.cuda.empty_cache()
    return add_overheads(rows)


def run(params: Params, cfg: dict, log: Callable = print) -> list[dict]:
    """All rows: every selected op x size x executor (``threads``: intra-op threads while measured)."""
    timing.use_device(params.device)
    with intra_op_threads(params.device) as threads:
        return [{**row, "threads": threads} for op in params.ops for label in params.sizes
                for row in run_size(op, label, cfg, params, log)]


def add_overheads(rows: list[dict]) -> list[dict]:
    """Add ``overhead_vs_eager_ms`` (ms per call minus eager's, same op and size) to each row."""
    eager = {(r["op"], r["size"]): r.get("ms_per_call") for r in rows if r["executor"] == "eager"}
    for r in rows:
        base = eager.get((r["op"], r["size"]))
        r["overhead_vs_eager_ms"] = (r["ms_per_call"] - base
                                     if r.get("ms_per_call") is not None and base is not None else None)
    return rows


ADD_COLUMNS = ["size", "executor", "label", "status", "ms_per_call", "q1_ms", "q3_ms", "kernels_per_call",
               "kernel_ms_per_call", "overhead_vs_eager_ms", "seed_h100_ms", "first_call_s", "reason"]


def add_table(rows: list[dict]) -> list[dict]:
    """The seed's experiment: ``add`` at the first size, one row per executor, with the seed's
    DGX H100 number (``reference.SEED_SINGLE_ADD_H100``) beside each measured one."""
    adds = [r for r in rows if r["op"] == "add"]
    first = adds[0]["size"] if adds else None
    return [{**{c: r.get(c) for c in ADD_COLUMNS}, "seed_h100_ms": SEED_SINGLE_ADD_H100["rows"].get(r["executor"])}
            for r in adds if r["size"] == first]


def add_findings(add_rows: list[dict], on_gpu: bool) -> list[str]:
    """What the add table shows, generated from it: on a GPU, eager's kernels and how much of a call
    is host work, and who launches more kernels than eager; on a CPU, per-call times only."""
    ran = {r["executor"]: r for r in add_rows if r.get("ms_per_call") is not None}
    if not ran:
        return ["No executor produced a time for add here."]
    fastest = min(ran.values(), key=lambda r: r["ms_per_call"])
    out = [f"Fastest add here: {fastest['label']} at {fastest['ms_per_call'] * 1e3:.3g} µs per call."]
    eager = ran.get("eager")
    if not on_gpu:
        return out + ["On a CPU there are no device kernels: every per-call time is host time."]
    if eager and eager.get("kernels_per_call") and eager.get("kernel_ms_per_call") is not None:
        share = 1 - eager["kernel_ms_per_call"] / eager["ms_per_call"]
        out.append(f"Eager launches {eager['kernels_per_call']:.3g} kernel(s) of {eager['kernel_ms_per_call'] * 1e3:.3g} µs "
                   f"in total per add; {share:.0%} of its {eager['ms_per_call'] * 1e3:.3g} µs call is host work.")
        more = [f"{r['label']} ({r['kernels_per_call']:.3g})" for r in ran.values()
                if (r.get("kernels_per_call") or 0) > eager["kernels_per_call"]]
        if more:
            out.append(f"More kernels per add than eager's {eager['kernels_per_call']:.3g}: {', '.join(more)}.")
    return out


TABLE_COLUMNS = ["op", "size", "tokens", "executor", "status", "ms_per_call", "iqr_ms", "noisy",
                 "overhead_vs_eager_ms", "kernels_per_call", "kernel_ms_per_call", "host_overhead_ms",
                 "first_call_s", "rel_err", "passed", "reason"]


def summary(rows: list[dict]) -> list[dict]:
    """The rows with the columns worth reading (the results JSON keeps all of them)."""
    return [{c: r.get(c) for c in TABLE_COLUMNS} for r in rows]


def overhead_grid(rows: list[dict], size: str) -> tuple[list, list, list]:
    """ops, executor labels and the ops x labels matrix of overhead against eager in µs at ``size``
    (None: no number)."""
    at = [r for r in rows if r["size"] == size]
    ops = list(dict.fromkeys(r["op"] for r in at))
    labels = list(dict.fromkeys(r["label"] for r in at))
    cell = {(r["op"], r["label"]): r.get("overhead_vs_eager_ms") for r in at}
    grid = [[None if cell.get((op, lab)) is None else cell[(op, lab)] * 1e3 for lab in labels] for op in ops]
    return ops, labels, grid


def heatmap(rows: list[dict], sizes: tuple[str, ...]):
    """Heat maps, one per size: overhead per call against eager (µs), ops x executors."""
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

    fig = make_subplots(rows=1, cols=len(sizes), subplot_titles=[f"size {s}" for s in sizes],
                        shared_yaxes=True, horizontal_spacing=0.04)
    for i, size in enumerate(sizes, start=1):
        ops, labels, grid = overhead_grid(rows, size)
        fig.add_trace(go.Heatmap(z=grid, x=labels, y=ops, coloraxis="coloraxis",
                                 text=[[("" if v is None else f"{v:.0f}") for v in row] for row in grid],
                                 texttemplate="%{text}", hovertemplate="%{y} / %{x}: %{z:.1f} µs<extra></extra>"),
                      row=1, col=i)
    fig.update_layout(title="Overhead per call against eager (µs; blank: no number, see the table)",
                      coloraxis={"colorscale": "RdBu_r", "cmid": 0, "colorbar": {"title": "µs"}},
                      height=380 + 20 * len(OPS), width=max(700, 520 * len(sizes)))
    fig.update_yaxes(autorange="reversed")
    return fig


def sweep_chart(rows: list[dict]):
    """ms per call against tokens, one panel per op: flat lines are overhead-bound; on a GPU the
    dashed line is eager's device kernel time, the floor every executor approaches."""
    import plotly.express as px

    ok = [r for r in rows if r.get("ms_per_call") is not None]
    points = [{"op": r["op"], "tokens": r["tokens"], "ms": r["ms_per_call"], "series": r["label"]} for r in ok]
    points += [{"op": r["op"], "tokens": r["tokens"], "ms": r["kernel_ms_per_call"], "series": "kernel time (eager)"}
               for r in ok if r["executor"] == "eager" and r.get("kernel_ms_per_call")]
    fig = px.line(points, x="tokens", y="ms", color="series", facet_col="op", facet_col_wrap=4, markers=True,
                  log_x=True, log_y=True, title="Time per call against tokens (log-log)",
                  labels={"ms": "ms per call"})
    fig.for_each_trace(lambda t: t.update(line_dash="dash") if t.name == "kernel time (eager)" else None)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return fig


def add_chart(table: list[dict], device_name: str):
    """The add rows measured here beside the seed's DGX H100 numbers, per executor."""
    import plotly.graph_objects as go

    labels = [r["label"] for r in table]
    fig = go.Figure([
        go.Bar(name=f"measured here ({device_name})", x=labels, y=[r.get("ms_per_call") for r in table],
               error_y={"type": "data", "symmetric": False,  # the interquartile range of the blocks
                        "array": [r["q3_ms"] - r["ms_per_call"] if r.get("q3_ms") else 0 for r in table],
                        "arrayminus": [r["ms_per_call"] - r["q1_ms"] if r.get("q1_ms") else 0 for r in table]}),
        go.Bar(name=f"seed, {SEED_SINGLE_ADD_H100['gpu']} (reference, not measured here)", x=labels,
               y=[r["seed_h100_ms"] for r in table], marker_pattern_shape="/"),
    ])
    fig.update_layout(barmode="group", title="One add per call: measured vs the seed's reference",
                      yaxis_title="ms per call", xaxis_title="executor")
    return fig
