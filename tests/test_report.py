"""Reports: paper-style numbers, the seed-vs-here tables, findings, the shared plotly.js, and the
run's pages drawn offline by headless Chromium."""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import nbformat
import pytest
from conftest import ROOT, chromium_dom, chromium_page

from latency_lab.core import parameters as P
from latency_lab.core import results, seed_numbers
from latency_lab.pages import display, html_assets, tables
from latency_lab.run import headline, notebook_run, report, run_page
from latency_lab.studies import executor_timing
from latency_lab.studies.thunder_traces import study as thunder_traces

MAX_RUN_MB = 10


# --- numbers and headers --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (1281.4, "1,280"),
        (0.455, "0.455"),
        (30.74, "30.7"),
        (9.996, "10.0"),
        (2.0, "2.00"),
        (0.001234, "0.00123"),
        (1.234e-5, "1.23e-5"),
        (1.5e7, "1.50e7"),
        (-0.0456, "-0.0456"),
        (0.0, "0"),
        (32, "32"),
        (125120, "125,120"),
        (True, "yes"),
        (False, "no"),
        (None, ""),
        (math.nan, ""),
        (math.inf, ""),
        ("thunder", "thunder"),
        ([1, 0.455, None], "[1, 0.455, ]"),
        ((16, "x"), "[16, x]"),
    ],
)
def test_number_prints_three_significant_figures_and_blanks(value, text):
    assert tables.number(value) == text


@pytest.mark.parametrize(
    "name, text",
    [
        ("first_call_s", "first call (s)"),
        ("wall_q1_ms", "wall q1 (ms)"),
        ("kernel_ms", "kernel (ms)"),
        ("bandwidth_measured_gbps", "bandwidth measured (GB/s)"),
        ("rel_err", "relative error"),
        ("gpu_busy_pct", "GPU busy (%)"),
        ("Overhead / Kernel (us)", "Overhead / Kernel (us)"),
        ("kernels_per_step", "kernels per step"),
    ],
)
def test_header_carries_the_unit(name, text):
    assert tables.header(name) == text


def test_frame_formats_for_display_and_keeps_raw_numbers():
    rows = [
        {"executor": "eager", "first_call_s": 0.123456, "kernels_per_step": 32, "reason": None, "empty": None},
        {"executor": "thunder", "first_call_s": None, "kernels_per_step": None, "reason": "needs CUDA", "empty": None},
    ]
    table = display.frame(rows, ["executor", "kernels_per_step"], caption="Demo")
    assert list(table.columns) == ["executor", "kernels_per_step", "first_call_s", "reason"]  # raw names; empty dropped
    assert table.iloc[0]["first_call_s"] == 0.123456 and table.iloc[1]["kernels_per_step"] is None
    page = table._repr_html_()
    assert ">kernels per step<" in page and ">first call (s)<" in page and "Demo" in page
    assert ">0.123<" in page and ">32<" in page
    assert "nan" not in page.lower() and "None" not in page
    renamed = table.rename(columns={"reason": "why"})  # still a DataFrame to callers, still shown formatted
    assert (
        isinstance(renamed, display.Table) and ">why<" in renamed._repr_html_() and ">0.123<" in renamed._repr_html_()
    )
    only = display.frame(rows, ["executor"], only=True)
    assert list(only.columns) == ["executor"]


def test_parameters_and_call_arguments_read_as_a_table_not_a_repr():
    from latency_lab.core import parameters

    params = parameters.validate({"preset": "tiny", "device": "cpu"})
    page = display.pairs(params.to_dict(), "Parameters", skip=parameters.AB_ONLY)._repr_html_()
    assert "Params(" not in page and ">preset<" in page and ">tiny<" in page
    assert ">planted_pct<" not in page and ">executors<" in page  # 08's own parameters left out
    call = display.pairs({"input_ids": "shape (1, 6), torch.int64", "use_cache": False, "cache": None}, "Call")
    html = call._repr_html_()
    assert "{'" not in html and "{&#39;" not in html and ">False<" in html and ">none<" in html


def test_a_headlines_fast_only_flag_stays_in_the_results_not_on_the_page():
    """``wall_fast_only`` is for compare (a headline over fast blocks in one run and all in the other is not
    comparable); a table shows it only when its columns name it."""
    rows = [{"executor": "eager", "wall_ms": 1.5, "wall_fast_only": True}]
    assert list(display.frame(rows, ["executor"]).columns) == ["executor", "wall_ms"]
    assert list(display.frame(rows, ["executor", "wall_fast_only"]).columns) == [
        "executor",
        "wall_fast_only",
        "wall_ms",
    ]


# --- the one HTML table and the one stylesheet -----------------------------------------------------


def _cells(table: str) -> tuple[list, list]:
    """A rendered table parsed: its header cells and body rows, each cell as (text, class)."""
    root = ElementTree.fromstring(table[table.index("<table") : table.index("</table>") + 8])  # well-formed
    cell = lambda e: ("".join(e.itertext()), e.get("class") or "")  # noqa: E731
    return [cell(th) for th in root.iter("th")], [[cell(td) for td in tr.iter("td")] for tr in root.find("tbody")]


def test_html_table_escapes_aligns_numbers_right_and_leaves_blanks():
    rows = [
        {"executor": "<script>alert(1)</script>", "wall_ms": 1.23456, "kernels_per_step": 60, "note": "a & b"},
        {"executor": "thunder", "wall_ms": math.nan, "kernels_per_step": None, "note": 2.0},
    ]
    page = str(tables.html_table(rows, caption="<i>Demo</i>"))
    assert "<script>" not in page and "&lt;script&gt;" in page and "<caption>&lt;i&gt;Demo&lt;/i&gt;</caption>" in page
    head, body = _cells(page)
    assert head == [("executor", ""), ("wall (ms)", "num"), ("kernels per step", "num"), ("note", "")]  # mixed: text
    assert body == [
        [("<script>alert(1)</script>", ""), ("1.23", "num"), ("60", "num"), ("a & b", "")],
        [("thunder", ""), ("", ""), ("", ""), ("2.00", "num")],  # NaN and None: blank, not aligned
    ]
    assert "nan" not in page.lower() and "None" not in page
    assert page.startswith('<div class="latency-lab table-box"><table class="latency-lab">')  # a box to scroll in


def test_html_table_takes_key_tables_lists_markup_and_cell_classes():
    from markupsafe import Markup

    key = results.key_table("Timing", [{"executor": "eager", "first_call_s": 0.5}])
    assert _cells(tables.html_table(key)) == (
        [("executor", ""), ("first call (s)", "num")],
        [[("eager", ""), ("0.500", "num")]],
    )
    assert "<caption>Other</caption>" in tables.html_table(key, caption="Other")
    rows = [[Markup('<a href="x.html">x</a>'), tables.Cell("1.0-2.0", "num"), tables.Cell("<b>", "differs")]]
    page = tables.html_table(rows, ["link", "range", "value"], row_classes=["ok"], css="params")
    assert '<td><a href="x.html">x</a></td>' in page and '<td class="differs">&lt;b&gt;</td>' in page
    assert '<table class="latency-lab params">' in page and '<tr class="ok">' in page
    assert _cells(page)[0][1] == ("range", "num")  # a column of text aligned as numbers
    with pytest.raises(ValueError, match="need their columns"):
        tables.html_table([[1, 2]])
    with pytest.raises(ValueError, match="do not match the 2 columns"):
        tables.html_table([[1, 2, 3]], ["a", "b"])
    styled = tables.html_table(key, style=True)  # outside the pages: the stylesheet comes along
    assert styled.startswith("<style>") and STYLESHEET in styled


def test_a_statistic_and_its_range_share_one_cell():
    """An interval (else the quartiles) joins its statistic's cell, ``1.48 (1.33–1.63)``; a range whose
    statistic is not shown, or that another range took the statistic from, is one cell ``1.40–1.55``."""
    rows = [
        {"executor": "eager", "wall_ms": 1.48, "wall_lo_ms": 1.33, "wall_hi_ms": 1.63, "wall_q1_ms": 1.4}
        | {"wall_q3_ms": 1.55, "host_q1_ms": 1.0, "host_q3_ms": 1.2, "kernel_ms": 0.5, "kernel_q1_ms": 0.4}
        | {"kernel_q3_ms": 0.6},
        {"executor": "thunder", "wall_ms": 2.0, "kernel_ms": None},  # no range: the value alone
    ]
    head, body = _cells(tables.html_table(rows))
    assert head == [
        ("executor", ""),
        ("wall (ms) (95% CI)", "num"),
        ("wall (ms) (q1–q3)", "num"),
        ("host (ms) (q1–q3)", "num"),
        ("kernel (ms) (q1–q3)", "num"),
    ]
    assert body == [
        [("eager", ""), ("1.48 (1.33–1.63)", "num range"), ("1.40–1.55", "num"), ("1.00–1.20", "num")]
        + [("0.500 (0.400–0.600)", "num range")],
        [("thunder", ""), ("2.00", "num"), ("", ""), ("", ""), ("", "")],
    ]


def test_each_time_column_gets_the_unit_its_values_read_best_in():
    """One unit per column, in its header, the one that prints most of its values between 0.01 and
    10,000 (then its own): 04's 0.00313 .. 0.385 ms read in µs, its first calls of 2.51e-5 .. 3.34 s in
    ms; a column that reads well in its own unit keeps it; a range is scaled with its value; rates are
    not times."""
    rows = [
        {"wall_ms": 0.00313, "wall_lo_ms": 0.003, "wall_hi_ms": 0.0035, "first_call_s": 2.51e-5, "host_ms": 1.48}
        | {"build_s": 2.01e-5, "tokens_per_s": 0.00012},
        {"wall_ms": 0.385, "first_call_s": 3.34, "host_ms": 0.3, "build_s": None},
        {"wall_ms": None, "first_call_s": 0.211, "host_ms": 0.54},
    ]
    head, body = _cells(tables.html_table(rows))
    assert [h for h, _ in head] == ["wall (µs) (95% CI)", "first call (ms)", "host (ms)", "build (µs)", "tokens/s"]
    assert [[t for t, _ in line] for line in body] == [
        ["3.13 (3.00–3.50)", "0.0251", "1.48", "20.1", "1.20e-4"],
        ["385", "3,340", "0.300", "", ""],
        ["", "211", "0.540", "", ""],
    ]
    assert tables.time_unit("first_call_s", [0.5]) == ("first_call_s", 1.0)  # 500 ms reads no better
    assert tables.time_unit("wall_ms", ["1.5"]) == ("wall_ms", 1.0)  # text: as it is


def test_long_text_goes_to_a_numbered_note_under_the_table():
    """A reason or note over a few words, and any text over ``NOTE_CHARS``, is a mark ``[n]`` in its cell
    and note n under the table, the same text one note; a long name may break after _ and =."""
    long = "skipped cudnn: " + "not registered here " * 20
    rows = [
        {"executor": "thunder", "options": "nv_enable_linear=True", "reason": "needs a CUDA device (running on cpu)"},
        {"executor": "thunder:torch", "options": "x" * 81, "reason": "needs a CUDA device (running on cpu)"},
        {"executor": "eager", "options": None, "reason": "timed out", "notes": long},
    ]
    page = str(tables.html_table(rows))
    head, body = _cells(page)
    assert [[t for t, _ in line] for line in body] == [
        ["thunder", "nv_enable_linear=True", "[1]", ""],
        ["thunder:torch", "[2]", "[1]", ""],
        ["eager", "", "timed out", "[3]"],
    ]
    assert body[0][2] == ("[1]", "fn") and "nv_<wbr/>enable_<wbr/>linear=<wbr/>True" in page
    assert "<td>thunder:torch</td>" in page  # a short name as it is
    notes = re.search(r'<ol class="notes">(.*)</ol>', page).group(1)
    assert re.findall(r"<li>(.*?)</li>", notes) == [
        "needs a CUDA device (running on cpu)",
        "x" * 81,
        html.escape(long, quote=True),
    ]


STYLESHEET = (Path(tables.__file__).parent / "templates" / "style.css").read_text().strip()


def test_stylesheet_rules_are_scoped_to_latency_lab():
    """Notebook and explorer tables carry the stylesheet into JupyterLab: no rule may restyle the lab."""
    rules = re.sub(r"/\*.*?\*/", "", STYLESHEET, flags=re.S)
    selectors = [s.strip() for block in re.findall(r"([^{}]+)\{", rules) for s in block.split(",")]
    assert len(selectors) > 20 and all(".latency-lab" in s for s in selectors), selectors


def test_numbers_align_right_in_a_notebook_page(tmp_path):
    """Headless Chromium computes the alignment in a notebook's HTML (nbconvert, the lab's stylesheet,
    whose rule right-aligns every cell of an output): text left, numbers right."""
    table = display.frame([{"executor": "eager", "wall_ms": 1.5, "kernels_per_step": None}])._repr_html_()
    probe = (
        "<script>window.addEventListener('load', () => { document.body.dataset.align = [...document"
        ".querySelectorAll('table.latency-lab :is(th, td)')].map(c => getComputedStyle(c).textAlign).join(' '); });"
        "</script>"
    )
    cell = nbformat.v4.new_code_cell("table")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": html}) for html in (table, probe)]
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell]
    nbformat.write(nb, tmp_path / "01_table.ipynb")
    page = notebook_run.to_html(tmp_path / "01_table.ipynb")
    dom = chromium_dom(page.as_uri(), tmp_path / "profile", budget_ms=3000, offline=True)
    assert 'data-align="left right left right"' in dom, re.findall(r"<body[^>]*>", dom)


def test_pages_share_the_one_stylesheet(tmp_path):
    """index.html, report.html, a published index.html and a compare page carry style.css, and no
    other style; every table on them is the renderer's."""
    from latency_lab.run.compare import command as compare

    run, summary = _fake_run(tmp_path)
    report.write(run, summary)
    report.publish(run, tmp_path / "pub", allow_incomplete=True)
    assert compare.main([str(run), str(tmp_path / "pub"), "--out", str(tmp_path / "cmp")]) == 0
    pages = [run / "index.html", run / "report.html", tmp_path / "pub" / "index.html"]
    pages += list((tmp_path / "cmp").glob("compare-*.html"))
    assert len(pages) == 4
    for path in pages:
        page = path.read_text()
        assert page.count("<style") == 1 and f"<style>{STYLESHEET}</style>" in page, path.name
        assert '<body class="latency-lab">' in page and ' style="' not in page, path.name
        assert page.count("<table") == page.count('<table class="latency-lab') > 0, path.name
    assert not hasattr(report, "STYLE")


# --- the seed and here, one table per metric -----------------------------------------------------------


def _measured_row(name: str, label: str, wall, kernel=None, kernels=None, timeit=None) -> dict:
    overhead = wall - kernel if kernel is not None else None
    return {
        "executor": name,
        "label": label,
        "wall_ms": wall,
        "cpu_overhead_ms": overhead,
        "kernel_ms": kernel,
        "kernels_per_step": kernels,
        "overhead_per_kernel_us": overhead * 1e3 / kernels if kernels else None,
        "timeit_ms": timeit,
        "status": "ok",
        "reason": None,
    }


def test_seed_tables_one_per_metric_with_ratio():
    rows = [
        _measured_row("eager", "torch-eager", 2.028, 0.5, 60, timeit=4.1),
        _measured_row("torch.compile:reduce-overhead", "torch.compile+CUDA graphs", 0.3, 0.25, 20),
        _measured_row("thunder", "Thunder-nvFuser", None),
    ]
    built = {t["title"].split(":")[0]: t for t in seed_numbers.seed_tables(rows)}
    assert len(built) == len(seed_numbers.SEED_METRICS)
    wall = built["Wall time per step"]
    assert wall["columns"] == ["executor", "seed DGX H100 (ms)", "here (ms)", "here / seed"]
    lines = {line[0]: line for line in wall["rows"]}
    assert lines["torch-eager"] == ["torch-eager", 1.014, 2.028, pytest.approx(2.0)]
    assert lines["torch.compile+CUDA graphs"][1:] == [None, 0.3, None]  # not in the seed: no ratio
    assert lines["Thunder-nvFuser"][1:] == [1.281, None, None]  # unmeasured here: blank, seed kept
    assert list(lines)[:2] == ["torch-eager", "torch.compile+CUDA graphs"]  # measured first
    assert {line[0] for line in wall["rows"]} >= {"Thunder-torch", "torch.compile"}  # the seed's other rows
    kernels = {line[0]: line for line in built["Kernels per step"]["rows"]}
    assert built["Kernels per step"]["columns"][1:3] == ["seed DGX H100", "here"]
    assert kernels["torch-eager"][1:] == [65, 60, pytest.approx(60 / 65)]
    per_kernel = built["CPU overhead per kernel"]
    assert per_kernel["columns"][1] == "seed DGX H100 (µs)"
    assert {line[0]: line for line in per_kernel["rows"]}["torch-eager"][2] == pytest.approx(1528 / 60)
    timer = {line[0]: line for line in built["Wall time per step, the seed's cuda_timer"]["rows"]}
    assert timer["torch-eager"][1] == seed_numbers.SEED_CUDA_TIMER_DGX_H100["rows"]["eager"]
    assert "Thunder-torch.compile" not in timer  # the seed has no number for it, and neither has this run
    timeit = built["%timeit per step"]
    assert timeit["columns"][1] == "seed L40S (ms)"
    assert {line[0]: line for line in timeit["rows"]}["torch-eager"][1:] == [2.05, 4.1, pytest.approx(2.0)]


def test_seed_tables_left_out_without_a_number_measured_here():
    rows = [_measured_row("eager", "torch-eager", 60.0)]  # a CPU run: no kernel times
    titles = [t["title"].split(":")[0] for t in seed_numbers.seed_tables(rows)]
    assert titles == ["Wall time per step", "Wall time per step, the seed's cuda_timer"]


# --- 03's findings -------------------------------------------------------------------------------------------


def test_trace_counter_findings_name_regions_per_configuration():
    configs = [
        {
            "executor": "thunder",
            "status": "ok",
            "bound_symbols": 52,
            "composition": {"nvFusion regions": 7, "TorchCompile regions": 0, "unfused ops": 4, "bookkeeping": 40},
        },
        {"executor": "thunder:cudagraphs", "status": "unavailable"},
    ]
    text, seed = thunder_traces.findings(configs, seed_numbers.SEED_TRACE_COUNTER)
    assert "thunder: 7 fusion regions (7 nvFusion), 4 unfused ops, 52 top-level symbols" in text
    assert "Not traced here: thunder:cudagraphs." in text
    assert seed == "The seed's thunder trace had 9 fusion regions (7 nvFusion, 2 TorchCompile) in 57 top-level symbols."
    assert (
        thunder_traces.findings(configs[1:], {"nvFusion0": 1})[0] == "No Thunder configuration produced a trace here."
    )


# --- HTML: shared plotly.js, figures, the run's pages -------------------------------------------------


def _figure() -> dict:
    import plotly.graph_objects as go

    return json.loads(go.Figure(go.Bar(x=["a", "b"], y=[1, 2], name="</script>")).to_json())


def test_figure_html_draws_into_its_div_and_escapes_script_ends():
    page = html_assets.figure_html(_figure(), "fig-1")
    assert '<div id="fig-1"' in page and 'Plotly.newPlot("fig-1"' in page
    assert page.count("</script>") == 1  # the name's "</script>" cannot close the script early


def test_notebook_html_uses_the_shared_plotly_js(tmp_path):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fig.show()")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={html_assets.PLOTLY_MIME: _figure(), "text/plain": "Figure"})
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# Demo"), cell]
    nbformat.write(nb, tmp_path / "01_demo.ipynb")
    page = notebook_run.to_html(tmp_path / "01_demo.ipynb").read_text()
    assert '<script src="plotly.packed.js">' in page
    assert 'Plotly.newPlot("plotly-1-0"' in page and '<link href="notebook.css" rel="stylesheet"/>' in page
    assert len(page) < 100_000  # neither plotly.js nor the lab stylesheet inside
    shared = (tmp_path / html_assets.PLOTLY_JS).read_text()
    assert shared == html_assets.packed_plotly_js() and len(shared) < 0.45 * html_assets.plotly_js_path().stat().st_size
    assert (
        ".jp-Notebook" in (tmp_path / "notebook.css").read_text()
        and "a.anchor-link" in (tmp_path / "notebook.css").read_text()
    )
    assert html_assets.PLOTLY_MIME in nbformat.read(tmp_path / "01_demo.ipynb", as_version=4).cells[1].outputs[0].data


def _fake_run(tmp_path: Path) -> tuple[Path, dict]:
    """A run folder with results of 01 (ok) and 02 (ok, with a chart) and a failed 03."""
    from latency_lab.core import parameters as P

    run = tmp_path / "run"
    run.mkdir()
    p = P.validate({"preset": "tiny", "device": "cpu"})
    results.save(
        run,
        "01_model_setup",
        p,
        {},
        results.key_table("Outputs against eager", [{"executor": "eager", "rel_err": 1.5e-5}]),
        findings=["One step moves at least 0.263 MB."],
    )
    rows = [_measured_row("eager", "torch-eager", 2.028, 0.5, 60), _measured_row("thunder", "Thunder-nvFuser", None)]
    gpu = replace(p, device="cuda", preset="seed")  # the seed's step on a GPU: shown beside the seed
    results.save(
        run,
        "02_executor_timing",
        gpu,
        {},
        results.key_table("Executor timing", rows, ["label", "wall_ms"]),
        rows=rows,
        measured={},
        findings=["Fastest to slowest by median wall time: torch-eager (2.028 ms)."],
    )
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("fig.show()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={html_assets.PLOTLY_MIME: _figure()})]
    nb.cells = [cell]
    nbformat.write(nb, run / "02_executor_timing.ipynb")
    outcomes = [
        notebook_run.Outcome("01_model_setup", "ok", 12.34),
        notebook_run.Outcome("02_executor_timing", "ok", 56.7, files={"ipynb": "02_executor_timing.ipynb"}),
        notebook_run.Outcome(
            "03_trace_counters", "failed", 3.0, {"cell": 4, "ename": "RuntimeError", "evalue": "deliberate"}
        ),
    ]
    meta = {
        "run_id": "fake",
        "started": "now",
        "seconds": 72.0,
        "command": "runner.py",
        "device": "cpu",
        "environment": {"cpu": "Test CPU", "gpu": None, "packages": {"torch": "2.9.1"}},
    }
    return run, report.summarize(run, meta, outcomes)


def test_report_write_index_and_standalone_report(tmp_path):
    run, summary = _fake_run(tmp_path)
    assert [n["findings"] for n in summary["notebooks"]] == [
        ["One step moves at least 0.263 MB."],
        ["Fastest to slowest by median wall time: torch-eager (2.028 ms)."],
        [],
    ]
    report.write(run, summary)
    index, standalone = (run / "index.html").read_text(), (run / "report.html").read_text()
    assert (run / html_assets.PLOTLY_JS).is_file() and json.loads((run / "summary.json").read_text())["notebooks"][0][
        "findings"
    ]
    for page in (index, standalone):
        assert page.index("Findings") < page.index("One step moves at least") < page.index("<h2>Notebooks")
        assert 'id="headline"' in page and "deliberate" in page and "cell 4" in page
        assert ">12.3<" in page and ">56.7<" in page and ">72.0<" in page  # time per notebook and run (s)
        body = page.split("</head>")[1]  # report.html's head holds plotly.js as base64
        assert ">1.50e-5<" in body and "None" not in body and "nan" not in body.lower()
        assert "seed DGX H100 (ms)" in page and ">2.00<" in page  # the wall table: here / seed
    assert '<script src="plotly.packed.js">' in index and "fig-02-0" not in index
    assert (
        "<script src=" not in standalone and html_assets.packed_plotly_js() in standalone and "fig-02-0" in standalone
    )


def test_headline_figure_splits_host_and_kernel_time():
    rows = [_measured_row("eager", "torch-eager", 2.0, 0.5, 60), _measured_row("torch.compile", "torch.compile", 1.0)]
    fig = headline.headline_figure({"rows": rows, "params": {"preset": "seed", "device": "cuda"}}, "H200")
    bars = {(t["xaxis"], t["name"]): dict(zip(t["x"], t["y"])) for t in fig["data"] if t["type"] == "bar"}
    totals = {t["xaxis"]: dict(zip(t["x"], t["text"])) for t in fig["data"] if t["type"] == "scatter"}
    assert totals["x"]["torch-eager"] == "1.01" and totals["x2"] == {"torch-eager": "2.00", "torch.compile": "1.00"}
    assert bars[("x", headline.KERNEL)]["torch-eager"] == 0.398 and bars[("x", headline.HOST)]["torch-eager"] == 0.616
    assert bars[("x2", headline.KERNEL)] == {"torch-eager": 0.5} and bars[("x2", headline.HOST)] == {"torch-eager": 1.5}
    assert bars[("x2", headline.UNSPLIT)] == {"torch.compile": 1.0}  # no kernel time: the wall, unsplit
    assert "here: H200, preset seed" in json.dumps(fig["layout"]["annotations"])
    alone = headline.headline_figure({"rows": rows, "params": {"preset": "tiny", "device": "cpu"}}, "CPU")
    assert {t["xaxis"] for t in alone["data"]} == {"x"} and "seed:" not in json.dumps(alone["layout"]["annotations"])


# --- offline rendering in headless Chromium -----------------------------------------------------------


def open_offline(page: Path, profile: Path) -> str:
    """The DOM of ``page`` after headless Chromium ran its scripts with the network disabled."""
    return chromium_dom(page.as_uri(), profile, budget_ms=15000, offline=True)


def test_fake_run_pages_draw_offline(tmp_path):
    run, summary = _fake_run(tmp_path)
    report.write(run, summary)
    for name in ("index.html", "report.html"):
        dom = open_offline(run / name, tmp_path / "profile")
        assert dom.count('class="main-svg"') >= 2, f"{name}: plotly drew nothing"
        assert 'class="chart-hint"' not in dom, f"{name}: a drawn chart still says it was not drawn"


def _charts(notebook: Path) -> int:
    """How many plotly figures an executed notebook holds."""
    return sum(
        1
        for c in nbformat.read(notebook, as_version=4).cells
        for o in c.get("outputs", [])
        if html_assets.PLOTLY_MIME in o.get("data", {})
    )


def test_run_pages_draw_offline_and_fit_the_size_budget(tiny_run: Path, tmp_path):
    """Every chart of every notebook's HTML, of index.html and of report.html is drawn offline; the
    run folder stays under the size budget."""
    drawn = lambda dom: dom.count('class="plot-container plotly"') if 'class="main-svg"' in dom else 0  # noqa: E731
    charts = {p.stem: _charts(p) for p in sorted(tiny_run.glob("[0-9][0-9]_*.ipynb"))}
    assert sum(charts.values()) >= 4
    for name, count in charts.items():
        dom = open_offline(tiny_run / f"{name}.html", tmp_path / "profile")
        assert drawn(dom) == count, f"{name}.html: {drawn(dom)} of {count} charts drawn"
        assert "Traceback" not in dom
    assert drawn(open_offline(tiny_run / "index.html", tmp_path / "profile")) == 1  # the headline chart
    assert drawn(open_offline(tiny_run / "report.html", tmp_path / "profile")) == 1 + sum(charts.values())
    size = sum(p.stat().st_size for p in tiny_run.rglob("*") if p.is_file())
    assert size < MAX_RUN_MB * 1e6, f"run folder is {size / 1e6:.1f} MB"
    assert list(tiny_run.glob("*.js")) == [tiny_run / html_assets.PLOTLY_JS]


WINDOW_PX = 1280
WIDEST = """(() => {
    const edge = document.documentElement.clientWidth;
    let right = 0, element = document.body;
    for (const e of document.body.querySelectorAll('*')) {
        const r = e.getBoundingClientRect();
        if ((r.width || r.height) && r.right > right) [right, element] = [r.right, e];
    }
    const what = `<${element.tagName.toLowerCase()}> ${(element.innerText || '').trim().slice(0, 60)}`;
    return {edge, scroll: document.documentElement.scrollWidth, widest: {right: Math.round(right), what}};
})()"""


# What no page shows outside its code: a literal ``**`` (Markdown not rendered), a Python function's repr,
# a table without a row.
FLAWS = """(() => {
    const body = document.body.cloneNode(true);
    body.querySelectorAll('pre, code, .jp-InputArea, .input_area').forEach(e => e.remove());
    const text = body.innerText || body.textContent, flaws = [], at = text.indexOf('**');
    if (at >= 0) flaws.push('a literal ** in: ' + text.slice(Math.max(0, at - 40), at + 40));
    const f = text.match(/<function [^>]* at 0x/);
    if (f) flaws.push('a Python function: ' + f[0]);
    for (const t of document.querySelectorAll('table'))
        if (!t.querySelector('td')) flaws.push('a table without rows: ' + (t.caption ? t.caption.innerText : ''));
    return flaws;
})()"""


def test_every_page_fits_a_1280_px_window(tiny_run: Path, tmp_path):
    """In a 1,280 px window no page scrolls sideways and no element reaches past the window's edge, not
    even inside a box of its own that scrolls: index.html and each notebook's HTML of a run, and the
    reference run's index.html as this code renders it from its results. And none shows, outside its
    code, a literal ``**``, a Python function's repr or a table without rows (``FLAWS``)."""
    reference = tmp_path / "reference-h100"
    shutil.copytree(ROOT / "outputs" / "reference-h100", reference)
    page_html = run_page.index_html(report.load_summary(reference), reference, published=True)
    (reference / "index.html").write_text(page_html)
    pages = [tiny_run / "index.html", *sorted(tiny_run.glob("[0-9][0-9]_*.html")), reference / "index.html"]
    assert len(pages) == 1 + len(results.NOTEBOOKS) + 1
    wide, flawed = [], []
    with chromium_page(tmp_path / "profile") as page:
        page.call("Emulation.setDeviceMetricsOverride", width=WINDOW_PX, height=1000, deviceScaleFactor=1, mobile=False)
        for path in pages:
            page.call("Page.navigate", url=path.as_uri())
            page.poll("document.readyState == 'complete' && !document.querySelector('.chart-hint')", 30)
            found = page.js(WIDEST)
            if max(found["scroll"], found["widest"]["right"]) > found["edge"]:
                wide.append(f"{path.parent.name}/{path.name}: {found}")
            flawed += [f"{path.parent.name}/{path.name}: {flaw}" for flaw in page.js(FLAWS) or []]
    assert not wide, "wider than the window:\n" + "\n".join(wide)
    assert not flawed, "\n".join(flawed)


# --- statuses, what each notebook ran with, writes that fail ------------------------------------------


def test_index_tells_failed_interrupted_and_not_run_apart_and_shows_what_each_notebook_ran_with(tmp_path):
    from latency_lab.core import parameters as P

    run = tmp_path / "run"
    run.mkdir()
    p = P.validate({"preset": "tiny", "device": "cpu"})
    results.save(run, "01_model_setup", p, {}, results.key_table("t", [{"x": 1}]))
    results.save(
        run,
        "05_host_overhead",
        P.validate({"preset": "tiny", "device": "cpu", "repeats": 4}),
        {},
        results.key_table("t", [{"x": 1}]),
    )
    outcomes = [
        notebook_run.Outcome("01_model_setup", "ok", 1.0),
        notebook_run.Outcome("05_host_overhead", "ok", 2.0),
        notebook_run.Outcome("02_executor_timing", "failed", 3.0, {"cell": 4, "ename": "RuntimeError", "evalue": "x"}),
        notebook_run.Outcome(
            "03_trace_counters", "interrupted", 98.2, {"cell": 5, "ename": "Interrupted", "evalue": "SIGINT"}
        ),
        notebook_run.Outcome("04_op_microbenchmarks", "not run"),
    ]
    meta = {
        "run_id": "r",
        "started": "now",
        "seconds": 104.0,
        "command": "runner.py",
        "interrupted": "SIGINT",
        "parameters": {"given": {}, "resolved": {**p.to_dict(), "repeats": 20}},
    }
    summary = report.summarize(run, meta, outcomes)
    assert [n["seconds"] for n in summary["notebooks"]] == [1.0, 2.0, 3.0, 98.2, 0.0]
    page = run_page.index_html(summary, run)
    for status, why in (
        ("failed", "the notebook failed"),
        ("interrupted", "the run was interrupted in this notebook"),
        ("not-run", "not run: the run stopped before it"),
    ):
        assert f'<div class="finding {status}">' in page and f"no findings saved ({why})" in page
    assert "cell 5: Interrupted: SIGINT" in page and ">98.2<" in page
    assert run_page.ran_with(summary, summary["notebooks"][1]) == {"repeats": (4, 20)}
    assert run_page.ran_with(summary, summary["notebooks"][0]) == {"repeats": (2, 20)}  # tiny's 2 against the run's 20
    assert "Ran with, unlike the run: repeats 4 (run: 20)" in page
    assert "<th>parameter</th><th>run</th><th>01</th><th>05</th>" in page
    assert '<tr><td>repeats</td><td>20</td><td class="differs">2</td><td class="differs">4</td></tr>' in page


def test_a_notebooks_own_default_is_not_set_against_the_run(tmp_path):
    """A default run: 02 runs its own seven executors (its catalog entry's defaults), 06 on a CPU its CPU
    defaults, the run resolves all executors: no section says "Ran with, unlike the run". Given on the
    command line, it is a plain difference."""
    from latency_lab.core import parameters as P

    run = tmp_path / "run"
    run.mkdir()
    for name in ("02_executor_timing", "06_scaling"):
        own = P.for_notebook(name, {"device": "cpu"})
        results.save(run, name, own, {}, results.key_table("t", [{"x": 1}]))
    resolved = P.validate({"device": "cpu"}).to_dict()
    outcomes = [notebook_run.Outcome(n, "ok", 1.0) for n in ("02_executor_timing", "06_scaling")]
    for given, lines in (({}, 0), ({"executors": "thunder"}, 2)):
        meta = {"run_id": "r", "started": "now", "seconds": 1.0, "command": "runner.py"}
        meta["parameters"] = {"given": given, "resolved": resolved}
        summary = report.summarize(run, meta, outcomes)
        page = html.unescape(run_page.index_html(summary, run))
        assert page.count("Ran with, unlike the run: ") == lines, page
        assert not lines or "Ran with, unlike the run: executors [eager, torch.compile, " in page


def test_write_writes_what_it_can_and_names_the_rest(tmp_path):
    run, summary = _fake_run(tmp_path)
    (run / "report.html").mkdir()  # cannot be replaced by a file: a write that fails
    unwritten = report.write(run, summary)
    assert len(unwritten) == 1 and unwritten[0].startswith("report.html (")
    assert json.loads((run / "summary.json").read_text())["run_id"] == "fake" and (run / "index.html").is_file()
    assert not list(run.glob(".*.tmp"))


def test_executor_timing_study_runs_without_papermill_and_saves_the_notebooks_results(tmp_path, tiny_run):
    params = P.validate(
        preset="tiny",
        device="cpu",
        executors="eager",
        warmup=1,
        iters=2,
        repeats=2,
        output_dir=str(tmp_path),
    )
    lines = []

    def run_line_magic(name, line):  # IPython's, as the notebook passes it: %timeit reads its caller's locals
        lines.append((name, line))
        exec("jm(**args); sync()", {}, dict(sys._getframe(1).f_locals))
        return SimpleNamespace(average=1e-3, stdev=0.0, loops=2, repeat=7, all_runs=[2e-3] * 7)

    result = executor_timing.run(params, timeit=run_line_magic)
    assert lines == [("timeit", "-o -q -n 2 -r 7 jm(**args); sync()")]
    [row] = result.rows
    assert row["executor"] == result.builds[0]["executor"] == "eager"
    assert row["status"] == "ok" and row["wall_ms"] > 0 and row["timeit_ms"] == 1.0
    assert result.rows == result.ran and len(result.wall_rows) == 2  # and the host reference
    assert {r["round"] for r in result.drift_rows} == {1, 2, 3, 4}  # 2 x repeats rounds
    assert result.thunder_rows == {} and result.measured["eager"]["timeit"]["mean_ms"] == 1.0
    assert not (result.top_kernels or result.bars or result.seed_tables)  # no device kernels, not the seed's step
    assert "timeit_ms" in result.noise_rows[0] and "kernel_ms" not in result.table_rows[0]
    assert result.findings[0].startswith("Fastest to slowest by median wall time: ")
    assert not any(r.get("source") == "measured here" for r in result.kernel_rows)
    assert executor_timing.run(params).rows[0]["timeit_ms"] is None  # no IPython: %timeit not measured
    saved = results.load(result.save())
    assert saved.keys() == results.load(tiny_run / f"{results.EXECUTOR_TIMING}{results.SUFFIX}").keys()
    assert saved["rounds"].keys() == {"eager"} and saved["host_reference"]


def test_report_and_compare_read_results_files_not_the_studies():
    """The run's pages are made from results files and the seed's numbers (core), never by importing a
    study: a folder imports only the folders above it (README's layout)."""
    code = (
        "import sys\n"
        "import latency_lab.run.compare.command, latency_lab.run.report, latency_lab.run.start_page\n"
        "print(sorted(m for m in sys.modules if m.startswith('latency_lab.studies')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_cpu_runs_page_says_what_it_cannot_answer_and_where_the_gpu_answer_is(tmp_path):
    """On a CPU the index says once that the nvFuser rows are unavailable there and points at the
    committed H100 run (which exists); a GPU run's index does not."""
    run, summary = _fake_run(tmp_path)
    for device, said in (("cpu", True), ("cuda", False)):
        summary["environment"] = {**(summary.get("environment") or {}), "device": device}
        page = html.unescape(run_page.index_html(summary, run))
        assert ("The GPU answer to the question is the committed H100 run: outputs/reference-h100" in page) == said
    assert (ROOT / run_page.GPU_ANSWER / "index.html").is_file()
