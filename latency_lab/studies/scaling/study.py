"""Notebook 06, scaling: ``run(params) -> Result`` (rows, one per point and executor, fits, key table,
findings), the notebook's charts (``Chart`` values, drawn by ``pages.charts``) and ``Result.save``.

Three sweeps, declared as data (``sweeps``): depth (``depths`` layers at ``seq_len`` tokens), prompt
length (``prompt_lengths`` tokens at ``layers`` layers) and the decode step (one token against a
``StaticCache`` pre-filled with ``seq_len`` prompt tokens, at ``layers`` layers; ``decode``). Every
(point, executor) is built and measured right after its first call (``sweep.build``; the point the depth
and prompt sweeps share is built once), then all of them are timed in the same interleaved rounds with the
host reference, each decode build's greedy loop as a probe after its block (``decode.probes``).
From the rows: time against depth as least-squares lines with the slope's standard error
(``fits``), and the findings (``findings``): the first call against depth over cold
compiles only, prefill against prompt length, decode, and comparisons of rows within rounds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar

from ...core import environment, registry, results, sweep
from ...core.harness import Rounds
from ...core.parameters import Params
from ...core.row_types import FitRow, ScalingRow
from ...pages.charts import Chart
from .. import base as study
from ..base import Study, saved
from .decode import DecodeCase, decode_case, decode_numbers, probes
from .findings import findings, n_layers, rows_of_sweep
from .fits import METRICS, depth_fits, fit_rows, fitted_curve
from .fits import PER_REF as PER_REF  # re-exported: the host-state tests read these two here
from .fits import slope_difference as slope_difference
from .rows import DepthFit


def sweeps(params, executors, bandwidth: float | None) -> dict[str, sweep.Sweep]:
    """The run's three sweeps: prefill points are ``sweep.model_case`` at their layers and tokens, the
    decode point a ``decode_case``. The depth and prompt sweeps share the point at ``layers`` layers
    and ``seq_len`` tokens (built once)."""

    def prefill(point: dict) -> sweep.Case:
        return sweep.model_case(replace(params, layers=point["layers"], seq_len=point["tokens"]), bandwidth)

    def decode(point: dict) -> DecodeCase:
        return decode_case(replace(params, layers=point["layers"]), point["prompt_tokens"], bandwidth)

    return {
        "depth": sweep.Sweep("depth", {"layers": params.depths, "tokens": (params.seq_len,)}, executors, prefill),
        "prompt": sweep.Sweep(
            "prompt", {"layers": (params.layers,), "tokens": params.prompt_lengths}, executors, prefill
        ),
        "decode": sweep.Sweep(
            "decode",
            {"layers": (params.layers,), "tokens": (1,), "prompt_tokens": (params.seq_len,)},
            executors,
            decode,
        ),
    }


def rows(sweeps_: dict[str, sweep.Sweep], built: list[sweep.Built], timed: Rounds, params) -> list[ScalingRow]:
    """One row per build (``row_types.ScalingRow``): ``sweep.row``'s columns, its key in the rounds,
    ``sweep`` (the sweeps its point belongs to: ``depth, prompt`` for the shared one), and for a decode
    build its loop's numbers and how many of its greedy tokens equal eager's."""
    out = []
    for b in built:
        names = [name for name, s in sweeps_.items() if sweep.label(b.point) in map(sweep.label, s.points())]
        decode, tokens = {}, b.measured.record("tokens")
        if isinstance(b.case, DecodeCase):
            t = timed.entries.get(b.key)
            decode = decode_numbers(t.probes.get("loop") if t else None, b.case.new_tokens, params.batch_size)
        row = sweep.row(
            b,
            timed,
            ScalingRow,
            sweep=", ".join(names),
            step="decode" if decode else "prefill",
            key=b.key,
            **decode,
            tokens_match_eager=tokens.get("match"),
            divergence_ulps=tokens.get("divergence_ulps"),
            near_tie=tokens.get("near_tie"),
        )
        out.append(row)
    return out


KEY_COLUMNS = [
    "executor",
    "step",
    "layers",
    "tokens",
    "prompt_tokens",
    "wall_ms",
    "host_ms",
    "host_per_ref_x",
    "kernel_ms",
    "kernels_per_step",
    "first_call_s",
    "tpot_ms",
    "tokens_per_s",
    "status",
    "reason",
]
POINT_COLUMNS = [
    "executor",
    "layers",
    "tokens",
    "status",
    "first_call_s",
    "first_call_cache_hits",
    "rel_err",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "host_ms",
    "kernel_ms",
    "kernels_per_step",
    "floor_ms",
    "floor_ratio_x",
    "held_allocated_mib",
    "held_reserved_mib",
    "reason",
    "notes",
]
DECODE_COLUMNS = [  # at one depth, which the table's caption names
    "executor",
    "prompt_tokens",
    "status",
    "first_call_s",
    "rel_err",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "host_ms",
    "kernel_ms",
    "kernels_per_step",
    "floor_ratio_x",
    "loop_ms",
    "tpot_ms",
    "tpot_q1_ms",
    "tpot_q3_ms",
    "tokens_per_s",
    "tokens_match_eager",
    "divergence_ulps",
    "near_tie",
    "held_reserved_mib",
    "reason",
    "notes",
]
FIT_COLUMNS = FitRow.columns()  # the fit table's columns, in order


def key_rows(table: list[dict]) -> list[dict]:
    """The run index's table: every measured point (prefill at every depth and prompt length, decode),
    per executor."""
    return [{c: r.get(c) for c in KEY_COLUMNS} for r in table]


def key_title(params) -> str:
    return (
        f"Prefill at {', '.join(map(str, params.depths))} layers ({params.seq_len} tokens) and at "
        f"{', '.join(map(str, params.prompt_lengths))} tokens ({n_layers(params.layers)}); decode at "
        f"{n_layers(params.layers)}: all timed in the same rounds"
    )


def depth_chart(depth_rows: list[dict], fits: list[DepthFit]) -> Chart | None:
    """Time per call against depth, one panel per metric: the measured ok points (solid) beside the
    least-squares lines (dashed); None when no executor ran in the depth sweep."""
    lines = [
        {"executor": r["executor"], "layers": r["layers"], "ms": r[metric], "metric": metric, "kind": "measured"}
        for r in depth_rows
        if r["status"] == "ok"
        for metric in METRICS
        if r[metric] is not None
    ]
    lines += [{**p, "metric": metric, "kind": "fit"} for metric in METRICS for p in fitted_curve(fits, metric)]
    if not lines:
        return None
    return Chart(
        kind="line",
        rows=lines,
        x="layers",
        y="ms",
        color="executor",
        dash="kind",
        facet="metric",
        log_x=True,
        log_y=True,
        title="Time per call against depth: measured and least-squares fit",
    )


def first_call_chart(depth_rows: list[dict]) -> Chart | None:
    """First call against depth, each point marked cold compile or compile cache hit; None when none ran."""
    ran = [
        {
            "executor": r["executor"],
            "layers": r["layers"],
            "first_call_s": r["first_call_s"],
            "first call": "cold compile" if r["first_call_cache_hits"] == 0 else "compile cache hit",
        }
        for r in depth_rows
        if r["first_call_s"] is not None
    ]
    if not ran:
        return None
    return Chart(
        kind="line",
        rows=ran,
        x="layers",
        y="first_call_s",
        color="executor",
        symbol="first call",
        log_x=True,
        log_y=True,
        labels={"first_call_s": "first call (s)"},
        title="First call (trace + compile + run) against depth",
    )


def floor_chart(depth_rows: list[dict]) -> Chart | None:
    """Wall over the memory-bandwidth floor against depth; None without a floor (it needs a GPU)."""
    floored = [_pick(r, "executor", "layers", "floor_ratio_x") for r in depth_rows if r["floor_ratio_x"] is not None]
    if not floored:
        return None
    return Chart(
        kind="line",
        rows=floored,
        x="layers",
        y="floor_ratio_x",
        color="executor",
        log_x=True,
        labels={"floor_ratio_x": "wall / bandwidth floor"},
        title="Wall time against the memory-bandwidth floor",
    )


def prefill_chart(prompt_rows: list[dict]) -> Chart | None:
    """Prefill wall against prompt length; None with fewer than two lengths measured."""
    ran = [_pick(r, "executor", "tokens", "wall_ms") for r in prompt_rows if r["wall_ms"] is not None]
    if len({r["tokens"] for r in ran}) < 2:
        return None
    return Chart(
        kind="line",
        rows=ran,
        x="tokens",
        y="wall_ms",
        color="executor",
        log_x=True,
        log_y=True,
        labels={"wall_ms": "wall (ms)", "tokens": "prompt tokens"},
        title="Prefill wall time against prompt length",
    )


def decode_chart(decode_rows: list[dict]) -> Chart | None:
    """Per executor the decode step beside the loop's time per output token; None when no loop ran."""
    bars = [
        {"executor": r["executor"], "ms": r[key], "what": what}
        for r in decode_rows
        if r["tpot_ms"] is not None
        for key, what in (("wall_ms", "decode step (same slot)"), ("tpot_ms", "per output token (loop)"))
    ]
    if not bars:
        return None
    return Chart(
        kind="bar",
        rows=bars,
        x="executor",
        y="ms",
        color="what",
        barmode="group",
        title="Decode: one step and time per output token",
    )


def _pick(row: dict, *columns: str) -> dict:
    """The chart's columns of a row."""
    return {c: row[c] for c in columns}


@dataclass
class Result(Study):
    """What notebook 06 shows and saves: every point and each sweep's rows, the depth fits, the key
    table, the findings, the elapsed times and the rounds."""

    NOTEBOOK: ClassVar[str] = results.SCALING
    COLUMNS: ClassVar[list[str]] = KEY_COLUMNS

    findings: list[str] = saved()
    points: list[ScalingRow] = saved()  # ``rows``: one per build
    fits: list[DepthFit] = saved()  # ``depth_fits``
    fit_rows: list[FitRow] = saved()
    elapsed: dict = saved("elapsed_s")  # seconds: builds, rounds, total
    memory_after_release: dict = saved()
    timed: Rounds = saved()
    # measured copy bandwidth (bytes/s) the floors use; None on a CPU
    bandwidth: float | None = saved("bandwidth_measured_GBps", write=lambda b: b / 1e9 if b else None)
    depth_rows: list[dict]
    prompt_rows: list[dict]
    decode_rows: list[dict]
    key_rows: list[dict]

    def key_table(self) -> dict:
        return results.key_table(key_title(self.params), self.key_rows, self.COLUMNS)


def run(params: Params) -> Result:
    """Notebook 06's study: the bandwidth measured once, every point of the three sweeps built, all timed
    in the same rounds, the builds released; the rows per sweep, the depth fits and the findings, the
    last of which says how long the builds, the rounds and the whole took."""
    env = study.begin(params)
    bandwidth = environment.measured_bandwidth(params.device)  # once; every point's floor uses it
    print(
        f"device {params.device} · executors {', '.join(params.executors)} · depths {list(params.depths)} · "
        f"prompt lengths {list(params.prompt_lengths)} · decode {params.decode_tokens} tokens · "
        f"warm-up {params.warmup}, {params.iters} calls per block, {2 * params.repeats} rounds · bandwidth for "
        "floors: " + (f"{bandwidth / 1e9:,.0f} GB/s (measured copy)" if bandwidth else "none (CPU)")
    )
    started = time.perf_counter()
    grid = sweeps(params, registry.selected(params.executors), bandwidth)
    built = sweep.build(list(grid.values()), params)
    elapsed = {"builds": time.perf_counter() - started}
    t0 = time.perf_counter()
    timed = sweep.time_all(built, params, probes(built, params))
    elapsed["rounds"] = time.perf_counter() - t0
    points = rows(grid, built, timed, params)
    memory_left = sweep.release(built, params.device)
    depth_rows = rows_of_sweep(points, "depth")
    fits = depth_fits(depth_rows, timed)
    elapsed["total"] = time.perf_counter() - started
    sentences = findings(points, fits, timed, params)
    sentences.append(
        f"Sweeps took {elapsed['total']:.0f} s (builds {elapsed['builds']:.0f} s, rounds {elapsed['rounds']:.0f} s)."
    )
    return Result(
        params=params,
        env=env,
        bandwidth=bandwidth,
        points=points,
        depth_rows=depth_rows,
        prompt_rows=rows_of_sweep(points, "prompt"),
        decode_rows=rows_of_sweep(points, "decode"),
        fits=fits,
        fit_rows=fit_rows(fits),
        key_rows=key_rows(points),
        findings=sentences,
        elapsed=elapsed,
        memory_after_release=memory_left,
        timed=timed,
    )
