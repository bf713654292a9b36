"""The run's summary: ``summary.json``; ``index.html``, which opens with the findings (a headline chart
and each notebook's generated sentences) and shares the run folder's ``plotly.packed.js`` with the
notebooks' HTML; and ``report.html``, the same page plus the notebooks' charts in one self-contained
file to send. Built from the notebooks' results files and executed notebooks, never from cell text."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

from ..core import results, rounds, seed_numbers
from ..core.parameters import own_defaults, resolved
from ..pages import html_assets, tables
from . import run_folder, scheduler

TIMING_NOTEBOOK = results.EXECUTOR_TIMING  # its results give the headline chart and the seed tables
HOST, KERNEL, UNSPLIT = "host: CPU overhead (wall - kernel time)", "kernel time", "wall (no kernel time on a CPU)"
COLORS = {HOST: "#e4872d", KERNEL: "#3b6fb6", UNSPLIT: "#9a9a9a"}


def summarize(run_dir: Path, meta: dict, outcomes: list) -> dict:
    """Summary of a run: its metadata and, per notebook, status, error, where it ran (``gpu``: "cpu"
    or the GPU, and the CPU cores it was pinned to side by side), files, key table, the parameters it
    ran with, its failed rows and its findings."""
    notebooks = []
    for o in outcomes:
        entry = {
            "name": o.name,
            "status": o.status,
            "seconds": round(o.seconds, 1),
            "html_seconds": round(o.html_seconds, 1),
            "error": o.error,
            "gpu": o.gpu,
            "cpus": o.cpus,
            "files": dict(o.files),
            "key_table": None,
            "params": None,
            "failed_rows": [],
            "findings": [],
        }
        path = results.path_for(run_dir, o.name)
        if path.exists():
            try:
                data = results.load(path)
                entry["key_table"], entry["params"] = data["key_table"], data["params"]
                entry["failed_rows"] = results.failed_rows(data["key_table"])
                found = data.get("findings") or []
                entry["findings"] = [found] if isinstance(found, str) else list(found)
                entry["files"]["results"] = path.name
                if o.status == "ok" and nothing_measured(data["key_table"]):
                    entry["status"] = UNAVAILABLE
            except ValueError as e:
                entry["status"], entry["error"] = "failed", {"ename": "ResultsError", "evalue": str(e)}
        elif o.status == "ok":
            entry["status"] = "failed"
            entry["error"] = {"ename": "MissingResults", "evalue": f"{path.name} was not written"}
        notebooks.append(entry)
    ok = all(n["status"] in ("ok", UNAVAILABLE) and not n["failed_rows"] for n in notebooks)
    return {**meta, "ok": ok, "notebooks": notebooks}


UNAVAILABLE = "unavailable"  # a notebook that ran but could measure nothing here: its findings say why


def nothing_measured(table: dict) -> bool:
    """Whether every row of a key table is ``unavailable`` (none measured, none failed)."""
    columns, rows = table.get("columns") or [], table.get("rows") or []
    if "status" not in columns or not rows:
        return False
    return all(row[columns.index("status")] == UNAVAILABLE for row in rows)


def write(run_dir: Path, summary: dict) -> list[str]:
    """``summary.json``, ``index.html``, the shared ``plotly.packed.js`` and ``report.html``, most
    needed first, each whole or not at all; returns those that could not be written (a full disk),
    each with why, and writes the others all the same."""
    run_dir = Path(run_dir)
    pages = {
        "summary.json": lambda: json.dumps(summary, indent=1, default=str),
        "index.html": lambda: index_html(summary, run_dir),
        html_assets.PLOTLY_JS: None,
        "report.html": lambda: index_html(summary, run_dir, standalone=True),
    }
    unwritten = []
    for name, text in pages.items():
        try:
            if text is None:
                html_assets.ensure_plotly_js(run_dir)
            else:
                results.write_atomic(run_dir / name, text())
        except Exception as e:  # OSError (full disk, file too large), or a page that could not be built
            why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {e}"
            unwritten.append(f"{name} ({why})")
    return unwritten


def load_summary(run_dir: Path) -> dict:
    """A run's ``summary.json``; ValueError saying what is wrong when it is missing, unreadable or
    not a summary (an object with a list of notebooks, each with name, status and files)."""
    path = Path(run_dir) / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"{run_dir} is not a run folder: {path.name}: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"{path} is not readable JSON (truncated?): {e}") from None
    notebooks = summary.get("notebooks") if isinstance(summary, dict) else None
    if not isinstance(notebooks, list) or not all(
        isinstance(n, dict)
        and isinstance(n.get("name"), str)
        and isinstance(n.get("status"), str)
        and isinstance(n.get("files"), dict)
        for n in notebooks
    ):
        raise ValueError(f"{path} is not a run summary (no list of notebooks with name, status and files)")
    return summary


def incomplete(summary: dict) -> list[str]:
    """What keeps a run from being complete: the interrupt, notebooks not ok, failed rows."""
    found = [f"interrupted ({summary['interrupted']})"] if summary.get("interrupted") else []
    found += [f"stopped ({summary['stopped']})"] if summary.get("stopped") else []
    found += [f"{n['name']} {n['status']}" for n in summary["notebooks"] if n["status"] not in ("ok", UNAVAILABLE)]
    found += [
        f"{n['name']} failed rows: {', '.join(n['failed_rows'])}" for n in summary["notebooks"] if n.get("failed_rows")
    ]
    return found


SAME_STACK = ("python", "cpu", "device", "gpu", "torch_cuda_build", "packages")  # runs merged into one must agree


def merged_summary(run_dirs: list[Path]) -> dict:
    """One summary for several runs that together hold a suite (run in as many calls as it took):
    their notebooks side by side, each notebook from one run only, on the same stack (``SAME_STACK``)
    and with the same parameters given; what interrupted any of them, and every notebook change.
    ValueError naming the notebook or the difference otherwise."""
    summaries = [load_summary(d) for d in run_dirs]
    if len(summaries) == 1:
        return summaries[0]
    first, seen = summaries[0], {}
    for d, sm in zip(run_dirs, summaries):
        for n in sm["notebooks"]:
            if n["name"] in seen:
                raise ValueError(f"notebook {n['name']} is in both {seen[n['name']]} and {d}: publish each once")
            seen[n["name"]] = d
        env_a, env_b = first.get("environment") or {}, sm.get("environment") or {}
        if differ := [k for k in SAME_STACK if env_a.get(k) != env_b.get(k)]:
            raise ValueError(f"{d} ran on another stack than {run_dirs[0]} ({', '.join(differ)} differ): not one run")
        if (sm.get("parameters") or {}).get("given") != (first.get("parameters") or {}).get("given"):
            raise ValueError(f"{d} was given other parameters than {run_dirs[0]}: not one run")
    return {
        **first,
        "run_id": "+".join(str(sm.get("run_id")) for sm in summaries),
        "command": " ; ".join(str(sm.get("command")) for sm in summaries),
        "seconds": sum(sm.get("seconds") or 0 for sm in summaries),
        "interrupted": next((sm["interrupted"] for sm in summaries if sm.get("interrupted")), None),
        "notebook_changes": {k: v for sm in summaries for k, v in (sm.get("notebook_changes") or {}).items()},
        "ok": all(sm.get("ok") for sm in summaries),
        "notebooks": sorted((n for sm in summaries for n in sm["notebooks"]), key=lambda n: n["name"]),
        "runs": [str(sm.get("run_id")) for sm in summaries],
    }


def publish(run_dir: Path | list[Path], dest: Path, allow_incomplete: bool = False) -> tuple[dict, list[Path]]:
    """A small copy of a run to commit or send: its results files, summary.json (marked as
    published), environment.json and an index.html whose links point only at what was copied (its
    charts draw with the shared plotly.js copied beside it). ``runner.py compare`` reads such a folder
    like a run and never writes into it. Several runs that together hold the suite publish as one
    (``merged_summary``). Made in a temporary folder beside ``dest`` and renamed to
    it once complete, so a failure leaves no ``dest``. ValueError, saying why, for: a folder that is
    not a run, a ``dest`` that exists, is named ``latest`` or lies inside a run, and an incomplete
    run (interrupted, a notebook not ok, failed rows) unless ``allow_incomplete``. Returns the
    published summary and files."""
    run_dirs = [Path(d) for d in (run_dir if isinstance(run_dir, list) else [run_dir])]
    dest = Path(dest)
    summary = merged_summary(run_dirs)
    if dest.name.lower() == run_folder.LATEST:
        raise ValueError(f"{dest}: 'latest' is the name of the runner's link to the newest run; choose another name")
    if dest.exists() or dest.is_symlink():
        raise ValueError(f"{dest} exists; publish into a new folder")
    inside = run_folder.enclosing_run(dest.resolve().parent)
    if inside:
        raise ValueError(f"{dest} would lie inside the run folder {inside}; publish next to it")
    missing = incomplete(summary)
    if missing and not allow_incomplete:
        raise ValueError(
            f"{', '.join(map(str, run_dirs))} is incomplete ({'; '.join(missing)}); "
            "to publish it as it is, add --incomplete"
        )
    for n in summary["notebooks"]:
        n["files"] = {k: f for k, f in n["files"].items() if k == "results"}
    summary["published"] = {
        "from": ", ".join(str(d.resolve()) for d in run_dirs),
        "at": datetime.now().isoformat(timespec="seconds"),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    try:
        for path in (p for d in run_dirs for p in d.glob(f"*{results.SUFFIX}")):
            shutil.copy2(path, tmp / path.name)
        if (run_dirs[0] / "environment.json").is_file():
            shutil.copy2(run_dirs[0] / "environment.json", tmp / "environment.json")
        elif summary.get("environment"):
            results.write_atomic(tmp / "environment.json", json.dumps(summary["environment"], indent=1))
        html_assets.ensure_plotly_js(tmp)
        results.write_atomic(tmp / "summary.json", json.dumps(summary, indent=1, default=str))
        results.write_atomic(tmp / "index.html", index_html(summary, tmp, published=True))
        tmp.chmod(0o777 & ~_umask())
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary, sorted(dest.iterdir())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- data -------------------------------------------------------------------------------------------


def _timing(run_dir: Path, summary: dict) -> dict | None:
    """The timing notebook's results, when it ran in this run and wrote them."""
    if not any(n["name"] == TIMING_NOTEBOOK and "results" in n["files"] for n in summary["notebooks"]):
        return None
    try:
        return results.load(results.path_for(run_dir, TIMING_NOTEBOOK))
    except (OSError, ValueError):
        return None


def seed_step(timing: dict) -> bool:
    """Whether a timing run measured the seed's step on a GPU (the only runs shown beside the seed's)."""
    p = timing.get("params") or {}
    return str(p.get("device", "")).startswith("cuda") and p.get("preset") == "seed"


def device_label(environment: dict | None) -> str:
    env = environment or {}
    return (env.get("gpu") or {}).get("name") or f"CPU ({env.get('cpu') or 'unknown'})"


def headline_figure(timing: dict, device: str) -> dict:
    """Wall time per step per executor, split into host (CPU overhead = wall - kernel time) and kernel
    time; on a GPU run of the seed preset the seed's DGX H100 table beside it, one panel each (one
    scale when within 10x). Other runs' steps are not the seed's: they get their own panel alone."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..core.registry import REGISTRY
    from ..core.seed_numbers import SEED_NSIGHT_DGX_H100 as seed

    here = sorted((r for r in timing.get("rows", []) if r.get("wall_ms") is not None), key=lambda r: r["wall_ms"])
    beside = seed_step(timing)
    order = list(dict.fromkeys([*(r["executor"] for r in here), *(seed["rows"] if beside else ())]))
    labels = {**{n: REGISTRY[n].label for n in order if n in REGISTRY}, **{r["executor"]: r["label"] for r in here}}
    cols = seed["columns"]
    panels = [
        (
            {
                r["executor"]: (
                    {HOST: r["wall_ms"] - r["kernel_ms"], KERNEL: r["kernel_ms"]}
                    if r.get("kernel_ms") is not None
                    else {UNSPLIT: r["wall_ms"]}
                )
                for r in here
            },
            f"here: {device}, preset {timing.get('params', {}).get('preset', '?')}",
        )
    ]
    if beside:
        panels.insert(
            0,
            (
                {
                    n: {HOST: v[cols.index("cpu_overhead_ms")], KERNEL: v[cols.index("kernel_ms")]}
                    for n, v in seed["rows"].items()
                },
                f"seed: {seed['gpu']}, {seed['method']}",
            ),
        )
    tops = [max((sum(p.values()) for p in parts.values()), default=0) for parts, _ in panels]
    shared = min(tops) > 0 and max(tops) / min(tops) < 10
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        shared_yaxes=shared,
        horizontal_spacing=0.08,
        subplot_titles=[title for _, title in panels],
    )
    shown = set()
    for col, (parts, _) in enumerate(panels, 1):
        for part in (KERNEL, HOST, UNSPLIT):
            names = [n for n in order if part in parts.get(n, {})]
            if not names:
                continue
            fig.add_trace(
                go.Bar(
                    x=[labels[n] for n in names],
                    y=[parts[n][part] for n in names],
                    name=part,
                    legendgroup=part,
                    showlegend=part not in shown,
                    marker_color=COLORS[part],
                    hovertemplate="%{x}: %{y:.3g} ms<extra>" + part + "</extra>",
                ),
                row=1,
                col=col,
            )
            shown.add(part)
        names = [n for n in order if n in parts]
        totals = [sum(parts[n].values()) for n in names]
        fig.add_trace(
            go.Scatter(
                x=[labels[n] for n in names],
                y=totals,
                text=[tables.number(t) for t in totals],
                mode="text",
                textposition="top center",
                showlegend=False,
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(categoryorder="array", categoryarray=[labels[n] for n in order if n in parts], row=1, col=col)
    fig.update_yaxes(title_text="ms per step")
    fig.update_layout(
        barmode="stack",
        height=460,
        margin={"t": 80, "b": 40},
        title="Wall time per step: host (CPU overhead) and kernel time",
        legend={"orientation": "h", "y": -0.25},
    )
    return json.loads(fig.to_json())


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


# --- HTML (templates/index.html.j2, tables.html_table) -----------------------------------------------


def _links(n: dict):
    """Links to a notebook's files, as ``Markup``."""
    from markupsafe import Markup

    return Markup(" · ").join(Markup('<a href="{}">{}</a>').format(f, kind) for kind, f in n["files"].items())


def _error(n: dict) -> str:
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
    timing = _timing(run_dir, summary) if run_dir else None
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
