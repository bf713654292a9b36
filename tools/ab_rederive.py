#!/usr/bin/env python
"""Notebook 08's A/B verdicts re-derived from kept runs (``tools/ab_validate.py run``) with the procedure that
shipped on 2026-12-06 (``old_change``: Welch over workers) and with the package's own (``paired.change`` paired
on slots, Holm over an arm's numbers: ``tables.held``), for issue 54:

    python tools/ab_rederive.py benchmarks/ab/cpu-2026-12-06 benchmarks/ab/h100-2026-12-06 [--json OUT]

Per run, executor, metric and arm against A: each procedure's change ± half-width (%), its call, and for a
planted arm whether its interval covers the planted size measured in the run (``tables.covers``); then per
folder and comparison the half-widths, the calls, and the plants detected and covered, old against new.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_validate  # noqa: E402

from latency_lab.core import paired  # noqa: E402
from latency_lab.core.rounds import Timed  # noqa: E402
from latency_lab.studies.ab import tables  # noqa: E402
from latency_lab.studies.ab.remote import A  # noqa: E402

FIELDS = ("wall_ms", "host_ms", "reference_before_ms", "reference_after_ms", "fast", "error")


def old_change(a: list[list], x: list[list], every: list[list], confidence: float) -> tuple | None:
    """The procedure it replaced (shipped 2026-12-06): per round the centre is the mean log time of every block
    of the executor in it (all arms); a worker's level the median over its rounds of log time less the centre;
    the change d the mean level of X's workers less A's, its interval Welch's t over the workers. (ratio, lo,
    hi, p); None with fewer than 2 workers in an arm."""
    centre = []
    for r in range(max(map(len, every))):
        logs = [math.log(v[r]) for v in every if r < len(v) and v[r] and v[r] > 0]
        centre.append(statistics.fmean(logs) if logs else None)

    def levels(workers):
        out = [[math.log(v) - c for v, c in zip(w, centre) if v and v > 0 and c is not None] for w in workers]
        return [statistics.median(y) for y in out if y]

    ya, yx = levels(a), levels(x)
    if len(ya) < 2 or len(yx) < 2:
        return None
    d = statistics.fmean(yx) - statistics.fmean(ya)
    va, vx = statistics.variance(ya) / len(ya), statistics.variance(yx) / len(yx)
    se = math.sqrt(va + vx)
    df = (va + vx) ** 2 / (va**2 / (len(ya) - 1) + vx**2 / (len(yx) - 1)) if se > 0 else len(ya) + len(yx) - 2
    half = paired.t_quantile(1 - (1 - confidence) / 2, df) * se
    p = 2 * (1 - paired.t_cdf(abs(d) / se, df)) if se > 0 else float(d == 0)
    return math.exp(d), math.exp(d - half), math.exp(d + half), p


def numbers(found: tuple | None, control: dict | None) -> dict | None:
    """One procedure's change as percentages, its call, and (a planted arm) whether it covers the plant."""
    if found is None or found[1] is None:
        return None
    ratio, lo, hi = found[:3]
    out = {"change_pct": 100 * (ratio - 1), "half_pct": 50 * (hi - lo), "lo_pct": 100 * (lo - 1)}
    out |= {"hi_pct": 100 * (hi - 1), "called": lo > 1 or hi < 1}
    if control:
        size, se = control["planted_pct"] / 100, control["planted_se_pct"] / 100
        out["covered"] = tables.covers(ratio, lo, hi, size, se)
        out["detected"] = out["called"] and ratio > 1
    return out


def matches(shipped: dict, old: tuple | None) -> bool:
    """Whether a shipped key-table row's interval is the old procedure's."""
    got = (shipped.get("ratio_lo_x"), shipped.get("ratio_hi_x"))
    return old is not None and None not in got and all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(got, old[1:3]))


def rederive(data: dict) -> list[dict]:
    """A run's rows: per executor, metric and arm against A, the old and the new procedure's numbers, and
    whether the shipped key table's interval is the old procedure's (``shipped_is_old``; None: no shipped row)."""
    params = SimpleNamespace(**{"planted_pct": [], "planted_ops": 0, "confidence": 0.95, **data["params"]})
    entries = {k: Timed(k, **{f: v[f] for f in FIELDS if f in v}) for k, v in data["rounds"].items()}
    timed = SimpleNamespace(entries=entries)  # what tables reads of a Rounds
    new = tables.held(timed, params)
    controls = {(c["executor"], c["comparison"]): c for c in data.get("controls") or []}
    shipped = {(r["executor"], r["comparison"], r["metric"]): r for r in ab_validate.key_rows(data)}
    rows = []
    for name in params.executors:
        workers = tables.workers_of(timed, name)
        for metric in tables.metrics_for(params.device):
            series = {}
            for _, arm, t in workers:
                series.setdefault(arm, []).append(getattr(t, metric))
            if not series.get(A):
                continue
            every = [v for group in series.values() for v in group]
            for arm in dict.fromkeys([*new.get((name, metric), {}), *series]):
                if arm == A:
                    continue
                comparison = tables.comparison_of(arm)
                control = controls.get((name, comparison)) if arm in tables.plant_labels(params) else None
                old = old_change(series.get(A, []), series.get(arm, []), every, params.confidence)
                c = new.get((name, metric), {}).get(arm)
                ship = shipped.get((name, comparison, metric))
                rows.append(
                    {
                        **{"executor": name, "metric": metric, "comparison": comparison, "arm": arm},
                        "planted_pct": control and control["planted_pct"],
                        "old": numbers(old, control),
                        "new": numbers(c and (c.ratio, c.lo, c.hi), control),
                        "new_family": c and c.family,
                        "shipped_is_old": None if ship is None else matches(ship, old),
                    }
                )
    return rows


def summarise(runs: list[dict]) -> dict:
    """Per metric and comparison over a folder's runs: half-widths (median, worst), calls, plants detected and
    covered, old against new; and how many shipped intervals the old procedure re-derives."""
    out = {}
    rows = [r for run in runs for r in run["rows"]]
    for key in dict.fromkeys((r["metric"], r["comparison"]) for r in rows):
        mine = [r for r in rows if (r["metric"], r["comparison"]) == key]
        s = {"numbers": len(mine)}
        for way in ("old", "new"):
            got = [r[way] for r in mine if r[way]]
            halves = [g["half_pct"] for g in got]
            s[way] = {
                "judged": len(got),
                "half_pct_median": statistics.median(halves) if halves else None,
                "half_pct_worst": max(halves, default=None),
                "called": sum(g["called"] for g in got),
            }
            if any(r["planted_pct"] is not None for r in mine):
                s[way] |= {k: sum(g[k] for g in got) for k in ("detected", "covered")}
                s[way]["both"] = sum(g["detected"] and g["covered"] for g in got)
        out[" · ".join(key)] = s
    shipped = [r["shipped_is_old"] for r in rows if r["shipped_is_old"] is not None]
    out["shipped_is_old"] = f"{sum(shipped)} of {len(shipped)}"
    return out


def fmt(x: dict | None) -> str:
    """One procedure's number in a few words: ``+12% ±3.9% CALLED covered``."""
    if x is None:
        return "not judged"
    tail = (" covered" if x["covered"] else " NOT covered") if "covered" in x else ""
    called = "CALLED" if x["called"] else "same"
    return f"{paired.pct(x['change_pct'], '+')}% ±{paired.pct(x['half_pct'])}% {called}{tail}"


def both(old: dict, new: dict, key: str) -> str:
    """A half-width, old → new."""
    return " → ".join("-" if x[key] is None else f"±{paired.pct(x[key])}%" for x in (old, new))


def report(folders: list[str], json_out: str | None = None) -> dict:
    """Print every run's rows and each folder's summary; write them as data to ``json_out`` too."""
    result = {}
    for folder in folders:
        runs = [{"file": Path(d["file"]).name, "rows": rederive(d)} for d in ab_validate.load([folder])]
        result[folder] = {"runs": runs, "summary": summarise(runs)}
        print(f"== {folder}: {len(runs)} runs (old: Welch over workers → new: paired on slots, Holm)")
        for run in runs:
            print(f"  {run['file']}")
            for r in run["rows"]:
                mark = "  (shipped interval differs from old)" if r["shipped_is_old"] is False else ""
                print(f"    {r['metric']:<8}{r['arm']:<18} old {fmt(r['old']):<32} → new {fmt(r['new'])}{mark}")
        print(f"  summary ({result[folder]['summary']['shipped_is_old']} shipped intervals re-derived by old):")
        for key, s in result[folder]["summary"].items():
            if key == "shipped_is_old":
                continue
            o, n = s["old"], s["new"]
            line = f"    {key:<36} half-width median {both(o, n, 'half_pct_median')}, worst "
            line += f"{both(o, n, 'half_pct_worst')}; called {o['called']} → {n['called']} of {s['numbers']}"
            if "covered" in o and "covered" in n:
                line += f"; detected {o['detected']} → {n['detected']}, covered {o['covered']} → {n['covered']}"
                line += f", both {o['both']} → {n['both']}"
            print(line)
    if json_out:
        Path(json_out).write_text(json.dumps(result, indent=1) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", help="folders of run-*.json.xz")
    ap.add_argument("--json", help="write the rows and summaries here too")
    args = ap.parse_args(argv)
    report(args.folders, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
