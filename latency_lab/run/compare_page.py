"""The two-run comparison as text and as a page: its table (``TABLE``), a tally of what it found
(``tally``), the plain-text report (``text``), the HTML page (``to_html``) and both written beside
each other (``write``). The report is ``compare_pair.compare``'s.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core import results, run_to_run, verdicts
from ..pages import tables

AB_HINT = (
    "Across two runs a change under that resolution is not told from what moves between them; for a change of "
    "the stack, time both builds in the same rounds: python runner.py ab --b-path FOLDER (or --b PYTHON)"
)


def shown(value) -> str:
    """A value that differs between the runs, as text: ``(none)`` where a run has none, a list of
    records (``quieted_noise``) as their names (each one's first value), else as ``tables.number``."""
    if value is None:
        return "(none)"
    if isinstance(value, list) and value and all(isinstance(v, dict) and v for v in value):
        return "; ".join(str(next(iter(v.values()))) for v in value)
    return tables.number(value)


def fmt_range(v) -> str:
    """An interval or a q1-q3 spread as ``lo-hi``; blank where none was measured."""
    return f"{tables.number(v[0])}-{tables.number(v[1])}" if v else ""


TABLE = (
    ("notebook", "notebook"),
    ("row", "row"),
    ("metric", "metric"),
    ("A", "a"),
    ("A interval", "a_interval"),
    ("A q1-q3", "a_q1_q3"),
    ("B", "b"),
    ("B interval", "b_interval"),
    ("B q1-q3", "b_q1_q3"),
    ("B / A", "ratio"),
    ("resolves ±%", "resolution"),
    ("verdict", "decided"),
)  # (header, key of a comparison row)
RANGES = ("a_interval", "a_q1_q3", "b_interval", "b_q1_q3")


def cell(entry: dict, key: str) -> str:
    """A comparison row's cell as text: numbers as ``tables.number`` prints them, spreads as ``q1-q3``,
    the resolution in %."""
    if key == "resolution":
        return "" if entry.get(key) is None else tables.number(100 * entry[key])
    return fmt_range(entry[key]) if key in RANGES else tables.number(entry[key])


def tally(report: dict) -> str:
    """What the comparison found, in a few sentences: how many numbers changed (higher or lower in B),
    stayed the same, could not be compared or judged, the minimum effects judged with, and the
    resolution."""
    numbers = [e for e in report["rows"] if e["metric"] not in ("status", "grade")]
    count = {v: sum(e["verdict"] == v for e in numbers) for v in verdicts.WORDS}
    higher = sum(e["verdict"] == verdicts.CHANGED and e["b"] > e["a"] for e in numbers)
    status = sum(e["metric"] == "status" for e in report["rows"])
    grades = [e for e in report["rows"] if e["metric"] == "grade"]
    regraded = sum(e["verdict"] == verdicts.CHANGED for e in grades)
    out = (
        f"{len(numbers)} numbers: {count['changed']} changed ({higher} higher in B, {count['changed'] - higher} "
        f"lower), {count['same']} same, {count['not comparable']} not comparable, {count['not judged']} not judged"
        f"{f'; {status} rows changed status' if status else ''}"
        f"{f'; {regraded} of {len(grades)} grades of the seed claims changed' if grades else ''}."
    )
    if report.get("hosts"):
        out += f" Host-bound numbers not judged where {'; '.join(report['hosts'])}."
    if report.get("stack"):
        out += f" Not comparable: another stack ({'; '.join(report['stack'])}); time both in one run: runner.py ab."
    elif report.get("parameters"):
        differ = ", ".join(f"{d['name']} in {', '.join(d['notebooks'])}" for d in report["parameters"])
        out += f" Not comparable where parameters differ: {differ}."
    noisy = sum(e.get("decided", "").startswith("too noisy") for e in numbers)
    if noisy:
        out += f" {noisy} not judged as too noisy: an interval wider than {100 * run_to_run.NOISY:.3g}% of its value."
    if report.get("stack"):
        return out  # nothing was judged: no minimum effect or resolution applies
    effects, where = report.get("effects") or {}, report.get("effects_source") or {}
    if effects:
        kinds = ", ".join(f"{k} {100 * v['min_effect']:.2g}%" for k, v in effects.items())
        pairs, folder = where.get("pairs", "?"), where.get("source", "?")
        out += f" Minimum effects (measured from {pairs} same-tree run pairs, {folder}): {kinds}; kernel counts exact."
    else:
        out += " No same-tree run pairs were measured on this device: only kernel counts are judged."
    resolved = sorted(e["resolution"] for e in numbers if e.get("resolution") is not None)
    if resolved:
        ab = report.get("ab_resolution_pct")
        median = 100 * resolved[len(resolved) // 2]
        out += (
            f" Resolution (the smallest move each number could be called changed by): median ±{median:.3g}%, "
            f"finest ±{100 * resolved[0]:.3g}%. {AB_HINT}"
            + (f"; this machine's 08 resolved ±{ab:.2g}% of host time within one run." if ab is not None else ".")
        )
    return out


def text(report: dict) -> str:
    """The report as plain text: differences, skipped items, then the table."""
    lines = [f"A: {report['a']['path']}", f"B: {report['b']['path']}"]
    lines.append("ran on:")
    lines += [f"  {d['name']}: {d['a']} -> {d['b']}" for d in report["ran_on"]]
    for title, items in (
        ("parameters that differ", report["parameters"]),
        ("environment that differs", report["environment"]),
    ):
        lines.append(f"{title}:" + ("" if items else " none"))
        lines += [
            f"  {d['name']}: {shown(d['a'])} -> {shown(d['b'])}"
            + (f"  ({', '.join(d['notebooks'])})" if "notebooks" in d else "")
            for d in items
        ]
    if report["skipped"]:
        lines.append("skipped: " + "; ".join(report["skipped"]))
    header = [h for h, _ in TABLE]
    body = [[cell(e, k) for _, k in TABLE] for e in report["rows"]]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    for r in [header, *body]:
        lines.append(
            "  ".join(
                c.rjust(w) if 3 <= i < len(r) - 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
    return "\n".join([*lines, tally(report)])


def entries_table(entries: list[dict], with_notebook: str | None = None, style: bool = False):
    """Comparison rows as one table (``tables.html_table``): row, metric, A and B with their
    spreads, B / A and the verdict (rows beyond the spread, or changed, marked ``beyond``);
    ``with_notebook``: the notebook first, under that header; ``style``: with the stylesheet
    (outside the pages)."""
    shown = ((with_notebook, "notebook"), *TABLE[1:]) if with_notebook else TABLE[1:]
    rows = [[tables.Cell(cell(e, k), "num") if k in RANGES else e[k] for _, k in shown] for e in entries]
    beyond = ["beyond" if e["verdict"] == verdicts.CHANGED else "" for e in entries]
    return tables.html_table(rows, [h for h, _ in shown], row_classes=beyond, style=style)


def _differences_table(items: list[dict]):
    """What differs between the runs (name, A, B and, for parameters, the notebooks); None for nothing."""
    if not items:
        return None
    notebooks = "notebooks" in items[0]
    rows = [
        [d["name"], shown(d["a"]), shown(d["b"]), *([", ".join(d["notebooks"])] if notebooks else [])] for d in items
    ]
    return tables.html_table(rows, ["name", "A", "B", *(["notebooks"] if notebooks else [])])


def to_html(report: dict) -> str:
    """A self-contained page (``templates/compare.html.j2``): differences at the top, skipped items,
    one table per notebook."""
    return str(
        tables.render(
            "compare.html.j2",
            title=f"latency-lab compare: {report['a']['name']} (A) vs {report['b']['name']} (B)",
            a=report["a"]["path"],
            b=report["b"]["path"],
            tally=tally(report),
            differences=[
                ("Ran on", _differences_table(report["ran_on"])),
                ("Parameters that differ", _differences_table(report["parameters"])),
                ("Environment that differs", _differences_table(report["environment"])),
            ],
            skipped=report["skipped"],
            notebooks=[
                (nb, entries_table([r for r in report["rows"] if r["notebook"] == nb])) for nb in report["notebooks"]
            ],
        )
    )


def write(report: dict, folder: Path) -> tuple[Path, Path]:
    """The page and its JSON as ``compare-A-vs-B`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"compare-{report['a']['name']}-vs-{report['b']['name']}"
    page, data = stem.with_suffix(".html"), stem.with_suffix(".json")
    results.write_atomic(page, to_html(report))
    results.write_atomic(data, json.dumps(report, indent=1, default=str))
    return page, data
