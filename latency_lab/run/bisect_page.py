"""A bisection's outcome in words (``outcome``: culprit confirmed, regression confirmed with no culprit found,
or not confirmed, as ``bisect.conclusion`` read it), its builds in order and its steps as tables, its
sentences, the page (``templates/bisect.html.j2``, the outcome at its top) and the JSON, written side by side
(``write``). The data is ``bisect.run``'s.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core import results
from ..pages import tables
from .bisect import CONFIRMED, NO_CULPRIT, NOT_CONFIRMED
from .bisect_counts import COUNTED

TITLE_CHARS = 48  # a commit's subject line, clipped in the builds table


def name(data: dict, i: int) -> str:
    return data["builds"][i]["name"]


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def signed(x: float) -> str:
    """A change in %, 3 significant figures, without an exponent."""
    return f"{x:+.0f}" if abs(x) >= 1000 else f"{x:+.3g}"


def interval(c: dict | None) -> str:
    if c is None or c.get("change_pct") is None:
        return ""
    if c["lo_pct"] is None:
        return signed(c["change_pct"])
    return f"{signed(c['change_pct'])} ({signed(c['lo_pct'])} to {signed(c['hi_pct'])})"


def against(c: dict | None, data: dict, i: int) -> str:
    """A change and its interval against build ``i``, or nothing where none was measured."""
    return f"{interval(c)} vs {name(data, i)}" if interval(c) else ""


def outcome(data: dict) -> dict:
    """The bisection's outcome (``data["outcome"]``, ``bisect.conclusion``) with its sentence, the builds the
    first bad one may be (``among``: the bracket's, skipped ones between) and how sure a confirmed culprit is:
    a wrong turn needs a false call, at most 1 - confidence per step (Bonferroni over the steps)."""
    o, lo, hi = data["outcome"], data["good"], data["bad"]
    n = sum(s["role"] != COUNTED for s in data["steps"])  # a step decided by counts makes no false call
    sure = max(0.0, 1 - n * (1 - data["confidence"]))  # every timing a chance of a false call
    out = {**o, "among": [name(data, i) for i in range(lo + 1, hi + 1)], "sure_pct": 100 * sure}
    ends = f"the ends {interval(o['ends'])}% ({name(data, -1)} against {name(data, 0)}, step 0)"
    if o["call"] == CONFIRMED:
        out["text"] = (
            f"Culprit confirmed: {o['found']} ({data['builds'][hi]['title']}), {interval(o['verified'])}% against "
            f"its parent {name(data, lo)} in fresh workers; {ends}. Sure at {out['sure_pct']:.3g}% or more: "
            f"{plural(n, 'timed step')}, each a wrong turn only through a false call (at most "
            f"{100 * (1 - data['confidence']):.3g}% each)."
        )
    elif o["call"] == NO_CULPRIT:
        out["text"] = f"Regression confirmed, no culprit found: {ends}; {o['why']}."
    elif o["call"] == NOT_CONFIRMED:
        out["text"] = f"Not confirmed, nothing bisected: {o['why']}."
    else:
        out["text"] = (
            f"Interrupted after {plural(n, 'step')}: the first bad build is between {name(data, lo)} (good) and "
            f"{name(data, hi)} (bad). The same command resumes."
        )
    return out


def findings(data: dict) -> list[str]:
    """The page's and the terminal's sentences: the outcome, then the time."""
    steps = data["steps"]
    per = ", ".join(f"{s['seconds']:.0f}" for s in steps)
    counted = (data.get("counts") or {}).get("text")
    replayed = sum(bool(s.get("replayed")) for s in steps)
    again = (
        f"{plural(replayed, 'timed step')} read back from an earlier run of the same bisection, not timed now: "
        f"remove {data['state']} to time them again."
    )
    return [
        outcome(data)["text"],
        *([again] if replayed else []),
        *([f"Counts of the ends: {counted}."] if counted else []),
        f"{len(data['builds'])} {data['kind']}s from {name(data, 0)} to {name(data, -1)}; {plural(len(steps), 'step')} "
        f"({per} s), {len(data['skipped'])} skipped, {data['seconds']:.0f} s in all.",
    ]


def build_rows(data: dict) -> list[dict]:
    """Every build in order: its status, the last step that timed it (as the midpoint, or as bad against good
    alone: the ends, the culprit), and its changes against that step's good and bad builds."""
    found, last = outcome(data)["found"], len(data["builds"]) - 1
    timed = {s["bad"] if s["mid"] is None else s["mid"]: s for s in data["steps"]}
    rows = []
    for b in data["builds"]:
        i = b["index"]
        s = timed.get(i)
        if str(i) in data["skipped"]:
            status = "skipped"
        elif i <= data["good"]:
            status = "good" if i in timed or i == 0 else "good (by order)"
        elif i == data["bad"] and found:
            status = "first bad"
        elif i >= data["bad"]:
            status = "bad" if i in timed or i == last else "bad (by order)"
        else:
            status = "undecided" if i in timed else "not timed"
        if s is None:
            vs_good = vs_bad = ""
        elif s["mid"] is None:
            vs_good, vs_bad = against(s["bad_vs_good"], data, s["good"]), ""
        else:
            vs_good, vs_bad = against(s["mid_vs_good"], data, s["good"]), against(s["mid_vs_bad"], data, s["bad"])
        rows.append(
            {
                "build": b["name"],
                "title": b["title"][:TITLE_CHARS],
                "status": status,
                "step": s["step"] if s else None,
                "against good (%)": tables.Cell(vs_good, "num"),
                "against bad (%)": tables.Cell(vs_bad, "num"),
            }
        )
    return rows


def step_rows(data: dict) -> list[dict]:
    return [
        {
            "step": s["step"],
            "times": s["role"],
            "good": name(data, s["good"]),
            "M": name(data, s["mid"]) if s["mid"] is not None else "(none)",
            "bad": name(data, s["bad"]),
            "bad vs good (%)": tables.Cell(interval(s["bad_vs_good"]), "num"),
            "call": s["call"],
            "why": s["why"],
            "time (s)": s["seconds"],
        }
        for s in data["steps"]
    ]


def title(data: dict) -> str:
    return f"latency-lab bisect: {name(data, 0)} (good) to {name(data, -1)} (bad), {data['executor']}"


def text(data: dict) -> str:
    """The terminal's summary: the sentences and the builds table as lines."""
    lines = [title(data), *findings(data)]
    for r in build_rows(data):
        cells = [r["build"], r["status"], r["against good (%)"].value, r["against bad (%)"].value]
        lines.append("  " + " · ".join(c for c in cells if c))
    return "\n".join(lines)


def to_html(data: dict) -> str:
    return str(
        tables.render(
            "bisect.html.j2",
            title=title(data),
            call=data["outcome"]["call"],
            findings=findings(data),
            workers=data["params"]["workers"],
            metric="host time",
            executor=data["executor"],
            confidence=f"{100 * data['confidence']:.3g}",
            builds=tables.html_table(build_rows(data)),
            steps=tables.html_table(step_rows(data)) if data["steps"] else "no step was timed",
            skipped=[f"{name(data, int(i))}: {why}" for i, why in data["skipped"].items()],
            params=json.dumps({k: data["params"][k] for k in ("preset", "device", "executors", "resolve_pct")}),
            state=data["state"],
        )
    )


def write(data: dict, folder: Path) -> tuple[Path, Path]:
    """``bisect.html`` and ``bisect.json`` (the data with its outcome) in ``folder``."""
    page, out = folder / "bisect.html", folder / "bisect.json"
    results.write_atomic(out, json.dumps({**data, "outcome": outcome(data)}, indent=1, default=str))
    results.write_atomic(page, to_html(data))
    return page, out
