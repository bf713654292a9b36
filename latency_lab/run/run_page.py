"""The run's page (``templates/index.html.j2``): ``index.html``, which opens with the findings (the
headline chart, ``headline``, and each notebook's generated sentences) and shares the run folder's
``plotly.packed.js`` with the notebooks' HTML; ``report.html``, the same page plus the notebooks' charts
in one self-contained file to send; and a published copy's ``index.html``. Built from the run's summary,
the notebooks' results files and executed notebooks, never from cell text."""

from __future__ import annotations

import json
from pathlib import Path

from ..core import results, rounds, seed_numbers
from ..core.parameters import own_defaults, resolved
from ..pages import html_assets, tables
from . import scheduler
from .headline import TIMING_NOTEBOOK, headline_figure, seed_step, timing_results


def device_label(environment: dict | None) -> str:
    """The run's device as the page names it: its GPU, else its CPU."""
    env = environment or {}
    return (env.get("gpu") or {}).get("name") or f"CPU ({env.get('cpu') or 'unknown'})"


def notebook_figures(run_dir: Path, files: dict) -> list[dict]:
    """The plotly figures of an executed notebook, in cell order."""
    import nbformat

    if "ipynb" not in files or not (run_dir / files["ipynb"]).is_file():
        return []
    try:
        nb = nbformat.read(run_dir / files["ipynb"], as_version=4)
    except Exception:  # cut short (an interrupt, a full disk): no charts to show from it
        return []
    return [
        out["data"][html_assets.PLOTLY_MIME]
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if html_assets.PLOTLY_MIME in out.get("data", {})
    ]


def _links(n: dict):
    """Links to a notebook's files, as ``Markup``."""
    from markupsafe import Markup

    return Markup(" · ").join(Markup('<a href="{}">{}</a>').format(f, kind) for kind, f in n["files"].items())


def _error(n: dict) -> str:
    """A notebook's error line and its failed rows, one per line."""
    from .notebook_run import error_line

    failed = f"failed rows: {', '.join(n['failed_rows'])}" if n.get("failed_rows") else ""
    return "\n".join(filter(None, (error_line(n["error"]), failed)))


NO_FINDINGS = {
    "failed": "the notebook failed",
    "interrupted": "the run was interrupted in this notebook",
    "not run": "not run: the run stopped before it",
}


def _status(n: dict) -> str:
    """The notebook's status as a CSS class (``not run`` -> ``not-run``)."""
    return n["status"].replace(" ", "-")


def _resolved(summary: dict) -> dict:
    """The run's resolved parameters as JSON has them (tuples as lists), to compare with results'."""
    return json.loads(json.dumps((summary.get("parameters") or {}).get("resolved") or {}, default=str))


def ran_with(summary: dict, n: dict) -> dict[str, tuple]:
    """The parameters notebook ``n`` ran with (its results' ``params``) that differ from the run's
    resolved ones: name -> (the notebook's value, the run's). A value that is the notebook's own default
    on the run's device (``own_default``: 02's seven executors, say), where the run was not given that
    parameter, is what the notebook runs by default, not a difference."""
    run = _resolved(summary)
    given = (summary.get("parameters") or {}).get("given") or {}
    device = run.get("device", "cpu")
    return {
        k: (v, run.get(k))
        for k, v in (n.get("params") or {}).items()
        if k != "output_dir" and v != run.get(k) and (k in given or v != own_default(n["name"], k, device))
    }


def _ran_with_line(summary: dict, n: dict) -> str:
    """``ran_with`` as text."""
    return ", ".join(f"{k} {tables.number(v)} (run: {tables.number(r)})" for k, (v, r) in ran_with(summary, n).items())


def own_default(notebook: str, name: str, device: str):
    """``notebook``'s own default of parameter ``name`` on ``device`` (``parameters.own_defaults``) as
    its results file holds it (validated, lists as JSON has them); None where it has none."""
    own = own_defaults(notebook, device)
    if name not in own:
        return None
    return json.loads(json.dumps(resolved({name: own[name]}).to_dict()[name]))  # no fit check: nothing runs


def _parameters_table(summary: dict):
    """The parameters some notebook ran with (its results' ``params``) at another value than the
    run's resolved one: per parameter the run's value and, where it differs, each notebook's; None
    when every notebook ran with the run's."""
    run = _resolved(summary)
    differing = {n["name"]: ran_with(summary, n) for n in summary["notebooks"] if n.get("params")}
    names = list(dict.fromkeys(k for d in differing.values() for k in d))
    if not names:
        return None
    rows = [
        [k, tables.number(run.get(k))]
        + [tables.Cell(tables.number(d[k][0]), "differs") if k in d else None for d in differing.values()]
        for k in names
    ]
    return tables.html_table(
        rows,
        ["parameter", "run", *(nb[:2] for nb in differing)],
        "Parameters a notebook ran with at another value than the run's (blank: the run's)",
        css="params",
    )


def _status_table(summary: dict):
    """Per notebook its status, time, where it ran and its files; the run's time last."""
    rows = [
        [
            n["name"],
            tables.Cell(n["status"], "status"),
            n["seconds"],
            scheduler.ran_on(n.get("gpu"), n.get("cpus")),
            _links(n),
        ]
        for n in summary["notebooks"]
    ]
    rows.append(["run", None, summary.get("seconds"), None, None])
    return tables.html_table(
        rows,
        ["notebook", "status", "time_s", "ran_on", "files"],
        row_classes=[_status(n) for n in summary["notebooks"]] + [""],
        css="notebooks",
    )


def _environment_line(summary: dict) -> str:
    """The device, the stack's main packages and the compile caches, on one line."""
    env = summary.get("environment") or {}
    packages = env.get("packages") or {}
    stack = ", ".join(
        f"{k} {v}" for k, v in packages.items() if k in ("torch", "lightning-thunder", "nvfuser", "transformers") and v
    )
    used = summary.get("compile_cache") or {}
    left = (
        f" ({used['inductor_files']} Inductor files, {used['nvfuser_kernels']} nvFuser kernels at the end)"
        if "inductor_files" in used
        else ""
    )
    cache = f" · compile caches: {env['compile_cache']}{left}" if env.get("compile_cache") else ""
    return f"{device_label(env)} · {stack}{cache}"


def _chart(figure: dict, div_id: str):
    """A plotly figure as the page's ``Markup`` (``html_assets.figure_html``)."""
    from markupsafe import Markup

    return Markup(html_assets.figure_html(figure, div_id))


def _notebook(summary: dict, n: dict, timing: dict | None, charts_from: Path | None) -> dict:
    """What the page shows of notebook ``n``: its findings and, in its section, the parameters it
    ran with unlike the run, its key table, the seed tables (02 on the seed's step) and, from
    ``charts_from`` (the run folder, for report.html), its charts."""
    shown = [tables.html_table(n["key_table"])] if n["key_table"] else []
    if n["name"] == TIMING_NOTEBOOK and timing and seed_step(timing):
        shown += [tables.html_table(t) for t in seed_numbers.seed_tables(timing.get("rows", []))]
    figures = notebook_figures(charts_from, n["files"]) if charts_from else []
    return {
        "name": n["name"],
        "status": n["status"],
        "css": _status(n),
        "seconds": tables.number(n["seconds"]),
        "findings": n.get("findings") or [],
        "no_findings": NO_FINDINGS.get(n["status"]),
        "error": _error(n),
        "links": _links(n),
        "ran_with": _ran_with_line(summary, n),
        "tables": shown,
        "charts": [_chart(f, "fig-" + n["name"][:2] + f"-{i}") for i, f in enumerate(figures)],
    }


GPU_ANSWER = "outputs/reference-h100"  # the committed H100 run


def cpu_note(summary: dict) -> str | None:
    """For a run on a CPU: what it cannot answer there and where the GPU answer is, naming only the
    notebooks that ran (06 and 07 where they did); else None."""
    if (summary.get("environment") or {}).get("device") != "cpu":
        return None
    ran = {n["name"] for n in summary.get("notebooks") or [] if n.get("status") != "not run"}
    which = "; ".join(
        said
        for name, said in (
            (results.SCALING, "06 runs thunder:torch in nvFuser-Thunder's place"),
            (results.LEVERS, "07 measures nothing"),
        )
        if name in ran
    )
    return (
        "A CPU run: Thunder with nvFuser and CUDA graphs need a CUDA device, so their rows say unavailable here"
        f"{f' ({which})' if which else ''}. The GPU answer to the question is the committed H100 run: "
        f"{GPU_ANSWER}/index.html."
    )


def index_html(summary: dict, run_dir: Path | None = None, standalone: bool = False, published: bool = False) -> str:
    """The run's page: findings first (headline chart, each notebook's sentences), then status and
    time per notebook, the key and seed tables, parameters and environment. ``standalone``: plotly.js
    inlined and the notebooks' charts included (``report.html``); else the shared ``plotly.packed.js``.
    ``published``: a copy made by ``publish``, which holds no report.html and no notebooks."""
    from markupsafe import Markup

    run_dir = Path(run_dir) if run_dir else None
    timing = timing_results(run_dir, summary) if run_dir else None
    headline = _chart(headline_figure(timing, device_label(summary.get("environment"))), "headline") if timing else None
    plotly = html_assets.inline_plotly_js() if standalone else f'<script src="{html_assets.PLOTLY_JS}"></script>'
    page = tables.render(
        "index.html.j2",
        title=f"latency-lab run {summary.get('run_id', run_dir.name if run_dir else '')}",
        ok=summary.get("ok"),
        stopped=summary.get("stopped"),
        interrupted=summary.get("interrupted"),
        environment_line=_environment_line(summary),
        started=str(summary.get("started")),
        seconds=tables.number(summary.get("seconds")),
        command=summary.get("command", ""),
        kind="standalone" if standalone else "published" if published else "index",
        notebook_changes=summary.get("notebook_changes") or {},
        cpu_note=cpu_note(summary),
        host_state_note=rounds.HOST_STATE_NOTE,
        plotly=Markup(plotly),
        headline=headline,
        notebooks=[_notebook(summary, n, timing, run_dir if standalone else None) for n in summary["notebooks"]],
        status_table=_status_table(summary),
        parameters_table=_parameters_table(summary),
        parameters_json=json.dumps(summary.get("parameters"), indent=1),
        environment_json=json.dumps(summary.get("environment"), indent=1),
    )
    return str(page)
