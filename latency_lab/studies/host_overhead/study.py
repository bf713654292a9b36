"""Notebook 05, where the host time goes: ``run(params) -> Result`` (rows, key table, findings), ``Result.save``.

Per executor, right after its first call (``plan``): its output against eager's, the warm-up, the GPU
memory it holds (from an emptied allocator cache before it was built to an emptied cache after its
warm-up), one profiled step's timeline, and for a Thunder configuration its regions run alone (the
cross-check). Then all executors run in the same interleaved rounds (``harness.rounds``): wall and
steady-state host time, and for each Thunder configuration an instrumented block of the same step
right after its plain block (``thunder_breakdown.InSitu``), which gives the in-place breakdown and
closes it on the plain step's host time of the same round.

The tables come from both (``step_row``, ``parts_rows``, ``phase_rows``, ``region_rows``, ``graph_rows``);
the seed's hypotheses are graded and the findings written in ``findings``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...core import harness, metrics, registry, results, timing
from ...core.catalog import COUNTED
from ...core.harness import Rounds, describe
from ...core.measurement import Measurement
from ...core.metrics import Stat
from ...core.parameters import Params
from ...core.row_types import GradeRow, GraphRow, HostStepRow
from ...instruments import counts, thunder_breakdown
from ...instruments.probes import STEP_PROFILES, breakdowns, insitu_probes, step_timeline, trace_file
from ...instruments.thunder_breakdown import CallRow, PartRow
from ..base import Study, begin_with_model, build_selected, rounds_text, saved, written
from . import findings as graded
from .rows import PhaseRow, RegionRow, RemainderRow

STEP_COLUMNS = [
    "executor",
    "wall_ms",
    "host_ms",
    "host_per_ref_x",
    "kernel_ms",
    "kernels_per_step",
    "gpu_busy_pct",
    "host_bound",
    "allocated_mib",
    "reserved_mib",
    "status",
    "reason",
]
# The notebook's step table: the key table's columns, wall, host and host per reference with their 95%
# intervals (shown in their cells) and the notes.
STEP_PAGE_COLUMNS = [
    *STEP_COLUMNS,
    *(part for name in ("wall_ms", "host_ms", "host_per_ref_x") for part in metrics.interval_names(name)),
    "notes",
]
REMAINDER = "remainder (plain step - instrumented call)"  # the parts' last row per configuration


def plan(kwargs: dict, params, eager_logits, notebook: str) -> harness.Plan:
    """The per-executor measurements, in order, right after its first call (module docstring)."""
    device = params.device
    before = {"reading": harness.memory(device, empty=True)}  # the first executor's memory counts from here

    def thunder_alone(p: Measurement):
        if thunder_breakdown.jit_parts(p.fn) is None:
            return {"reason": thunder_breakdown.not_jit_reason(p.name, "regions")}
        try:
            return {"rows": thunder_breakdown.alone(p.fn, kwargs, device, params.iters, p.name)}
        except Exception as e:  # an API the installed thunder lacks is a reason in this part's rows
            return {"reason": describe(e)}

    def memory_after(p: Measurement):
        if not device.startswith("cuda"):
            return {"reason": "GPU memory needs a CUDA device"}
        return harness.memory_held(before["reading"], harness.memory(device, empty=True))

    return {
        "output": lambda p: harness.check_output(p, eager_logits, params.dtype, params.layers),
        "warm-up": lambda p: timing.warm_up(p.fn, kwargs, params.warmup),
        "memory": memory_after,
        "timeline": lambda p: step_timeline(p.fn, kwargs, device, trace_file(params.output_dir, notebook, p.name)),
        "alone": lambda p: thunder_alone(p) if p.executor.needs_thunder else None,
        "counts": lambda p: counts.count_step(p.fn, kwargs, device).to_dict(),  # exact, apart from any timing
        "memory baseline of the next executor": lambda p: before.update(reading=harness.memory(device, empty=True)),
    }


def step_row(p: Measurement) -> HostStepRow:
    """One executor's steady-state step: wall and host time (same rounds), kernels and kernel time
    (the profiled step), GPU busy and host-bound, the memory it holds."""
    step = p.record("timeline").get("step") or {}
    kernel_ms = step["kernel_us"] / 1e3 if step.get("kernels") else None
    memory = p.record("memory")
    out = HostStepRow.of(
        p,
        kernel_ms=kernel_ms,
        kernels_per_step=step.get("kernels") or None,
        allocated_mib=memory.get("allocated_mib"),
        reserved_mib=memory.get("reserved_mib"),
    )
    if memory.get("reason") and p.ok:
        out.note(f"memory: {memory['reason']}")
    return out


def timeline_row(p: Measurement) -> dict | None:
    """The profiled step's metrics: host time under the profiler, its top-level host split, call to
    first kernel, GPU idle, host after the last launch."""
    t = p.record("timeline")
    if not t:
        return None
    s = t["step"]
    return {
        "executor": p.name,
        "profiled_host_us": s["host_us"],
        "in_torch_ops_us": s["host_in_ops_us"],
        "in_annotated_regions_us": s["host_in_annotations_us"],
        "in_cuda_runtime_us": s["host_in_runtime_us"],
        "call_to_first_kernel_us": s["first_kernel_us"],
        "gpu_idle_us": s["gpu_idle_us"],
        "host_after_last_launch_us": s["host_tail_us"],
        "chrome_trace": t["file"],
    }


def phase_rows(taken_apart: dict[str, dict]) -> list[PhaseRow]:
    """Per configuration and phase of the call: in-place µs (median and quartiles over the rounds, and
    the interval), the statistics of the per-block samples its breakdown holds (``thunder_breakdown.phase_stats``)."""
    return [
        PhaseRow(n, phase, s)
        for n, b in taken_apart.items()
        if "phases_per_block" in b
        for phase, s in thunder_breakdown.phase_stats(b["phases_per_block"], b["fast"]).items()
    ]


def parts_rows(taken_apart: dict[str, dict]) -> list[PartRow]:
    """Per configuration: the in-place parts of one call (``thunder_breakdown.part_rows``: phases around the
    computation, and the computation's statements by kind), then the remainder (``RemainderRow``: the plain
    step's host time of the same rounds less the corrected instrumented call, and % of plain; medians over rounds)."""
    rows = []
    for n, b in taken_apart.items():
        if "phases" not in b:
            continue
        rem, rem_us = b["remainder_pct"], b.get("remainder_us")
        rows += [
            *thunder_breakdown.part_rows(n, b),
            RemainderRow(n, REMAINDER, rem_us and rem_us.median, remainder_pct=rem and rem.median),
        ]
    return rows


def region_rows(taken_apart: dict[str, dict], measured: dict[str, Measurement]) -> list[RegionRow]:
    """Every region and op of each configuration (``RegionRow``): in place (µs per call, quartiles over
    rounds), alone from an idle GPU (the cross-check), an nvFuser region's ``fd.execute`` alone (nvFuser
    without Thunder's wrapper), kernels it launches (profiled alone) and µs per kernel. Calls are matched
    to the statements by name, in order per name: a call missing alone leaves only its own row empty."""
    out = []
    for n, b in taken_apart.items():
        rows = measured[n].record("alone").get("rows") or [] if n in measured else []
        execute = {r.index: r for r in rows if r.kind == "nvFuser execute"}
        by_name: dict[str, list[CallRow]] = {}
        for r in rows:
            if r.kind != "nvFuser execute":
                by_name.setdefault(r.call, []).append(r)
        for s in b.get("statements", []):
            if s["kind"] == "glue":
                continue
            same = by_name.get(s["name"])
            a = same.pop(0) if same else None
            fd = execute.get(a.index) if a is not None else None
            out.append(
                RegionRow(
                    n,
                    s["index"],
                    s["name"],
                    s["kind"],
                    Stat(s["median"], s["q1"], s["q3"], None, None, None, None, None),  # median and quartiles
                    alone_us=_median(a),
                    execute_alone_us=_median(fd),
                    kernels=a.kernels if a is not None else None,
                )
            )
    return out


def _median(call: CallRow | None) -> float | None:
    """The median of a call's latency alone; None without the call or its latency."""
    return call.alone_us.median if call is not None and call.alone_us is not None else None


def graph_rows(step: list[HostStepRow], timed: Rounds) -> list[GraphRow]:
    """Each CUDA-graph variant against the same executor without graphs, in the same rounds: wall and
    host time, the within-round ratio of the walls (quartiles and interval), and the memory each holds."""
    by = {r.executor: r for r in step}
    rows = []
    for graphs, plain in registry.GRAPH_PAIRS:
        if graphs not in by or plain not in by:
            continue
        g, b = by[graphs], by[plain]
        ratio = timed.ratio(graphs, plain)
        host_ratio = timed.ratio(graphs, plain, "host_ms")
        reason = "; ".join(f"{r.executor}: {r.reason}" for r in (g, b) if r.status != "ok" and r.reason)
        rows.append(
            GraphRow(
                graphs,
                plain,
                g.wall,
                b.wall,
                ratio or None,
                g.host,
                b.host,
                100 * (1 - host_ratio.median) if host_ratio else None,
                g.allocated_mib,
                b.allocated_mib,
                g.reserved_mib,
                b.reserved_mib,
                reason or None,
            )
        )
    return rows


def parts_figure(rows: list[dict]):
    """Stacked bars (a ``pages.charts.Chart``): each configuration's in-place host time per step, by part,
    and the remainder; None without parts."""
    from ...pages.charts import Chart

    if not rows:
        return None
    return Chart(
        kind="bar",
        rows=rows,
        x="executor",
        y="us",
        color="part",
        title="Host time per step, taken apart in place",
        labels={"us": "µs per step"},
    )


def trace_href(file: str, output_dir_given: bool, output_dir: str) -> str:
    """Relative link to a saved Chrome trace: under the runner (``output_dir`` given) the executed
    notebook sits beside it; in JupyterLab (``output_dir`` left empty) in the working directory."""
    import os

    return file if output_dir_given else os.path.relpath(Path(output_dir) / file, Path.cwd())


@dataclass
class Result(Study):
    """Notebook 05's run: the tables it shows and saves, its findings and the rounds they come from;
    the steps as ``HostStepRow``s (``step``: as the results file holds them)."""

    NOTEBOOK = results.HOST_OVERHEAD
    TITLE = "Host overhead per executor"
    COLUMNS = STEP_COLUMNS

    findings: list[str] = saved()
    steps: list[HostStepRow] = saved("step")  # one per executor (``step_row``)
    parts: list[PartRow] = saved()  # ``parts_rows``: the parts, then a ``RemainderRow``, per configuration
    breakdown: dict[str, dict] = saved()
    regions: list[RegionRow] = saved()  # ``region_rows``
    graphs: list[GraphRow] = saved()
    grades: list[GradeRow] = saved()  # the seed claims' grades (``findings.grades``)
    timelines: dict[str, dict] = saved("timeline")  # the profiled step's metrics per executor (``timeline_row``)
    memory: dict[str, dict | None] = saved()
    first_call_s: dict[str, float | None] = saved()
    counted: dict[str, dict] = saved(COUNTED)  # per executor its step counted (``instruments.counts.Counts``)
    timed: Rounds = saved()
    phases: list[PhaseRow]  # ``phase_rows``
    count_rows: list[dict]  # the step's work counted per executor (``instruments.counts.table`` of ``counted``)
    count_functions: list[dict]  # the functions with the most starts per step, per executor
    profiled: dict[str, dict]  # the profiled step per executor: its Chrome trace's file and its rows

    @property
    def step(self) -> list[dict]:
        """One per executor, as the results file holds it."""
        return written(self.steps)

    def key_table_rows(self) -> list[dict]:
        return self.step


def run(params: Params) -> Result:
    """Build and measure every executor one after another (``plan``), then time them all in the same
    rounds with each Thunder configuration taken apart in place; the tables and findings from both."""
    env, setup, eager_logits = begin_with_model(params)
    print(
        f"device {params.device} · {rounds_text(params)} · {STEP_PROFILES} profiled steps · "
        f"executors {', '.join(params.executors)}"
    )
    measurements = plan(setup.kwargs, params, eager_logits, results.HOST_OVERHEAD)
    measured = build_selected(params, setup, measurements)
    probed, insitu, not_taken_apart = insitu_probes(measured, setup.kwargs, params.iters)
    measured, timed = harness.time_in_rounds(measured, setup.kwargs, params, probed)
    taken_apart = {**breakdowns(insitu, timed), **{n: {"reason": why} for n, why in not_taken_apart.items()}}
    step = [step_row(p) for p in measured.values()]
    regions = region_rows(taken_apart, measured)
    timelines = {n: r for n, p in measured.items() if (r := timeline_row(p))}
    graphs = graph_rows(step, timed)
    return Result(
        params=params,
        env=env,
        steps=step,
        breakdown=taken_apart,
        parts=parts_rows(taken_apart),
        phases=phase_rows(taken_apart),
        regions=regions,
        timelines=timelines,
        profiled={n: p.steps["timeline"] for n, p in measured.items() if p.steps.get("timeline")},
        graphs=graphs,
        grades=graded.grades(taken_apart, timelines, regions, graphs, params.device),
        findings=graded.findings(taken_apart, timelines, regions, graphs, timed, params.device),
        memory={n: p.steps.get("memory") for n, p in measured.items() if p.built},
        first_call_s={n: p.first_call_s for n, p in measured.items()},
        timed=timed,
        counted=(counted := {n: p.record("counts") for n, p in measured.items() if p.record("counts")}),
        count_rows=counts.table(counted),
        count_functions=counts.top_functions(counted),
    )
