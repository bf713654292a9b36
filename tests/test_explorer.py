"""The explorer's logic without a browser: runs, details, Stop between calls, progress with a Thunder
first call's phases, noise flags, the comparison with the reference run, and the widgets' callbacks."""

from __future__ import annotations

import gzip
import html
import itertools
import json
import threading
import time

import pytest

from latency_lab import explorer as X
from latency_lab.core import parameters as P
from latency_lab.core import registry as E
from latency_lab.core import timing
from latency_lab.explorer import session, view


@pytest.fixture(scope="module")
def tiny_params():
    return P.validate(preset="tiny", device="cpu", executors="eager,thunder", warmup=1, iters=2, repeats=2)


class Recorder(X.Progress):
    live = True

    def __init__(self):
        super().__init__()
        self.steps, self.details = [], []

    def step(self, done, total, text):
        self.steps.append((done, total, text))

    def detail(self, text):
        self.details.append(text)


def test_explorer_keeps_runs_details_and_reports_bad_settings(tiny_params, tmp_path):
    explorer, progress = X.Explorer(tmp_path), Recorder()
    first = explorer.run(X.settings_from(tiny_params), progress)
    assert first["error"] is None and first["stopped"] is None
    eager, thunder = first["rows"]
    assert eager["status"] == "ok" and eager["wall_q1_ms"] <= eager["wall_ms"] <= eager["wall_q3_ms"]
    assert (
        eager["method"] == "perf_counter" and len(eager["blocks_ms"]) == 4 and 0 < eager["host_ms"] <= eager["wall_ms"]
    )
    assert 0 <= eager["host_slow_pct"] <= 100 and eager["noisy"] in (True, False) and eager["host_reference_ms"] > 0
    assert eager["wall_lo_ms"] <= eager["wall_ms"] <= eager["wall_hi_ms"] and eager["host_per_ref_x"] > 0
    assert thunder["status"] == "unavailable" and "CUDA" in thunder["reason"] and thunder["wall_ms"] is None
    # one line per step; the bar ends full; block progress goes to the live detail only
    assert progress.steps[0][:2] == (0, 8) and progress.steps[-1] == (8, 8, "done")
    assert (
        any("eager: wall and steady-state host time" in text for _, _, text in progress.steps)
        and "rounds: 4 of 4 done" in progress.details
    )
    # the profiled step: a Chrome trace file that opens, and the step's top host ops
    details = first["details"]["eager"]
    trace = json.loads(gzip.open(details["timeline"]["path"], "rt").read())
    assert trace["traceEvents"] and details["top_ops"][0]["us"] >= details["top_ops"][-1]["us"] > 0
    assert "aten::linear" in {op["op"] for op in details["top_ops"]}
    page = X.details_html(first, "eager", tmp_path)
    assert "00_explorer.run1.eager.chrome-trace.json.gz" in page and "aten::linear" in page
    assert "did not run here" in X.details_html(first, "thunder")
    decode = explorer.run(
        {**X.settings_from(tiny_params), "executors": ["eager"], "step": "decode", "cache_mode": "static"}
    )
    assert decode["error"] is None and decode["step"] == "decode" and decode["rows"][0]["wall_ms"] > 0
    for bad, name in (
        ({"step": "decode"}, "cache_mode"),
        ({"step": "generate"}, "step"),
        ({"layers": 0}, "layers"),
        ({"executors": []}, "executors"),
        ({"executors": ["tvm"]}, "executors"),
        ({"threads": 0}, "threads"),
        ({"preset": "huge"}, "preset"),
        ({"dtype": "int8"}, "dtype"),
    ):
        run = explorer.run({**X.settings_from(tiny_params), **bad})
        assert run["error"].startswith(f"invalid parameter {name}=") and run["rows"] == []
    assert [r["id"] for r in explorer.runs] == list(range(1, 11))
    assert [r["run"] for r in explorer.rows()] == [f"run {first['id']}"] * 2 + [f"run {decode['id']}"]
    legend = X.legend_html(explorer.runs)  # the settings once per run, above the table, not in every row
    assert html.escape(first["label"]) in legend and legend.count("<li>") == 10
    saved = json.loads(explorer.save(tmp_path / "runs.json").read_text())
    assert len(saved["runs"]) == 10 and saved["runs"][1]["rows"][0]["executor"] == "eager"
    assert any("torch-eager" in f for f in X.findings(first)) and "unavailable" in X.findings(first)[-1]


def test_settings_pick_preset_dtype_device_batch_and_threads(tmp_path):
    settings = {
        **X.settings_from(P.validate(preset="tiny", device="cpu", executors="eager")),
        "dtype": "float32",
        "batch_size": 2,
        "threads": 2,
        "seq_len": 4,
        "warmup": 0,
        "iters": 1,
    }
    run = X.Explorer(tmp_path).run(settings)
    import torch

    assert run["error"] is None and torch.get_num_threads() == 2  # applied before timing
    assert (run["params"]["dtype"], run["params"]["batch_size"], run["params"]["threads"]) == ("float32", 2, 2)
    assert "tiny float32 cpu" in run["label"] and "2x4 tok" in run["label"] and "2 thread(s)" in run["label"]
    torch.set_num_threads(1)


def test_stop_ends_a_run_before_its_next_call(tmp_path):
    """Stop while the wall-time blocks run: no call starts after it; the run says where it stopped."""
    params = P.validate(
        preset="tiny", device="cpu", executors="eager,torch.compile", warmup=0, iters=100_000, repeats=2
    )
    stop, progress = X.StopSwitch(), Recorder()
    explorer = X.Explorer(tmp_path)
    worker = threading.Thread(target=explorer.run, args=(X.settings_from(params), progress, stop))
    worker.start()
    deadline = time.monotonic() + 120
    while (
        not any("eager: wall and steady-state host time" in t for _, _, t in progress.steps)
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    time.sleep(0.5)
    calls, t0 = stop.calls, time.perf_counter()
    stop.set()
    worker.join(60)
    after = stop.calls - calls
    run = explorer.runs[0]
    assert not worker.is_alive() and time.perf_counter() - t0 < 10
    assert after <= 1  # at most the call that was running when Stop came
    assert run["stopped"] == "eager, wall" and [r["status"] for r in run["rows"]] == ["stopped", "not run"]
    assert (
        run["rows"][1]["executor"] == "torch.compile" and "stopped before it (eager, wall)" in run["rows"][1]["reason"]
    )
    assert run["calls"] < 100_000 and "none after Stop" in X.summary_line(run)
    assert "did not finish" in X.findings(run)[0]


def test_stop_switch_guard_counts_and_refuses_calls():
    stop, seen = X.StopSwitch(), []
    fn = stop.guard(lambda **kw: seen.append(kw))
    fn(a=1)
    stop.set()
    with pytest.raises(X.Stopped):
        fn(a=2)
    assert seen == [{"a": 1}] and stop.calls == 1
    assert not issubclass(X.Stopped, Exception)  # no measurement's `except Exception` swallows it


def test_thunder_first_call_reports_its_phases(tmp_path):
    """A live progress sees the phase of a Thunder first call as it goes; the step lines give the split."""
    params = P.validate(preset="tiny", device="cpu", executors="thunder:torch", warmup=0, iters=1, repeats=2)
    progress = Recorder()
    run = X.Explorer(tmp_path).run(X.settings_from(params), progress)
    assert run["error"] is None and run["rows"][0]["status"] == "ok"
    phases = {d.split(" · ")[0] for d in progress.details}
    assert "interpreting the model's Python" in phases, phases
    line = next(t for _, _, t in progress.steps if "first call phases" in t)
    assert "interpreting" in line and "transforms" in line
    thunder = run["details"]["thunder:torch"]["thunder"]
    assert thunder["status"] == "ok" and thunder["trace"] and thunder["bound_symbols"] > 0
    page = X.details_html(run, "thunder:torch")
    assert "final trace" in page and "fusion region(s)" in page


def test_first_call_phase_reads_thunder_stamps():
    """The phase from thunder's compile-statistics stamps, as ``watched`` polls them."""
    from types import SimpleNamespace

    import thunder

    ex = E.REGISTRY["thunder:torch"]
    cases = [
        ((-1, -1, -1, -1), "looking up its cache"),
        ((5, -1, -1, -1), "interpreting the model's Python"),
        ((5, 9, -1, -1), "transforms (fusion passes, prologue)"),
        ((5, 9, 12, -1), "first run (compiling fusions)"),
        ((5, 9, 12, 20), "finishing"),
    ]
    for (start, stop, run_start, run_stop), phase in cases:
        cs = SimpleNamespace(
            last_trace_tracing_start=start,
            last_trace_tracing_stop=stop,
            last_trace_host_execution_start=run_start,
            last_trace_host_execution_stop=run_stop,
        )
        original = thunder.compile_stats
        thunder.compile_stats = lambda fn, cs=cs: cs
        try:
            assert X.first_call_phase(object(), ex) == phase
        finally:
            thunder.compile_stats = original
    assert X.first_call_phase(object(), E.REGISTRY["torch.compile"]) == "Dynamo tracing, Inductor compiling"


def test_noisy_flag_from_the_host_reference(monkeypatch, tmp_path):
    """A host that reads slow in most references flags the row, though its own blocks agree; the
    explorer times through the suite's harness (its references are the ones read)."""
    refs = itertools.cycle([1.0, 2.0, 2.0, 2.0])
    monkeypatch.setattr(timing, "host_reference_ms", lambda: next(refs))
    params = P.validate(preset="tiny", device="cpu", executors="eager", warmup=0, iters=1, repeats=4)
    run = X.Explorer(tmp_path).run(X.settings_from(params))
    row = run["rows"][0]
    assert row["host_slow_pct"] == pytest.approx(75, abs=10) and row["noisy"] and run["noisy"]
    assert len(row["blocks_ms"]) == 8 and 1.0 < row["host_reference_ms"] <= 2.0
    assert "noisy: eager" in X.summary_line(run) and any("Noisy" in f for f in X.findings(run))


def test_runs_beside_the_reference(tiny_params, tmp_path):
    explorer = X.Explorer(tmp_path)
    with pytest.raises(ValueError, match="press Run first"):
        X.beside_reference(explorer.runs, {})
    explorer.run({**X.settings_from(tiny_params), "executors": ["eager"]})
    report = X.beside_reference(explorer.runs, {"device": "cpu"})
    wall = next(e for e in report["rows"] if e["row"] == "eager" and e["metric"] == "wall_ms")
    assert wall["notebook"] == "run 1" and wall["a"] > 0 and wall["b"] > 0 and wall["a_q1_q3"] and wall["b_q1_q3"]
    assert {"preset", "device"} <= {d["name"] for d in report["parameters"]}
    assert any("thunder" in s and "only in A" in s for s in report["skipped"])
    numbers = [e for e in report["rows"] if e["metric"] != "status"]
    assert numbers and all(e["verdict"] == "not comparable" for e in numbers)  # a tiny CPU run against an H100
    assert all(e["decided"].startswith("not comparable: another ") for e in numbers)  # beside seed H100
    page = X.comparison_html(report)
    assert "reference-h100" in page and "<td>wall_ms</td>" in page and "<th>run</th>" in page
    assert "<th>notebook</th>" not in page


def test_widgets_run_in_a_worker_show_errors_and_keep_working(tiny_params, tmp_path, monkeypatch):
    ui = X.ExplorerUI(X.Explorer(tmp_path), tiny_params, tmp_path / "saved.json")
    ui.executors.value = ("eager",)
    ui.step.value = "decode"
    assert ui.cache_mode.value == "static"  # decode needs the pre-filled StaticCache
    ui.cache_mode.value = "seed"
    ui.on_run().join()
    assert "invalid parameter cache_mode='seed'" in ui.status.value and not ui.run_button.disabled

    def broken(*args, **kwargs):
        raise RuntimeError("model build exploded")

    monkeypatch.setattr(session, "measure", broken)
    ui.cache_mode.value = "static"
    ui.on_run().join()
    assert (
        ui.explorer.runs[-1]["error"].startswith("RuntimeError: model build exploded") and "exploded" in ui.status.value
    )
    monkeypatch.undo()
    ui.on_run().join()
    run = ui.explorer.runs[-1]
    assert run["error"] is None and "1 executor(s)" in ui.status.value and "<td>torch-eager</td>" in ui.table.value
    assert ui.progress.value == ui.progress.max and ui.stop_button.disabled and not ui.run_button.disabled
    # the chart is plotly JSON in an Output widget's state (a reloaded page draws it again)
    (chart,) = ui.chart.outputs
    assert len(chart["data"][X.PLOTLY_MIME]["data"]) == 1
    assert ui.row_choice.value == "3|eager" and "Profiler timeline" in ui.details.value and ui.timeline.outputs
    assert (
        ui.on_save() == tmp_path / "saved.json" and len(json.loads((tmp_path / "saved.json").read_text())["runs"]) == 3
    )
    ui.save_path.value = str(tmp_path / "saved.json" / "below-a-file.json")
    assert ui.on_save() is None and "save failed" in ui.status.value
    assert ui.on_compare() and "reference-h100" in ui.comparison.value and "run 3" in ui.comparison.value
    ui.on_run().join()  # a later run: the comparison shown is redone with it
    assert "run 4" in ui.comparison.value
    assert list(tmp_path.glob("compare-reference-h100-vs-explorer.html"))
    assert ui.on_compare(tmp_path / "no-such-run") is None and "not a run folder" in ui.comparison.value


def test_stop_says_at_once_what_finishes_first(tiny_params, tmp_path, monkeypatch):
    """Issue 24: Stop during a first call that runs 14 s more: the status line says at once what
    finishes first, and keeps saying it while that call reports its phase."""
    ui = X.ExplorerUI(X.Explorer(tmp_path), tiny_params, tmp_path / "saved.json")
    pressed, seen = threading.Event(), []

    def long_first_call(settings, progress, stop, *args):
        progress.step(1, 4, "thunderfx: first call (build, trace, compile)")
        progress.detail("Dynamo tracing · 18 s")
        pressed.wait(60)
        progress.detail("Dynamo tracing · 19 s")  # the call goes on after Stop
        seen.append(ui.status.value)
        return {"stopped": "thunderfx, first call"}

    monkeypatch.setattr(session, "measure", long_first_call)
    worker = ui.on_run()
    deadline = time.monotonic() + 60
    while "18 s" not in ui.status.value and time.monotonic() < deadline:
        time.sleep(0.01)
    ui.on_stop()
    running = "thunderfx: first call (build, trace, compile) · Dynamo tracing"
    assert ui.status.value == f"stopping: finishing {running} · 18 s ..." and ui.stop_button.disabled
    pressed.set()
    worker.join(60)
    assert seen == [f"stopping: finishing {running} · 19 s ..."]
    assert "stopped (thunderfx, first call)" in ui.status.value


def test_out_of_range_numbers_are_red_messages_not_silent_clamps(tiny_params, tmp_path, monkeypatch):
    """Layers 0 and threads 99 reach validation (a ParameterError naming them), as every other bad value does."""
    ui = X.ExplorerUI(X.Explorer(tmp_path), tiny_params, tmp_path / "saved.json")
    ui.executors.value = ("eager",)
    for widget, value, name in ((ui.layers, 0, "layers"), (ui.threads, 99, "threads"), (ui.repeats, 3, "repeats")):
        before = widget.value
        widget.value = value
        assert widget.value == value  # kept as typed
        ui.on_run().join()
        assert f"invalid parameter {name}={value}" in ui.status.value, ui.status.value
        widget.value = before


def test_widgets_follow_preset_and_device(tiny_params, tmp_path):
    ui = X.ExplorerUI(X.Explorer(tmp_path), tiny_params, tmp_path / "saved.json")
    assert (ui.warmup.value, ui.iters.value, ui.repeats.value) == (1, 2, 2)  # the notebook's parameters
    ui.preset.value = "seed"
    assert (ui.warmup.value, ui.iters.value, ui.repeats.value) == tuple(
        P.TIMING_DEFAULTS["cpu"][k] for k in ("warmup", "iters", "repeats")
    )
    assert ui.settings()["preset"] == "seed" and "cpu" in ui.device.options
    assert any("unavailable" in label for label, _ in ui.executors.options)
    ui.preset.value = "tiny"
    assert (ui.warmup.value, ui.iters.value, ui.repeats.value) == tuple(
        P.TINY_TIMING[k] for k in ("warmup", "iters", "repeats")
    )


def test_explorer_steps(tiny_params):
    """Prefill: the prompt's tokens; decode: one token at position seq_len, cache pre-filled."""
    prefill = X.step_setup(tiny_params, "prefill")
    assert prefill.kwargs["input_ids"].shape == (1, tiny_params.seq_len)
    static = P.validate({**tiny_params.to_dict(), "cache_mode": "static"})
    decode = X.step_setup(static, "decode").kwargs
    assert decode["input_ids"].shape == (1, 1) and decode["cache_position"].tolist() == [tiny_params.seq_len]
    assert decode["past_key_values"].get_seq_length() == tiny_params.seq_len  # the prompt's prefill filled it


def test_figure_names_executors_as_the_table_and_goes_log_across_scales():
    def run(label, wall):
        row = {"executor": "thunder:torch", "label": "Thunder-torch", "wall_ms": wall, "wall_lo_ms": wall * 0.9}
        return {"label": label, "rows": [{**row, "wall_hi_ms": wall * 1.1}]}

    fig = X.figure([run("seed", 77.0), run("tiny", 1.4)])
    assert fig.layout.yaxis.type == "log" and list(fig.data[0].x) == ["thunder:torch"]
    assert fig.data[1].error_y.array[0] == pytest.approx(0.14)
    assert X.figure([run("seed", 77.0), run("again", 70.0)]).layout.yaxis.type == "linear"


def test_log_axis_ticks_are_whole_numbers_in_order():
    """Issue 37: plotly's own log ticks read "5, 2, 10, 5, 2, 1, 5"; the axis names 1-2-5 steps in
    full across a few decades, the decades alone across more."""
    row = {"executor": "eager", "label": "eager", "wall_ms": 77.0, "wall_lo_ms": 70.0, "wall_hi_ms": 84.7}
    tiny = {**row, "wall_ms": 1.4, "wall_lo_ms": 1.26, "wall_hi_ms": 1.5}
    yaxis = X.figure([{"label": "seed", "rows": [row]}, {"label": "tiny", "rows": [tiny]}]).layout.yaxis
    assert yaxis.type == "log" and yaxis.tickmode == "array"
    assert list(yaxis.ticktext) == ["1", "2", "5", "10", "20", "50", "100"]
    assert list(yaxis.tickvals) == [1, 2, 5, 10, 20, 50, 100]
    assert view.log_ticks(0.004, 300) == [0.001, 0.01, 0.1, 1, 10, 100, 1000]
