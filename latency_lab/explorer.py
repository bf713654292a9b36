"""The explorer notebook's logic: measure one setting (executors, layers, prompt length, prefill or
decode step, cache mode, warm-up and timed calls) with the suite's own code, keep every run so that
settings can be compared on one chart, and the ipywidgets front end around it.

``measure`` is the measurement (no widgets); ``Explorer`` holds the runs and never raises on a bad
setting or a failing executor (the run keeps its error); ``ExplorerUI`` builds the widgets.
"""

from __future__ import annotations

import gc
import html
import json
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from . import harness, model as llama, registry, tables, timing
from .parameters import CACHE_MODES, ParameterError, Params, validate

STEPS = ("prefill", "decode")
# Settings the widgets change; the rest (preset, dtype, device, batch size, seed) come from the
# notebook's parameters.
SETTINGS = ("executors", "layers", "seq_len", "step", "cache_mode", "warmup", "iters", "repeats")
BASE = ("preset", "dtype", "device", "batch_size", "seed")
PROFILE_STEPS = 3
COLUMNS = ["run", "executor", "label", "status", "wall_ms", "wall_q1_ms", "wall_q3_ms", "host_ms",
           "kernels_per_step", "kernel_ms", "first_call_s", "reason"]


def settings_from(params: Params, step: str = "prefill") -> dict:
    """The explorer's settings for a notebook's validated parameters."""
    d = params.to_dict()
    return {**{k: d[k] for k in BASE}, **{k: d[k] for k in SETTINGS if k in d}, "executors": list(params.executors),
            "step": step}


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
        raise ParameterError("cache_mode", params.cache_mode,
                             "static when step='decode' (a decode step runs against a StaticCache pre-filled by a prefill)")
    return params, step


def step_setup(params: Params, step: str) -> llama.Setup:
    """The model and the kwargs of one ``step``: the prompt's prefill, or the one-token decode step
    after it (``model.build_decode``: a ``StaticCache`` an eager prefill of the prompt filled; each
    call re-writes the same cache slot, so repeated calls are the same step)."""
    setup = llama.build(params)
    if step == "decode":
        return llama.Setup(params, setup.config, setup.model, llama.build_decode(setup, params.seq_len, 1).kwargs)
    return setup


def _methods(kwargs: dict, params: Params) -> dict:
    """What each executor is measured with, in order (``harness.build_and_measure``): the seed's timer
    (wall and steady-state host time of the same blocks), then kernels per step."""
    device = params.device
    return {
        "wall": lambda p: timing.event_timer(p.fn, kwargs, device, params.warmup, params.iters, params.repeats),
        "kernels": lambda p: timing.profile_kernels(p.fn, kwargs, device, PROFILE_STEPS),
    }


def measured_row(p: harness.Prepared, measured: dict | None) -> dict:
    """One executor's row: wall median and quartiles, host time, kernels, first call, reason."""
    m = measured or {}
    timed, kernels = m.get("wall") or {}, m.get("kernels") or {}
    wall, host = timed.get("wall"), timed.get("host")
    return p.row(**(wall.flat("wall_ms") if wall else {"wall_ms": None}), host_ms=host and host.median,
                 kernels_per_step=kernels.get("kernels_per_step"), kernel_ms=kernels.get("kernel_ms"),
                 first_call_s=p.first_call_s, method=timed.get("method"),
                 blocks_ms=[w for w, _ in timed.get("blocks", [])] or None)


def measure(settings: dict, progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Measure every selected executor on one setting; returns the resolved parameters, the step
    and one row per executor. A bad setting raises ``ParameterError`` before any work; an executor
    that is unavailable or fails is a row with its reason. ``progress(done, total, text)`` is called
    before the model is built and after each executor."""
    params, step = check(settings)
    chosen = registry.selected(params.executors)
    total = len(chosen) + 1
    tell = progress or (lambda done, total, text: None)
    tell(0, total, f"building the model ({step}, {params.layers} layer(s), {params.seq_len} tokens)")
    setup = step_setup(params, step)
    methods = _methods(setup.kwargs, params)
    rows = []
    for i, ex in enumerate(chosen, 1):
        tell(i, total, f"measuring {ex.name}")
        prepared, measured = harness.build_and_measure([ex], setup.model, setup.kwargs, methods, params.device,
                                                       progress=lambda text: None)
        rows.append(measured_row(prepared[ex.name], measured.get(ex.name)))
        del prepared, measured
        gc.collect()
    tell(total, total, "done")
    return {"params": params.to_dict(), "step": step, "rows": rows}


def describe_settings(settings: dict) -> str:
    """A short label of a run's setting for legends and tables."""
    s = settings
    return (f"{s.get('step', 'prefill')}, {s.get('layers')} layer(s), {s.get('seq_len')} tok, "
            f"cache {s.get('cache_mode')}, {s.get('warmup')}+{s.get('iters')}x{s.get('repeats')}")


class Explorer:
    """The runs of one explorer session. ``run`` never raises: a bad setting or an error is kept in
    the run's ``error`` (the kernel stays usable)."""

    def __init__(self):
        self.runs: list[dict] = []

    def run(self, settings: dict, progress: Callable[[int, int, str], None] | None = None) -> dict:
        record = {"id": len(self.runs) + 1, "settings": dict(settings), "label": "", "params": None, "step": None,
                  "rows": [], "error": None, "seconds": None,
                  "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        t0 = time.perf_counter()
        try:
            record.update(measure(settings, progress))
        except ParameterError as e:
            record["error"] = str(e)
        except Exception as e:  # the session goes on; the run says what went wrong
            record["error"] = harness.describe(e) + "\n" + traceback.format_exc(limit=3)
        record["seconds"] = round(time.perf_counter() - t0, 2)
        shown = {**record["params"], "step": record["step"]} if record["params"] else settings
        record["label"] = f"run {record['id']}: {describe_settings(shown)}"
        self.runs.append(record)
        return record

    def rows(self) -> list[dict]:
        """The rows of every run that measured, each with its run's label, in ``COLUMNS`` order."""
        return [{"run": r["label"], **{c: row.get(c) for c in COLUMNS[1:]}} for r in self.runs for row in r["rows"]]

    def save(self, path: str | Path) -> Path:
        """Write every run (settings, resolved parameters, rows, errors) to ``path`` as JSON."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"runs": self.runs}, indent=1, default=str))
        return path


def findings(run: dict) -> list[str]:
    """Sentences about one run, generated from its rows."""
    if run["error"]:
        return [f"The explorer's default run failed: {run['error'].splitlines()[0]}"]
    ok = sorted((r for r in run["rows"] if r["wall_ms"] is not None), key=lambda r: r["wall_ms"])
    out = [f"{run['label']}: " + (", ".join(f"{r['label']} {r['wall_ms']:.3g} ms (q1-q3 {r['wall_q1_ms']:.3g}-{r['wall_q3_ms']:.3g})"
                                            for r in ok) if ok else "no executor produced a wall time") + "."]
    if len(ok) >= 2:
        fast, slow = ok[0], ok[-1]
        overlap = slow["wall_q1_ms"] <= fast["wall_q3_ms"]
        out.append(f"{fast['label']} is the fastest; {slow['label']} takes {slow['wall_ms'] / fast['wall_ms']:.3g}x as long"
                   + (" (their quartiles overlap: this run cannot order them)." if overlap else "."))
    skipped = [f"{r['executor']} ({r['status']})" for r in run["rows"] if r["wall_ms"] is None]
    if skipped:
        out.append("Without a wall time: " + ", ".join(skipped) + ".")
    return out


def figure(runs: list[dict], widget: bool = True):
    """Wall time per executor, one bar group per run, whiskers at the quartiles: a plotly
    ``FigureWidget`` (updated in place) or, with ``widget=False``, a plain ``Figure``."""
    import plotly.graph_objects as go

    fig = (go.FigureWidget if widget else go.Figure)(
        layout=dict(title="Wall time per step (median, whiskers at q1-q3)", barmode="group",
                    yaxis_title="wall time per step (ms)", xaxis_title="executor", height=420))
    for run in runs:
        if run["rows"]:
            fig.add_trace(bar_of(run))
    return fig


def bar_of(run: dict):
    import plotly.graph_objects as go

    ok = [r for r in run["rows"] if r["wall_ms"] is not None]
    return go.Bar(name=run["label"], x=[r["label"] for r in ok], y=[r["wall_ms"] for r in ok],
                  error_y=dict(type="data", symmetric=False, array=[r["wall_q3_ms"] - r["wall_ms"] for r in ok],
                               arrayminus=[r["wall_ms"] - r["wall_q1_ms"] for r in ok]))


def table_html(rows: list[dict]) -> str:
    """The runs' rows as an HTML table, cells as ``tables.number`` prints them."""
    def cell(v):
        return html.escape(tables.number(v))
    head = "".join(f"<th>{html.escape(tables.header(c))}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in COLUMNS) + "</tr>" for r in rows)
    return f"<table class='latency-lab'><tr>{head}</tr>{body}</table>"


def executor_options(device: str) -> list[tuple[str, str]]:
    """(label, name) for every registered executor; one that cannot run here is marked with its
    status (unavailable, failed) and reason."""
    out = []
    for name, ex in registry.REGISTRY.items():
        state = ex.check(device)
        out.append((f"{name} ({state[0]}: {state[1]})" if state else name, name))
    return out


class ExplorerUI:
    """The widgets: settings, Run and Save buttons, progress, status, a chart and a table, all
    updated in place. Errors of a run show in the status line; callbacks never raise."""

    def __init__(self, explorer: Explorer, params: Params, save_path: str | Path):
        import ipywidgets as w

        self.explorer, self.base = explorer, settings_from(params)
        wide = {"style": {"description_width": "8em"}}
        self.executors = w.SelectMultiple(options=executor_options(params.device), value=tuple(params.executors),
                                          rows=len(registry.REGISTRY), description="executors",
                                          layout=w.Layout(width="56em"), **wide)
        self.layers = w.BoundedIntText(value=params.layers, min=1, max=64, description="layers", **wide)
        self.seq_len = w.BoundedIntText(value=params.seq_len, min=1, max=8192, description="prompt tokens", **wide)
        self.step = w.ToggleButtons(options=STEPS, value="prefill", description="step", **wide)
        self.cache_mode = w.Dropdown(options=CACHE_MODES, value=params.cache_mode, description="cache mode", **wide)
        self.warmup = w.BoundedIntText(value=params.warmup, min=0, max=10_000, description="warm-up calls", **wide)
        self.iters = w.BoundedIntText(value=params.iters, min=1, max=100_000, description="calls / block", **wide)
        self.repeats = w.BoundedIntText(value=params.repeats, min=2, max=10_000, step=2, description="blocks", **wide)
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.save_button = w.Button(description="Save", icon="save")
        self.save_path = w.Text(value=str(save_path), description="save to", layout=w.Layout(width="40em"))
        self.progress = w.IntProgress(value=0, min=0, max=1, description="idle")
        self.status = w.HTML()
        self.log = w.Output(layout=w.Layout(max_height="12em", overflow="auto"))
        self.table = w.HTML(table_html(explorer.rows()))
        self.chart = self._chart()
        self.step.observe(self._step_changed, names="value")
        self.run_button.on_click(lambda _: self.on_run())
        self.save_button.on_click(lambda _: self.on_save())
        controls = w.VBox([self.executors, w.HBox([self.layers, self.seq_len]), self.step,
                           w.HBox([self.cache_mode, self.warmup]), w.HBox([self.iters, self.repeats]),
                           w.HBox([self.run_button, self.progress]), w.HBox([self.save_button, self.save_path]),
                           self.status])
        self.widget = w.VBox([controls, self.chart, self.table, self.log])

    def _chart(self):
        """A FigureWidget updated in place; without anywidget (plotly 6+ needs it for FigureWidget)
        an Output that ``_show`` redraws after each run."""
        try:
            return figure(self.explorer.runs)
        except ImportError as e:
            import ipywidgets as w

            self.status.value = f"<i>the chart is redrawn after each run ({html_escape(str(e))})</i>"
            return w.Output()

    def _step_changed(self, change) -> None:
        if change["new"] == "decode":  # a decode step needs the pre-filled StaticCache
            self.cache_mode.value = "static"

    def settings(self) -> dict:
        return {**self.base, "executors": list(self.executors.value), "layers": self.layers.value,
                "seq_len": self.seq_len.value, "step": self.step.value, "cache_mode": self.cache_mode.value,
                "warmup": self.warmup.value, "iters": self.iters.value, "repeats": self.repeats.value}

    def _progress(self, done: int, total: int, text: str) -> None:
        self.progress.max, self.progress.value, self.progress.description = total, done, f"{done}/{total}"
        self.status.value = html_escape(text)

    def on_run(self) -> dict | None:
        self.run_button.disabled = True
        try:
            with self.log:
                run = self.explorer.run(self.settings(), self._progress)
            if run["error"]:
                self.status.value = f"<b style='color:#c22'>{html_escape(run['label'])}: {html_escape(run['error'])}</b>"
            else:
                self.status.value = f"{html_escape(run['label'])}: {len(run['rows'])} executor(s) in {run['seconds']} s"
                self._show(run)
            self.table.value = table_html(self.explorer.rows())
            return run
        except Exception as e:  # a widget callback must never take the kernel's session down
            self.status.value = f"<b style='color:#c22'>{html_escape(harness.describe(e))}</b>"
            return None
        finally:
            self.run_button.disabled = False
            self.progress.description = "idle"

    def _show(self, run: dict) -> None:
        if hasattr(self.chart, "add_trace"):
            self.chart.add_trace(bar_of(run))
        else:
            self.chart.clear_output(wait=True)
            with self.chart:
                figure(self.explorer.runs, widget=False).show()

    def on_save(self) -> Path | None:
        try:
            path = self.explorer.save(self.save_path.value)
            self.status.value = f"saved {len(self.explorer.runs)} run(s) to {html_escape(str(path))}"
            return path
        except Exception as e:
            self.status.value = f"<b style='color:#c22'>save failed: {html_escape(harness.describe(e))}</b>"
            return None


def html_escape(text: str) -> str:
    return html.escape(text, quote=False).replace("\n", "<br>")
