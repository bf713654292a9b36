"""The run's summary: ``summary.json`` and ``index.html``, built from the notebooks' results files."""

from __future__ import annotations

import html
import json
from pathlib import Path

from . import results


def summarize(run_dir: Path, meta: dict, outcomes: list) -> dict:
    """Summary of a run: its metadata and, per notebook, status, error, files and key table."""
    notebooks = []
    for o in outcomes:
        entry = {"name": o.name, "status": o.status, "seconds": round(o.seconds, 1), "error": o.error,
                 "files": dict(o.files), "key_table": None, "params": None, "failed_rows": []}
        path = results.path_for(run_dir, o.name)
        if path.exists():
            try:
                data = results.load(path)
                entry["key_table"], entry["params"] = data["key_table"], data["params"]
                entry["failed_rows"] = results.failed_rows(data["key_table"])
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
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    (run_dir / "index.html").write_text(index_html(summary), encoding="utf-8")


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape("" if value is None else str(value))


def _table(table: dict) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table["columns"])
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in table["rows"])
    return f"<h3>{html.escape(table['title'])}</h3><table><tr>{head}</tr>{body}</table>"


def index_html(summary: dict) -> str:
    """A self-contained page: run metadata, status and links per notebook, key tables, environment."""
    parts = []
    for n in summary["notebooks"]:
        links = " · ".join(f'<a href="{html.escape(f)}">{kind}</a>' for kind, f in n["files"].items())
        error = ""
        if n["error"]:
            e = n["error"]
            where = f"cell {e['cell']}: " if e.get("cell") is not None else ""
            error = f'<pre class="error">{html.escape(where + str(e.get("ename")) + ": " + str(e.get("evalue")))}</pre>'
        table = _table(n["key_table"]) if n["key_table"] else ""
        parts.append(f'<section class="{n["status"]}"><h2>{html.escape(n["name"])} '
                     f'<span class="status">{n["status"]}</span> <small>{n["seconds"]} s</small></h2>'
                     f"<p>{links}</p>{error}{table}</section>")
    env = html.escape(json.dumps(summary.get("environment"), indent=1))
    params = html.escape(json.dumps(summary.get("parameters"), indent=1))
    title = f"latency-lab run {summary['run_id']}"
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:110em}}table{{border-collapse:collapse;font-size:90%}}
td,th{{border:1px solid #ccc;padding:2px 6px;text-align:right}}th{{background:#f3f3f3}}
section{{border-left:6px solid #2a2;padding-left:1em;margin:1.5em 0}}section.failed{{border-color:#c22}}
.failed .status{{color:#c22}}.ok .status{{color:#2a2}}pre.error{{background:#fee;padding:.5em;white-space:pre-wrap}}</style>
</head><body><h1>{html.escape(title)}</h1>
<p>{"all notebooks ok" if summary["ok"] else "<b>some notebooks failed</b>"} · started {summary.get("started")} ·
{summary.get("seconds")} s · device {html.escape(str(summary.get("device")))} · <code>{html.escape(summary.get("command", ""))}</code></p>
{"".join(parts)}
<h2>Parameters</h2><pre>{params}</pre><h2>Environment</h2><pre>{env}</pre></body></html>"""
