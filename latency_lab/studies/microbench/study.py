"""Notebook 04, op microbenchmarks: ``run(params) -> Result`` (rows, key table: the seed's single ``add``,
findings), the notebook's charts (``Chart`` values, drawn by ``pages.charts``) and ``Result.save``.

The seed's single ``add`` in isolation, generalised to the ops its trace shows (pointwise ops,
linear, matmul, embedding, triu, an RMSNorm-like composite; ``ops``), at the seed model's
shapes for its tokens and at multiples of them, through every executor. The op x size x executor grid is
one ``Sweep`` (``grid``): every (op, size, executor) is built, checked against eager and warmed up right
after its first call, then all of them are timed in the same interleaved rounds with the host reference
(``sweep.time_all``): wall and steady-state host time per call with quartiles, and the overhead
against eager as a within-round difference and ratio. Every (op, size, executor) is a row, measured
or with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import torch

from ...core import harness, model_config, registry, results, sweep, timing
from ...core.harness import Rounds
from ...core.metrics import Stat
from ...core.model import compare_to_eager
from ...core.parameters import Params
from ...core.progress import say
from ...core.rounds import host_moved_note, state_text
from ...core.row_types import OpRow
from ...core.seed_numbers import SEED_SINGLE_ADD_H100
from ...pages.charts import Chart
from ...pages.tables import number
from .. import base as study
from ..base import Study, saved
from .ops import OPS, dims, make_inputs, shape_table, size_tokens
from .rows import ShapeRow

PROFILE_STEPS = 5  # profiled calls per row: kernels per call is exact, so a few suffice
CPU_THREADS = 1  # intra-op threads while measuring on a CPU (see ``intra_op_threads``)


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

    def against_eager(p: harness.Measurement) -> dict:
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


def rows(built: list[sweep.Built], timed: Rounds, threads: int, seq_len: int) -> list[OpRow]:
    """One row per (op, size, executor) (``row_types.OpRow``): ``sweep.row``'s columns, the tokens, the
    intra-op threads, and the overhead against eager at the same op and size, within rounds:
    ``overhead_vs_eager_us`` (median difference, with quartiles) and ``vs_eager_x`` (median ratio)."""
    eager = {sweep.label(b.point): b.key for b in built if b.measured.name == "eager"}
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
        out.append(row)
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
    note = host_moved_note(timed, min(abs(r["vs_eager_x"] - 1) for r in others))
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
            state_text(timed),
            cpu_text(params),
            not_ok_text(table),
        )
        if t
    ]


def heatmap(table: list[dict], sizes: tuple[str, ...]) -> Chart:
    """Heat maps, one per size: overhead per call against eager (µs, within rounds), ops x executors."""
    return Chart(
        kind="heatmap",
        rows=[
            {"size": r["size"], "op": r["op"], "label": r["label"], "overhead_vs_eager_us": r["overhead_vs_eager_us"]}
            for size in sizes
            for r in table
            if r["size"] == size
        ],
        x="label",
        y="op",
        color="overhead_vs_eager_us",
        labels={"overhead_vs_eager_us": "µs"},
        facet="size",
        facet_title="size {value}",
        title="Overhead per call against eager (µs, within rounds; blank: no number, see the table)",
        height=380 + 20 * len(OPS),
        width=max(700, 520 * len(sizes)),
    )


KERNEL_SERIES = "kernel time (eager)"


def size_chart(table: list[dict]) -> Chart | None:
    """ms per call against tokens, one panel per op: flat lines are overhead-bound; on a GPU the dashed
    line is eager's device kernel time, the floor every executor approaches. None with fewer than two
    sizes."""
    if len({r["size"] for r in table}) < 2:
        return None
    ok = [r for r in table if r["wall_ms"] is not None]
    points = [{"op": r["op"], "tokens": r["tokens"], "ms": r["wall_ms"], "series": r["label"]} for r in ok]
    points += [
        {"op": r["op"], "tokens": r["tokens"], "ms": r["kernel_ms"], "series": KERNEL_SERIES}
        for r in ok
        if r["executor"] == "eager" and r["kernel_ms"]
    ]
    return Chart(
        kind="line",
        rows=points,
        x="tokens",
        y="ms",
        color="series",
        dashed=(KERNEL_SERIES,),
        facet="op",
        facet_wrap=4,
        facet_title="{value}",
        log_x=True,
        log_y=True,
        title="Time per call against tokens (log-log)",
        labels={"ms": "ms per call"},
    )


def add_chart(adds: list[dict], device_name: str) -> Chart | None:
    """The add rows measured here (median, bars from q1 to q3 over the rounds), beside the seed's DGX H100
    numbers where the key table has them; None without add rows."""
    if not adds:
        return None
    bars = [
        {
            "executor": r["label"],
            "ms": r["wall_ms"],
            "bars": f"measured here ({device_name})",
            "above": None if r["wall_ms"] is None else r["wall_q3_ms"] - r["wall_ms"],
            "below": None if r["wall_ms"] is None else r["wall_ms"] - r["wall_q1_ms"],
        }
        for r in adds
    ]
    seeded = any("seed_wall_ms" in r for r in adds)
    if seeded:
        name = f"seed, {SEED_SINGLE_ADD_H100['gpu']} (reference, not measured here)"
        bars += [{"executor": r["label"], "ms": r["seed_wall_ms"], "bars": name} for r in adds]
    return Chart(
        kind="bar",
        rows=bars,
        x="executor",
        y="ms",
        color="bars" if seeded else None,
        pattern="bars" if seeded else None,
        error_y=("above", "below"),
        barmode="group",
        labels={"ms": "ms per call", "bars": ""},
        title="One add per call: wall time over the rounds (bars: q1-q3)",
    )


@dataclass
class Result(Study):
    """What notebook 04 shows and saves: the ops' places and shapes, every row, the add rows (the key
    table), the findings, and the rounds they were timed in."""

    NOTEBOOK: ClassVar[str] = results.OP_MICROBENCHMARKS

    ops_in_model: list[dict]  # op, its place in one forward step
    shapes: list[ShapeRow] = saved()  # ``shape_table``
    rows: list[OpRow] = saved()  # ``rows``, one per (op, size, executor)
    add_rows: list[dict]  # ``key_rows``
    findings: list[str] = saved()
    threads: int = saved()  # intra-op threads while measuring
    memory_after_release: dict = saved()
    timed: Rounds = saved()

    @property
    def device_name(self) -> str:
        return self.env["gpu"]["name"] if self.env["gpu"] else f"CPU: {self.env['cpu']}"

    def key_table(self) -> dict:
        title = f"One add per call (size {self.params.sizes[0]}), overhead against eager within rounds"
        return results.key_table(title, self.add_rows, key_columns(self.params))


def run(params: Params) -> Result:
    """Notebook 04's study: the grid built, checked and timed in the same rounds (``measure``), its rows,
    the builds released, the add rows and the findings."""
    env = study.begin(params)
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
