"""Notebook 02, executor timing: rows (one per executor), key table, findings.

Every executor is built and measured right after its first call (``harness.standard_plan``: output,
Thunder trace, warm-up, ``%timeit``, kernels), then all of them are timed together in interleaved
rounds (``harness.rounds``): wall time (CUDA events) and steady-state host time (``perf_counter``
around the same blocks). A step is host-bound when its host time per step is at least its kernel time
per step (``metrics.host_bound``): the GPU waits for the host. Ranks and ties come from ratios taken
within rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core import harness, model, registry, results, seed_numbers
from ..core.catalog import COUNTED
from ..core.harness import Rounds
from ..core.measurement import Measurement, step_records
from ..core.metrics import Stat
from ..core.parameters import Params
from ..core.rounds import state_text
from ..core.row_types import ExecutorRow
from ..core.rows import plain_row
from ..instruments import counts
from ..instruments.trace_row import TraceRow, trace_row
from ..pages.tables import number
from .base import Study, begin_with_model, build_selected, rounds_text, saved, written

AGREEMENT = 0.10  # two ABBA passes of one executor should agree within 10%
TIMEIT_RUNS = 7  # %timeit -r: the seed's "mean ± std. dev. of 7 runs"

# The seed's DGX H100 table: its column names for this notebook's vocabulary (a display mapping).
SEED_HEADERS = {
    "label": "Execution Type",
    "wall_ms": "Wall Clock Time (ms)",
    "cpu_overhead_ms": "CPU Overhead (ms)",
    "kernel_ms": "Kernel Time (ms)",
    "kernels_per_step": "Kernels",
    "overhead_per_kernel_us": "Overhead / Kernel (us)",
}
TABLE_COLUMNS = [
    "label",
    "wall_ms",
    "cpu_overhead_ms",
    "kernel_ms",
    "kernels_per_step",
    "overhead_per_kernel_us",
    "host_ms",
    "gpu_busy_pct",
    "host_bound",
    "floor_ratio_x",
    "status",
]
NOISE_COLUMNS = [
    "label",
    "wall_q1_ms",
    "wall_q3_ms",
    "wall_iqr_pct",
    "pass_ratio_x",
    "noisy",
    "host_q1_ms",
    "host_q3_ms",
    "timeit_ms",
    "timeit_std_ms",
    "blocks",
    "first_call_s",
    "reason",
    "notes",
]
KEY_COLUMNS = [
    "executor",
    "wall_ms",
    "host_ms",
    "host_per_ref_x",
    "kernel_ms",
    "kernels_per_step",
    "gpu_busy_pct",
    "host_bound",
    "first_call_s",
    "status",
    "reason",
]


def row(p: Measurement, floor_ms: float | None) -> ExecutorRow:
    """One executor's row: wall and steady-state host time with quartiles,
    kernel time and count, the seed's derived columns, how busy the GPU is and whether the step is
    host-bound, the floor ratio, noise and provenance."""
    wall, kernels, timeit = p.wall, p.record("kernels"), p.record("timeit")
    ratio = p.timed.pass_ratio() if p.timed else None
    out = ExecutorRow.of(
        p,
        kernel_ms=kernels.get("kernel_ms"),
        kernels_per_step=kernels.get("kernels_per_step"),
        copies_per_step=kernels.get("copies_per_step"),
        timeit_ms=timeit.get("mean_ms"),
        timeit_std_ms=timeit.get("std_ms"),
        floor_ms=floor_ms,
        wall_iqr_pct=100 * wall.rel_spread if wall else None,
        blocks=wall.n if wall else None,
        pass_ratio_x=ratio,
        noisy=bool(wall.noisy or (ratio is not None and abs(ratio - 1) > AGREEMENT)) if wall else None,
    )
    out.note(kernels.get("reason"))
    return out


def rows(measured: dict[str, Measurement], floor_ms: float | None) -> list[ExecutorRow]:
    return [row(p, floor_ms) for p in measured.values()]


def seed_frame_rows(table: list[dict], columns: list[str]) -> list[dict]:
    """``table`` restricted to ``columns``, with the columns no row has a value for dropped."""
    kept = [c for c in columns if any(r.get(c) is not None for r in table)]
    return [{c: r.get(c) for c in kept} for r in table]


def wall_rows(timed: Rounds) -> list[dict]:
    """Per executor and the host reference: median and quartiles of its blocks, each pass's median."""
    out = []
    for name, t in timed.entries.items():
        first, second = t.passes()
        out.append(
            {
                "executor": name,
                **(t.wall.flat("wall_ms") if t.wall else {}),
                "blocks": len(t.wall_ms),
                "pass_1_ms": first and first.median,
                "pass_2_ms": second and second.median,
                "error": t.error,
            }
        )
    if ref := timed.reference:
        out.append({"executor": "host reference (Python loop)", **ref.flat("wall_ms"), "blocks": ref.n})
    return out


def drift_rows(timed: Rounds) -> list[dict]:
    """Every block in time order, relative to its executor's median, and the host reference per round:
    a drift of the machine moves all of them together; an executor's own noise moves it alone."""
    series = {n: t.wall_ms for n, t in timed.entries.items() if t.wall_ms}
    series["host reference"] = timed.reference_ms
    out = []
    for name, xs in series.items():
        median = Stat.of(xs).median
        out += [{"executor": name, "round": i + 1, "ms": ms, "relative_x": ms / median} for i, ms in enumerate(xs)]
    return out


def tied(timed: Rounds, fast: str, slow: str) -> bool:
    """Whether this run cannot order two executors: the quartiles of their within-round wall ratio
    include 1."""
    r = timed.ratio(slow, fast)
    return r is None or r.q1 <= 1.0


def ranking_text(table: list[ExecutorRow], timed: Rounds) -> str:
    """Fastest to slowest by median wall time; two neighbours whose within-round ratio does not
    separate them are a tie ("~", explained where there is one)."""
    ranked = sorted((r for r in table if r.wall is not None), key=lambda r: r.wall)
    if not ranked:
        return "No executor produced a wall time here."
    order = f"{ranked[0].executor} ({number(ranked[0].wall)} ms)"
    for prev, r in zip(ranked, ranked[1:]):
        sign = "~" if tied(timed, prev.executor, r.executor) else "<"
        order += f" {sign} {r.executor} ({number(r.wall)} ms)"
    tie = (
        " '~': the within-round ratio of the two does not separate them (its quartiles include 1)."
        if " ~ " in order
        else ""
    )
    return f"Fastest to slowest by median wall time: {order}.{tie}"


def seed_order_text(table: list[ExecutorRow], timed: Rounds, params) -> str | None:
    """Whether the seed's DGX H100 wall-time order holds here: said only on a GPU run of the seed
    preset, the only runs whose step is the seed's."""
    if not (params.is_cuda and params.preset == "seed"):
        return None
    seed = seed_numbers.SEED_NSIGHT_DGX_H100["rows"]
    here = [
        r.executor
        for r in sorted((r for r in table if r.wall is not None and r.executor in seed), key=lambda r: r.wall)
    ]
    if len(here) < 2:
        return "Too few of the seed's executors ran here to compare orders with the seed's DGX H100 table."
    seed_order = sorted(here, key=lambda n: seed[n][0])
    flipped = [
        (a, b)
        for i, a in enumerate(here)
        for b in here[i + 1 :]
        if seed_order.index(b) < seed_order.index(a) and not tied(timed, a, b)
    ]
    if not flipped:
        return f"The seed's executors keep the seed's DGX H100 order ({' < '.join(seed_order)}), ties included."
    return (
        f"The order differs from the seed's DGX H100 table ({' < '.join(seed_order)}): this run separates "
        + ", ".join(f"{a} < {b}" for a, b in flipped)
        + "."
    )


def host_bound_text(table: list[ExecutorRow]) -> str | None:
    """Which steps are host-bound (host time per step >= kernel time per step) and which the GPU
    bounds; a CUDA-graph executor that stays host-bound is named: host work survives its replay."""
    judged = [r for r in table if r.host_bound is not None]
    if not judged:
        return None

    def each(rs):
        return ", ".join(f"{r.executor} ({number(r.host)} vs {number(r.kernel_ms)})" for r in rs) or "none"

    bound = [r for r in judged if r.host_bound]
    text = (
        "Host-bound (host time per step at least the kernels' time per step, ms: the GPU waits for the host): "
        f"{each(bound)}. Bound by the GPU: {each([r for r in judged if not r.host_bound])}."
    )
    graphs = [r.executor for r in bound if r.executor in {g for g, _ in registry.GRAPH_PAIRS}]
    if graphs:
        one = len(graphs) == 1
        text += (
            f" {' and '.join(graphs)} replay{'s' if one else ''} CUDA graphs and still take{'s' if one else ''} "
            f"more host time per step than {'its' if one else 'their'} kernels: the per-call host work around "
            "the replay (for Thunder, its Python before the graph launches; notebook 05 takes it apart) is the "
            "bottleneck."
        )
    return text


def cpu_text(params) -> str | None:
    """What a CPU run can and cannot answer."""
    if params.is_cuda:
        return None
    return (
        "On a CPU every step is host time (no kernels, no GPU to wait for): this run ranks the executors' "
        "Python and dispatch cost on this machine's model, but says nothing about the seed's GPU numbers, "
        "kernels, CUDA graphs or nvFuser."
    )


def findings(table: list[ExecutorRow], timed: Rounds, params) -> list[str]:
    return [
        t
        for t in (
            ranking_text(table, timed),
            host_bound_text(table),
            seed_order_text(table, timed, params),
            state_text(timed),
            cpu_text(params),
        )
        if t
    ]


def top_kernels(measured: dict[str, Measurement], n: int = 5) -> list[dict]:
    """Each executor's ``n`` largest kernels (device µs per step); none on a CPU."""
    return [
        {"executor": name, **k}
        for name, m in measured.items()
        if m.built
        for k in m.record("kernels").get("top_kernels", [])[:n]
    ]


def bar_rows(table: list[ExecutorRow]) -> list[dict]:
    """Per executor with a wall time: its kernel time and CPU overhead (wall - kernel) as two parts;
    none without device kernels."""
    return [
        {"executor": r.label, "part": part, "ms": ms}
        for r in table
        if r.wall is not None
        for part, ms in (("kernel time", r.kernel_ms), ("CPU overhead (wall - kernel)", r.cpu_overhead_ms))
        if ms is not None
    ]


def kernel_rows(table: list[ExecutorRow], seed: list[seed_numbers.SeedRow]) -> list[dict]:
    """Kernels per step of the rows here and of the seed's (its Nsight table), each with its source."""
    here = [{**r.as_dict(), "source": "measured here"} for r in table if r.kernels_per_step is not None]
    return here + [dict(r) for r in seed if isinstance(r, seed_numbers.NsightRow)]


@dataclass
class Result(Study):
    """What notebook 02 shows and saves: the executors' rows as ``ExecutorRow``s, and the tables the
    notebook shows from them (``rows``, ``table_rows``, ``noise_rows``, ``ran``: as the results file
    holds rows)."""

    NOTEBOOK = results.EXECUTOR_TIMING
    TITLE = "Executor timing"
    COLUMNS = KEY_COLUMNS

    executors: list[ExecutorRow] = saved("rows")  # one per executor (``row``)
    seed_rows: list[seed_numbers.SeedRow] = saved("reference")  # the seed's published rows
    floor: dict = saved()  # model.bandwidth_floor
    findings: list[str] = saved()
    thunder_rows: dict[str, TraceRow] = saved()  # notebook 03's rows, from these builds
    measured: dict = saved()  # per executor, what standard_plan measured but its Thunder trace and counts
    counted: dict[str, dict] = saved(COUNTED)  # per executor its step counted (``instruments.counts.Counts``)
    timed: Rounds = saved()
    builds: list[dict]  # build and first call per executor
    top_kernels: list[dict]  # largest kernels per executor
    wall_rows: list[dict]  # wall time over the rounds and each pass
    drift_rows: list[dict]  # every block relative to its executor's median
    seed_tables: list[dict]  # the seed's numbers beside these (GPU runs of the seed preset only)
    bars: list[dict]  # kernel time and CPU overhead per executor (``bar_rows``)
    kernel_rows: list[dict]  # kernels per step, here and in the seed
    count_rows: list[dict]  # the step's work counted per executor (``instruments.counts.table`` of ``counted``)
    count_functions: list[dict]  # the functions with the most starts per step, per executor

    @property
    def rows(self) -> list[dict]:
        """One per executor, as the results file holds it."""
        return written(self.executors)

    @property
    def table_rows(self) -> list[dict]:
        """The rows in TABLE_COLUMNS."""
        return seed_frame_rows(self.rows, TABLE_COLUMNS)

    @property
    def noise_rows(self) -> list[dict]:
        """The rows in NOISE_COLUMNS."""
        return seed_frame_rows(self.rows, NOISE_COLUMNS)

    @property
    def ran(self) -> list[dict]:
        """The rows with a wall time."""
        return [r.as_dict() for r in self.executors if r.wall is not None]

    def key_table_rows(self) -> list[dict]:
        return self.rows


def seed_timeit(run_line_magic: Callable, kwargs: dict, params: Params) -> Callable:
    """``timeit(jm)`` for ``harness.standard_plan``: the seed's ``%timeit jm(**args); sync()`` with
    ``-n iters -r TIMEIT_RUNS``, issued through IPython's ``run_line_magic`` (what the ``%`` line
    compiles to)."""
    import torch

    line = f"-o -q -n {params.iters} -r {TIMEIT_RUNS} jm(**args); sync()"
    sync = torch.cuda.synchronize if params.is_cuda else (lambda: None)

    def timeit(jm, args=kwargs, sync=sync):  # %timeit reads the names of its line from this frame's locals
        return run_line_magic("timeit", line)

    return timeit


def run(params: Params, timeit: Callable | None = None) -> Result:
    """Build and measure every selected executor one after another, then time them all in interleaved
    rounds. ``timeit``: IPython's ``run_line_magic`` (``get_ipython().run_line_magic``), for the seed's
    ``%timeit``; without it that column is not measured."""
    env, setup, eager_logits = begin_with_model(params)
    floor = model.bandwidth_floor(setup)
    print(
        f"device {params.device} · {rounds_text(params)} · cache_mode {params.cache_mode} · bandwidth floor "
        + (
            f"{floor['floor_ms_measured']:.3g} ms"
            if floor["floor_ms_measured"]
            else "n/a (no device bandwidth on a CPU)"
        )
    )
    args = setup.kwargs
    plan = harness.standard_plan(
        args,
        params,
        eager_logits,
        timeit=seed_timeit(timeit, args, params) if timeit else None,
        trace=trace_row,
    )
    plan["counts"] = lambda p: counts.count_step(p.fn, args, params.device).to_dict()  # a pass of its own
    measured = build_selected(params, setup, plan)
    builds = [plain_row(p, first_call_s=p.first_call_s) for p in measured.values()]
    measured, timed = harness.time_in_rounds(measured, args, params)
    table = rows(measured, floor["floor_ms_measured"])
    seed = seed_numbers.seed_rows()
    return Result(
        params=params,
        env=env,
        floor=floor,
        builds=builds,
        top_kernels=top_kernels(measured),
        measured=step_records(measured, leave_out=("trace", "counts")),  # each saved once: thunder_rows, counted
        thunder_rows=thunder_rows(measured),
        timed=timed,
        wall_rows=wall_rows(timed),
        drift_rows=drift_rows(timed),
        executors=table,
        seed_tables=seed_numbers.seed_tables([r.as_dict() for r in table])
        if params.is_cuda and params.preset == "seed"
        else [],
        findings=findings(table, timed, params),
        bars=bar_rows(table),
        seed_rows=seed,
        kernel_rows=kernel_rows(table, seed),
        counted=(counted := {n: p.record("counts") for n, p in measured.items() if p.record("counts")}),
        count_rows=counts.table(counted),
        count_functions=counts.top_functions(counted),
    )


def thunder_rows(measured: dict[str, Measurement]) -> dict[str, TraceRow]:
    """Notebook 02's Thunder rows for ``thunder_traces.from_run``: per Thunder configuration the row its
    ``trace`` step took, or its own row (unavailable, or failed before that step ran)."""
    return {n: p.record("trace") or TraceRow.of(p) for n, p in measured.items() if p.executor.needs_thunder}
