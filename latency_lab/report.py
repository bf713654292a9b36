"""The run's summary: ``summary.json``; ``index.html``, which opens with the findings (a headline chart
and each notebook's generated sentences) and shares the run folder's ``plotly.packed.js`` with the
notebooks' HTML; and ``report.html``, the same page plus the notebooks' charts in one self-contained
file to send. Built from the notebooks' results files and executed notebooks, never from cell text."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from . import html_assets, results, tables

TIMING_NOTEBOOK = "02_executor_timing"  # its results give the headline chart and the seed tables
HOST, KERNEL, UNSPLIT = "host: CPU overhead (wall - kernel time)", "kernel time", "wall (no kernel time on a CPU)"
COLORS = {HOST: "#e4872d", KERNEL: "#3b6fb6", UNSPLIT: "#9a9a9a"}


def summarize(run_dir: Path, meta: dict, outcomes: list) -> dict:
    """Summary of a run: its metadata and, per notebook, status, error, files, key table, the
    parameters it ran with, its failed rows and its findings."""
    notebooks = []
    for o in outcomes:
        entry = {"name": o.name, "status": o.status, "seconds": round(o.seconds, 1), "error": o.error,
                 "files": dict(o.files), "key_table": None, "params": None, "failed_rows": [], "findings": []}
        path = results.path_for(run_dir, o.name)
        if path.exists():
            try:
                data = results.load(path)
                entry["key_table"], entry["params"] = data["key_table"], data["params"]
                entry["failed_rows"] = results.failed_rows(data["key_table"])
                found = data.get("findings") or []
                entry["findings"] = [found] if isinstance(found, str) else list(found)
                entry["files"]["results"] = path.name
            except ValueError as e:
                entry["status"], entry["error"] = "failed", {"ename": "ResultsError", "evalue": str(e)}
        elif o.status == "ok":
            entry["status"] = "failed"
            entry["error"] = {"ename": "MissingResults", "evalue": f"{path.name} was not written"}
        notebooks.append(entry)
    ok = all(n["status"] == "ok" and not n["failed_rows"] for n in notebooks)
    return {**meta, "ok": ok, "notebooks": notebooks}


def write(run_dir: Path, summary: dict) -> None:
    """``summary.json``, ``index.html`` (with the shared ``plotly.packed.js``) and ``report.html``."""
    run_dir = Path(run_dir)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    html_assets.ensure_plotly_js(run_dir)
    (run_dir / "index.html").write_text(index_html(summary, run_dir), encoding="utf-8")
    (run_dir / "report.html").write_text(index_html(summary, run_dir, standalone=True), encoding="utf-8")


PUBLISHED = ("summary.json", "environment.json", "index.html", html_assets.PLOTLY_JS)


def publish(run_dir: Path, dest: Path) -> list[Path]:
    """A small copy of a run to commit or send: its results files, summary.json, environment.json and
    an index.html whose links point only at what was copied (its charts draw with the shared
    plotly.js copied beside it). ``runner.py compare`` reads such a folder like a run."""
    run_dir, dest = Path(run_dir), Path(dest)
    dest.mkdir(parents=True, exist_ok=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    for n in summary["notebooks"]:
        n["files"] = {k: f for k, f in n["files"].items() if k == "results"}
    for path in run_dir.glob(f"*{results.SUFFIX}"):
        shutil.copy2(path, dest / path.name)
    shutil.copy2(run_dir / "environment.json", dest / "environment.json")
    html_assets.ensure_plotly_js(dest)
    (dest / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    (dest / "index.html").write_text(index_html(summary, dest, published=True), encoding="utf-8")
    return sorted(dest.iterdir())


# --- data -------------------------------------------------------------------------------------------

def _timing(run_dir: Path, summary: dict) -> dict | None:
    """The timing notebook's results, when it ran in this run and wrote them."""
    if not any(n["name"] == TIMING_NOTEBOOK and "results" in n["files"] for n in summary["notebooks"]):
        return None
    try:
        return results.load(results.path_for(run_dir, TIMING_NOTEBOOK))
    except (OSError, ValueError):
        return None


def device_label(environment: dict | None) -> str:
    env = environment or {}
    return (env.get("gpu") or {}).get("name") or f"CPU ({env.get('cpu') or 'unknown'})"


def headline_figure(timing: dict, device: str) -> dict:
    """Wall time per step per executor, split into host (CPU overhead) and kernel time: the seed's
    DGX H100 table beside this run's measurements, one panel each (one scale when within 10x)."""
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

    from .executors import REGISTRY
    from .reference import SEED_NSIGHT_DGX_H100 as seed

    here = sorted((r for r in timing.get("rows", []) if r.get("Wall Clock Time (ms)") is not None),
                  key=lambda r: r["Wall Clock Time (ms)"])
    order = list(dict.fromkeys([*(r["executor"] for r in here), *seed["rows"]]))
    labels = {**{n: REGISTRY[n].label for n in order if n in REGISTRY}, **{r["executor"]: r["Execution Type"] for r in here}}
    cols = seed["columns"]
    seed_parts = {n: {HOST: v[cols.index("cpu_overhead_ms")], KERNEL: v[cols.index("kernel_ms")]} for n, v in seed["rows"].items()}
    here_parts = {r["executor"]: ({HOST: r["Wall Clock Time (ms)"] - r["Kernel Time (ms)"], KERNEL: r["Kernel Time (ms)"]}
                                  if r.get("Kernel Time (ms)") is not None else {UNSPLIT: r["Wall Clock Time (ms)"]})
                  for r in here}
    seed_top = max(sum(p.values()) for p in seed_parts.values())
    here_top = max((sum(p.values()) for p in here_parts.values()), default=0)
    shared = here_top > 0 and max(seed_top, here_top) / min(seed_top, here_top) < 10
    fig = make_subplots(rows=1, cols=2, shared_yaxes=shared, horizontal_spacing=0.08,
                        subplot_titles=[f"seed: {seed['gpu']}, {seed['method']}",
                                        f"here: {device}, preset {timing.get('params', {}).get('preset', '?')}"])
    shown = set()
    for col, parts in ((1, seed_parts), (2, here_parts)):
        for part in (KERNEL, HOST, UNSPLIT):
            names = [n for n in order if part in parts.get(n, {})]
            if not names:
                continue
            fig.add_trace(go.Bar(x=[labels[n] for n in names], y=[parts[n][part] for n in names], name=part,
                                 legendgroup=part, showlegend=part not in shown, marker_color=COLORS[part],
                                 hovertemplate="%{x}: %{y:.3g} ms<extra>" + part + "</extra>"), row=1, col=col)
            shown.add(part)
        names = [n for n in order if n in parts]
        totals = [sum(parts[n].values()) for n in names]
        fig.add_trace(go.Scatter(x=[labels[n] for n in names], y=totals, text=[tables.number(t) for t in totals],
                                 mode="text", textposition="top center", showlegend=False, hoverinfo="skip"), row=1, col=col)
    for col, parts in ((1, seed_parts), (2, here_parts)):
        fig.update_xaxes(categoryorder="array", categoryarray=[labels[n] for n in order if n in parts], row=1, col=col)
    fig.update_yaxes(title_text="ms per step")
    fig.update_layout(barmode="stack", height=460, margin={"t": 80, "b": 40},
                      title="Wall time per step: host (CPU overhead) and kernel time",
                      legend={"orientation": "h", "y": -0.25})
    return json.loads(fig.to_json())


def notebook_figures(run_dir: Path, files: dict) -> list[dict]:
    """The plotly figures of an executed notebook, in cell order."""
    import nbformat

    if "ipynb" not in files or not (run_dir / files["ipynb"]).is_file():
        return []
    nb = nbformat.read(run_dir / files["ipynb"], as_version=4)
    return [out["data"][html_assets.PLOTLY_MIME] for cell in nb.cells for out in cell.get("outputs", [])
            if html_assets.PLOTLY_MIME in out.get("data", {})]


# --- HTML ---------------------------------------------------------------------------------------------

def _table(table: dict, caption: str | None = None) -> str:
    """A key table as a paper prints it; numbers right-aligned, text left."""
    head = "".join(f"<th>{html.escape(tables.header(str(c)))}</th>" for c in table["columns"])
    body = "".join("<tr>" + "".join(f'<td class="{"num" if tables.is_number(v) else "text"}">{html.escape(tables.number(v))}</td>'
                                    for v in row) + "</tr>" for row in table["rows"])
    return f"<table><caption>{html.escape(caption or table['title'])}</caption><tr>{head}</tr>{body}</table>"


def _chart(figure: dict, div_id: str) -> str:
    return f'<div class="chart">{html_assets.figure_html(figure, div_id)}</div>'


def _error(n: dict) -> str:
    from .notebook_run import error_line

    failed = f"failed rows: {', '.join(n['failed_rows'])}" if n.get("failed_rows") else ""
    text = "\n".join(filter(None, (error_line(n["error"]), failed)))
    return f'<pre class="error">{html.escape(text)}</pre>' if text else ""


def _links(n: dict) -> str:
    return " · ".join(f'<a href="{html.escape(f)}">{kind}</a>' for kind, f in n["files"].items())


def _findings(summary: dict) -> str:
    parts = []
    for n in summary["notebooks"]:
        items = "".join(f"<li>{html.escape(s)}</li>" for s in n.get("findings") or [])
        if not items:
            items = "<li class=\"none\">no findings saved" + (" (the notebook failed)" if n["status"] != "ok" else "") + "</li>"
        parts.append(f'<div class="finding {n["status"]}"><h3>{html.escape(n["name"])} '
                     f'<span class="status">{n["status"]}</span> <small>{tables.number(n["seconds"])} s</small></h3>'
                     f'<ul>{items}</ul>{_error(n)}</div>')
    return "".join(parts)


def _status_table(summary: dict) -> str:
    rows = "".join(f'<tr class="{n["status"]}"><td>{html.escape(n["name"])}</td><td class="status">{n["status"]}</td>'
                   f'<td class="num">{tables.number(n["seconds"])}</td><td>{_links(n)}</td></tr>' for n in summary["notebooks"])
    total = f'<tr><td>run</td><td></td><td class="num">{tables.number(summary.get("seconds"))}</td><td></td></tr>'
    return f"<table class=\"notebooks\"><tr><th>notebook</th><th>status</th><th>time (s)</th><th>files</th></tr>{rows}{total}</table>"


def _environment_line(summary: dict) -> str:
    env = summary.get("environment") or {}
    packages = env.get("packages") or {}
    stack = ", ".join(f"{k} {v}" for k, v in packages.items() if k in ("torch", "lightning-thunder", "nvfuser", "transformers") and v)
    used = summary.get("compile_cache") or {}
    left = f" ({used['inductor_files']} Inductor files, {used['nvfuser_kernels']} nvFuser kernels at the end)" if "inductor_files" in used else ""
    cache = f" · compile caches: {env['compile_cache']}{left}" if env.get("compile_cache") else ""
    return f"{html.escape(device_label(env))} · {html.escape(stack)}{html.escape(cache)}"


STYLE = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:78em;padding:0 1.5em;color:#222;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
h3{margin:.8em 0 .3em;font-size:1.05em}.meta{color:#555;margin-top:0}
table{border-collapse:collapse;font-size:88%;margin:.6em 0 1.2em;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:.3em 0}td,th{border-bottom:1px solid #e3e3e3;padding:3px 9px;text-align:left;vertical-align:top}
td.num{text-align:right}
th{background:#f4f4f4;border-bottom:2px solid #bbb}
.finding{border-left:5px solid #c22;padding:.1em 0 .1em 1em;margin:.8em 0}.finding.ok{border-color:#2a2}
.finding ul{margin:.2em 0;padding-left:1.2em}.finding li{margin:.25em 0}li.none{color:#888}
.status{font-weight:600;font-size:90%;color:#c22}.ok .status,tr.ok .status{color:#2a2}
pre.error{background:#fee;padding:.5em;white-space:pre-wrap}details{margin:.5em 0}summary{cursor:pointer;color:#345}
p.error{background:#fee;padding:.5em}
.note{color:#666;font-size:90%}.chart{margin:1em 0}"""


def index_html(summary: dict, run_dir: Path | None = None, standalone: bool = False, published: bool = False) -> str:
    """The run's page: findings first (headline chart, each notebook's sentences), then status and
    time per notebook, the key and seed tables, parameters and environment. ``standalone``: plotly.js
    inlined and the notebooks' charts included (``report.html``); else the shared ``plotly.packed.js``.
    ``published``: a copy made by ``publish``, which holds no report.html and no notebooks."""
    run_dir = Path(run_dir) if run_dir else None
    timing = _timing(run_dir, summary) if run_dir else None
    charts, details = [], []
    if timing:
        charts.append(_chart(headline_figure(timing, device_label(summary.get("environment"))), "headline"))
    for n in summary["notebooks"]:
        section = [_error(n)]
        if n["key_table"]:
            section.append(_table(n["key_table"]))
        if n["name"] == TIMING_NOTEBOOK and timing:
            seed = [t for t in tables.seed_tables(timing.get("rows", []), timing.get("measured") or {}) if tables.has_here(t)]
            section += [_table(t) for t in seed]
        if standalone and run_dir:
            figures = notebook_figures(run_dir, n["files"])
            section += [_chart(f, "fig-" + n["name"][:2] + f"-{i}") for i, f in enumerate(figures)]
        details.append(f'<section class="{n["status"]}"><h3>{html.escape(n["name"])} <span class="status">{n["status"]}</span> '
                       f'<small>{tables.number(n["seconds"])} s · {_links(n)}</small></h3>{"".join(section)}</section>')
    plotly = html_assets.inline_plotly_js() if standalone else f'<script src="{html_assets.PLOTLY_JS}"></script>'
    note = ('<p class="note">One file: plotly.js and the notebooks\' charts are inside it; the links point into the run folder.</p>'
            if standalone else '<p class="note">A published copy of the run: its results files, summary and environment; '
            'the executed notebooks and their charts stayed in the run folder.</p>' if published
            else '<p class="note"><a href="report.html">report.html</a>: this page and the notebooks\' charts in one file, to send.</p>')
    headline = "".join(charts) or \
        '<p class="note">No headline chart: the timing notebook (02) did not run or wrote no results.</p>'
    changed = summary.get("notebook_changes") or {}
    if changed:
        note += ('<p class="error"><b>Not the committed notebooks</b> (edited files ran): '
                 + "; ".join(f"{html.escape(n)}: {html.escape(c)}" for n, c in changed.items()) + "</p>")
    params = html.escape(json.dumps(summary.get("parameters"), indent=1))
    env = html.escape(json.dumps(summary.get("environment"), indent=1))
    title = f"latency-lab run {summary['run_id']}"
    state = "all notebooks ok" if summary["ok"] else "<b>some notebooks failed</b>"
    if summary.get("interrupted"):
        state = f"<b>interrupted ({html.escape(str(summary['interrupted']))})</b>"
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{STYLE}</style>{plotly}</head><body>
<h1>{html.escape(title)}</h1>
<p class="meta">{state} · {_environment_line(summary)} · started {html.escape(str(summary.get("started")))} ·
{tables.number(summary.get("seconds"))} s · <code>{html.escape(summary.get("command", ""))}</code></p>{note}
<h2>Findings</h2>{headline}{_findings(summary)}
<h2>Notebooks</h2>{_status_table(summary)}{"".join(details)}
<h2>Parameters</h2><details><summary>as given and as resolved</summary><pre>{params}</pre></details>
<h2>Environment</h2><details><summary>versions and hardware</summary><pre>{env}</pre></details></body></html>"""
