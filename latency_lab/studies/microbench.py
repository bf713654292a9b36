"""Notebook 04, op microbenchmarks: ``run(params) -> Result`` (rows, key table: the seed's single ``add``,
findings), then the notebook's display and ``Result.save``.

The seed's single ``add`` in isolation, generalised to the ops its trace shows (pointwise ops,
linear, matmul, embedding, triu, an RMSNorm-like composite), at the seed model's shapes for its tokens
and at multiples of them, through every executor. The op x size x executor grid is one ``Sweep``
(``grid``): every (op, size, executor) is built, checked against eager and warmed up right after its
first call, then all of them are timed in the same interleaved rounds with the host reference
(``sweep.time_all``): wall and steady-state host time per call with quartiles, and the overhead
against eager as a within-round difference and ratio. Every (op, size, executor) is a row, measured
or with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..core import environment, harness, model_config, registry, results, sweep, timing
from ..core.harness import Rounds
from ..core.metrics import Stat
from ..core.model import compare_to_eager
from ..core.parameters import Params
from ..core.progress import say
from ..core.rows import OpRow
from ..core.seed_numbers import SEED_SINGLE_ADD_H100
from ..pages.tables import number

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


def shape_table(cfg: dict, params: Params) -> list[dict]:
    """One row per size label: its tokens and every selected op's argument shapes."""
    rows = []
    for label in params.sizes:
        d = dims(cfg, size_tokens(label, params.seq_len), params.batch_size)
        rows.append(
            {"size": label, "tokens": d.tokens, **{op: describe_shapes(OPS[op].shapes(d)) for op in params.ops}}
        )
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


def check(reference: torch.Tensor, dtype: str) -> Callable:
    """The output check of one point: the first call's output against eager's (``compare_to_eager``);
    a mismatch fails the row, since the timings of a wrong computation mean nothing."""

    def against_eager(p: harness.Prepared) -> dict:
        result = compare_to_eager(p.output, reference, dtype)
        if not result["passed"]:
            raise ValueError(
                f"output differs from eager's: rel err {result['rel_err']} > {result['tolerance']} "
                f"{result.get('mismatch') or ''}".strip()
            )
        return result

    return against_eager


def grid(params: Params, cfg: dict) -> sweep.Sweep:
    """The op x size x executor grid: per point, inputs made once and eager's output as the reference."""

    def make(point: dict) -> sweep.Case:
        d = dims(cfg, size_tokens(point["size"], params.seq_len), params.batch_size)
        kwargs = make_inputs(point["op"], d, params.dtype, params.device, params.seed)
        reference = OPS[point["op"]].fn(**kwargs).clone()
        return sweep.Case(OPS[point["op"]].fn, kwargs, check(reference, params.dtype))

    return sweep.Sweep("ops", {"op": params.ops, "size": params.sizes}, registry.selected(params.executors), make)


def measure(params: Params, cfg: dict, progress: Callable[[str], None] = say) -> tuple[list[sweep.Built], Rounds, int]:
    """Build every (op, size, executor), then time all of them in the same rounds; returns the builds,
    the rounds and the intra-op threads they ran with. The caller takes its rows, then releases."""
    timing.use_device(params.device)
    with intra_op_threads(params.device) as threads:
        built = sweep.build(grid(params, cfg), params, PROFILE_STEPS, progress)
        timed = sweep.time_all(built, params)
    return built, timed, threads


def difference(timed: Rounds, a: str, b: str) -> Stat | None:
    """``a`` minus ``b`` in µs per call, round by round (``Rounds.paired``: both timed in the same round,
    over the rounds where both ran fast), with its interval over those rounds."""
    return timed.paired(a, b, "wall_ms", lambda x, y: (x - y) * 1e3)


def rows(built: list[sweep.Built], timed: Rounds, threads: int, seq_len: int) -> list[dict]:
    """One row per (op, size, executor) (``rows.OpRow``): ``sweep.row``'s columns, the tokens, the intra-op threads, and
    the overhead against eager at the same op and size, within rounds: ``overhead_vs_eager_us`` (median
    difference, with quartiles) and ``vs_eager_x`` (median ratio)."""
    eager = {sweep.label(b.point): b.key for b in built if b.prepared.name == "eager"}
    out = []
    for b in built:
        base = eager.get(sweep.label(b.point))
        ratio = timed.ratio(b.key, base) if base else None
        row = sweep.row(
            b,
            timed,
            OpRow,
            tokens=size_tokens(b.point["size"], seq_len),
            threads=threads,
            overhead_vs_eager_us=difference(timed, b.key, base) if base else None,
            vs_eager_x=ratio,
        )
        out.append(row.as_dict())
    return out


ROW_COLUMNS = [
    "op",
    "size",
    "tokens",
    "executor",
    "status",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "host_ms",
    "overhead_vs_eager_us",
    "vs_eager_x",
    "kernels_per_step",
    "kernel_ms",
    "first_call_s",
    "rel_err",
    "held_reserved_mib",
    "reason",
]
KEY_COLUMNS = [
    "size",
    "executor",
    "label",
    "status",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "host_ms",
    "kernels_per_step",
    "kernel_ms",
    "overhead_vs_eager_us",
    "vs_eager_x",
    "first_call_s",
    "reason",
]


def seed_comparable(params: Params) -> bool:
    """Whether the seed's DGX H100 numbers belong beside this run's: a GPU run of the seed's add (the seed
    preset's shapes for one sequence of its 6 tokens at the first size)."""
    return (
        params.is_cuda
        and params.preset == "seed"
        and params.sizes[0] == "seed"
        and (params.seq_len, params.batch_size) == (6, 1)
    )


def key_columns(params: Params) -> list[str]:
    return KEY_COLUMNS + (["seed_wall_ms"] if seed_comparable(params) else [])


def key_rows(table: list[dict], params: Params) -> list[dict]:
    """The seed's experiment: ``add`` at the first size, one row per executor; on a GPU run of the seed
    preset with the seed's DGX H100 number (``seed_numbers.SEED_SINGLE_ADD_H100``) beside each."""
    adds = [r for r in table if r["op"] == "add" and r["size"] == params.sizes[0]]
    seed = SEED_SINGLE_ADD_H100["rows"] if seed_comparable(params) else {}
    return [
        {**{c: r.get(c) for c in KEY_COLUMNS}, **({"seed_wall_ms": seed.get(r["executor"])} if seed else {})}
        for r in adds
    ]


def _us(ms: float) -> str:
    return f"{number(ms * 1e3)} µs"


def fastest_text(adds: list[dict], on_gpu: bool) -> str:
    ran = [r for r in adds if r["wall_ms"] is not None]
    if not ran:
        return "No executor produced a time for add here."
    r = min(ran, key=lambda r: r["wall_ms"])
    host = f" (steady-state host time {_us(r['host_ms'])})" if on_gpu else ""
    return f"Fastest add here (size {r['size']}): {r['label']} at {_us(r['wall_ms'])} per call{host}."


def overhead_text(adds: list[dict], timed: Rounds) -> str | None:
    """Every executor's add against eager's, as differences and ratios taken within rounds."""
    eager = next((r for r in adds if r["executor"] == "eager" and r["wall_ms"] is not None), None)
    others = sorted(
        (r for r in adds if r["executor"] != "eager" and r["vs_eager_x"] is not None),
        key=lambda r: r["overhead_vs_eager_us"],
    )
    if not eager or not others:
        return None
    parts = [
        f"{r['label']} {'+' if r['overhead_vs_eager_us'] >= 0 else '-'}{number(abs(r['overhead_vs_eager_us']))} µs "
        f"(x{number(r['vs_eager_x'])})"
        for r in others
    ]
    note = harness.host_moved_note(timed, min(abs(r["vs_eager_x"] - 1) for r in others))
    return (
        f"Against eager's add ({_us(eager['wall_ms'])}), per call, within rounds: {', '.join(parts)}. "
        f"One add does almost no work, so this is each executor's fixed cost per call.{note}"
    )


def kernels_text(adds: list[dict]) -> str | None:
    """On a GPU: eager's kernels per add and how much of its call they fill; who launches more."""
    eager = next((r for r in adds if r["executor"] == "eager" and r["kernel_ms"] is not None and r["wall_ms"]), None)
    if not eager:
        return None
    busy = eager["kernel_ms"] / eager["wall_ms"]
    text = (
        f"Eager launches {eager['kernels_per_step']:.3g} kernel(s) of {_us(eager['kernel_ms'])} in all per add: "
        f"they fill {busy:.0%} of its {_us(eager['wall_ms'])} call; the rest is host work."
    )
    more = [
        f"{r['label']} ({r['kernels_per_step']:.3g})"
        for r in adds
        if (r["kernels_per_step"] or 0) > eager["kernels_per_step"]
    ]
    return text + (f" More kernels per add than eager's: {', '.join(more)}." if more else "")


def cpu_text(params: Params) -> str | None:
    if params.is_cuda:
        return None
    return (
        "On a CPU there are no device kernels: every per-call time is host time, and the seed's DGX H100 "
        "numbers are not comparable with this run's."
    )


def not_ok_text(table: list[dict]) -> str | None:
    bad = [r for r in table if r["status"] != "ok"]
    if not bad:
        return None
    reasons = dict.fromkeys(f"{r['executor']} ({r['status']}: {r['reason']})" for r in bad)
    return f"{len(bad)} of {len(table)} (op, size, executor) rows have no full measurement: {'; '.join(reasons)}."


def findings(table: list[dict], timed: Rounds, params: Params) -> list[str]:
    """What the add rows show (fastest, overhead against eager within rounds, kernels on a GPU), how far
    the host drifted, what a CPU run cannot answer, and the rows that did not run."""
    adds = key_rows(table, params)
    return [
        t
        for t in (
            fastest_text(adds, params.is_cuda),
            overhead_text(adds, timed),
            kernels_text(adds),
            harness.state_text(timed),
            cpu_text(params),
            not_ok_text(table),
        )
        if t
    ]


def overhead_grid(table: list[dict], size: str) -> tuple[list, list, list]:
    """ops, executor labels and the ops x labels matrix of overhead against eager (µs, within rounds)
    at ``size`` (None: no number)."""
    at = [r for r in table if r["size"] == size]
    ops = list(dict.fromkeys(r["op"] for r in at))
    labels = list(dict.fromkeys(r["label"] for r in at))
    cell = {(r["op"], r["label"]): r["overhead_vs_eager_us"] for r in at}
    return ops, labels, [[cell.get((op, lab)) for lab in labels] for op in ops]


def heatmap(table: list[dict], sizes: tuple[str, ...]):
    """Heat maps, one per size: overhead per call against eager (µs, within rounds), ops x executors."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(
        rows=1, cols=len(sizes), subplot_titles=[f"size {s}" for s in sizes], shared_yaxes=True, horizontal_spacing=0.04
    )
    for i, size in enumerate(sizes, start=1):
        ops, labels, grid_ = overhead_grid(table, size)
        fig.add_trace(
            go.Heatmap(
                z=grid_,
                x=labels,
                y=ops,
                coloraxis="coloraxis",
                text=[[("" if v is None else f"{v:.0f}") for v in row] for row in grid_],
                texttemplate="%{text}",
                hovertemplate="%{y} / %{x}: %{z:.1f} µs<extra></extra>",
            ),
            row=1,
            col=i,
        )
    fig.update_layout(
        title="Overhead per call against eager (µs, within rounds; blank: no number, see the table)",
        coloraxis={"colorscale": "RdBu_r", "cmid": 0, "colorbar": {"title": "µs"}},
        height=380 + 20 * len(OPS),
        width=max(700, 520 * len(sizes)),
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def size_chart(table: list[dict]):
    """ms per call against tokens, one panel per op (drawn for two sizes or more): flat lines are
    overhead-bound; on a GPU the dashed line is eager's device kernel time, the floor every executor
    approaches."""
    import plotly.express as px

    ok = [r for r in table if r["wall_ms"] is not None]
    points = [{"op": r["op"], "tokens": r["tokens"], "ms": r["wall_ms"], "series": r["label"]} for r in ok]
    points += [
        {"op": r["op"], "tokens": r["tokens"], "ms": r["kernel_ms"], "series": "kernel time (eager)"}
        for r in ok
        if r["executor"] == "eager" and r["kernel_ms"]
    ]
    fig = px.line(
        points,
        x="tokens",
        y="ms",
        color="series",
        facet_col="op",
        facet_col_wrap=4,
        markers=True,
        log_x=True,
        log_y=True,
        title="Time per call against tokens (log-log)",
        labels={"ms": "ms per call"},
    )
    fig.for_each_trace(lambda t: t.update(line_dash="dash") if t.name == "kernel time (eager)" else None)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=")[-1]))
    return fig


def add_chart(adds: list[dict], device_name: str):
    """The add rows measured here (median and quartiles over the rounds), beside the seed's DGX H100
    numbers where the key table has them."""
    import plotly.graph_objects as go

    labels = [r["label"] for r in adds]
    bars = [
        go.Bar(
            name=f"measured here ({device_name})",
            x=labels,
            y=[r["wall_ms"] for r in adds],
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [r["wall_q3_ms"] - r["wall_ms"] if r["wall_ms"] is not None else 0 for r in adds],
                "arrayminus": [r["wall_ms"] - r["wall_q1_ms"] if r["wall_ms"] is not None else 0 for r in adds],
            },
        )
    ]
    if any("seed_wall_ms" in r for r in adds):
        bars.append(
            go.Bar(
                name=f"seed, {SEED_SINGLE_ADD_H100['gpu']} (reference, not measured here)",
                x=labels,
                y=[r["seed_wall_ms"] for r in adds],
                marker_pattern_shape="/",
            )
        )
    fig = go.Figure(bars)
    fig.update_layout(
        barmode="group",
        title="One add per call: wall time over the rounds (bars: q1-q3)",
        yaxis_title="ms per call",
        xaxis_title="executor",
    )
    return fig


@dataclass
class Result:
    """What notebook 04 shows and saves: the ops' places and shapes, every row, the add rows (the key
    table), the findings, and the rounds they were timed in."""

    params: Params
    env: dict
    ops_in_model: list[dict]  # op, its place in one forward step
    shapes: list[dict]  # ``shape_table``
    rows: list[dict]  # ``rows``, one per (op, size, executor)
    add_rows: list[dict]  # ``key_rows``
    findings: list[str]
    threads: int  # intra-op threads while measuring
    memory_after_release: dict
    timed: Rounds

    @property
    def device_name(self) -> str:
        return self.env["gpu"]["name"] if self.env["gpu"] else f"CPU: {self.env['cpu']}"

    def save(self) -> Path:
        """The results file of notebook 04."""
        return results.save(
            self.params.output_dir,
            results.OP_MICROBENCHMARKS,
            self.params,
            self.env,
            results.key_table(
                f"One add per call (size {self.params.sizes[0]}), overhead against eager within rounds",
                self.add_rows,
                key_columns(self.params),
            ),
            shapes=self.shapes,
            rows=self.rows,
            findings=self.findings,
            threads=self.threads,
            memory_after_release=self.memory_after_release,
            **self.timed.sections(),
        )


def run(params: Params) -> Result:
    """Notebook 04's study: the grid built, checked and timed in the same rounds (``measure``), its rows,
    the builds released, the add rows and the findings."""
    harness.set_up(params)
    env = environment.collect(params.device)
    cfg = model_config.config_dict(params.preset, params.layers)
    ops_in_model = [{"op": op, "in the model": OPS[op].where} for op in params.ops]
    shapes = shape_table(cfg, params)
    built, timed, threads = measure(params, cfg)
    table = rows(built, timed, threads, params.seq_len)
    left = sweep.release(built, params.device)
    return Result(
        params=params,
        env=env,
        ops_in_model=ops_in_model,
        shapes=shapes,
        rows=table,
        add_rows=key_rows(table, params),
        findings=findings(table, timed, params),
        threads=threads,
        memory_after_release=left,
        timed=timed,
    )
