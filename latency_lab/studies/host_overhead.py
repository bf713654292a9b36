"""Notebook 05, where the host time goes: ``run(params) -> Result`` (rows, key table, findings), ``Result.save``.

Per executor, right after its first call (``plan``): its output against eager's, the warm-up, the GPU
memory it holds (from an emptied allocator cache before it was built to an emptied cache after its
warm-up), one profiled step's timeline, and for a Thunder configuration its regions run alone (the
cross-check). Then all executors run in the same interleaved rounds (``harness.rounds``): wall and
steady-state host time, and for each Thunder configuration an instrumented block of the same step
right after its plain block (``thunder_breakdown.InSitu``), which gives the in-place breakdown and
closes it on the plain step's host time of the same round.

The seed's hypotheses are graded two-sided against the seed's numbers, in ``compare``'s words with the
seed's claim as A: ``same: holds`` inside the seed's range, ``changed: higher`` or ``changed: lower``
outside it, ``same: at the edge`` where the interval straddles a bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..core import harness, metrics, registry, results, timing
from ..core.harness import Prepared, Rounds, describe
from ..core.metrics import Stat
from ..core.parameters import Params
from ..core.rows import HostStepRow
from ..core.verdicts import CHANGED, SAME, phrase
from ..pages.tables import number
from . import profiler_timeline, thunder_breakdown
from .study import Study, begin_with_model, build_selected, rounds_text

STEP_PROFILES = 3  # profiled steps per executor; the median one (by host time) is drawn and saved
# The seed's hypotheses as ranges: a measured median inside holds, outside is changed (higher or lower).
SEED_STARTUP_US = (200.0, 300.0)  # "~250 µs of start-up time" per step
SEED_NVFUSER_US_PER_KERNEL = (20.0, 30.0)  # "around 20 to 30 us per kernel"
SEED_WRAPPER_US = 20.0  # "The FusionDefinition caching from Thunder looks slow on the order of 20+us per fusion"
GRAPHS_CURE = 0.8  # graphs "cure" when the wall with them is <= 80% of without, within rounds
CLOSES = 10.0  # % of the plain step's host time the in-place parts may leave unexplained
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


def trace_file(output_dir: str, notebook: str, executor: str) -> Path:
    """Where a profiled step's Chrome trace is saved: ``<notebook>.<executor>.chrome-trace.json.gz``."""
    return Path(output_dir) / f"{notebook}.{re.sub(r'[^A-Za-z0-9_.-]+', '_', executor)}.chrome-trace.json.gz"


def step_timeline(fn, kwargs: dict, device: str, path: Path) -> dict:
    """``STEP_PROFILES`` steps under the profiler; metrics of each, the median step (by host time)
    drawn and saved to ``path`` as a Chrome trace. Profiled numbers: the profiler adds its own host
    cost, so they are compared with each other, never with the unprofiled host time."""
    trace = profiler_timeline.profile_calls([("step", lambda: fn(**kwargs))], device, STEP_PROFILES)
    steps = [w for w in profiler_timeline.windows(profiler_timeline.spans_from_chrome(trace)) if w.label == "step"]
    metrics = [profiler_timeline.window_metrics(w) for w in steps]
    median = sorted(range(len(steps)), key=lambda i: metrics[i]["host_us"])[len(steps) // 2]
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler_timeline.write_chrome_trace(trace, steps[median], path)
    return {
        "file": path.name,
        "steps": metrics,
        "step": metrics[median],
        "rows": profiler_timeline.timeline_rows(steps[median]),
    }


def plan(kwargs: dict, params, eager_logits, notebook: str) -> harness.Plan:
    """The per-executor measurements, in order, right after its first call (module docstring)."""
    device = params.device
    before = {"reading": harness.memory(device, empty=True)}  # the first executor's memory counts from here

    def thunder_alone(p: Prepared):
        if thunder_breakdown.jit_parts(p.fn) is None:
            return {"reason": thunder_breakdown.not_jit_reason(p.name, "regions")}
        try:
            return {"rows": thunder_breakdown.alone(p.fn, kwargs, device, params.iters)}
        except Exception as e:  # an API the installed thunder lacks is a reason in this part's rows
            return {"reason": describe(e)}

    def memory_after(p: Prepared):
        if not device.startswith("cuda"):
            return {"reason": "GPU memory needs a CUDA device"}
        return harness.memory_held(before["reading"], harness.memory(device, empty=True))

    return {
        "output": lambda p: harness.check_output(p, eager_logits, params.dtype, params.layers),
        "warm-up": lambda p: timing.warm_up(p.fn, kwargs, params.warmup),
        "memory": memory_after,
        "timeline": lambda p: step_timeline(p.fn, kwargs, device, trace_file(params.output_dir, notebook, p.name)),
        "alone": lambda p: thunder_alone(p) if p.executor.needs_thunder else None,
        "memory baseline of the next executor": lambda p: before.update(reading=harness.memory(device, empty=True)),
    }


def probes(prepared: dict[str, Prepared], kwargs: dict, calls: int) -> tuple[dict, dict, dict]:
    """For every Thunder configuration that can be instrumented: its ``InSitu`` and a probe for the
    rounds; for the others, the reason. Returns (probes by executor, InSitu by executor, reasons)."""
    out, insitu, reasons = {}, {}, {}
    for name, p in prepared.items():
        if not (p.ok and p.executor.needs_thunder):
            continue
        ins, why = thunder_breakdown.insitu_probe(p, kwargs, calls)
        if ins is None:
            reasons[name] = why
            continue
        insitu[name] = ins
        out[name] = {"insitu": lambda ins=ins: ins.block(calls)}
    return out, insitu, reasons


def breakdowns(insitu: dict, timed: Rounds) -> dict[str, dict]:
    """Per instrumented configuration, the in-place breakdown over the rounds (``summarize``)."""
    return {
        n: thunder_breakdown.summarize(
            ins, timed.entries[n].probes.get("insitu") or [], timed.entries[n].host_ms, timed.entries[n].keep()
        )
        for n, ins in insitu.items()
        if n in timed.entries
    }


def step_row(p: Prepared, measured: dict, timed: Rounds) -> HostStepRow:
    """One executor's steady-state step: wall and host time (same rounds), kernels and kernel time
    (the profiled step), GPU busy and host-bound, the memory it holds."""
    t = timed.entries.get(p.name)
    step = (measured.get("timeline") or {}).get("step") or {}
    kernel_ms = step["kernel_us"] / 1e3 if step.get("kernels") else None
    memory = measured.get("memory") or {}
    out = HostStepRow.of(
        p,
        first_call_s=p.first_call_s,
        **HostStepRow.timed(t),
        kernel_ms=kernel_ms,
        kernels_per_step=step.get("kernels") or None,
        allocated_mib=memory.get("allocated_mib"),
        reserved_mib=memory.get("reserved_mib"),
    )
    if memory.get("reason") and p.ok:
        out.note(f"memory: {memory['reason']}")
    return out


def timeline_row(name: str, measured: dict) -> dict | None:
    """The profiled step's metrics: host time under the profiler, its top-level host split, call to
    first kernel, GPU idle, host after the last launch."""
    t = measured.get("timeline")
    if not t:
        return None
    s = t["step"]
    return {
        "executor": name,
        "profiled_host_us": s["host_us"],
        "in_torch_ops_us": s["host_in_ops_us"],
        "in_annotated_regions_us": s["host_in_annotations_us"],
        "in_cuda_runtime_us": s["host_in_runtime_us"],
        "call_to_first_kernel_us": s["first_kernel_us"],
        "gpu_idle_us": s["gpu_idle_us"],
        "host_after_last_launch_us": s["host_tail_us"],
        "chrome_trace": t["file"],
    }


def phase_rows(taken_apart: dict[str, dict]) -> list[dict]:
    """Per configuration and phase of the call: in-place µs (median and quartiles over the rounds)."""
    return [
        {"executor": n, "phase": phase, **Stat.from_dict(v).flat("us")}
        for n, b in taken_apart.items()
        if "phases" in b
        for phase, v in b["phases"].items()
    ]


def parts_rows(taken_apart: dict[str, dict]) -> list[dict]:
    """Per configuration: the in-place parts of one call (phases around the computation, and the
    computation's statements by kind), the corrected instrumented call, the plain step's host time
    of the same rounds, and the remainder (plain - instrumented, % of plain; median over rounds)."""
    rows = []
    for n, b in taken_apart.items():
        if "phases" not in b:
            continue
        for phase, v in b["phases"].items():
            if phase != "statements":
                rows.append({"executor": n, "part": phase, "us": v["median"]})
        for kind, v in b["kinds"].items():
            rows.append({"executor": n, "part": thunder_breakdown.kind_label(kind), "us": v["median"]})
        rem = b["remainder_pct"] or {}
        rows.append(
            {
                "executor": n,
                "part": "remainder (plain step - instrumented call)",
                "us": (b.get("remainder_us") or {}).get("median"),
                "remainder_pct": rem.get("median"),
            }
        )
    return rows


def region_rows(taken_apart: dict[str, dict], measured: dict[str, dict]) -> list[dict]:
    """Every region and op of each configuration: in place (µs per call, quartiles over rounds), alone
    from an idle GPU (the cross-check), an nvFuser region's ``fd.execute`` alone (nvFuser without
    Thunder's wrapper), kernels it launches (profiled alone) and µs per kernel. Calls are matched to
    the statements by name, in order per name: a call missing alone leaves only its own row empty."""
    out = []
    for n, b in taken_apart.items():
        rows = ((measured.get(n) or {}).get("alone") or {}).get("rows") or []
        execute = {r["index"]: r for r in rows if r["kind"] == "nvFuser execute"}
        by_name: dict[str, list[dict]] = {}
        for r in rows:
            if r["kind"] != "nvFuser execute":
                by_name.setdefault(r["call"], []).append(r)
        for s in b.get("statements", []):
            if s["kind"] == "glue":
                continue
            same = by_name.get(s["name"])
            a = same.pop(0) if same else {}
            kernels = a.get("kernels")
            fd = (execute.get(a["index"]) or {}).get("alone_us") if a else None
            out.append(
                {
                    "executor": n,
                    "statement": s["index"],
                    "call": s["name"],
                    "kind": s["kind"],
                    "in_place_us": s["median"],
                    "in_place_q1_us": s["q1"],
                    "in_place_q3_us": s["q3"],
                    "alone_us": a.get("alone_us"),
                    "execute_alone_us": fd,
                    "kernels": kernels,
                    "in_place_us_per_kernel": s["median"] / kernels if kernels else None,
                    "alone_us_per_kernel": a["alone_us"] / kernels
                    if kernels and a.get("alone_us") is not None
                    else None,
                    "execute_alone_us_per_kernel": fd / kernels if kernels and fd is not None else None,
                }
            )
    return out


def nvfusion_per_kernel(taken_apart: dict[str, dict], regions: list[dict], name: str) -> Stat | None:
    """In-place host µs per kernel over all nvFusion regions of ``name``, per round (total nvFusion µs
    over total nvFusion kernels), over the rounds where the host ran fast, with its interval."""
    kernels = sum(r["kernels"] or 0 for r in regions if r["executor"] == name and r["kind"] == "nvFusion")
    per_block = (taken_apart.get(name) or {}).get("kinds_per_block", {}).get("nvFusion")
    keep = (taken_apart.get(name) or {}).get("fast")
    return Stat.headline([us / kernels for us in per_block], keep) if kernels and per_block else None


def alone_costs(regions: list[dict], name: str) -> dict | None:
    """``name``'s nvFusion regions alone, in the same statistic as in place (totals over regions): µs
    per kernel through Thunder's wrapper and in ``fd.execute`` alone, and the wrapper's µs per fusion
    (wrapper - execute); over the regions that have both. None without any."""
    both = [
        r
        for r in regions
        if r["executor"] == name and r["kind"] == "nvFusion" and r["kernels"]
        if r["alone_us"] is not None and r["execute_alone_us"] is not None
    ]
    if not both:
        return None
    kernels = sum(r["kernels"] for r in both)
    wrapped, execute = sum(r["alone_us"] for r in both), sum(r["execute_alone_us"] for r in both)
    return {
        "regions": len(both),
        "kernels": kernels,
        "alone_us_per_kernel": wrapped / kernels,
        "execute_us_per_kernel": execute / kernels,
        "wrapper_us_per_fusion": (wrapped - execute) / len(both),
    }


HOLDS, EDGE = phrase(SAME, "holds"), phrase(SAME, "at the edge")  # the seed's claim as A (``verdicts``)
HIGHER, LOWER, DOES_NOT_HOLD = (phrase(CHANGED, w) for w in ("higher", "lower", "does not hold"))


def grade(value: float | Stat, band: tuple[float, float]) -> str:
    """``HOLDS`` inside the seed's range, ``HIGHER`` or ``LOWER`` outside it; for a statistic with an
    interval, by the interval: higher or lower only when all of it lies outside the range, holds when
    all of it lies inside, else ``EDGE`` (the interval straddles a bound)."""
    if not isinstance(value, Stat) or value.lo is None:
        m = value.median if isinstance(value, Stat) else value
        return LOWER if m < band[0] else HIGHER if m > band[1] else HOLDS
    if value.hi < band[0]:
        return LOWER
    if value.lo > band[1]:
        return HIGHER
    return HOLDS if band[0] <= value.lo and value.hi <= band[1] else EDGE


def graph_rows(step: list[HostStepRow], timed: Rounds) -> list[dict]:
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
            {
                "with_graphs": graphs,
                "without": plain,
                "wall_with_ms": g.wall,
                "wall_without_ms": b.wall,
                **(ratio.flat("wall_ratio_x") if ratio else {"wall_ratio_x": None}),
                "host_with_ms": g.host,
                "host_without_ms": b.host,
                "host_removed_pct": 100 * (1 - host_ratio.median) if host_ratio else None,
                "allocated_with_mib": g.allocated_mib,
                "allocated_without_mib": b.allocated_mib,
                "reserved_with_mib": g.reserved_mib,
                "reserved_without_mib": b.reserved_mib,
                "reason": reason or None,
            }
        )
    return rows


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{number(value / 1e3)} ms" if abs(value) >= 1e3 else f"{number(value)} µs"


def _spread(s: Stat | dict) -> str:
    """The statistic's interval where it has one (``host_state.interval``), else its IQR."""
    s = s if isinstance(s, Stat) else Stat.from_dict(s)
    return f"interval {_us(s.lo)}-{_us(s.hi)}" if s.lo is not None else f"IQR {_us(s.q1)}-{_us(s.q3)}"


def parts_text(taken_apart: dict[str, dict]) -> list[str]:
    """Per instrumented configuration: its largest in-place parts and whether they close on the step."""
    out = []
    for n, b in taken_apart.items():
        if "phases" not in b:
            out.append(f"{n}: no in-place breakdown ({b.get('reason')}).")
            continue
        parts = {
            **{k: v["median"] for k, v in b["phases"].items() if k != "statements"},
            **{thunder_breakdown.kind_label(k): v["median"] for k, v in b["kinds"].items()},
        }
        top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        rem = (b["remainder_pct"] or {}).get("median")
        verdict = "close" if rem is not None and abs(rem) <= CLOSES else "do not close"
        out.append(
            f"{n}: host {_us(b['plain_host_us']['median'])} per step; largest in-place parts "
            + ", ".join(f"{k} {_us(v)}" for k, v in top)
            + f". The in-place parts {verdict} on the plain step of the same rounds "
            f"(remainder {number(rem)}% of it, median over {b['blocks']} rounds of the plain step's mean host time per "
            f"call against the instrumented call's; within ±{CLOSES:.0f}% closes)." + closure_scope(b)
        )
    return out


def closure_scope(b: dict) -> str:
    """What the closure can and cannot detect, from the breakdown's own numbers."""
    corr = (b.get("correction_pct") or {}).get("median")
    text = (
        " The closure tests the instrumented call as a whole (a copy of the computation that ran slower or "
        "faster than the original would leave a remainder); it cannot see time moved from one part to another"
    )
    if corr is None:
        return text + "."
    return text + (
        f", and the timestamps' whole correction is {number(corr)}% of the step, so an error in their "
        "calibration moves the remainder by less than that."
    )


def startup_of(taken_apart: dict[str, dict]) -> str | None:
    """The Thunder configuration whose in-place start-up is graded: thunder where it was taken apart,
    else the first that was; None without one."""
    if "thunder" in taken_apart and "startup_us" in taken_apart["thunder"]:
        return "thunder"
    return next((n for n, b in taken_apart.items() if "startup_us" in b), None)


def startup_text(taken_apart: dict[str, dict], timelines: dict[str, dict], device: str) -> str:
    """The seed's ~250 µs start-up per step, graded on Thunder's in-place time before its computation's
    first statement, with the profiled call-to-first-kernel against eager's as a cross-check."""
    name = startup_of(taken_apart)
    if name is None:
        return "Start-up per step (seed: ~250 µs): no Thunder configuration was taken apart in place here."
    s = Stat.from_dict(taken_apart[name]["startup_us"])
    lo, hi = SEED_STARTUP_US
    text = (
        f"Start-up per step (seed: ~250 µs that Thunder spends and eager does not, read as {lo:.0f}-{hi:.0f} µs). "
        f"Before the computation's first statement, in place: {_us(s.median)} for {name} ({_spread(s)}; call "
        f"entry, cache info, cache search, prologue, bookkeeping): {grade(s, SEED_STARTUP_US)}"
        + ("." if device.startswith("cuda") else " (on this CPU machine's host; the seed's ran beside a GPU).")
    )
    eager, here = ((timelines.get(n) or {}).get("call_to_first_kernel_us") for n in ("eager", name))
    if device.startswith("cuda") and eager is not None and here is not None:
        text += (
            f" Call to first kernel beyond eager's, profiled (one step under the profiler, which adds its own "
            f"host cost): {_us(here - eager)} ({name} {_us(here)}, eager {_us(eager)}): "
            f"{grade(here - eager, SEED_STARTUP_US)}."
        )
    return text


def per_kernel_text(taken_apart: dict[str, dict], regions: list[dict], device: str) -> str:
    """The seed's two per-fusion costs, each graded on its own claim: nvFuser's 20-30 µs of host time
    per kernel (in place, which includes Thunder's wrapper, and ``fd.execute`` alone, which does not)
    and Thunder's FusionDefinition cache at 20+ µs per fusion (the wrapper around ``fd.execute``, alone)."""
    lo, hi = SEED_NVFUSER_US_PER_KERNEL
    parts = []
    for n in taken_apart:
        s = nvfusion_per_kernel(taken_apart, regions, n)
        if s is None:
            continue
        text = (
            f"{n}: in place, Thunder's wrapper included, {_us(s.median)} per kernel ({_spread(s)} over rounds; total "
            f"nvFusion µs over its kernels): {grade(s, SEED_NVFUSER_US_PER_KERNEL)}"
        )
        if c := alone_costs(regions, n):
            own = grade(c["execute_us_per_kernel"], SEED_NVFUSER_US_PER_KERNEL)
            cache = HOLDS if c["wrapper_us_per_fusion"] >= SEED_WRAPPER_US else LOWER
            text += (
                f"; alone from an idle GPU (totals over {c['regions']} regions, {number(c['kernels'])} kernels): "
                f"{_us(c['alone_us_per_kernel'])} per kernel through the wrapper, "
                f"{_us(c['execute_us_per_kernel'])} in fd.execute alone (nvFuser's own: {own}); the wrapper adds "
                f"{_us(c['wrapper_us_per_fusion'])} per fusion (seed: 20+ µs per fusion for Thunder's "
                f"FusionDefinition cache: {cache})"
            )
        parts.append(text)
    if not parts:
        return f"nvFuser host time per kernel (seed: {lo:.0f}-{hi:.0f} µs): " + (
            "needs CUDA and nvFuser." if not device.startswith("cuda") else "no nvFusion region was measured."
        )
    return f"nvFuser host time per kernel (seed: {lo:.0f}-{hi:.0f} µs): " + "; ".join(parts) + "."


def graphs_text(graphs: list[dict], timed: Rounds, device: str) -> str:
    cures = [g for g in graphs if g["wall_ratio_x"] is not None]
    if not cures:
        return "CUDA graphs as the cure: " + (
            "needs CUDA." if not device.startswith("cuda") else "no graph variant ran beside its baseline."
        )
    parts = [
        f"{g['with_graphs']} runs at x{number(g['wall_ratio_x'])} the wall of {g['without']} "
        f"(within rounds, IQR x{number(g['wall_ratio_q1_x'])}-x{number(g['wall_ratio_q3_x'])}"
        + (
            f", interval x{number(g['wall_ratio_lo_x'])}-x{number(g['wall_ratio_hi_x'])}"
            if "wall_ratio_lo_x" in g
            else ""
        )
        + f"; removes {number(g['host_removed_pct'])}% of its host time): {cure_verdict(g)}"
        + harness.host_moved_note(timed, 1 - g["wall_ratio_x"])
        for g in cures
    ]
    return (
        f"CUDA graphs as the cure (holds when the ratio's interval lies at or under x{GRAPHS_CURE:g} of the wall "
        "without, does not hold when above it, else at the edge; in compare's words, the seed's claim as A): "
        + "; ".join(parts)
        + "."
    )


def cure_verdict(g: dict) -> str:
    """``HOLDS`` / ``EDGE`` / ``DOES_NOT_HOLD`` for a graph row, from its ratio's interval (the median
    where it has none)."""
    lo, hi = g.get("wall_ratio_lo_x", g["wall_ratio_x"]), g.get("wall_ratio_hi_x", g["wall_ratio_x"])
    return HOLDS if hi <= GRAPHS_CURE else DOES_NOT_HOLD if lo > GRAPHS_CURE else EDGE


def grades(taken_apart, timelines, regions, graphs, device: str) -> list[dict]:
    """Each grade of a seed claim that the findings give, as a record (claim, executor, the value graded
    and its grade), so that ``compare`` can set two runs' grades side by side."""

    def record(claim, executor, value, verdict):
        return {"claim": claim, "executor": executor, "value": value, "grade": verdict}

    out = []
    if (name := startup_of(taken_apart)) is not None:
        s = Stat.from_dict(taken_apart[name]["startup_us"])
        out.append(record("start-up per step, in place (µs)", name, s.median, grade(s, SEED_STARTUP_US)))
        eager, here = ((timelines.get(n) or {}).get("call_to_first_kernel_us") for n in ("eager", name))
        if device.startswith("cuda") and eager is not None and here is not None:
            out.append(
                record(
                    "call to first kernel beyond eager's (µs)", name, here - eager, grade(here - eager, SEED_STARTUP_US)
                )
            )
    for n in taken_apart:
        if (s := nvfusion_per_kernel(taken_apart, regions, n)) is not None:
            out.append(record("nvFuser per kernel, in place (µs)", n, s.median, grade(s, SEED_NVFUSER_US_PER_KERNEL)))
            if c := alone_costs(regions, n):
                own = c["execute_us_per_kernel"]
                out.append(
                    record("nvFuser per kernel, fd.execute alone (µs)", n, own, grade(own, SEED_NVFUSER_US_PER_KERNEL))
                )
                wrap = c["wrapper_us_per_fusion"]
                out.append(
                    record(
                        "FusionDefinition cache per fusion (µs)", n, wrap, HOLDS if wrap >= SEED_WRAPPER_US else LOWER
                    )
                )
    out += [
        record("CUDA graphs as the cure (wall ratio)", g["with_graphs"], g["wall_ratio_x"], cure_verdict(g))
        for g in graphs
        if g["wall_ratio_x"] is not None
    ]
    return out


def findings(taken_apart, timelines, regions, graphs, timed: Rounds, device: str) -> list[str]:
    return [
        *parts_text(taken_apart),
        startup_text(taken_apart, timelines, device),
        per_kernel_text(taken_apart, regions, device),
        graphs_text(graphs, timed, device),
    ]


def parts_figure(rows: list[dict]):
    """Stacked bars (a ``pages.charts.Chart``): each configuration's in-place host time per step, by part,
    and the remainder; None without parts."""
    from ..pages.charts import Chart

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

    steps: list[HostStepRow]  # one per executor (``step_row``)
    breakdown: dict[str, dict]
    parts: list[dict]
    phases: list[dict]
    regions: list[dict]
    timelines: dict[str, dict]  # the profiled step's metrics per executor (``timeline_row``)
    profiled: dict[str, dict]  # the profiled step per executor: its Chrome trace's file and its rows
    graphs: list[dict]
    grades: list[dict]  # the seed claims' grades (``grades``)
    findings: list[str]
    memory: dict[str, dict | None]
    first_call_s: dict[str, float | None]
    timed: Rounds

    @property
    def step(self) -> list[dict]:
        """One per executor, as the results file holds it."""
        return [r.as_dict() for r in self.steps]

    def key_table_rows(self) -> list[dict]:
        return self.step

    def sections(self) -> dict:
        return {
            "findings": self.findings,
            "step": self.step,
            "parts": self.parts,
            "breakdown": self.breakdown,
            "regions": self.regions,
            "graphs": self.graphs,
            "grades": self.grades,
            "timeline": self.timelines,
            "memory": self.memory,
            "first_call_s": self.first_call_s,
            **self.timed.sections(),
        }


def run(params: Params) -> Result:
    """Build and measure every executor one after another (``plan``), then time them all in the same
    rounds with each Thunder configuration taken apart in place; the tables and findings from both."""
    env, setup, eager_logits = begin_with_model(params)
    print(
        f"device {params.device} · {rounds_text(params)} · {STEP_PROFILES} profiled steps · "
        f"executors {', '.join(params.executors)}"
    )
    measurements = plan(setup.kwargs, params, eager_logits, results.HOST_OVERHEAD)
    prepared, measured = build_selected(params, setup, measurements)
    probed, insitu, not_taken_apart = probes(prepared, setup.kwargs, params.iters)
    prepared, timed = harness.time_prepared(prepared, setup.kwargs, params, probed)
    taken_apart = {**breakdowns(insitu, timed), **{n: {"reason": why} for n, why in not_taken_apart.items()}}
    step = [step_row(p, measured.get(n) or {}, timed) for n, p in prepared.items()]
    regions = region_rows(taken_apart, measured)
    timelines = {n: r for n, m in measured.items() if (r := timeline_row(n, m))}
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
        profiled={n: m["timeline"] for n, m in measured.items() if m.get("timeline")},
        graphs=graphs,
        grades=grades(taken_apart, timelines, regions, graphs, params.device),
        findings=findings(taken_apart, timelines, regions, graphs, timed, params.device),
        memory={n: m.get("memory") for n, m in measured.items()},
        first_call_s={n: p.first_call_s for n, p in prepared.items()},
        timed=timed,
    )
