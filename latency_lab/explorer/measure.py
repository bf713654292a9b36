"""The explorer's measurement of one setting (no widgets): ``check`` validates it, ``measure`` runs it.

Per executor its first call (``harness.prepare``; a Thunder first call reports its phase as it goes), its
final Thunder trace (``instruments.trace_row``), wall and steady-state host time through the suite's one
harness (``harness.rounds``: every block between two host references, headlines over the host's fast
blocks with their intervals), kernels (``timing.profile_kernels``, GPU) and one profiled step saved as a
Chrome trace (``instruments.probes.step_timeline``). A ``StopSwitch`` ends a run before its next call; an
executor that is unavailable or fails is a row with its reason.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ..core import harness, registry, results, timing
from ..core import model as llama
from ..core.parameters import ParameterError, Params, validate
from ..core.progress import say
from ..core.row_types import ExplorerRow
from ..instruments import trace_analysis
from ..instruments.probes import step_timeline, trace_file
from ..instruments.trace_row import trace_row

STEPS = ("prefill", "decode")
PROFILE_STEPS = 3
NOISY_SLOW_SHARE = 0.5  # a run whose host read slow in over half of its references is flagged noisy
TOP = 12  # rows of the top ops / kernels tables


class Stopped(BaseException):
    """Raised before the next call once Stop was pressed; a BaseException, so that no measurement's
    ``except Exception`` turns it into a failed row and goes on."""


class StopSwitch:
    """Stop between calls: ``guard(fn)`` checks the switch before each call of ``fn`` and counts the
    calls (0.2 µs per call on the 2-core CI machine: under 0.1% of the fastest step measured here)."""

    def __init__(self):
        self._event = threading.Event()
        self.calls = 0

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Stopped()

    def guard(self, fn):
        event = self._event

        def call(**kwargs):
            if event.is_set():
                raise Stopped()
            self.calls += 1
            return fn(**kwargs)

        return call


class Progress:
    """Where a run reports: ``step`` once per step (printed as one line when ``echo``), ``detail``
    while a long step runs (shown only by a ``live`` progress, the widgets)."""

    live = False

    def __init__(self, echo: bool = False):
        self.echo = echo

    def step(self, done: int, total: int, text: str) -> None:
        if self.echo:
            say(f"[{done}/{total}] {text}")

    def detail(self, text: str) -> None:
        pass


def check(settings: dict) -> tuple[Params, str]:
    """Validated parameters and step of ``settings``; a bad value raises ``ParameterError``."""
    values = dict(settings)
    step = values.pop("step", "prefill")
    if step not in STEPS:
        raise ParameterError("step", step, ", ".join(STEPS))
    if not values.get("executors"):
        raise ParameterError("executors", values.get("executors"), "at least one executor name")
    params = validate(values)
    if step == "decode" and params.cache_mode != "static":
        raise ParameterError(
            "cache_mode",
            params.cache_mode,
            "static when step='decode' (a decode step runs against a StaticCache pre-filled by a prefill)",
        )
    return params, step


def step_setup(params: Params, step: str) -> llama.Setup:
    """The model and the kwargs of one ``step``: the prompt's prefill, or the one-token decode step
    after it (``model.build_decode``: a ``StaticCache`` an eager prefill of the prompt filled; each
    call re-writes the same cache slot, so repeated calls are the same step)."""
    setup = llama.build(params)
    if step == "decode":
        return llama.Setup(params, setup.config, setup.model, llama.build_decode(setup, params.seq_len, 1).kwargs)
    return setup


PART_TEXT = {
    "trace": "final trace and fusion regions",
    "wall": "wall and steady-state host time (blocks, host reference beside each)",
    "kernels": "kernels (torch.profiler)",
    "timeline": "one profiled step (Chrome trace)",
}


def parts_of(executor: registry.Executor, device: str) -> list[str]:
    """The measurements an executor gets, in order."""
    return [
        "first call",
        *(["trace"] if executor.needs_thunder else []),
        "wall",
        *(["kernels"] if device.startswith("cuda") else []),
        "timeline",
    ]


def first_call_phase(fn, executor: registry.Executor) -> str:
    """What a first call of ``fn`` is doing now: for Thunder, the phase its compile statistics have
    stamped so far (interpreting, transforms, first run); else what the executor does in one."""
    if not executor.needs_thunder:
        return "running" if executor.name == "eager" else "Dynamo tracing, Inductor compiling"
    import thunder

    fns = trace_analysis.thunder_functions(fn)  # thunderfx: none until Dynamo hands a graph to thunder
    cs = thunder.compile_stats(fns[-1]) if fns else None
    if cs is None:
        return "Dynamo tracing"
    start, stop = cs.last_trace_tracing_start, cs.last_trace_tracing_stop
    run_start, run_stop = cs.last_trace_host_execution_start, cs.last_trace_host_execution_stop
    if start <= 0:
        return "looking up its cache"
    if stop < start:
        return "interpreting the model's Python"
    if run_start < stop:
        return "transforms (fusion passes, prologue)"
    return "first run (compiling fusions)" if run_stop < run_start else "finishing"


@contextmanager
def watched(executor: registry.Executor, progress: Progress):
    """``executor`` with a factory that keeps what it builds; while the block runs, a live progress
    gets the first call's phase and seconds every half second."""
    if not progress.live:
        yield executor
        return
    built, done, t0 = [], threading.Event(), time.perf_counter()

    def factory(module, notes):
        built.append(executor.factory(module, notes))
        return built[-1]

    def tick():
        while not done.wait(0.5):
            phase = first_call_phase(built[-1], executor) if built else "building"
            progress.detail(f"{phase} · {time.perf_counter() - t0:.0f} s")

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield dataclasses.replace(executor, factory=factory)
    finally:
        done.set()
        ticker.join()


def wall_blocks(p: harness.Measurement, fn, kwargs: dict, params: Params, progress: Progress) -> dict:
    """The executor's wall and steady-state host time through the suite's one harness
    (``harness.rounds`` with this executor alone: a warm-up round, then ``2 x repeats`` blocks, each
    between two host references): its blocks go to ``p.timed``; returns the rounds' method and host
    state (``reference``). A failing call raises, as it would outside the harness."""
    done = harness.rounds(
        [harness.Entry("step", fn, kwargs)], params.device, params.warmup, params.iters, params.repeats, progress.detail
    )
    if error := done.entries["step"].error:
        raise RuntimeError(error)
    p.timed = done.entries["step"]
    return {"method": done.method, "reference": done.reference_record()}


def top_host_ops(rows: list[dict], top: int = TOP) -> list[dict]:
    """The profiled step's top-level host spans by name: calls and µs in the step, largest first."""
    by_name: dict[str, dict] = {}
    for r in rows:
        if r["lane"] == "host":
            entry = by_name.setdefault(r["name"], {"op": r["name"], "calls": 0, "us": 0.0})
            entry["calls"] += 1
            entry["us"] += r["dur_us"]
    return sorted(by_name.values(), key=lambda e: e["us"], reverse=True)[:top]


def trace_path(folder: Path, tag: str, executor: str) -> Path:
    """Where a run's profiled step of ``executor`` is saved as a Chrome trace."""
    return trace_file(str(folder), f"{results.EXPLORER}.{tag}", executor)


def _row(p: harness.Measurement) -> dict:
    """The run's row of one executor (``row_types.ExplorerRow``): its blocks' statistics, the host's slow
    share, kernels and its first call."""
    wall, kernels = p.wall, p.record("kernels")
    reference = p.record("wall").get("reference") or {}
    slow = reference.get("slow_share")
    return ExplorerRow.of(
        p,
        kernel_ms=kernels.get("kernel_ms"),
        kernels_per_step=kernels.get("kernels_per_step"),
        wall_iqr_pct=100 * wall.rel_spread if wall else None,
        host_slow_pct=None if slow is None else 100 * slow,
        noisy=None if not wall else bool(wall.noisy or (slow or 0) > NOISY_SLOW_SHARE),
        method=p.record("wall").get("method"),
        blocks_ms=p.timed.wall_ms if p.timed else None,
        host_reference_ms=(reference.get("stat") or {}).get("median"),
    ).as_dict()


def _details(p: harness.Measurement) -> dict:
    """The run's details of one executor: first call, Thunder trace, timeline, top ops and kernels."""
    timeline = p.record("timeline")
    return {
        "first_call_s": p.first_call_s,
        "thunder": dict(t) if (t := p.steps.get("trace")) else None,  # its file form (``TraceRow.as_dict``)
        "timeline": {k: timeline.get(k) for k in ("file", "path", "step", "rows")} if timeline else None,
        "top_ops": top_host_ops(timeline.get("rows") or []),
        "top_kernels": p.record("kernels").get("top_kernels") or [],
    }


@dataclasses.dataclass
class Count:
    """Where a run is: ``done`` of ``total`` measurements, said to ``progress``."""

    progress: Progress
    total: int
    done: int = 0

    def advance(self, text: str, by: int = 1) -> None:
        self.done += by
        self.progress.step(self.done, self.total, text)


def explorer_plan(ex, parts: list[str], params: Params, kwargs: dict, stop: StopSwitch, count: Count, where) -> dict:
    """The harness plan (``harness.run_plan``) of an executor's ``parts`` after its first call: each part
    checks Stop, says itself and measures through ``stop.guard`` (``_measure_part``); ``where``: the
    run's trace folder and tag."""

    def step(part):
        def measure(p):
            stop.check()
            count.advance(f"{ex.name}: {PART_TEXT[part]}")
            record = _measure_part(part, p, stop.guard(p.fn), kwargs, params, count.progress, *where)
            if part == "trace":
                count.advance(f"{ex.name}: first call phases: {phases_of(record)}", by=0)
            return record

        return measure

    return {part: step(part) for part in parts}


def measure(
    settings: dict,
    progress: Progress | None = None,
    stop: StopSwitch | None = None,
    trace_folder: Path | None = None,
    tag: str = "run",
) -> dict:
    """Measure every selected executor on one setting: the resolved parameters, the step, one row per
    executor and per executor its details (Thunder trace, timeline, top ops and kernels). A bad
    setting raises ``ParameterError`` before any work; an executor that is unavailable or fails is a
    row with its reason; Stop ends the run before its next call (``stopped``: where)."""
    params, step = check(settings)
    progress, stop = progress or Progress(), stop or StopSwitch()
    harness.set_up(params)
    chosen = registry.selected(params.executors)
    parts = {ex.name: parts_of(ex, params.device) for ex in chosen}
    count = Count(progress, 1 + sum(map(len, parts.values())))
    out = {"params": params.to_dict(), "step": step, "rows": [], "details": {}, "stopped": None}
    count.advance(
        f"building the model ({params.preset}, {step}, {params.layers} layer(s), "
        f"{params.seq_len} tokens, {params.threads} thread(s))",
        by=0,
    )
    setup = step_setup(params, step)
    for ex in chosen:
        p = measure_one(ex, setup, params, parts[ex.name][1:], stop, count, (trace_folder, tag))
        if p.status == "stopped":
            out["stopped"] = f"{ex.name}, {p.reason.removeprefix('stopped during its ')}"
        out["rows"].append(_row(p))
        out["details"][ex.name] = _details(p)
        del p
        gc.collect()
        if out["stopped"]:
            break
    for ex in chosen[len(out["rows"]) :]:  # after Stop: each executor that never started is a row too
        p = harness.Measurement(ex, "not run", reason=f"stopped before it ({out['stopped']})")
        out["rows"].append(_row(p))
        out["details"][ex.name] = _details(p)
    out["calls"] = stop.calls
    count.advance(
        f"stopped ({out['stopped']})" if out["stopped"] else "done",
        by=0 if out["stopped"] else count.total - count.done,
    )
    return out


def measure_one(
    ex, setup, params: Params, parts: list[str], stop: StopSwitch, count: Count, where
) -> harness.Measurement:
    """One executor: its first call (``harness.prepare``, its phases said as it goes), then its ``parts``
    (``harness.run_plan`` over ``explorer_plan``). Stop marks it ``stopped`` where it was."""
    p, part = harness.Measurement(ex, "stopped"), "first call"
    try:
        stop.check()
        count.advance(f"{ex.name}: first call (build, trace, compile)")
        with watched(ex, count.progress) as spied:
            p = harness.prepare(spied, setup.model, setup.kwargs, params.device)
        if not p.ok:
            count.done += len(parts)
        count.advance(
            f"{ex.name}: first call {p.first_call_s:.2f} s" if p.ok else f"{ex.name}: {p.status}: {p.reason}", by=0
        )
        if p.ok:
            harness.run_plan(p, explorer_plan(ex, parts, params, setup.kwargs, stop, count, where))
    except Stopped:
        part = next((s for s in parts if s not in p.steps), part) if p.first_call_s is not None else part
        p.status, p.reason = "stopped", f"stopped during its {part}"
    return p


def _measure_part(part, p, fn, kwargs, params, progress, trace_folder, tag) -> dict:
    """The record of one measurement of ``parts_of`` on a built executor (``fn``: its guarded callable)."""
    device = params.device
    if part == "trace":
        return trace_row(p, kwargs)  # a failed analysis keeps its reason, the timing goes on
    if part == "wall":
        return wall_blocks(p, fn, kwargs, params, progress)
    if part == "kernels":
        return timing.profile_kernels(fn, kwargs, device, PROFILE_STEPS)
    path = trace_path(Path(trace_folder or params.output_dir), tag, p.executor.name)
    return {**step_timeline(fn, kwargs, device, path), "path": str(path)}


def phases_of(trace_row: dict) -> str:
    """A Thunder first call's stamped phases and their seconds, as text."""
    phases = trace_row.get("first_call_phases") or {}
    names = {"interpret_s": "interpreting", "transform_s": "transforms", "first_run_s": "first run"}
    return ", ".join(f"{names[k]} {v:.2f} s" for k, v in phases.items() if v is not None) or "no phases stamped"
