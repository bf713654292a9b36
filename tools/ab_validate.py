#!/usr/bin/env python
"""How well ``runner.py ab`` tells builds apart at its defaults, from whole runs: run it many times and keep
every run's records, then re-derive every number reported about it from those records.

    python tools/ab_validate.py run --runs 20 --out benchmarks/ab/cpu-2026-12-06 -- --preset tiny
    python tools/ab_validate.py run --runs 5 --out benchmarks/ab/h100-2026-12-06 -- -p planted_pct=[1,2,5]
    python tools/ab_validate.py report benchmarks/ab/cpu-2026-12-06 benchmarks/ab/h100-2026-12-06

``run`` starts ``runner.py ab --b-env LATENCY_LAB_SAME_BUILD=1`` (B is A: a second A/A, read as a B with
its gate; ``--no-b``: ``runner.py --notebooks 08``, the controls alone) ``--runs`` times, each a fresh
run with fresh workers, passing on what follows ``--``; it keeps
each run's notebook-08 results (every worker's every block) as ``run-*.json.xz`` with its wall seconds and where
they went (``tools/time_split.py``: the kernel's start, builds, rounds, profiling, ending the workers, the rest).
``report`` reads those files alone and prints, per device and planted size: detection (called slower),
coverage (the interval holds the planted size), the A/A false-call rate (A' and B against A), how often
the gate withheld B, the sizes detected 50% and 90% of the time, the half-widths, the spread between
processes, and seconds per run (``--json`` writes the same as data).
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import time_split  # noqa: E402

SAME_BUILD = ["--b-env", "LATENCY_LAB_SAME_BUILD=1"]
NO_CHANGE = ("B vs A", "A' vs A (A/A control)")  # B is A in these runs: a call of either is a false one


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="ab-validate-") as tmp:
            t0 = time.perf_counter()
            how = ["--notebooks", "08"] if args.no_b else ["ab", *SAME_BUILD]
            cmd = [sys.executable, str(ROOT / "runner.py"), *how, "--output-dir", tmp, "--run-id", "r"]
            done = subprocess.run([*cmd, *args.rest], cwd=ROOT, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            found = Path(tmp) / "r" / "08_ab_builds.results.json"
            if not found.is_file():
                failures += 1
                print(f"run {i + 1}: no results (exit {done.returncode}): {(done.stderr or done.stdout)[-600:]}")
                continue
            data = json.loads(found.read_text())
            split = time_split.split(Path(tmp) / "r")  # the kernel's start, its phases, the rest, the HTML
            data["validation"] = {"wall_s": seconds, "exit": done.returncode, "args": args.rest, "split": split}
            name = out / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{i + 1:02d}.json.xz"
            name.write_bytes(lzma.compress(json.dumps(data).encode()))
            rows = [r for r in key_rows(data) if r["metric"] == "host_ms"]
            print(
                f"run {i + 1}: {seconds:.0f} s · " + " · ".join(f"{r['comparison']}: {r['verdict']}" for r in rows),
                flush=True,
            )
    return 1 if failures else 0


def key_rows(data: dict) -> list[dict]:
    table = data["key_table"]
    return [dict(zip(table["columns"], r)) for r in table["rows"]]


def load(folders: list[str]) -> list[dict]:
    runs = []
    for f in folders:
        for path in sorted(Path(f).glob("run-*.json.xz")):
            data = json.loads(lzma.decompress(path.read_bytes()))
            data["file"] = str(path)
            runs.append(data)
    return runs


def device_of(data: dict) -> str:
    env = data.get("environment") or {}
    gpu = env.get("gpu") or {}
    return gpu.get("name") or f"cpu: {env.get('cpu')}, {env.get('cpu_count')} cores"


def stop_kind(data: dict) -> str:
    """Why a run stopped adding rounds, in a word or three."""
    reason = (data.get("stopping") or {}).get("reason") or "no rounds"
    for start, kind in (("resolved", "resolved"), ("the next", "budget"), ("more rounds cannot help", "spread")):
        if reason.startswith(start):
            return kind
    return reason


def quantile(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = int(pos)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)


def machine_of(data: dict) -> str:
    """The machine a run ran on: its host's name as the run recorded it (a fresh device machine has its own)."""
    return (data.get("environment") or {}).get("machine") or "?"


def per_machine(mine: list[dict]) -> dict:
    """Per machine: its runs, B's host-time half-widths (median and widest), the false calls of A' and B, and each
    planted size detected and covered."""
    out = {}
    for machine in sorted({machine_of(r) for r in mine}):
        rows = [x for r in mine if machine_of(r) == machine for x in key_rows(r) if x["metric"] == "host_ms"]
        b = [x["resolution_pct"] for x in rows if x["comparison"] == "B vs A" and x.get("resolution_pct") is not None]
        controls = [c for r in mine if machine_of(r) == machine for c in r["controls"]]
        out[machine] = {
            "runs": sum(machine_of(r) == machine for r in mine),
            "b_half_width_pct_median": statistics.median(b) if b else None,
            "b_half_width_pct_widest": max(b) if b else None,
            "false_calls": sum(
                x["verdict"].startswith("changed")
                for x in rows
                if x["comparison"] in ("B vs A", "A' vs A (A/A control)")
            ),
            "planted": {
                f"{pct:g}": [sum(c["detected"] for c in cs), sum(c["covered"] for c in cs), len(cs)]
                for pct in sorted({c["planted_pct_asked"] for c in controls})
                if (cs := [c for c in controls if c["planted_pct_asked"] == pct])
            },
        }
    return out


# what a run's seconds went on: the builds' split (08's ``stopping.builds``), then the rounds, the rest of 08 and of
# the command (``tools/time_split.py``'s row for 08 and the wall time outside it)
SPLIT = ("started_s", "built_s", "sized_s", "first_call_s")


def where_seconds_went(runs: list[dict]) -> dict:
    """Medians over ``runs`` of what their seconds went on, each where every run recorded it: the builds' split,
    08's phases (rounds, profile, close and the rest of its cells) and the command's seconds outside 08."""
    rows = []
    for r in runs:
        row = dict((r.get("stopping") or {}).get("builds") or {})
        nb = next((x for x in (r["validation"].get("split") or []) if x["notebook"] == "08_ab_builds"), None)
        if nb:
            row |= {k: nb.get(k) for k in ("start", "rounds", "profile", "close", "other")}
            row["outside_08_s"] = r["validation"]["wall_s"] - nb["total"]
        rows.append(row)
    keys = [*SPLIT, "start", "rounds", "profile", "close", "other", "outside_08_s"]
    return {k: statistics.median(x[k] for x in rows) for k in keys if all(x.get(k) is not None for x in rows) and rows}


def summary(runs: list[dict]) -> dict:
    """Every reported number, per device and per machine, from the runs' own records."""
    out = {}
    for device in sorted({device_of(r) for r in runs}):
        mine = [r for r in runs if device_of(r) == device]
        controls = [c for r in mine for c in r["controls"]]
        rows = [x for r in mine for x in key_rows(r) if x["metric"] == "host_ms"]
        aa = [x for x in rows if x["comparison"].startswith("A' vs A") and x.get("p") is not None]
        bb = [x for x in rows if x["comparison"] == "B vs A"]
        sizes = {}
        for pct in sorted({c["planted_pct_asked"] for c in controls}):
            cs = [c for c in controls if c["planted_pct_asked"] == pct]
            sizes[f"{pct:g}"] = {
                "runs": len(cs),
                "planted_pct_median": statistics.median(c["planted_pct"] for c in cs),
                "detected": sum(c["detected"] for c in cs),
                "covered": sum(c["covered"] for c in cs),
                "detected_and_covered": sum(c["detected"] and c["covered"] for c in cs),
                "error_pp_median": statistics.median(c["error_pp"] for c in cs),
            }
        # the size a run detects: its estimate's error and half-width say where "estimate - half-width > 0" starts
        margins = [
            (c["found_pct"] - c["found_lo_pct"]) - c["error_pp"] for c in controls if c.get("found_lo_pct") is not None
        ]
        halves = [x["resolution_pct"] for x in rows if x.get("resolution_pct") is not None]
        b_halves = [x["resolution_pct"] for x in bb if x.get("resolution_pct") is not None]
        out[device] = {
            "runs": len(mine),
            "b_half_width_pct": {"median": statistics.median(b_halves), "widest": max(b_halves)} if b_halves else None,
            "machines": per_machine(mine),
            "seconds_per_run": {
                "median": statistics.median(r["validation"]["wall_s"] for r in mine),
                "max": max(r["validation"]["wall_s"] for r in mine),
            },
            "where_the_seconds_went": where_seconds_went(mine),
            "workers_per_arm": sorted({r["params"]["workers"] for r in mine}),
            "rounds_median": statistics.median(r["stopping"]["rounds"] for r in mine if r.get("stopping")),
            "resolved": sum(bool(r.get("stopping", {}).get("resolved")) for r in mine),
            "stopped_because": {
                why: sum(stop_kind(r) == why for r in mine) for why in sorted({stop_kind(r) for r in mine})
            },
            "aa_called": sum(x["verdict"].startswith("changed") for x in aa),
            "aa_numbers": len(aa),
            "b_is_a_called": sum(x["verdict"].startswith("changed") for x in bb),
            "b_not_judged": sum(x["verdict"].startswith("not judged") for x in bb),
            "b_numbers": len(bb),
            "planted": sizes,
            "size_detected_50pct": quantile(margins, 0.5),
            "size_detected_90pct": quantile(margins, 0.9),
            "half_width_pct_median": statistics.median(halves) if halves else None,
            "between_sd_pct_median": statistics.median(
                x["between_sd_pct"] for x in aa if x.get("between_sd_pct") is not None
            )
            if aa
            else None,
        }
    return out


def report(args: argparse.Namespace) -> int:
    s = summary(load(args.folders))
    for device, d in s.items():
        print(
            f"{device}: {d['runs']} runs, {d['workers_per_arm']} core slots, "
            f"{d['seconds_per_run']['median']:.0f} s per run (max {d['seconds_per_run']['max']:.0f}), "
            f"median {d['rounds_median']:.0f} rounds, resolved in {d['resolved']}; "
            "stopped: " + ", ".join(f"{k} {n}" for k, n in d["stopped_because"].items())
        )
        print(
            f"  A/A (A' vs A) called changed: {d['aa_called']} of {d['aa_numbers']}; B = A called changed: "
            f"{d['b_is_a_called']} of {d['b_numbers']} (not judged: {d['b_not_judged']})"
        )
        for pct, x in d["planted"].items():
            print(
                f"  planted {pct}% (in the rounds {x['planted_pct_median']:.2g}%): "
                f"detected {x['detected']} of {x['runs']}, "
                f"covered {x['covered']} of {x['runs']}, both {x['detected_and_covered']}; "
                f"median error {x['error_pp_median']:+.2g} pp"
            )
        print(
            f"  size detected 50% of the time {d['size_detected_50pct']:.2g}%, 90% {d['size_detected_90pct']:.2g}%; "
            f"median half-width ±{d['half_width_pct_median']:.2g}%, "
            f"spread between slots (A' vs A) {d['between_sd_pct_median']:.2g}% (SD)"
        )
        if d["where_the_seconds_went"]:
            print("  seconds (medians): " + ", ".join(f"{k} {v:.3g}" for k, v in d["where_the_seconds_went"].items()))
        if d["b_half_width_pct"]:
            b = d["b_half_width_pct"]
            print(f"  B vs A (host): half-width median ±{b['median']:.2g}%, widest ±{b['widest']:.2g}%")
        for machine, m in d["machines"].items():
            planted = ", ".join(f"{pct}%: detected {x[0]}, covered {x[1]} of {x[2]}" for pct, x in m["planted"].items())
            widths = (
                f"B ±{m['b_half_width_pct_median']:.2g}% median, ±{m['b_half_width_pct_widest']:.2g}% widest"
                if m["b_half_width_pct_median"] is not None
                else "no B"
            )
            print(f"  machine {machine}: {m['runs']} runs, {widths}, false calls {m['false_calls']}; {planted}")
    if args.json:
        Path(args.json).write_text(json.dumps(s, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run runner.py ab --runs times, keeping each run's records")
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--out", required=True, help="folder for run-*.json.xz")
    r.add_argument("--no-b", action="store_true", help="runner.py --notebooks 08: the controls alone, no B")
    r.add_argument("rest", nargs=argparse.REMAINDER, help="after --: runner.py's arguments")
    p = sub.add_parser("report", help="every number, re-derived from the kept runs")
    p.add_argument("folders", nargs="+")
    p.add_argument("--json", help="write the summary here too")
    args = ap.parse_args(argv)
    if args.command == "run":
        args.rest = [a for a in args.rest if a != "--"]
        return run(args)
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
