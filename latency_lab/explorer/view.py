"""The explorer's view: the wall-time chart (plotly), the runs' legend, table and a row's details as
HTML, and the comparison beside the reference run as one table."""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path

from ..pages import tables
from ..run.compare import command as compare
from .measure import PROFILE_STEPS, phases_of
from .session import COLUMNS

LOG_AXIS_SPAN = 10.0  # walls spanning more than this factor get a log axis
LIMITS = ("wall_lo_ms", "wall_hi_ms")  # a row's whiskers: the log axis's ticks cover them
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def figure(runs: list[dict]):
    """Wall time per executor (named as in the table), one bar group per run, whiskers at each
    median's interval; a log axis when the runs' walls span more than ``LOG_AXIS_SPAN`` x (a seed run
    beside a tiny one), so that no bar vanishes."""
    import plotly.graph_objects as go

    walls = [r["wall_ms"] for run in runs for r in run["rows"] if r["wall_ms"]]
    log = bool(walls) and max(walls) / min(walls) > LOG_AXIS_SPAN
    yaxis = dict(title="wall time per step (ms" + (", log scale)" if log else ")"), type="log" if log else "linear")
    if log:
        ends = [r.get(k) or r["wall_ms"] for run in runs for r in run["rows"] if r["wall_ms"] for k in LIMITS]
        ticks = log_ticks(min(ends), max(ends))
        yaxis.update(tickmode="array", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    fig = go.Figure(
        layout=dict(
            title="Wall time per step (median over fast blocks, whiskers at its interval)",
            barmode="group",
            yaxis=yaxis,
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


def log_ticks(lo: float, hi: float) -> list[float]:
    """A log axis's ticks from the decade at or below ``lo`` to the one at or above ``hi``: 1, 2 and 5
    times each power of ten across at most three decades, the powers of ten alone across more."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 3 else (1,)
    return [float(f"{m}e{e}") for e in range(first, last + 1) for m in steps if m == 1 or e < last]


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
            f"first call: {phases_of(thunder)}</b>" + table_html(regions, ["region", "kind", "inside", "n_ops", "ops"])
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


def comparison_html(report: dict, page: Path | None = None) -> str:
    """The comparison's rows as one table (``compare.entries_table``; the full page, when written, is linked)."""
    differ = ", ".join(sorted({d["name"] for d in report["parameters"]})) or "none"
    link = f" Full report: <code>{html.escape(str(page))}</code>." if page else ""
    table = compare.entries_table(report["rows"], with_notebook="run", style=True)
    return (
        f"<p><b>A: {html.escape(report['a']['name'])} (its 02 executor timing) · B: this session's runs.</b> "
        f"Parameters that differ: {html.escape(differ)}. {html.escape(compare.tally(report))}{link}</p>{table}"
    )


def plotly_output(fig) -> dict:
    """A display_data output of ``fig`` as plotly JSON (JupyterLab draws it; a widget keeps it)."""
    return {
        "output_type": "display_data",
        "metadata": {},
        "data": {PLOTLY_MIME: json.loads(fig.to_json()), "text/plain": f"<{fig.layout.title.text}>"},
    }
