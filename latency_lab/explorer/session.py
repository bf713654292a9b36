"""The explorer's session: measure one setting (preset, dtype, device, batch, threads, executors, layers,
prompt length, prefill or decode step, cache mode, warm-up and timed calls) with the suite's own code,
keep every run so that settings compare, and say what a run found.

``measure`` is the measurement (no widgets): per executor its first call (``harness.prepare``; a
Thunder first call reports its phase as it goes), its final Thunder trace (``instruments.trace_row``),
wall and steady-state host time through the suite's one harness (``harness.rounds``: every block
between two host references, headlines over the host's fast blocks with their intervals), kernels
(``timing.profile_kernels``, GPU) and one profiled step saved as a Chrome trace
(``instruments.probes.step_timeline``). A ``StopSwitch`` ends a run before its next call. ``Explorer``
holds the runs and never raises on a bad setting or a failing executor (the run keeps its error).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
import time
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ..core import harness, metrics, registry, results, timing
from ..core import model as llama
from ..core.parameters import REPO_ROOT, SAME_MODEL, ParameterError, Params, validate
from ..core.progress import say
from ..core.rows import ExplorerRow
from ..core.verdicts import NOT_COMPARABLE, phrase
from ..instruments import trace_analysis
from ..instruments.probes import step_timeline, trace_file
from ..instruments.trace_row import trace_row
from ..pages import tables
from ..run.compare import command as compare

STEPS = ("prefill", "decode")
# The widgets set all of these; ``seed`` comes from the notebook's parameters.
SETTINGS = (
    "preset",
    "dtype",
    "device",
    "batch_size",
    "threads",
    "executors",
    "layers",
    "seq_len",
    "step",
    "cache_mode",
    "warmup",
    "iters",
    "repeats",
    "seed",
)
PROFILE_STEPS = 3
NOISY_SLOW_SHARE = 0.5  # a run whose host read slow in over half of its references is flagged noisy
TOP = 12  # rows of the top ops / kernels tables
COLUMNS = [
    "run",
    "executor",
    "label",
    "status",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "wall_lo_ms",
    "wall_hi_ms",
    "wall_iqr_pct",
    "host_slow_pct",
    "noisy",
    "host_ms",
    "host_per_ref_x",
    "kernels_per_step",
    "kernel_ms",
    "first_call_s",
    "reason",
]
REFERENCE = REPO_ROOT / "outputs" / "reference-h100"


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


def settings_from(params: Params, step: str = "prefill") -> dict:
    """The explorer's settings for a notebook's validated parameters."""
    d = params.to_dict()
    return {**{k: d[k] for k in SETTINGS if k in d}, "executors": list(params.executors), "step": step}


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
    return trace_file(str(folder), f"{results.EXPLORER}.{tag}", executor)


def _row(p: harness.Measurement) -> dict:
    """The run's row of one executor (``rows.ExplorerRow``): its blocks' statistics, the host's slow
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
    timeline = p.record("timeline")
    return {
        "first_call_s": p.first_call_s,
        "thunder": p.steps.get("trace"),
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
    phases = trace_row.get("first_call_phases") or {}
    names = {"interpret_s": "interpreting", "transform_s": "transforms", "first_run_s": "first run"}
    return ", ".join(f"{names[k]} {v:.2f} s" for k, v in phases.items() if v is not None) or "no phases stamped"


def describe_settings(settings: dict) -> str:
    """A short label of a run's setting for legends and tables."""
    s = settings
    return (
        f"{s.get('preset')} {s.get('dtype')} {s.get('device')}, {s.get('step', 'prefill')}, "
        f"{s.get('layers')} layer(s), {s.get('batch_size')}x{s.get('seq_len')} tok, cache {s.get('cache_mode')}, "
        f"{s.get('warmup')}+{s.get('iters')}x{s.get('repeats')}, {s.get('threads')} thread(s)"
    )


class Explorer:
    """The runs of one explorer session; traces go to ``output_dir``. ``run`` never raises: a bad
    setting or an error is kept in the run's ``error``, a Stop (or the kernel's interrupt) in its
    ``stopped`` (the kernel stays usable)."""

    def __init__(self, output_dir: str | Path):
        self.output_dir = Path(output_dir)
        self.runs: list[dict] = []

    def run(self, settings: dict, progress: Progress | None = None, stop: StopSwitch | None = None) -> dict:
        number = len(self.runs) + 1
        record = {
            "id": number,
            "settings": dict(settings),
            "label": "",
            "params": None,
            "step": None,
            "rows": [],
            "details": {},
            "error": None,
            "stopped": None,
            "calls": None,
            "seconds": None,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        t0 = time.perf_counter()
        try:
            record.update(measure(settings, progress, stop, self.output_dir, f"run{number}"))
        except ParameterError as e:
            record["error"] = str(e)
        except KeyboardInterrupt:  # the kernel's interrupt, while a run blocks the notebook
            record["stopped"] = "interrupted"
        except Exception as e:  # the session goes on; the run says what went wrong
            record["error"] = harness.describe(e) + "\n" + traceback.format_exc(limit=3)
        record["seconds"] = round(time.perf_counter() - t0, 2)
        shown = {**record["params"], "step": record["step"]} if record["params"] else settings
        record["label"] = f"run {number}: {describe_settings(shown)}"
        record["noisy"] = any(r.get("noisy") for r in record["rows"])
        self.runs.append(record)
        return record

    def rows(self) -> list[dict]:
        """The rows of every run that measured, each with its run's number (``legend_html`` says its
        settings), in ``COLUMNS`` order."""
        return [
            {"run": f"run {r['id']}", **{c: row.get(c) for c in COLUMNS[1:]}} for r in self.runs for row in r["rows"]
        ]

    def save(self, path: str | Path) -> Path:
        """Write every run (settings, resolved parameters, rows, details, errors) to ``path`` as JSON."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"runs": self.runs}, indent=1, default=str))
        return path


def summary_line(run: dict) -> str:
    """One line about a run for the status line: what ran, how long, stopped or noisy."""
    if run["error"]:
        return f"{run['label']}: {run['error']}"
    if run["stopped"]:
        return (
            f"{run['label']}: stopped ({run['stopped']}) after {run['seconds']} s; "
            f"{run['calls']} guarded calls ran, none after Stop"
        )
    noisy = [
        f"{r['executor']} (wall IQR {tables.number(r['wall_iqr_pct'])}%, host slow in "
        f"{tables.number(r['host_slow_pct'])}% of its references)"
        for r in run["rows"]
        if r.get("noisy")
    ]
    return f"{run['label']}: {len(run['rows'])} executor(s) in {run['seconds']} s" + (
        f"; noisy: {', '.join(noisy)}: compare within quieter runs" if noisy else ""
    )


def findings(run: dict) -> list[str]:
    """Sentences about one run, generated from its rows."""
    if run["error"] or run["stopped"]:
        why = run["error"] or f"stopped ({run['stopped']})"
        return [f"The explorer's default run did not finish: {why.splitlines()[0]}"]
    ok = sorted((r for r in run["rows"] if r["wall_ms"] is not None), key=lambda r: r["wall_ms"])
    out = [
        f"{run['label']}: "
        + (
            ", ".join(
                f"{r['label']} {r['wall_ms']:.3g} ms (interval {r['wall_lo_ms']:.3g}-{r['wall_hi_ms']:.3g})" for r in ok
            )
            if ok
            else "no executor produced a wall time"
        )
        + "."
    ]
    if len(ok) >= 2:
        fast, slow = ok[0], ok[-1]
        overlap = slow["wall_lo_ms"] <= fast["wall_hi_ms"]
        out.append(
            f"{fast['label']} is the fastest; {slow['label']} takes {slow['wall_ms'] / fast['wall_ms']:.3g}x as long"
            + (" (their intervals overlap: this run cannot order them)." if overlap else ".")
        )
    noisy = [r["label"] for r in ok if r["noisy"]]
    if noisy:
        out.append(
            f"Noisy (wall IQR over {metrics.NOISY_REL_SPREAD:.0%} of the median, or the host slow in over "
            f"{NOISY_SLOW_SHARE:.0%} of the references): {', '.join(noisy)}; the machine was busy or drifting."
        )
    skipped = [f"{r['executor']} ({r['status']})" for r in run["rows"] if r["wall_ms"] is None]
    if skipped:
        out.append("Without a wall time: " + ", ".join(skipped) + ".")
    return out


def reference_rows(timing_results: dict) -> list[dict]:
    """Notebook 02's rows of a run (its results file) in the explorer's columns (the same vocabulary)."""
    return [{c: r.get(c) for c in COLUMNS[1:]} for r in timing_results.get("rows") or []]


def beside_reference(runs: list[dict], environment: dict, reference: Path = REFERENCE) -> dict:
    """``compare.compare`` of each run that measured (B) against the reference run's executor timing
    (A, notebook 02's rows), one section per run; a run of another model or step than A's
    (``parameters.SAME_MODEL``) is shown beside it, not judged."""
    ref = compare.load_run(Path(reference))
    timing_results = ref["notebooks"].get(results.EXECUTOR_TIMING)
    if not timing_results:
        raise compare.CompareError(f"{reference} holds no {results.EXECUTOR_TIMING} results")
    measured = [r for r in runs if r["rows"]]
    if not measured:
        raise compare.CompareError("no explorer run has rows yet: press Run first")
    columns = ["executor", *COLUMNS[2:]]

    def entry(params, rows):
        return {"params": params, "rows": rows, "key_table": {"title": "", "columns": columns, "rows": []}}

    ref_entry = entry(timing_results["params"], reference_rows(timing_results))
    a = {
        "name": Path(reference).name,
        "path": str(reference),
        "environment": ref["environment"],
        "unreadable": [],
        "ran_on": ref.get("ran_on") or {},
        "notebooks": {f"run {r['id']}": ref_entry for r in measured},
    }
    b = {
        "name": "explorer",
        "path": "this explorer session",
        "environment": environment,
        "unreadable": [],
        "ran_on": {},
        "notebooks": {f"run {r['id']}": entry(r["params"], r["rows"]) for r in measured},
    }
    report = compare.compare(a, b)
    for d in report["parameters"]:  # other settings: the numbers side by side, no verdict on them
        if d["name"] in SAME_MODEL:
            for e in (e for e in report["rows"] if e["notebook"] in d["notebooks"]):
                e.update(verdict=NOT_COMPARABLE, decided=phrase(NOT_COMPARABLE, f"another {d['name']} than A's"))
    return report
