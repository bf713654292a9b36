"""What a study runs beside a step to see inside it: one profiled step's timeline, saved as a Chrome trace
(``step_timeline``, ``trace_file``), and the in-place breakdown of a Thunder step as a probe of the rounds
(``insitu_probes``, ``breakdowns``: ``thunder_breakdown.InSitu`` after every plain block)."""

from __future__ import annotations

import re
from pathlib import Path

from ..core.measurement import Measurement
from ..core.rounds import Rounds
from . import profiler_timeline, thunder_breakdown

STEP_PROFILES = 3  # profiled steps per executor; the median one (by host time) is drawn and saved


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


def insitu_probes(measured: dict[str, Measurement], kwargs: dict, calls: int) -> tuple[dict, dict, dict]:
    """For every Thunder configuration that can be instrumented: its ``InSitu`` and a probe for the
    rounds; for the others, the reason. Returns (probes by executor, InSitu by executor, reasons)."""
    out, insitu, reasons = {}, {}, {}
    for name, p in measured.items():
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
