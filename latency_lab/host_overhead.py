"""The host-overhead notebook's measurements per executor and the tables built from them: one step's
timeline (``profiler_timeline``), Thunder's phases and regions run alone (``thunder_breakdown``), the
closure of the measured parts against the step's host time, CUDA graphs with and without, and the
generated conclusion.

Per executor, right after its first call: warm-up, GPU memory, host time and wall time of the step,
the profiled step, Thunder's phases and regions; then it is released, so the next one's memory counts
from where this one left it. Each executor's work is bounded (a few profiled steps, ``iters`` calls
per host time) so that every registry entry fits in the notebook's budget.
"""

from __future__ import annotations

import gc
import re
import statistics
from pathlib import Path

from . import profiler_timeline as pt
from . import thunder_breakdown as tb
from . import timing
from .registry import describe

NOTEBOOK = "05_host_overhead"
STEP_PROFILES = 3  # profiled steps per executor; the median one (by host time) is drawn and saved
GRAPH_PAIRS = (("torch.compile:reduce-overhead", "torch.compile"), ("thunder:cudagraphs", "thunder"),
               ("thunder.compile:reduce-overhead", "thunder.compile"))
REGION_KINDS = ("nvFusion", "TorchCompile", "CUDAGraph")
# The seed's hypotheses and the thresholds at which this notebook calls them confirmed here.
SEED_STARTUP_US = 250.0       # Thunder's extra time before its first kernel; holds at >= half of it
SEED_NVFUSER_US_PER_KERNEL = (20.0, 30.0)  # holds when the median is >= the lower bound
GRAPHS_CURE = 0.8             # graphs "cure" when the wall time with them is <= 80% of without
REMAINDER = "remainder (not in any measured part)"


# Column names of the raw rows -> table headers with units.
UNITS = {"us": "µs", "iqr_us": "IQR (µs)", "host_us": "host (µs)", "host_iqr_us": "host IQR (µs)",
         "kernel_us": "kernel time (µs)", "host_us_per_kernel": "host µs per kernel"}


def frame(rows: list[dict], columns: list[str] | None = None):
    """``display.frame`` with unit-bearing headers."""
    from .display import frame as plain

    return plain(rows, columns).rename(columns=UNITS)


def safe_name(name: str) -> str:
    """A file-name-safe form of an executor name: torch.compile:reduce-overhead -> torch.compile_reduce-overhead."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def trace_file(output_dir: str, executor: str) -> Path:
    return Path(output_dir) / f"{NOTEBOOK}.{safe_name(executor)}.trace.json.gz"


class MemoryLedger:
    """GPU memory (MiB, allocated and reserved) after each executor's warm-up, and its increase from
    just before that executor was built (the previous one released). None on a CPU."""

    def __init__(self, device: str):
        self.device = device
        self.before = self.read()

    def read(self) -> dict | None:
        if not self.device.startswith("cuda"):
            return None
        import torch

        return {"allocated_MiB": torch.cuda.memory_allocated(self.device) / 2**20,
                "reserved_MiB": torch.cuda.memory_reserved(self.device) / 2**20}

    def after_warm_up(self) -> dict:
        now = self.read()
        if now is None:
            return {"reason": "GPU memory needs a CUDA device"}
        return {**now, **{f"{k} increase": now[k] - self.before[k] for k in now}}

    def release(self, p) -> dict:
        """Drop the executor's callable and output; what the allocator holds afterwards."""
        p.fn = p.output = None
        gc.collect()
        self.before = self.read()
        return self.before or {}


def _guarded(measure):
    """A Thunder-only measurement that cannot take the executor's row down: an error is its reason."""
    def run(p):
        try:
            return measure(p)
        except Exception as e:  # an API the installed thunder lacks is a reason in this part's rows
            return {"error": describe(e)}
    return run


def step_timeline(fn, kwargs: dict, device: str, path: Path) -> dict:
    """``STEP_PROFILES`` steps under the profiler; metrics of each, the median step (by host time)
    drawn and saved to ``path`` as a Chrome trace."""
    trace = pt.profile_calls([("step", lambda: fn(**kwargs))], device, STEP_PROFILES)
    steps = [w for w in pt.windows(pt.spans_from_chrome(trace)) if w.label == "step"]
    metrics = [pt.window_metrics(w) for w in steps]
    median = sorted(range(len(steps)), key=lambda i: metrics[i]["host_us"])[len(steps) // 2]
    path.parent.mkdir(parents=True, exist_ok=True)
    pt.write_trace(trace, steps[median], path)
    return {"trace": path.name, "steps": metrics, "step": metrics[median], "rows": pt.timeline_rows(steps[median]),
            "host_us": timing.stats([m["host_us"] for m in metrics])}


def regions(fn, kwargs: dict, device: str, calls: int) -> list[dict]:
    """Every call of the computation function run alone (``thunder_breakdown``), and for each nvFuser
    region also its ``FusionDefinition.execute`` alone."""
    recorded = tb.record_calls(fn, kwargs)
    return tb.measure_calls(recorded + [x for c in recorded if (x := tb.execute_only(c))], device, calls)


def methods(kwargs: dict, params, ledger: MemoryLedger) -> dict:
    """The per-executor methods for ``executor_timing.build_and_measure``, in the order they run."""
    device, calls = params.device, params.iters

    def thunder_only(measure, applies, part):
        return _guarded(lambda p: measure(p) if applies(p.fn) else {"reason": tb.not_jit_reason(p.executor.name, part)})

    return {
        "warm-up": lambda p: timing.warm_up(p.fn, kwargs, params.warmup),
        "memory": lambda p: ledger.after_warm_up(),
        "host": lambda p: timing.host_submit(p.fn, kwargs, device, calls),
        "wall": lambda p: timing.event_timer(p.fn, kwargs, device, 0, calls, params.repeats),
        "timeline": lambda p: step_timeline(p.fn, kwargs, device, trace_file(params.output_dir, p.executor.name)),
        "phases": thunder_only(lambda p: {"rows": tb.phases(p.fn, kwargs, device, calls)}, tb.thunder_functions, "phases"),
        "regions": thunder_only(lambda p: {"rows": regions(p.fn, kwargs, device, calls)}, tb.jit_parts,
                                "regions (thunderfx: each Dynamo graph's inputs are not recorded)"),
        "release": ledger.release,
    }


def closure(total_us: float, parts: list[tuple[str, float, str]]) -> list[dict]:
    """Parts (name, µs, method) against the total, and the remainder as its own part: the parts and
    the remainder add up to the total (negative remainder: the parts alone took longer than in the step)."""
    rows = [{"part": name, "us": us, "method": method} for name, us, method in parts]
    rows.append({"part": REMAINDER, "us": total_us - sum(us for _, us, _ in parts),
                 "method": "the step's host time minus the sum of the parts"})
    for r in rows:
        r["share of host time (%)"] = 100 * r["us"] / total_us if total_us else None
    return rows


def closure_parts(m: dict) -> tuple[float, str, list[tuple[str, float, str]]] | None:
    """Total and parts of one executor's closure. Thunder (phases and regions measured): total = host
    time of the step; parts = cache lookup + prologue, regions by kind, ops outside fusions, bookkeeping
    calls and the epilogue, each run alone, and the computation function's own Python (the function
    alone less its calls alone; only when every call ran alone). Others: total = the profiled step's host
    time; parts = the top-level profiler events inside it (torch ops, annotated regions, CUDA runtime calls)."""
    phases, calls = (m.get("phases") or {}).get("rows"), (m.get("regions") or {}).get("rows")
    if phases and calls is not None:
        alone = {r["phase"]: r["us"] for r in phases if r["method"].startswith("alone")}
        method = "run alone on recorded inputs, perf_counter"
        parts = [("cache lookup + prologue", alone["cache lookup + prologue"], method)]
        for kind in (*REGION_KINDS, "op", "bookkeeping"):
            us = [r["host_us"] for r in calls if r["kind"] == kind and "host_us" in r]
            if us:
                label = f"{kind} regions" if kind in REGION_KINDS else {"op": "ops outside fusions", "bookkeeping": "bookkeeping calls"}[kind]
                parts.append((f"{label} ({len(us)} calls)", sum(us), method))
        if "computation function" in alone and all("host_us" in r for r in calls if not r["kind"].startswith("nvFuser execute")):
            inside = sum(us for name, us, _ in parts[1:])
            parts.append(("computation function's own Python (dels, unpacking, returns)", alone["computation function"] - inside,
                          "derived: computation function alone - its calls alone"))
        if "epilogue" in alone:
            parts.append(("epilogue", alone["epilogue"], method))
        return m["host"]["median"] * 1e3, "host time of the step (median, perf_counter)", parts
    step = (m.get("timeline") or {}).get("step")
    if not step:
        return None
    method = "torch.profiler: top-level events inside the profiled step"
    return step["host_us"], "host time of the profiled step (torch.profiler)", [("torch ops", step["host_in_ops_us"], method),
                             ("annotated regions", step["host_in_annotations_us"], method),
                             ("CUDA runtime calls", step["host_in_runtime_us"], method)]


def closures(measured: dict[str, dict]) -> dict[str, dict]:
    """Per executor with a closure: its total (µs), what the total is, and the closure's rows."""
    return {name: {"total_us": cp[0], "total": cp[1], "rows": closure(cp[0], cp[2])}
            for name, m in measured.items() if (cp := closure_parts(m))}


def closure_long(closed: dict[str, dict]) -> list[dict]:
    return [{"executor": name, "total (µs)": c["total_us"], "total": c["total"], **r}
            for name, c in closed.items() for r in c["rows"]]


def nvfusion_us_per_kernel(m: dict) -> float | None:
    """Median host µs per kernel over the nvFusion regions run alone."""
    xs = [r["host_us_per_kernel"] for r in (m.get("regions") or {}).get("rows") or []
          if r["kind"] == "nvFusion" and r.get("host_us_per_kernel")]
    return statistics.median(xs) if xs else None


def summary_rows(prepared: dict, measured: dict[str, dict], closed: dict[str, dict], device: str) -> list[dict]:
    """One row per executor: host and wall time, the profiled step's timeline metrics, the largest part
    of its closure and the remainder; partial when a Thunder part could not be measured."""
    rows = []
    for name, p in prepared.items():
        m = measured.get(name) or {}
        step = (m.get("timeline") or {}).get("step") or {}
        wall, host = m.get("wall"), m.get("host")
        parts = (closed.get(name) or {}).get("rows") or []
        named = [r for r in parts if r["part"] != REMAINDER]
        largest = max(named, key=lambda r: r["us"]) if named else None
        remainder = parts[-1] if parts else None
        errors = [f"{k}: {m[k]['error']}" for k in ("phases", "regions") if (m.get(k) or {}).get("error")]
        no_kernels = bool(step) and step.get("first_kernel_us") is None
        reasons = [p.reason] + errors + ([("kernel metrics need CUDA" if not device.startswith("cuda")
                                           else "no kernels in the profiled step")] if no_kernels else [])
        rows.append({
            "executor": name, "label": p.executor.label,
            "status": "partial" if p.ok and errors else p.status,
            "host (µs/step)": host["median"] * 1e3 if host else None,
            "wall (µs/step)": wall["median"] * 1e3 if wall else None,
            "wall IQR (%)": wall["rel_spread"] * 100 if wall else None,
            "kernels/step": step.get("kernels") if step.get("first_kernel_us") is not None else None,
            "kernel time (µs/step)": step.get("kernel_us") if step.get("first_kernel_us") is not None else None,
            "call to first kernel (µs)": step.get("first_kernel_us"),
            "GPU idle in step (µs)": step.get("gpu_idle_us"),
            "host after last launch (µs)": step.get("host_tail_us"),
            "largest part": f"{largest['part']} ({largest['us']:.3g} µs)" if largest else None,
            "remainder (µs)": remainder["us"] if remainder else None,
            "remainder (% of host)": remainder["share of host time (%)"] if remainder else None,
            "nvFusion host µs/kernel (median)": nvfusion_us_per_kernel(m),
            "trace": (m.get("timeline") or {}).get("trace"),
            "reason": "; ".join(r for r in reasons if r) or None,
        })
    return rows


def thunder_rows(measured: dict[str, dict], key: str) -> list[dict]:
    """The phases (``key="phases"``) or region calls (``"regions"``) of every Thunder configuration, one
    table; a configuration whose part failed or does not apply is one row with its reason."""
    out = []
    for name, m in measured.items():
        part = m.get(key) or {}
        if "rows" in part:
            out += [{"executor": name, **r} for r in part["rows"]]
        elif part:
            out.append({"executor": name, "reason": part.get("error") or part.get("reason")})
    return out


def region_summary(measured: dict[str, dict]) -> list[dict]:
    """Per Thunder configuration and kind of call: calls, host µs, kernels, device µs, host µs per kernel."""
    out = []
    for name, m in measured.items():
        calls = [r for r in (m.get("regions") or {}).get("rows") or [] if "host_us" in r]
        for kind in dict.fromkeys(r["kind"] for r in calls):
            rs = [r for r in calls if r["kind"] == kind]
            kernels = sum(r.get("kernels") or 0 for r in rs) if any("kernels" in r for r in rs) else None
            host = sum(r["host_us"] for r in rs)
            out.append({"executor": name, "kind": kind, "calls": len(rs), "host (µs)": host, "kernels": kernels,
                        "kernel time (µs)": sum(r.get("kernel_us") or 0 for r in rs) if kernels is not None else None,
                        "host µs per kernel": host / kernels if kernels else None})
    return out


def graph_rows(prepared: dict, measured: dict[str, dict], summary: list[dict]) -> list[dict]:
    """Each CUDA-graph variant against the same executor without graphs: host and wall time per step,
    what the graphs remove, and the GPU memory each holds after warm-up."""
    by_name = {r["executor"]: r for r in summary}
    rows = []
    for graphs, plain in GRAPH_PAIRS:
        row = {"with graphs": graphs, "without": plain}
        missing = [n for n in (graphs, plain) if n not in prepared]
        if missing:
            rows.append({**row, "reason": f"not in this run's executors: {', '.join(missing)}"})
            continue
        g, b = by_name[graphs], by_name[plain]
        for col, key in (("host", "host (µs/step)"), ("wall", "wall (µs/step)")):
            row[f"{col} with (µs)"], row[f"{col} without (µs)"] = g[key], b[key]
            row[f"{col} removed (%)"] = 100 * (1 - g[key] / b[key]) if g[key] and b[key] else None
        for n, side in ((graphs, "with"), (plain, "without")):
            mem = (measured.get(n) or {}).get("memory") or {}
            row[f"allocated {side} (MiB)"] = mem.get("allocated_MiB increase")
            row[f"reserved {side} (MiB)"] = mem.get("reserved_MiB increase")
        reasons = [f"{n}: {by_name[n]['reason']}" for n in (graphs, plain) if by_name[n]["status"] != "ok" and by_name[n]["reason"]]
        rows.append({**row, "reason": "; ".join(reasons) or None})
    return rows


def _fmt(us: float | None) -> str:
    if us is None:
        return "n/a"
    return f"{us / 1e3:.3g} ms" if abs(us) >= 1e3 else f"{us:.3g} µs"


def conclusion(summary: list[dict], closed: dict[str, dict], graphs: list[dict], device: str) -> list[str]:
    """Generated sentences: the largest contributors per executor, then each seed hypothesis with the
    numbers that decide it here (or why this run cannot)."""
    ok = {r["executor"]: r for r in summary if r["status"] in ("ok", "partial") and r["host (µs/step)"] is not None}
    out = []
    for name in ok:
        if name in closed:
            c = closed[name]
            parts = sorted(c["rows"], key=lambda x: -x["us"])[:2]
            remainder = c["rows"][-1]["share of host time (%)"]
            caveat = (f" The parts alone add up to more than the step (remainder {remainder:.0f}%): timed alone they do not "
                      "repeat their times inside the step on this machine." if remainder is not None and remainder < -20 else "")
            out.append(f"{name}: {c['total']} {_fmt(c['total_us'])}; largest: "
                       + ", ".join(f"{x['part']} {_fmt(x['us'])} ({x['share of host time (%)']:.0f}%)" for x in parts) + "." + caveat)
    cuda = device.startswith("cuda")
    thunders = [n for n in ok if n.startswith("thunder") and ok[n]["call to first kernel (µs)"] is not None]
    if not cuda:
        out.append("Fixed start-up before the first kernel (seed: ~250 µs): needs CUDA (no kernels on a CPU).")
    elif "eager" in ok and ok["eager"]["call to first kernel (µs)"] is not None and thunders:
        base = ok["eager"]["call to first kernel (µs)"]
        extra = {n: ok[n]["call to first kernel (µs)"] - base for n in thunders}
        decider = "thunder" if "thunder" in extra else max(extra, key=extra.get)  # the seed's configuration first
        verdict = "holds" if extra[decider] >= SEED_STARTUP_US / 2 else "does not hold"
        out.append(f"Fixed start-up (seed: ~{SEED_STARTUP_US:.0f} µs before the first kernel) {verdict} here: "
                   f"eager's first kernel starts {_fmt(base)} after the call; Thunder configurations start later by "
                   + ", ".join(f"{n} {_fmt(v)}" for n, v in extra.items()) + f" (decided on {decider}: holds at >= half the seed's value).")
    else:
        out.append("Fixed start-up: not decided (needs eager and a Thunder configuration with kernels).")
    per_kernel = {n: r["nvFusion host µs/kernel (median)"] for n, r in ok.items() if r["nvFusion host µs/kernel (median)"]}
    if per_kernel:
        med = statistics.median(per_kernel.values())
        verdict = "holds" if med >= SEED_NVFUSER_US_PER_KERNEL[0] else "does not hold (lower here)"
        out.append(f"nvFuser host latency per kernel (seed: 20-30 µs) {verdict}: {_fmt(med)} of host time per kernel, "
                   "the median over the configurations with nvFusion regions of each one's median over its regions "
                   "run alone (" + ", ".join(f"{n} {_fmt(v)}" for n, v in per_kernel.items()) + ").")
    else:
        out.append("nvFuser host latency per kernel (seed: 20-30 µs): " + ("needs CUDA and nvFuser." if not cuda
                                                                           else "no nvFusion region was measured."))
    cures = [g for g in graphs if g.get("wall removed (%)") is not None]
    if cures:
        out.append("CUDA graphs as the cure: " + "; ".join(
            f"{g['with graphs']} removes {g['host removed (%)']:.0f}% of the host time and {g['wall removed (%)']:.0f}% of the wall time of {g['without']} "
            f"({'holds' if g['wall with (µs)'] <= GRAPHS_CURE * g['wall without (µs)'] else 'does not hold'})" for g in cures)
            + f" (holds at a wall time <= {GRAPHS_CURE:.0%} of without).")
    else:
        out.append("CUDA graphs as the cure: " + ("needs CUDA." if not cuda else "no graph variant ran beside its baseline."))
    return out


def closure_figure(closed: dict[str, dict]):
    """Stacked bars: each executor's host time split into its measured parts and the remainder."""
    import plotly.express as px

    fig = px.bar(closure_long(closed), x="executor", y="us", color="part", hover_data=["method", "share of host time (%)"],
                 title="Host time per step: measured parts and the remainder", labels={"us": "µs per step"})
    fig.update_layout(barmode="relative")
    return fig


def trace_href(trace: str, output_dir_given: bool, output_dir: str) -> str:
    """Relative link to a saved trace: under the runner (``output_dir`` given) the executed notebook and
    its HTML sit in the output folder beside the trace; in JupyterLab (``output_dir`` left empty) the
    notebook sits in the working directory."""
    import os

    return trace if output_dir_given else os.path.relpath(Path(output_dir) / trace, Path.cwd())
