#!/usr/bin/env python
"""How well notebook 08 tells two builds apart on this machine: many trials of the A/A control and of
planted delays, and the minimum effect they give.

    python tools/ab_benchmark.py                                  # GPU: seed model, thunder
    python tools/ab_benchmark.py --preset tiny --executor thunder:torch --planted 2,10   # the CPU machine
    python tools/ab_benchmark.py ... --write-min-effect           # and keep the minimum effect as data

A **session** starts and builds the workers of build A and its twin A' once (``ab_builds.Session``);
a **trial** is one set of rounds on them (A, A', A' behind each planted delay), read as 08 reads a run.
The **minimum effect** per metric is how far A' against A landed outside its own interval, at most,
over the trials: what two workers of one build differ by beyond the sampling error a run's interval
carries, within and across sessions (0 when every A/A interval held no change). Each trial's verdicts
are judged with the minimum effect of the *other* sessions' trials (held out), so no trial judges
itself. ``--add REPORT --sessions 0`` re-reads an earlier report alone (another estimate, no GPU). Writes the
trials and the summary to ``--out``; ``--write-min-effect`` stores the minimum effect for this kind of
machine in ``latency_lab/core/min_effect.json`` (what 08 reads).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from latency_lab.core import environment, paired, parameters, results  # noqa: E402
from latency_lab.core.results import write_atomic  # noqa: E402
from latency_lab.studies import ab_builds, ab_tables  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="seed")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--executor", default="thunder", help="one executor (default: thunder)")
    ap.add_argument("--sessions", type=int, default=4, help="worker pairs started afresh (default: 4)")
    ap.add_argument("--trials", type=int, default=5, help="trials per session (default: 5)")
    ap.add_argument("--planted", default="0.5,1,2,5", help="planted delays, %% of A's host time (default: 0.5,1,2,5)")
    ap.add_argument("--repeats", type=int, help="rounds per ABBA pass of a trial (default: 08's, 60)")
    ap.add_argument("--out", default="outputs/ab-benchmark.json", help="the trials and summary (JSON)")
    ap.add_argument("--write-min-effect", action="store_true", help="store the minimum effect in min_effect.json")
    ap.add_argument("--add", metavar="REPORT", help="an earlier report of this machine: its trials count too")
    return ap.parse_args(argv)


def change_of(row: dict, min_effect: float) -> paired.Change:
    """A key-table row of 08 back as its ``paired.Change``, judged with ``min_effect``."""
    return paired.Change(
        row["metric"],
        row["a_ms"],
        row["b_ms"],
        row["ratio_x"],
        row["ratio_lo_x"],
        row["ratio_hi_x"],
        row["p"],
        row["rounds"],
        row["fast_only"],
        min_effect,
    )


def trial_record(result: ab_builds.Result, session: int, seconds: float) -> dict:
    rows = [r for r in result.table if r.get("ratio_x") is not None]
    return {
        "session": session,
        "seconds": seconds,
        "aa": {r["metric"]: r for r in rows if r["comparison"].startswith("A' vs A")},
        "costs": result.costs,
        "planted": [
            {**r, "planted_pct": c["planted_pct"], "asked_pct": c["planted_pct_asked"]}
            for r in rows
            if "planted" in r["comparison"]
            for c in result.controls
            if (c["executor"], c["comparison"]) == (r["executor"], r["comparison"])
        ],
    }


def min_effect(trials: list[dict], metric: str) -> float | None:
    """How far A' against A landed outside its own interval, at most, over ``trials`` for ``metric`` (a
    fraction; 0 when every A/A interval held no change): the part of what two workers of one build
    differ by that a run's interval does not see (its sampling error the interval already carries)."""
    rows = [t["aa"][metric] for t in trials if metric in t["aa"]]
    return max((max(0.0, r["ratio_lo_x"] - 1, 1 - r["ratio_hi_x"]) for r in rows), default=None)


def summarize(trials: list[dict], metrics: tuple[str, ...]) -> dict:
    """Per metric: the minimum effect (all trials), the A/A false calls and each planted delay's
    detections and estimate errors, every trial judged with its held-out minimum effect."""
    out = {"trials": len(trials), "seconds_per_trial": statistics.median(t["seconds"] for t in trials)}
    for metric in metrics:
        m = {"min_effect": min_effect(trials, metric), "aa_calls": 0, "aa_trials": 0, "resolution_pct": []}
        planted: dict[float, dict] = {}
        for t in trials:
            held_out = min_effect([x for x in trials if x["session"] != t["session"]], metric)
            effect = held_out if held_out is not None else 0.0
            if metric in t["aa"]:
                c = change_of(t["aa"][metric], effect)
                m["aa_trials"] += 1
                m["aa_calls"] += c.called
                m["resolution_pct"].append(100 * c.resolution)
            for r in (x for x in t["planted"] if x["metric"] == metric):
                c = change_of(r, effect)
                p = planted.setdefault(r["asked_pct"], {"trials": 0, "detected": 0, "error_pp": [], "planted_pct": []})
                p["trials"] += 1
                p["detected"] += c.called and c.ratio > 1
                p["error_pp"].append(c.change_pct - r["planted_pct"])
                p["planted_pct"].append(r["planted_pct"])
        m["resolution_pct"] = statistics.median(m["resolution_pct"]) if m["resolution_pct"] else None
        m["planted"] = {
            f"{k:g}": {
                **v,
                "planted_pct": statistics.median(v["planted_pct"]),
                "error_pp_median": statistics.median(v["error_pp"]),
                "error_pp_max": max(v["error_pp"], key=abs),
            }
            for k, v in sorted(planted.items())
        }
        out[metric] = m
    return out


def write_min_effect(summary: dict, params, env: dict, metrics, argv) -> Path:
    kind = "cuda" if params.device.startswith("cuda") else "cpu"
    data = json.loads(paired.MIN_EFFECT_FILE.read_text()) if paired.MIN_EFFECT_FILE.is_file() else {}
    data[kind] = {
        **{m: summary[m]["min_effect"] for m in metrics},
        "measured": {
            "date": datetime.now(timezone.utc).date().isoformat(),
            "machine": env.get("gpu") or env.get("cpu"),
            "trials": summary["trials"],
            "command": "python tools/ab_benchmark.py " + " ".join(argv),
            "executor": params.executors[0],
            "preset": params.preset,
        },
    }
    return write_atomic(paired.MIN_EFFECT_FILE, json.dumps(data, indent=1) + "\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    earlier = json.loads(Path(args.add).read_text()) if args.add else None
    if earlier is not None and args.sessions == 0:  # re-read alone: the machine and parameters it was made with
        params = parameters.resolved({**earlier["params"], "threads": None})  # (another machine's CPUs)
        env = earlier["environment"]
    else:
        planted = [float(x) for x in args.planted.split(",") if x.strip()]
        given = {"preset": args.preset, "device": args.device, "executors": args.executor, "planted_pct": planted}
        if args.repeats is not None:
            given["repeats"] = args.repeats
        params = parameters.for_notebook(results.AB_BUILDS, {**given, "output_dir": str(Path(args.out).parent)})
        env = environment.collect(params.device)
    metrics = ab_tables.metrics_for(params.device)
    trials = earlier["trials"] if earlier else []
    starts = earlier["summary"].get("session_start_s", []) if earlier else []
    for s in range(len(starts), len(starts) + args.sessions):
        t0 = time.perf_counter()
        with ab_builds.Session(params) as session:
            starts.append(time.perf_counter() - t0)
            for t in range(args.trials):
                t1 = time.perf_counter()
                result = session.trial(shuffle=1000 * s + t, min_effect={}, extras=False)
                trials.append(trial_record(result, s, time.perf_counter() - t1))
                aa = trials[-1]["aa"].get("host_ms") or {}
                print(f"session {s + 1} trial {t + 1}: A'/A host x{aa.get('ratio_x', float('nan')):.4f}", flush=True)
        write(args, argv, params, env, metrics, trials, starts)  # after every session: a cut run keeps it
    print(json.dumps(write(args, argv, params, env, metrics, trials, starts), indent=1))
    return 0


def write(args, argv, params, env, metrics, trials, starts) -> dict:
    """The report so far to ``--out``, and with ``--write-min-effect`` (two sessions or more, so that
    every trial is judged held out) the minimum effect."""
    summary = {**summarize(trials, metrics), "session_start_s": starts}
    report = {
        "params": params.to_dict(),
        "environment": {k: env.get(k) for k in ("gpu", "cpu", "platform", "packages")},
        "summary": summary,
        "trials": trials,
    }
    write_atomic(Path(args.out), json.dumps(report, indent=1, default=str) + "\n")
    if args.write_min_effect and len(starts) >= 2:
        print(f"minimum effect written to {write_min_effect(summary, params, env, metrics, argv)}", flush=True)
    return summary


if __name__ == "__main__":
    sys.exit(main())
