"""A bisection's outcome (``outcome``), its builds in order and its steps as tables, its sentences, the
page (``templates/bisect.html.j2``) and the JSON, written side by side (``write``). The data is
``bisect.run``'s.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core import results
from ..pages import tables

TITLE_CHARS = 48  # a commit's subject line, clipped in the builds table


def name(data: dict, i: int) -> str:
    return data["builds"][i]["name"]


def pair_change(data: dict, lo: int, hi: int) -> dict | None:
    """Build ``hi`` against build ``lo`` as a step timed them in the same rounds (the last such step), or None."""
    for s in reversed(data["steps"]):
        if s["mid"] == hi and s["good"] == lo:
            return s["mid_vs_good"]
        if s["mid"] is None and (s["good"], s["bad"]) == (lo, hi):
            return s["bad_vs_good"]
        if s["mid"] == lo and s["bad"] == hi and s["mid_vs_bad"]:
            return inverted(s["mid_vs_bad"])
    return None


def inverted(c: dict) -> dict:
    """A change of M against B read as B against M (ratios inverted)."""

    def inv(pct):
        return None if pct is None else 100 * (1 / (1 + pct / 100) - 1)

    return {**c, "change_pct": inv(c["change_pct"]), "lo_pct": inv(c["hi_pct"]), "hi_pct": inv(c["lo_pct"])}


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
    """The first bad build, or why there is none: ``found`` (one build), ``among`` (the builds it may be,
    skipped ones between), the sentence, the change it brings against the last good build, and how sure:
    a wrong turn needs a false call, at most 1 - confidence per step (Bonferroni over the steps)."""
    lo, hi, timed = data["good"], data["bad"], [s for s in data["steps"] if s["call"] in ("good", "bad")]
    sure = max(0.0, 1 - len(data["steps"]) * (1 - data["confidence"]))  # every timing a chance of a false call
    among = [i for i in range(lo + 1, hi + 1)]
    done = data["status"] == "complete" and data["stop"] is None and timed
    out = {"found": None, "among": [name(data, i) for i in among], "sure_pct": 100 * sure, "change": None}
    if data["status"] != "complete":
        out["text"] = (
            f"Interrupted after {len(data['steps'])} steps: the first bad build is between {name(data, lo)} "
            f"(good) and {name(data, hi)} (bad). The same command resumes."
        )
    elif not done:
        out["text"] = (
            f"No first bad build: between {name(data, lo)} (good) and {name(data, hi)} (bad), "
            f"{data['stop'] or 'no step could be timed'}."
        )
    elif len(among) == 1:
        out["found"] = name(data, hi)
        out["change"] = pair_change(data, lo, hi)
        moved = f": {interval(out['change'])}% against {name(data, lo)}" if out["change"] else ""
        out["text"] = (
            f"First bad build: {name(data, hi)} ({data['builds'][hi]['title']}){moved}. "
            f"Sure at {out['sure_pct']:.3g}% or more: {plural(len(data['steps']), 'step')}, each a wrong turn only "
            f"through a false call (at most {100 * (1 - data['confidence']):.3g}% each)."
        )
    else:
        out["text"] = (
            f"The first bad build is one of {', '.join(out['among'])}: the builds between {name(data, lo)} (good) "
            f"and {name(data, hi)} (bad) could not run (skipped)."
        )
    return out


def findings(data: dict) -> list[str]:
    """The page's and the terminal's sentences: the outcome, then the time."""
    steps = data["steps"]
    per = ", ".join(f"{s['seconds']:.0f}" for s in steps)
    return [
        outcome(data)["text"],
        f"{len(data['builds'])} {data['kind']}s from {name(data, 0)} to {name(data, -1)}; {plural(len(steps), 'step')} "
        f"({per} s), {len(data['skipped'])} skipped, {data['seconds']:.0f} s in all.",
    ]


def build_rows(data: dict) -> list[dict]:
    """Every build in order: its status, the step that timed it, and its changes against that step's good
    and bad builds."""
    found = outcome(data)
    timed = {s["mid"]: s for s in data["steps"] if s["mid"] is not None}
    rows = []
    for b in data["builds"]:
        i = b["index"]
        s = timed.get(i)
        if str(i) in data["skipped"]:
            status = "skipped"
        elif i <= data["good"]:
            status = "good" if i in timed or i == 0 else "good (by order)"
        elif i == data["bad"] and found["found"]:
            status = "first bad"
        elif i >= data["bad"]:
            status = "bad" if i in timed or i == len(data["builds"]) - 1 else "bad (by order)"
        else:
            status = "undecided" if i in timed else "not timed"
        last = len(data["builds"]) - 1
        ends = [x for x in data["steps"] if (x["good"], x["bad"]) == (0, last)]  # the range's own ends timed
        if i == last and ends:
            vs_good, vs_bad = against(ends[-1]["bad_vs_good"], data, 0), ""
        else:
            vs_good = against(s["mid_vs_good"], data, s["good"]) if s else ""
            vs_bad = against(s["mid_vs_bad"], data, s["bad"]) if s else ""
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
