"""More than two runs: run A (the first) set against each other run, pair by pair
(``pair.compare``: the same verdicts), merged into one report: per number A's value and range,
then each other run's value, range, ratio to A and verdict; the seed's tables with one column per run
(``runner.py compare A B C ...``, and ``runner.py --ray``'s fleet page).
"""

from __future__ import annotations

import json
from pathlib import Path

from ...core import results, seed_numbers
from ...core.verdicts import CHANGED
from ...pages import tables
from ..headline import seed_step
from .page import fmt_range, moved_functions, shown, tally
from .pair import compare

TABLE_KEYS_A = ("notebook", "row", "metric", "a", "a_interval", "a_q1_q3")  # of a pair's row: A's, once per line
PER_RUN = ("b", "b_interval", "b_q1_q3", "ratio", "verdict", "decided")  # of a pair's row: each other run's
_SAME = "= A"  # an entry that differs in another pair only


def compare_many(runs: list[dict]) -> dict:
    """Run A (the first of ``runs``) against each other run, pair by pair (``compare``: the same
    verdicts), merged: one line per number A and some other run hold, with A's value and, per other
    run, its value, ranges, ratio to A and verdict (None where that run lacks the number); per
    notebook where each run ran, and the parameters and environment entries that differ anywhere."""
    a, others = runs[0], runs[1:]
    pairs = [compare(a, b) for b in others]
    lines: dict[tuple, dict] = {}
    for i, pair in enumerate(pairs):
        for e in pair["rows"]:
            key = (e["notebook"], e["row"], e["metric"])
            line = lines.setdefault(key, {**{k: e[k] for k in TABLE_KEYS_A}, "others": [None] * len(pairs)})
            line["others"][i] = {k: e[k] for k in PER_RUN}
    notebooks = [n for n in a["notebooks"] if any(n in p["notebooks"] for p in pairs)]
    rows = sorted(lines.values(), key=lambda line: notebooks.index(line["notebook"]))
    return {
        "runs": [{"name": r["name"], "path": r["path"]} for r in runs],
        "notebooks": notebooks,
        "ran_on": [{"name": n, "runs": [r["ran_on"].get(n) or "not recorded" for r in runs]} for n in notebooks],
        "parameters": _differing(pairs, "parameters"),
        "environment": _differing(pairs, "environment"),
        "skipped": [f"{b['name']}: {s}" for b, p in zip(others, pairs) for s in p["skipped"]],
        "tallies": [f"{b['name']} against {a['name']}: {tally(p)}" for b, p in zip(others, pairs)],
        # per other run, each changed count of function starts with its functions' changes (``page.moved_functions``)
        "functions": [
            {"run": b["name"], "number": number, "lines": found}
            for b, p in zip(others, pairs)
            for number, found in moved_functions(p)
        ],
        "seed_tables": seed_columns_per_run(runs),
        "rows": rows,
    }


def _differing(pairs: list[dict], section: str) -> list[dict]:
    """Entries of ``section`` (parameters, environment) that differ between A and any other run:
    name, A's value and each other run's (None where that pair did not differ: the same as A)."""
    found: dict[str, dict] = {}
    for i, pair in enumerate(pairs):
        for d in pair[section]:
            entry = found.setdefault(d["name"], {"name": d["name"], "a": d["a"], "others": [_SAME] * len(pairs)})
            entry["others"][i] = d["b"]
    return list(found.values())


def seed_columns_per_run(runs: list[dict]) -> list[dict]:
    """The seed's tables (``seed_numbers.seed_tables``) with one column per run that measured the
    seed's step on a GPU (``headline.seed_step``); none without such a run."""
    merged: dict[str, dict] = {}
    shown_runs = [r for r in runs if seed_step(r["notebooks"].get(results.EXECUTOR_TIMING) or {})]
    for i, run in enumerate(shown_runs):
        for t in seed_numbers.seed_tables(run["notebooks"][results.EXECUTOR_TIMING].get("rows") or []):
            title = t["title"].replace(" and here", " and each run")
            table = merged.setdefault(
                title,
                {
                    "title": title,
                    "columns": [t["columns"][0], t["columns"][1]]
                    + [t["columns"][2].replace("here", r["name"], 1) for r in shown_runs],
                    "rows": {},
                },
            )
            for label, seed, here, _ in t["rows"]:
                table["rows"].setdefault(label, [label, seed] + [None] * len(shown_runs))[2 + i] = here
    return [{**t, "rows": list(t["rows"].values())} for t in merged.values()]


def _range(entry: dict, side: str) -> str:
    """A run's interval for a number, else its q1-q3 (so marked); blank where it has neither."""
    if entry.get(f"{side}_interval"):
        return fmt_range(entry[f"{side}_interval"])
    return f"q1-q3 {fmt_range(entry[f'{side}_q1_q3'])}" if entry.get(f"{side}_q1_q3") else ""


def many_columns(report: dict) -> list[str]:
    """The wide table's headers: row, metric, A's value and range, then per other run its value,
    range, ratio to A and verdict."""
    a, others = report["runs"][0]["name"], [r["name"] for r in report["runs"][1:]]
    return [
        "row",
        "metric",
        a,
        f"{a} range",
        *(f"{b}{s}" for b in others for s in ("", " range", f" / {a}", " verdict")),
    ]


def many_cells(line: dict) -> list:
    """One line of the wide table (``many_columns``), a verdict beyond the spread marked."""
    cells = [line["row"], line["metric"], line["a"], _range(line, "a")]
    for o in line["others"]:
        if o is None:
            cells += [None, None, None, "not in this run"]
        else:
            cells += [
                o["b"],
                _range(o, "b"),
                o["ratio"],
                tables.Cell(o["decided"], "differs" if o["verdict"] == CHANGED else ""),
            ]
    return cells


def many_text(report: dict) -> str:
    """The N-run report as plain text: the runs, where each notebook ran, what differs, skipped
    items, the wide table and one tally per other run."""
    names = [r["name"] for r in report["runs"]]
    lines = [f"{'A: ' if i == 0 else ''}{r['name']}: {r['path']}" for i, r in enumerate(report["runs"])]
    lines.append("ran on (" + " | ".join(names) + "):")
    lines += [f"  {d['name']}: {' | '.join(d['runs'])}" for d in report["ran_on"]]
    for title, items in (
        ("parameters that differ", report["parameters"]),
        ("environment that differs", report["environment"]),
    ):
        lines.append(f"{title}:" + ("" if items else " none"))
        lines += [f"  {d['name']}: {' | '.join(shown(v) for v in [d['a'], *d['others']])}" for d in items]
    if report["skipped"]:
        lines.append("skipped: " + "; ".join(report["skipped"]))
    header = ["notebook", *many_columns(report)]
    body = [
        [line["notebook"], *(tables.number(c.value if isinstance(c, tables.Cell) else c) for c in many_cells(line))]
        for line in report["rows"]
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *body]]
    for f in report.get("functions", []):
        lines += [
            f"functions whose starts changed, {f['run']} against A, {f['number']}:",
            *(f"  {x}" for x in f["lines"]),
        ]
    return "\n".join([*lines, *report["tallies"]])


def many_html(report: dict, title: str | None = None, status=None) -> str:
    """The N-run page (``templates/compare_many.html.j2``): ``status`` (a fleet's table of tasks)
    first, where each notebook ran, what differs, the seed's tables, skipped items, then one wide
    table per notebook."""
    names = [r["name"] for r in report["runs"]]

    def differing(items):
        rows = [[d["name"], *(shown(v) for v in [d["a"], *d["others"]])] for d in items]
        return tables.html_table(rows, ["name", *names]) if rows else None

    return str(
        tables.render(
            "compare_many.html.j2",
            title=title or f"latency-lab compare: {' vs '.join(names)}",
            runs=report["runs"],
            status=status,
            tallies=report["tallies"],
            differences=[
                (
                    "Ran on",
                    tables.html_table([[d["name"], *d["runs"]] for d in report["ran_on"]], ["notebook", *names]),
                ),
                ("Parameters that differ", differing(report["parameters"])),
                ("Environment that differs", differing(report["environment"])),
            ],
            seed_tables=[tables.html_table(t) for t in report["seed_tables"]],
            skipped=report["skipped"],
            functions=report.get("functions", []),
            notebooks=[(nb, _many_table(report, nb)) for nb in report["notebooks"]],
        )
    )


def _many_table(report: dict, notebook: str):
    """The wide table of ``notebook``'s numbers (lines with one beyond the spread marked); None
    where it has none (its results hold no metric, as 01's)."""
    lines = [line for line in report["rows"] if line["notebook"] == notebook]
    if not lines:
        return None
    beyond = ["beyond" if any(o and o["verdict"] == CHANGED for o in line["others"]) else "" for line in lines]
    return tables.html_table([many_cells(line) for line in lines], many_columns(report), row_classes=beyond)


def write_many(report: dict, folder: Path) -> tuple[Path, Path]:
    """The N-run page and its JSON as ``compare-A-vs-B-vs-C`` (``compare-A-vs-N-runs`` when the
    names would make too long a file name) in ``folder``."""
    names = [r["name"] for r in report["runs"]]
    stem = "compare-" + "-vs-".join(names)
    if len(stem) > 200:
        stem = f"compare-{names[0]}-vs-{len(names) - 1}-runs"
    folder.mkdir(parents=True, exist_ok=True)
    page, data = folder / f"{stem}.html", folder / f"{stem}.json"
    results.write_atomic(page, many_html(report))
    results.write_atomic(data, json.dumps(report, indent=1, default=str))
    return page, data
