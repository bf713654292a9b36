#!/usr/bin/env python3
"""Where a run's time went, per notebook: the kernel's start, builds and first calls, warm-up calls,
timed rounds, profiling, writing results, ending worker processes, the rest of its cells, and the HTML
rendering after it.

    python tools/time_split.py outputs/<run-id> [--json FILE] [--wall SECONDS]

Reads the run's ``summary.json`` (each notebook's seconds and HTML seconds), each notebook's
``<notebook>.phases.json`` (its kernel's seconds per phase, ``latency_lab.core.phases``) and the
executed notebooks' cell durations (papermill's). Prints a Markdown table; ``--json`` writes the same
numbers; ``--wall`` (the command's own wall time, measured outside) adds the run's set-up and index
as what the notebooks leave of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from latency_lab.core.phases import PHASES  # noqa: E402

COLUMNS = ("start", *PHASES, "other", "html")


def cell_seconds(ipynb: Path) -> float | None:
    """The summed durations papermill recorded for the executed notebook's cells; None without it."""
    try:
        cells = json.loads(ipynb.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return None
    return sum((c.get("metadata", {}).get("papermill", {}).get("duration") or 0.0) for c in cells)


def split(run: Path) -> list[dict]:
    """One row per notebook of ``run``: seconds in all and per part (None where not recorded)."""
    summary = json.loads((run / "summary.json").read_text())
    rows = []
    for n in summary["notebooks"]:
        name, seconds, html = n["name"], n.get("seconds") or 0.0, n.get("html_seconds")
        phases_file = run / f"{name}.phases.json"
        phases = json.loads(phases_file.read_text()) if phases_file.exists() else {}
        cells = cell_seconds(run / f"{name}.ipynb")
        row = {"notebook": name, "status": n["status"], "total": seconds + (html or 0.0)}
        row["start"] = None if cells is None else max(seconds - cells, 0.0)
        row |= {p: phases.get(p) for p in PHASES}
        measured = sum(phases.get(p) or 0.0 for p in PHASES)
        row["other"] = None if cells is None or not phases else max(cells - measured, 0.0)
        row["html"] = html
        rows.append(row)
    return rows


def table(rows: list[dict], wall: float | None = None) -> str:
    """The rows as a Markdown table in seconds, with a total row (and the run's own share of ``wall``)."""
    head = "| notebook | status | total (s) | " + " | ".join(f"{c} (s)" for c in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 3)]

    def cell(v):
        return "" if v is None else f"{v:.1f}"

    for r in rows:
        parts = [r["notebook"], r["status"], *(cell(r[c]) for c in ("total", *COLUMNS))]
        lines.append("| " + " | ".join(parts) + " |")
    sums = {c: sum(r[c] or 0.0 for r in rows) for c in ("total", *COLUMNS)}
    lines.append("| all notebooks | | " + " | ".join(cell(sums[c]) for c in ("total", *COLUMNS)) + " |")
    if wall is not None:
        notebooks = sums["total"]
        rest = wall - notebooks
        lines.append(f"\nThe command: {wall:.0f} s; its notebooks {notebooks:.0f} s, set-up and index {rest:.0f} s.")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a run folder (outputs/<run-id>)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--wall", type=float, help="the command's wall seconds, measured outside it")
    args = ap.parse_args(argv)
    if not (args.run / "summary.json").exists():
        ap.error(f"run: {args.run} has no summary.json (a run folder: outputs/<run-id>)")
    rows = split(args.run)
    print(table(rows, args.wall))
    if args.json:
        data = {"run": str(args.run), "wall_s": args.wall, "notebooks": rows}
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
