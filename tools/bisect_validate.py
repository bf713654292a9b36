#!/usr/bin/env python
"""How often ``runner.py bisect`` names the commit that moved the step, and how long it takes: bisect fresh
synthetic checkouts (``tests/bisect_repo.py``: the suite's package, one commit making every step a known
share longer, at a random place) and keep each bisection's JSON; then re-derive every number from them.

    python tools/bisect_validate.py run --runs 4 --commits 16 --out benchmarks/bisect/cpu-2026-12-06 -- \\
        --preset tiny --device cpu
    python tools/bisect_validate.py report benchmarks/bisect/cpu-2026-12-06

``run`` passes what follows ``--`` to every bisection, each with an empty cache (nothing resumed).
``report`` prints, per folder: found (the planted commit named), stopped without a build, named another;
the seconds per bisection and per step; the steps per bisection (``--json``: the same as data).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import bisect_repo  # noqa: E402  (tests/: the synthetic checkout)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    failures = 0
    for i in range(args.runs):
        slow_at = rng.randrange(1, args.commits)
        # an unrunnable commit (its import broken, fixed by the next one) away from the planted one
        broken_at = (
            rng.choice([n for n in range(1, args.commits - 1) if n not in (slow_at, slow_at - 1)])
            if args.broken
            else None
        )
        with tempfile.TemporaryDirectory(prefix="bisect-validate-") as tmp:
            repo = Path(tmp) / "repo"
            commits = bisect_repo.make(repo, args.commits, slow_at=slow_at, cost=args.cost, broken_at=broken_at)
            cmd = [sys.executable, str(ROOT / "runner.py"), "bisect", "--repo", str(repo)]
            cmd += ["--good", commits[0], "--bad", commits[-1], "--output-dir", tmp, "--run-id", "r", *args.rest]
            t0 = time.perf_counter()
            env = {**__import__("os").environ, "LATENCY_LAB_CACHE": str(Path(tmp) / "cache")}
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
            seconds = time.perf_counter() - t0
            found = Path(tmp) / "r" / "bisect.json"
            if not found.is_file():
                failures += 1
                print(f"run {i + 1}: no result (exit {done.returncode}): {(done.stderr or done.stdout)[-600:]}")
                continue
            data = json.loads(found.read_text())
        data["validation"] = {"wall_s": seconds, "planted": commits[slow_at][:12], "planted_index": slow_at}
        data["validation"] |= {"commits": args.commits, "cost": args.cost, "broken_index": broken_at, "args": args.rest}
        (out / f"run-{time.strftime('%Y%m%d-%H%M%S')}-{i + 1:02d}.json").write_text(json.dumps(data, indent=1))
        got = data["outcome"]["found"]
        print(
            f"run {i + 1}: planted at {slow_at}, "
            + ("found" if got == data["validation"]["planted"] else f"named {got}")
            + f" in {seconds:.0f} s, {len(data['steps'])} steps",
            flush=True,
        )
    return 1 if failures else 0


def summary(folder: Path) -> dict:
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob("run-*.json"))]
    found = [r for r in runs if r["outcome"]["found"] == r["validation"]["planted"]]
    other = [r for r in runs if r["outcome"]["found"] not in (None, r["validation"]["planted"])]
    walls = [r["validation"]["wall_s"] for r in runs]
    steps = [s["seconds"] for r in runs for s in r["steps"]]
    return {
        "folder": folder.name,
        "runs": len(runs),
        "commits": sorted({r["validation"]["commits"] for r in runs}),
        "cost_pct": sorted({100 * r["validation"]["cost"] for r in runs}),
        "found": len(found),
        "stopped_without_a_build": sum(r["outcome"]["found"] is None for r in runs),
        "named_another": len(other),
        "stops": [r["stop"] for r in runs if r["stop"]],
        "seconds": {"min": min(walls), "median": statistics.median(walls), "max": max(walls)} if walls else None,
        "step_seconds": {"min": min(steps), "median": statistics.median(steps), "max": max(steps)} if steps else None,
        "steps": [len(r["steps"]) for r in runs],
        "args": runs[0]["validation"]["args"] if runs else None,
    }


def report(args: argparse.Namespace) -> int:
    rows = [summary(Path(f)) for f in args.folders]
    for r in rows:
        s = r["seconds"]
        print(
            f"{r['folder']}: {r['runs']} bisections of {r['commits']} commits, one {r['cost_pct']}% longer: "
            f"found {r['found']}, stopped {r['stopped_without_a_build']}, another named {r['named_another']}; "
            + (f"{s['min']:.0f}-{s['max']:.0f} s (median {s['median']:.0f}); steps {r['steps']}" if s else "")
        )
        for stop in r["stops"]:
            print(f"  stopped: {stop}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--commits", type=int, default=16)
    r.add_argument("--cost", type=float, default=0.2, help="the planted commit's share of the step (0.2: 20%%)")
    r.add_argument("--seed", type=int, default=0, help="where the planted commit goes, run after run")
    r.add_argument("--broken", action="store_true", help="also a commit whose import fails (fixed by the next)")
    r.add_argument("--out", required=True)
    r.add_argument("rest", nargs=argparse.REMAINDER)
    p = sub.add_parser("report")
    p.add_argument("folders", nargs="+")
    p.add_argument("--json")
    args = ap.parse_args()
    if args.cmd == "run":
        args.rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
        return run(args)
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
