"""The run's summary: ``summarize`` (per notebook its status, files, key table and findings), ``write``
(``summary.json`` and the run's pages, ``run_page``), ``load_summary`` and ``incomplete`` for a run read
back, and ``publish``, a small copy of a run (or of a suite run in parts) to commit or send."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from datetime import datetime
from pathlib import Path

from ..core import results
from ..pages import html_assets
from . import run_folder
from .run_page import index_html


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
    """The process's umask (read by setting it, then set back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
