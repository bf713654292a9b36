"""The explorer notebook's logic: measure one setting (preset, dtype, device, batch, threads,
executors, layers, prompt length, prefill or decode step, cache mode, warm-up and timed calls) with
the suite's own code, keep every run so that settings compare on one chart, and the ipywidgets front
end around it.

``measure`` is the measurement (no widgets): per executor its first call (``harness.prepare``; a
Thunder first call reports its phase as it goes), its final Thunder trace (``thunder_traces.trace_row``),
wall and steady-state host time through the suite's one harness (``harness.rounds``: every block
between two host references, headlines over the host's fast blocks with their intervals), kernels
(``timing.profile_kernels``, GPU) and one profiled step saved as a Chrome trace
(``host_overhead.step_timeline``). A ``StopSwitch`` ends a run before its next call. ``Explorer``
holds the runs and never raises on a bad setting or a failing executor (the run keeps its error);
``ExplorerUI`` builds the widgets, whose state the kernel keeps, so a reloaded page shows the same
chart, table and details.
"""

from __future__ import annotations

import dataclasses
import gc
import html
import json
import os
import threading
import time
import traceback
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from .core import harness, metrics, registry, results, timing
from .core import model as llama
from .core.parameters import CACHE_MODES, DTYPES, PRESETS, REPO_ROOT, ParameterError, Params, apply_threads, validate
from .core.progress import say
from .pages import tables
from .run import compare
from .studies import host_overhead, thunder_traces

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
LOG_AXIS_SPAN = 10.0  # walls spanning more than this factor get a log axis
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
PLOTLY_MIME = "application/vnd.plotly.v1+json"


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

    fns = thunder_traces.thunder_functions(fn)  # thunderfx: none until Dynamo hands a graph to thunder
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


def wall_blocks(fn, kwargs: dict, params: Params, progress: Progress) -> dict:
    """The executor's wall and steady-state host time through the suite's one harness
    (``harness.rounds`` with this executor alone: a warm-up round, then ``2 x repeats`` blocks, each
    between two host references): ``{"wall": its record, "reference": the rounds' host state}``. A
    failing call raises, as it would outside the harness."""
    done = harness.rounds(
        [harness.Entry("step", fn, kwargs)], params.device, params.warmup, params.iters, params.repeats, progress.detail
    )
    if error := done.timed["step"].error:
        raise RuntimeError(error)
    return {"wall": done.record("step"), "reference": done.reference_record()}


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
    return host_overhead.trace_file(str(folder), f"{results.EXPLORER}.{tag}", executor)


def _row(p: harness.Prepared, found: dict) -> dict:
    timed, reference = found.get("wall") or {}, found.get("reference") or {}
    wall, host, per_ref = (timed.get(k) or {} for k in ("wall", "host", "host_per_ref"))
    kernels = found.get("kernels") or {}
    slow = reference.get("slow_share")
    return p.row(
        **{f"wall{part}_ms": wall.get(key) for part, key in (("", "median"), ("_q1", "q1"), ("_q3", "q3"))},
        wall_lo_ms=wall.get("lo"),
        wall_hi_ms=wall.get("hi"),
        wall_iqr_pct=100 * wall["rel_spread"] if wall else None,
        host_slow_pct=None if slow is None else 100 * slow,
        noisy=None if not wall else bool(wall.get("noisy") or (slow or 0) > NOISY_SLOW_SHARE),
        host_ms=host.get("median"),
        host_per_ref_x=per_ref.get("median"),
        kernels_per_step=kernels.get("kernels_per_step"),
        kernel_ms=kernels.get("kernel_ms"),
        first_call_s=p.first_call_s,
        method=timed.get("method"),
        blocks_ms=timed.get("wall_ms"),
        host_reference_ms=(reference.get("stat") or {}).get("median"),
    )


def _details(p: harness.Prepared, found: dict) -> dict:
    timeline = found.get("timeline") or {}
    return {
        "first_call_s": p.first_call_s,
        "thunder": found.get("trace"),
        "timeline": {k: timeline.get(k) for k in ("file", "path", "step", "rows")} if timeline else None,
        "top_ops": top_host_ops(timeline.get("rows") or []),
        "top_kernels": (found.get("kernels") or {}).get("top_kernels") or [],
    }


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
    apply_threads(params)
    chosen = registry.selected(params.executors)
    plan = {ex.name: parts_of(ex, params.device) for ex in chosen}
    total, done = 1 + sum(map(len, plan.values())), 0
    out = {"params": params.to_dict(), "step": step, "rows": [], "details": {}, "stopped": None}
    progress.step(
        done,
        total,
        f"building the model ({params.preset}, {step}, {params.layers} layer(s), "
        f"{params.seq_len} tokens, {params.threads} thread(s))",
    )
    setup = step_setup(params, step)
    kwargs = setup.kwargs
    for ex in chosen:
        found, part = {}, "first call"
        p = harness.Prepared(ex, "stopped")
        try:
            stop.check()
            done += 1
            progress.step(done, total, f"{ex.name}: first call (build, trace, compile)")
            with watched(ex, progress) as spied:
                p = harness.prepare(spied, setup.model, kwargs, params.device)
            if not p.ok:
                done += len(plan[ex.name]) - 1
            progress.step(
                done,
                total,
                f"{ex.name}: first call {p.first_call_s:.2f} s" if p.ok else f"{ex.name}: {p.status}: {p.reason}",
            )
            for part in plan[ex.name][1:] if p.ok else []:
                stop.check()
                done += 1
                progress.step(done, total, f"{ex.name}: {PART_TEXT[part]}")
                found.update(_measure_part(part, p, stop.guard(p.fn), kwargs, params, progress, trace_folder, tag))
                if part == "trace":
                    progress.step(done, total, f"{ex.name}: first call phases: {_phases(found[part])}")
        except Stopped:
            p.status, p.reason = "stopped", f"stopped during its {part}"
            out["stopped"] = f"{ex.name}, {part}"
        except Exception as e:  # one executor's failure is its row's reason
            p.fail(e, part)
        out["rows"].append(_row(p, found))
        out["details"][ex.name] = _details(p, found)
        del p, found
        gc.collect()
        if out["stopped"]:
            break
    for ex in chosen[len(out["rows"]) :]:  # after Stop: each executor that never started is a row too
        p = harness.Prepared(ex, "not run", reason=f"stopped before it ({out['stopped']})")
        out["rows"].append(_row(p, {}))
        out["details"][ex.name] = _details(p, {})
    out["calls"] = stop.calls
    if out["stopped"]:
        progress.step(done, total, f"stopped ({out['stopped']})")
    else:
        progress.step(total, total, "done")
    return out


def _measure_part(part, p, fn, kwargs, params, progress, trace_folder, tag) -> dict:
    """``{part: its record}`` for one measurement of ``parts_of`` on a prepared executor (``fn``: its
    guarded callable); the wall time comes with its host ``reference``."""
    device = params.device
    if part == "trace":
        return {part: thunder_traces.trace_row(p, kwargs)}  # a failed analysis keeps its reason, the timing goes on
    if part == "wall":
        return wall_blocks(fn, kwargs, params, progress)
    if part == "kernels":
        return {part: timing.profile_kernels(fn, kwargs, device, PROFILE_STEPS)}
    path = trace_path(Path(trace_folder or params.output_dir), tag, p.executor.name)
    return {part: {**host_overhead.step_timeline(fn, kwargs, device, path), "path": str(path)}}


def _phases(trace_row: dict) -> str:
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


def figure(runs: list[dict]):
    """Wall time per executor (named as in the table), one bar group per run, whiskers at each
    median's interval; a log axis when the runs' walls span more than ``LOG_AXIS_SPAN`` x (a seed run
    beside a tiny one), so that no bar vanishes."""
    import plotly.graph_objects as go

    walls = [r["wall_ms"] for run in runs for r in run["rows"] if r["wall_ms"]]
    log = bool(walls) and max(walls) / min(walls) > LOG_AXIS_SPAN
    fig = go.Figure(
        layout=dict(
            title="Wall time per step (median over fast blocks, whiskers at its interval)",
            barmode="group",
            yaxis_title="wall time per step (ms" + (", log scale)" if log else ")"),
            yaxis_type="log" if log else "linear",
            xaxis_title="executor",
            height=420,
            legend=dict(orientation="h", y=-0.25),
        )
    )
    for run in runs:
        ok = [r for r in run["rows"] if r["wall_ms"] is not None]
        if ok:
            fig.add_bar(
                name=run["label"],
                x=[r["executor"] for r in ok],
                y=[r["wall_ms"] for r in ok],
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=[(r.get("wall_hi_ms") or r["wall_ms"]) - r["wall_ms"] for r in ok],
                    arrayminus=[r["wall_ms"] - (r.get("wall_lo_ms") or r["wall_ms"]) for r in ok],
                ),
            )
    return fig


def legend_html(runs: list[dict]) -> str:
    """One line per run: its number, as the table's run column shows it, and its settings."""
    items = "".join(f"<li>{html.escape(r['label'])}</li>" for r in runs)
    return f"<ul class='runs'>{items}</ul>" if runs else ""


def table_html(rows: list[dict], columns: list[str] = COLUMNS) -> str:
    """Rows as the suite's HTML table (``tables.html_table``), with its stylesheet: widgets show it
    outside the pages."""
    return str(tables.html_table(rows, columns, style=True))


def details_html(run: dict, executor: str, notebook_dir: Path | None = None) -> str:
    """One row's details: first call, the Chrome trace file (its path relative to ``notebook_dir``, the
    notebook's folder), top ops and kernels, Thunder's fusion regions and its final trace."""
    d = run["details"].get(executor) or {}
    parts = [f"<h4>{html.escape(run['label'])} · {html.escape(executor)}</h4>"]
    timeline = d.get("timeline")
    if timeline:
        path = os.path.relpath(timeline["path"], notebook_dir) if notebook_dir else timeline["path"]
        step = timeline["step"]
        parts.append(
            f"<p>Profiler timeline of one step (the median of {PROFILE_STEPS}), below; its Chrome trace: "
            f"<code>{html.escape(path)}</code> (open it in ui.perfetto.dev or chrome://tracing). Host "
            f"{tables.number(step['host_us'])} µs, {step['host_ops']} top-level host ops.</p>"
        )
    if d.get("top_kernels"):
        parts.append("<b>Top kernels</b>" + table_html(d["top_kernels"], ["name", "calls_per_step", "device_us"]))
    if d.get("top_ops"):
        parts.append(
            "<b>Top host ops (top-level spans of the step)</b>" + table_html(d["top_ops"], ["op", "calls", "us"])
        )
    thunder = d.get("thunder")
    if thunder:
        if thunder.get("status") != "ok":
            parts.append(f"<p>Thunder trace: {html.escape(str(thunder.get('reason')))}</p>")
        regions = [{**r, "ops": _ops(r.get("ops"))} for r in thunder.get("regions") or []]
        parts.append(
            f"<b>Thunder: {len(regions)} fusion region(s), {thunder.get('bound_symbols')} top-level symbols; "
            f"first call: {_phases(thunder)}</b>" + table_html(regions, ["region", "kind", "inside", "n_ops", "ops"])
        )
        parts.append(
            f"<details><summary>final trace ({thunder.get('trace_lines')} lines)</summary>"
            f"<pre>{html.escape(thunder.get('trace') or '')}</pre></details>"
        )
    if len(parts) == 1:
        parts.append("<p>No details: the executor did not run here.</p>")
    return "".join(parts)


def _ops(counts) -> str:
    return ", ".join(f"{k} {v}" for k, v in (counts or {}).items())


def reference_rows(timing_results: dict) -> list[dict]:
    """Notebook 02's rows of a run (its results file) in the explorer's columns (the same vocabulary)."""
    return [{c: r.get(c) for c in COLUMNS[1:]} for r in timing_results.get("rows") or []]


def beside_reference(runs: list[dict], environment: dict, reference: Path = REFERENCE) -> dict:
    """``compare.compare`` of each run that measured (B) against the reference run's executor timing
    (A, notebook 02's rows), one section per run; a run of another model or step than A's
    (``thunder_traces.SAME_MODEL``) is shown beside it, not judged."""
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
        if d["name"] in thunder_traces.SAME_MODEL:
            for e in (e for e in report["rows"] if e["notebook"] in d["notebooks"]):
                e.update(verdict=None, beyond_spread=None, decided=f"not judged: another {d['name']} than A's")
    return report


def comparison_html(report: dict, page: Path | None = None) -> str:
    """The comparison's rows as one table (``compare.entries_table``; the full page, when written, is linked)."""
    differ = ", ".join(sorted({d["name"] for d in report["parameters"]})) or "none"
    link = f" Full report: <code>{html.escape(str(page))}</code>." if page else ""
    table = compare.entries_table(report["rows"], with_notebook="run", style=True)
    return (
        f"<p><b>A: {html.escape(report['a']['name'])} (its 02 executor timing) · B: this session's runs.</b> "
        f"Parameters that differ: {html.escape(differ)}. {html.escape(compare.tally(report))}{link}</p>{table}"
    )


def executor_options(device: str) -> list[tuple[str, str]]:
    """(label, name) for every registered executor; one that cannot run here is marked with its
    status (unavailable, failed) and reason."""
    out = []
    for name, ex in registry.REGISTRY.items():
        state = ex.check(device)
        out.append((f"{name} ({state[0]}: {state[1]})" if state else name, name))
    return out


def device_options() -> list[str]:
    import torch

    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return ["cpu", *(["cuda"] if cuda else []), *cuda]


def plotly_output(fig) -> dict:
    """A display_data output of ``fig`` as plotly JSON (JupyterLab draws it; a widget keeps it)."""
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {PLOTLY_MIME: json.loads(fig.to_json()), "text/plain": f"<{fig.layout.title.text}>"},
    }


class _WidgetProgress(Progress):
    """The widgets' progress: bar, status line and a log of the last steps, one line each; once Stop
    is pressed, the status line says what finishes before the run stops."""

    live = True

    def __init__(self, ui: "ExplorerUI", echo: bool):
        super().__init__(echo)
        self.ui, self.text, self.shown, self.lines = ui, "", "", []

    def step(self, done: int, total: int, text: str) -> None:
        super().step(done, total, text)
        ui = self.ui
        ui.progress.max, ui.progress.value, ui.progress.description = total, done, f"{done}/{total}"
        self.text = self.shown = text
        ui.status.value = html_escape(text)
        self.lines = (self.lines + [f"[{done}/{total}] {text}"])[-8:]
        log = "\n".join(self.lines)
        ui.log.value = f"<pre>{html.escape(log)}</pre>"

    def detail(self, text: str) -> None:
        self.shown = f"{self.text} · {text}"
        self.show()

    def show(self) -> None:
        """What runs now on the status line; after Stop, as what finishes first."""
        stopping = self.ui.stop_switch.is_set()
        self.ui.status.value = html_escape(f"stopping: finishing {self.shown} ..." if stopping else self.shown)


class ExplorerUI:
    """The widgets: settings, Run, Stop, Save and Beside-reference buttons, progress, status, a chart,
    a table, a row's details and the comparison, all kept in the widgets' state (a reload shows
    them again). Run measures in a worker thread, so the kernel stays free for Stop; callbacks
    never raise."""

    def __init__(self, explorer: Explorer, params: Params, save_path: str | Path, notebook_dir: Path | None = None):
        import ipywidgets as w

        self.explorer, self.seed, self.notebook_dir = explorer, params.seed, notebook_dir
        self.worker: threading.Thread | None = None
        self.stop_switch = StopSwitch()
        self.reporter: _WidgetProgress | None = None  # the running (or last) run's progress
        self.compared: Path | None = None  # the reference the comparison shows, redone after each run
        wide = {"style": {"description_width": "8em"}}
        self.preset = w.Dropdown(options=PRESETS, value=params.preset, description="preset", **wide)
        self.dtype = w.Dropdown(options=sorted(set(DTYPES.values())), value=params.dtype, description="dtype", **wide)
        self.device = w.Dropdown(options=device_options(), value=params.device, description="device", **wide)
        self.batch_size = w.IntText(value=params.batch_size, description="batch", **wide)
        self.threads = w.IntText(value=params.threads, description="threads", **wide)
        self.executors = w.SelectMultiple(
            options=executor_options(params.device),
            value=tuple(params.executors),
            rows=len(registry.REGISTRY),
            description="executors",
            layout=w.Layout(width="56em"),
            **wide,
        )
        self.layers = w.IntText(value=params.layers, description="layers", **wide)
        self.seq_len = w.IntText(value=params.seq_len, description="prompt tokens", **wide)
        self.step = w.ToggleButtons(options=STEPS, value="prefill", description="step", **wide)
        self.cache_mode = w.Dropdown(options=CACHE_MODES, value=params.cache_mode, description="cache mode", **wide)
        self.warmup = w.IntText(value=params.warmup, description="warm-up calls", **wide)
        self.iters = w.IntText(value=params.iters, description="calls / block", **wide)
        self.repeats = w.IntText(value=params.repeats, description="blocks/pass", **wide)
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", button_style="danger", icon="stop", disabled=True)
        self.save_button = w.Button(description="Save", icon="save")
        self.save_path = w.Text(value=str(save_path), description="save to", layout=w.Layout(width="40em"))
        self.compare_button = w.Button(
            description="Beside H100 reference", icon="columns", layout=w.Layout(width="16em")
        )
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle")
        self.status = w.HTML()
        self.log = w.HTML()
        self.chart = w.Output()
        self.table = w.HTML(table_html(explorer.rows()))
        self.row_choice = w.Dropdown(options=[], description="details of", layout=w.Layout(width="56em"), **wide)
        self.details = w.HTML()
        self.timeline = w.Output()
        self.comparison = w.HTML()
        self.step.observe(self._step_changed, names="value")
        for base in (self.preset, self.device):
            base.observe(self._base_changed, names="value")
        self.row_choice.observe(lambda _: self.show_details(), names="value")
        self.run_button.on_click(lambda _: self.on_run())
        self.stop_button.on_click(lambda _: self.on_stop())
        self.save_button.on_click(lambda _: self.on_save())
        self.compare_button.on_click(lambda _: self.on_compare())
        controls = w.VBox(
            [
                w.HBox([self.preset, self.dtype, self.device]),
                w.HBox([self.batch_size, self.threads]),
                self.executors,
                w.HBox([self.layers, self.seq_len]),
                self.step,
                w.HBox([self.cache_mode, self.warmup]),
                w.HBox([self.iters, self.repeats]),
                w.HBox([self.run_button, self.stop_button, self.progress]),
                self.status,
                self.log,
                w.HBox([self.save_button, self.save_path, self.compare_button]),
            ]
        )
        self.widget = w.VBox(
            [controls, self.chart, self.table, self.row_choice, self.details, self.timeline, self.comparison]
        )
        self._refresh()
        _register_profiler()

    def view(self, interactive: bool = True):
        """The widgets; in a batch run (``interactive`` False: no one to click, no widget state saved)
        a note instead, since the page would show the widgets' text form."""
        if interactive:
            return self.widget
        from IPython.display import HTML

        return HTML(
            "<p><i>The explorer's widgets show in JupyterLab (python3 tasks.py lab); the batch run's "
            "measurement follows.</i></p>"
        )

    def _step_changed(self, change) -> None:
        if change["new"] == "decode":  # a decode step needs the pre-filled StaticCache
            self.cache_mode.value = "static"

    def _base_changed(self, change) -> None:
        """A new preset or device: its timing defaults, and the executors' availability there."""
        try:
            p = validate(preset=self.preset.value, device=self.device.value)
        except ParameterError as e:
            self.status.value = f"<b style='color:#c22'>{html_escape(str(e))}</b>"
            return
        self.warmup.value, self.iters.value, self.repeats.value = p.warmup, p.iters, p.repeats
        if change["owner"] is self.device:
            chosen = self.executors.value
            self.executors.options = executor_options(p.device)
            self.executors.value = chosen

    def settings(self) -> dict:
        return {
            "preset": self.preset.value,
            "dtype": self.dtype.value,
            "device": self.device.value,
            "batch_size": self.batch_size.value,
            "threads": self.threads.value,
            "seed": self.seed,
            "executors": list(self.executors.value),
            "layers": self.layers.value,
            "seq_len": self.seq_len.value,
            "step": self.step.value,
            "cache_mode": self.cache_mode.value,
            "warmup": self.warmup.value,
            "iters": self.iters.value,
            "repeats": self.repeats.value,
        }

    def on_run(self) -> threading.Thread | None:
        """Run the widgets' setting in a worker thread (the kernel stays free for Stop)."""
        if self.worker and self.worker.is_alive():
            return None
        self.worker = threading.Thread(target=self.run_now, args=(self.settings(),), daemon=True)
        self.worker.start()
        return self.worker

    def run_now(self, settings: dict, echo: bool = False) -> dict | None:
        """Run ``settings`` in this thread (the notebook's own run: ``echo`` prints one line per step)."""
        self.stop_switch = StopSwitch()
        self.run_button.disabled, self.stop_button.disabled = True, False
        try:
            self.reporter = _WidgetProgress(self, echo)
            run = self.explorer.run(settings, self.reporter, self.stop_switch)
            colour = "#c22" if run["error"] or run["stopped"] else "#a60" if run["noisy"] else "inherit"
            self.status.value = f"<b style='color:{colour}'>{html_escape(summary_line(run))}</b>"
            self._refresh()
            return run
        except Exception as e:  # a widget callback must never take the kernel's session down
            self.status.value = f"<b style='color:#c22'>{html_escape(harness.describe(e))}</b>"
            return None
        finally:
            self.run_button.disabled, self.stop_button.disabled = False, True
            self.progress.description = "idle"

    def on_stop(self) -> None:
        """Stop before the next call; the status line says at once what finishes first (a first call,
        say, runs to its end) and keeps saying it while that runs."""
        self.stop_switch.set()
        self.stop_button.disabled = True
        if self.reporter and self.progress.description != "idle":
            self.reporter.show()

    def _refresh(self) -> None:
        """Chart, table and the rows to pick details from, after a run; the comparison again, where
        one is shown."""
        self.chart.outputs = (plotly_output(figure(self.explorer.runs)),)
        self.table.value = legend_html(self.explorer.runs) + table_html(self.explorer.rows())
        choices = [
            (f"run {r['id']} · {row['executor']} ({row['status']})", f"{r['id']}|{row['executor']}")
            for r in self.explorer.runs
            for row in r["rows"]
        ]
        self.row_choice.options = choices
        if choices:
            self.row_choice.value = choices[-1][1]
        if self.compared is not None:
            self.on_compare(self.compared)

    def show_details(self) -> None:
        """The chosen row's details and its profiled step's timeline."""
        if not self.row_choice.value:
            return
        number, executor = self.row_choice.value.split("|", 1)
        run = self.explorer.runs[int(number) - 1]
        self.details.value = details_html(run, executor, self.notebook_dir)
        timeline = (run["details"].get(executor) or {}).get("timeline")
        if timeline:
            from .studies.profiler_timeline import timeline_figure

            fig = timeline_figure(timeline["rows"], f"run {number} · {executor}: one profiled step")
            self.timeline.outputs = (plotly_output(fig),)
        else:
            self.timeline.outputs = ()

    def on_save(self) -> Path | None:
        try:
            path = self.explorer.save(self.save_path.value)
            self.status.value = f"saved {len(self.explorer.runs)} run(s) to {html_escape(str(path))}"
            return path
        except Exception as e:
            self.status.value = f"<b style='color:#c22'>save failed: {html_escape(harness.describe(e))}</b>"
            return None

    def on_compare(self, reference: Path = REFERENCE) -> dict | None:
        """Every run beside the reference run (``beside_reference``), shown and written as a page."""
        from .core import environment

        self.compared = reference
        try:
            report = beside_reference(self.explorer.runs, environment.collect(self.device.value), reference)
            page, _ = compare.write(report, self.explorer.output_dir)
            self.comparison.value = comparison_html(report, page)
            return report
        except Exception as e:
            self.comparison.value = f"<b style='color:#c22'>{html_escape(harness.describe(e))}</b>"
            return None


def _register_profiler() -> None:
    """One empty profile in this (the kernel's main) thread: kineto registers here, and a first
    profile from the worker thread would log 'External init callback must run in same thread'."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]):
        pass


def html_escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")
