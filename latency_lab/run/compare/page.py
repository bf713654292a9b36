"""The two-run comparison as text and as a page: its table (``TABLE``), a tally of what it found
(``tally``), the plain-text report (``text``), the HTML page (``to_html``) and both written beside
each other (``write``). The report is ``pair.compare``'s.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from collections import Counter
from pathlib import Path

from ...core import results, run_to_run, verdicts
from ...instruments import counts
from ...pages import tables

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


COUNTS_JUDGED = "kernel counts and the step's counts"  # what compare judges without run-to-run effects: exactly


def judged_with(report: dict) -> str:
    """How the numbers were judged: the false-discovery control over all of them, and the minimum
    effects per kind (or why only counts were judged)."""
    effects, where = report.get("effects") or {}, report.get("effects_source") or {}
    multiple, out = report.get("multiple"), ""
    if multiple and multiple["judged"]:
        out += (
            f" {multiple['judged']} numbers judged at once: held to {100 * multiple['false_discovery_rate']:.0f}% "
            f"false discoveries ({multiple['method']}), which kept {multiple['held']} from reading changed."
        )
    if effects:
        kinds = ", ".join(f"{k} {100 * v['min_effect']:.2g}%" for k, v in effects.items() if " · " not in k)
        own = sorted({k.split(" · ")[1] for k in effects if " · " in k})
        pairs, folder = where.get("pairs", "?"), where.get("source", "?")
        out += (
            f" Minimum effects (measured from {pairs} same-tree run pairs, {folder}): {kinds}; {COUNTS_JUDGED} exact"
            + (f"; {', '.join(own)} with effects of their own where measured." if own else ".")
        )
    elif (report.get("machines") or {}).get("apart"):
        out += f" No effects were measured across machines of this device: only {COUNTS_JUDGED} are judged."
    else:
        out += f" No same-tree run pairs were measured on this device: only {COUNTS_JUDGED} are judged."
    return out


def next_step(stack: list[str]) -> str:
    """What a user can do about runs on other stacks: on one device, time both builds in one run
    (``runner.py ab``); on two devices, nothing holds their times against each other."""
    if any(d.split(" ", 1)[0] in ("device", "gpu.name") for d in stack):
        return "the runs ran on different devices, whose times no run can hold against each other"
    return "time both builds in one run on one machine: runner.py ab"


def tally(report: dict) -> str:
    """What the comparison found, in a few sentences: how many numbers changed (higher or lower in B),
    stayed the same, could not be compared or judged, the minimum effects judged with, and the
    resolution."""
    numbers = [e for e in report["rows"] if e["metric"] not in ("status", "grade")]
    count = {v: sum(e["verdict"] == v for e in numbers) for v in verdicts.WORDS}
    higher = sum(e["verdict"] == verdicts.CHANGED and e["b"] > e["a"] for e in numbers)
    status = sum(e["metric"] == "status" and e["verdict"] == verdicts.CHANGED for e in report["rows"])
    status_apart = sum(e["metric"] == "status" and e["verdict"] == verdicts.NOT_COMPARABLE for e in report["rows"])
    grades = [e for e in report["rows"] if e["metric"] == "grade"]
    regraded = sum(e["verdict"] == verdicts.CHANGED for e in grades)
    out = (
        f"{len(numbers)} numbers: {count['changed']} changed ({higher} higher in B, {count['changed'] - higher} "
        f"lower), {count['same']} same, {count['not comparable']} not comparable, {count['not judged']} not judged"
        f"{f'; {status} rows changed status' if status else ''}"
        f"{f'; {status_apart} rows differ in status, not compared' if status_apart else ''}"
        f"{f'; {regraded} of {len(grades)} grades of the seed claims changed' if grades else ''}."
    )
    if report.get("hosts"):
        out += f" Host-bound numbers not judged where {'; '.join(report['hosts'])}."
    if (report.get("machines") or {}).get("apart"):
        out += f" The runs' machines: {report['machines']['apart']}."
    if report.get("stack"):
        out += f" Not comparable: another stack ({'; '.join(report['stack'])}); {next_step(report['stack'])}."
    elif report.get("parameters"):
        differ = ", ".join(f"{d['name']} in {', '.join(d['notebooks'])}" for d in report["parameters"])
        out += f" Not comparable where parameters differ: {differ}."
    noisy = sum(e.get("decided", "").startswith("too noisy") for e in numbers)
    if noisy:
        out += f" {noisy} not judged as too noisy: an interval wider than {100 * run_to_run.NOISY:.3g}% of its value."
    if report.get("stack"):
        return out  # nothing was judged: no minimum effect or resolution applies
    out += judged_with(report)
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


SHOWN_CHANGED = 15  # changed numbers the short report prints, largest move first (``--all``: every row)
SHOWN_FUNCTIONS = 5  # functions the short report names per changed count of function starts (``--all``: all kept)


def terminal_width() -> int:
    """The terminal's columns (``COLUMNS`` where set; 100 where there is no terminal)."""
    return shutil.get_terminal_size((100, 24)).columns


def clip(line: str, width: int) -> str:
    """``line`` cut to ``width`` characters, ``…`` marking a cut."""
    return line if len(line) <= width else line[: width - 1] + "…"


def move(entry: dict) -> float:
    """A changed number's move as a share of A's value (a count's too), for ordering: largest first."""
    a, b = entry["a"], entry["b"]
    return abs(b - a) / abs(a) if a else float("inf")


def changed(report: dict) -> list[dict]:
    """The changed numbers (and changed statuses), largest move first."""
    found = [e for e in report["rows"] if e["verdict"] == verdicts.CHANGED]
    return sorted(found, key=lambda e: -move(e) if isinstance(e["a"], (int, float)) else float("inf"))


def function_changes(entry: dict, most: int | None = None) -> list[str]:
    """The functions whose starts changed in a changed count of function starts, largest first
    (``counts.function_lines``; at most ``most``), then how many more changed; none for another number."""
    found = counts.function_lines(entry.get("functions") or {})[:most]
    more = (entry.get("functions_changed") or 0) - len(found)
    return found + ([f"… {more} more functions changed"] if found and more > 0 else [])


def moved_functions(report: dict) -> list[tuple[str, list[str]]]:
    """Per changed count of function starts (notebook · executor), its functions' changes (``function_changes``)."""
    return [(f"{e['notebook']} · {e['row']}", function_changes(e)) for e in changed(report) if e.get("functions")]


def groups(report: dict) -> list[tuple[str, int]]:
    """The numbers not compared or not judged, grouped by their reason (a number's own figures cut
    off): (verdict and reason, how many), most first."""
    found = Counter()
    for e in report["rows"]:
        if e["verdict"] in (verdicts.NOT_COMPARABLE, verdicts.NOT_JUDGED):
            found[reason_group(e["decided"])] += 1
    return found.most_common()


def reason_group(decided: str) -> str:
    """A verdict's text without what is particular to its number (its own move, p and interval)."""
    for cut in (": B higher", ": B lower", ", p ", " (A "):
        if cut in decided:
            decided = decided.split(cut)[0]
    return decided


def warnings(report: dict) -> list[str]:
    """One line per results file or record that could not be read, in either run."""
    return [
        f"warning: run {side} ({report[side.lower()]['name']}): could not read {u}"
        for side, found in (report.get("unreadable") or {}).items()
        for u in found
    ]


def header(report: dict) -> list[str]:
    """What was compared: the runs, their machines and stacks, where they ran, what differs."""
    a, b, m = report["a"], report["b"], report.get("machines") or {}
    lines = [f"A: {a['name']} ({a['path']})", f"B: {b['name']} ({b['path']})"]
    lines.append(f"machines: {m['apart']}" if m.get("apart") else f"machines: the same ({m.get('a')})")
    lines.append(f"stacks: differ: {'; '.join(report['stack'])}" if report.get("stack") else "stacks: the same")
    where: dict[str, list[str]] = {}
    for d in report["ran_on"]:
        where.setdefault(f"{d['a']} -> {d['b']}", []).append(d["name"])
    lines.append("ran on: " + "; ".join(f"{w} ({', '.join(names)})" for w, names in where.items()))
    params = report["parameters"]
    lines.append(
        "parameters that differ: "
        + (
            "; ".join(f"{d['name']} {shown(d['a'])} -> {shown(d['b'])} ({len(d['notebooks'])})" for d in params)
            or "none"
        )
    )
    env = report["environment"]
    lines.append(f"environment that differs: {', '.join(d['name'] for d in env) or 'none'}")
    return lines


def text(report: dict, every_row: bool = False, width: int | None = None) -> str:
    """The report as plain text, each line at most ``width`` (the terminal's) long: warnings, what was
    compared, the tally, the changed numbers (largest first, at most ``SHOWN_CHANGED``), then one line
    per group of numbers not compared or not judged and the skipped items' count. ``every_row``: every
    difference, skipped item and row in full (the table)."""
    width = width or terminal_width()
    said = [part for w in warnings(report) for part in textwrap.wrap(w, width, subsequent_indent="  ")]
    lines = [*said, *header(report), ""]
    lines += textwrap.wrap(tally(report), width)
    found = changed(report)
    shown_changed = found if every_row else found[:SHOWN_CHANGED]
    lines += ["", f"changed ({len(found)}, largest first):" if found else "changed: none"]
    for e in shown_changed:
        lines.append(
            f"  {e['notebook']} · {e['row']} · {e['metric']}: {cell(e, 'a')} -> {cell(e, 'b')} ({e['decided']})"
        )
        lines += [f"    {f}" for f in function_changes(e, None if every_row else SHOWN_FUNCTIONS)]
    if len(found) > len(shown_changed):
        lines.append(f"  … {len(found) - len(shown_changed)} more: --all prints every row")
    for reason, n in groups(report):
        lines.append(f"{n} {reason}")
    if report["skipped"]:
        lines.append(
            f"skipped: {len(report['skipped'])} (rows, metrics or notebooks in one run only; --all lists them)"
        )
    if every_row:
        lines += ["", "parameters that differ:"]
        lines += [
            f"  {d['name']}: {shown(d['a'])} -> {shown(d['b'])}  ({', '.join(d['notebooks'])})"
            for d in report["parameters"]
        ]
        lines += ["environment that differs:"] + [
            f"  {d['name']}: {shown(d['a'])} -> {shown(d['b'])}" for d in report["environment"]
        ]
        lines += ["skipped:"] + [f"  {s}" for s in report["skipped"]]
        lines += ["", *table_lines(report)]
    return "\n".join(line if every_row else clip(line, width) for line in lines)


def table_lines(report: dict) -> list[str]:
    """Every row of the report as an aligned text table (``TABLE``)."""
    header_ = [h for h, _ in TABLE]
    body = [[cell(e, k) for _, k in TABLE] for e in report["rows"]]
    widths = [max(len(r[i]) for r in [header_, *body]) for i in range(len(header_))]
    return [
        "  ".join(c.rjust(w) if 3 <= i < len(r) - 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in [header_, *body]
    ]


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
            warnings=warnings(report),
            header=header(report),
            changed=entries_table(changed(report), with_notebook="notebook") if changed(report) else None,
            functions=moved_functions(report),
            groups=groups(report),
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
