"""The explorer's widgets (ipywidgets): settings, Run, Stop, Save and Beside-reference buttons, progress,
status, chart, table, a row's details and the comparison, all kept in the widgets' state, so a reloaded
page shows the same chart, table and details."""

from __future__ import annotations

import html
import threading
from pathlib import Path

from ..core import harness, registry
from ..core.parameters import CACHE_MODES, DTYPES, PRESETS, ParameterError, Params, validate
from ..run.compare import command as compare
from .measure import STEPS, Progress, StopSwitch
from .session import REFERENCE, Explorer, beside_reference, summary_line
from .view import comparison_html, details_html, figure, legend_html, plotly_output, table_html


def executor_options(device: str) -> list[tuple[str, str]]:
    """(label, name) for every registered executor; one that cannot run here is marked with its
    status (unavailable, failed) and reason."""
    out = []
    for name, ex in registry.REGISTRY.items():
        state = ex.check(device)
        out.append((f"{name} ({state[0]}: {state[1]})" if state else name, name))
    return out


def device_options() -> list[str]:
    """The devices to pick: cpu and, where CUDA is present, cuda and each cuda:N."""
    import torch

    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return ["cpu", *(["cuda"] if cuda else []), *cuda]


WIDE = {"style": {"description_width": "8em"}}  # the labels' width, the same for every setting


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
        self.explorer, self.seed, self.notebook_dir = explorer, params.seed, notebook_dir
        self.worker: threading.Thread | None = None
        self.stop_switch = StopSwitch()
        self.reporter: _WidgetProgress | None = None  # the running (or last) run's progress
        self.compared: Path | None = None  # the reference the comparison shows, redone after each run
        self._make_settings(params)
        self._make_buttons_and_outputs(save_path)
        self._connect()
        self.widget = self._layout()
        self._refresh()
        _register_profiler()

    def _make_settings(self, params: Params) -> None:
        """The settings' widgets, at ``params``' values."""
        import ipywidgets as w

        self.preset = w.Dropdown(options=PRESETS, value=params.preset, description="preset", **WIDE)
        self.dtype = w.Dropdown(options=sorted(set(DTYPES.values())), value=params.dtype, description="dtype", **WIDE)
        self.device = w.Dropdown(options=device_options(), value=params.device, description="device", **WIDE)
        self.batch_size = w.IntText(value=params.batch_size, description="batch", **WIDE)
        self.threads = w.IntText(value=params.threads, description="threads", **WIDE)
        self.executors = w.SelectMultiple(
            options=executor_options(params.device),
            value=tuple(params.executors),
            rows=len(registry.REGISTRY),
            description="executors",
            layout=w.Layout(width="56em"),
            **WIDE,
        )
        self.layers = w.IntText(value=params.layers, description="layers", **WIDE)
        self.seq_len = w.IntText(value=params.seq_len, description="prompt tokens", **WIDE)
        self.step = w.ToggleButtons(options=STEPS, value="prefill", description="step", **WIDE)
        self.cache_mode = w.Dropdown(options=CACHE_MODES, value=params.cache_mode, description="cache mode", **WIDE)
        self.warmup = w.IntText(value=params.warmup, description="warm-up calls", **WIDE)
        self.iters = w.IntText(value=params.iters, description="calls / block", **WIDE)
        self.repeats = w.IntText(value=params.repeats, description="rounds/pass", **WIDE)

    def _make_buttons_and_outputs(self, save_path: str | Path) -> None:
        """Run, Stop, Save (with its path) and Beside-reference; progress, status, log, chart, table, the
        row to detail, its details and timeline, and the comparison."""
        import ipywidgets as w

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
        self.table = w.HTML(table_html(self.explorer.rows()))
        self.row_choice = w.Dropdown(options=[], description="details of", layout=w.Layout(width="56em"), **WIDE)
        self.details = w.HTML()
        self.timeline = w.Output()
        self.comparison = w.HTML()

    def _connect(self) -> None:
        """The callbacks: a step, preset or device changed, a row chosen, a button clicked."""
        self.step.observe(self._step_changed, names="value")
        for base in (self.preset, self.device):
            base.observe(self._base_changed, names="value")
        self.row_choice.observe(lambda _: self.show_details(), names="value")
        self.run_button.on_click(lambda _: self.on_run())
        self.stop_button.on_click(lambda _: self.on_stop())
        self.save_button.on_click(lambda _: self.on_save())
        self.compare_button.on_click(lambda _: self.on_compare())

    def _layout(self):
        """The controls above the chart, table, row details, timeline and comparison."""
        import ipywidgets as w

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
        return w.VBox([controls, self.chart, self.table, self.row_choice, self.details, self.timeline, self.comparison])

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
        """A decode step picked: the static cache it needs."""
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
        """The widgets' setting, as ``Explorer.run`` takes it."""
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
            from ..instruments.profiler_timeline import timeline_figure

            fig = timeline_figure(timeline["rows"], f"run {number} · {executor}: one profiled step")
            self.timeline.outputs = (plotly_output(fig),)
        else:
            self.timeline.outputs = ()

    def on_save(self) -> Path | None:
        """Every run saved to the path given (``Explorer.save``); the status line says where, or why not."""
        try:
            path = self.explorer.save(self.save_path.value)
            self.status.value = f"saved {len(self.explorer.runs)} run(s) to {html_escape(str(path))}"
            return path
        except Exception as e:
            self.status.value = f"<b style='color:#c22'>save failed: {html_escape(harness.describe(e))}</b>"
            return None

    def on_compare(self, reference: Path = REFERENCE) -> dict | None:
        """Every run beside the reference run (``beside_reference``), shown and written as a page."""
        from ..core import environment

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
    """``text`` as HTML, its line breaks as ``<br>``."""
    return html.escape(text, quote=False).replace("\n", "<br>")
