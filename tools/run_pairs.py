#!/usr/bin/env python
"""Same-tree run pairs: what two runs of one tree differ by, per kind of number, and a test of compare's rule.

    python tools/run_pairs.py run --plan e1,e2,e3 --into benchmarks/pairs/h100 -- --notebooks 02,04
    python tools/run_pairs.py run --plan t1,p5,t2 --deadline 540 --into ... -- --notebooks 02,04
    python tools/run_pairs.py estimate benchmarks/pairs/h100 --write     # the minimum effect per kind (folders...)
    python tools/run_pairs.py pack benchmarks/pairs/h100                 # the run folders into runs.tar.xz
    python tools/run_pairs.py check benchmarks/pairs/h100                # the held-out and planted pairs

``run``: each name of ``--plan`` is one ``runner.py`` call (the arguments after ``--``) into
``INTO/<name>/``, of which the results JSON, ``environment.json`` and ``summary.json`` are kept (no
pages). A name ``p<N>`` plants a delay of N % of ``--planted-executor``'s host time (its 02 row in the
last run before it, or in ``--size-from RUN``) into that executor (``core/planted.py``): a change of
known size. ``--deadline``: seconds after which no run starts that the slowest run so far would not
finish in.

``estimate`` and ``check`` read ``INTO/plan.json`` (written before the runs: which pairs estimate, which
are held out, which carry a planted change, and the pass criteria) and judge with ``compare``:
``estimate`` measures per kind (``run_to_run.KINDS``: the kinds of number the studies of
``latency_lab/core/catalog.py`` declare) the run-to-run sigma and the minimum effect from
the estimation pairs and, with ``--write``, keeps them for this device in
``latency_lab/core/run_to_run.json``; ``check`` applies compare's rule to the held-out and planted
pairs and says whether the plan's criteria pass.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from latency_lab.core import planted, results, run_to_run  # noqa: E402
from latency_lab.run.compare import command as compare  # noqa: E402

KEPT = ("environment.json", "summary.json")
RUNS = "runs.tar.xz"  # a folder of pairs keeps its runs packed (``pack``): a GPU call carries the tree


def host_us(run: Path, executor: str) -> float | None:
    """``executor``'s host µs per step in a kept run's 02 (its row's median), or None."""
    path = run / f"{results.EXECUTOR_TIMING}{results.SUFFIX}"
    if not path.is_file():
        return None
    rows = json.loads(path.read_text()).get("rows") or []
    return next((1e3 * r["host_ms"] for r in rows if r.get("executor") == executor and r.get("host_ms")), None)


def run_one(name: str, into: Path, runner_args: list[str], env: dict) -> dict:
    """One ``runner.py`` call; its results JSON, environment and summary kept in ``into/name``."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, str(ROOT / "runner.py"), *runner_args, "--output-dir", tmp, "--run-id", name]
        rc = subprocess.call(cmd, cwd=ROOT, env={**os.environ, **env})
        made = Path(tmp) / name
        (into / name).mkdir(parents=True, exist_ok=True)
        for f in [*made.glob(f"*{results.SUFFIX}"), *(made / k for k in KEPT)]:
            if f.is_file():
                shutil.copy2(f, into / name / f.name)
    return {"name": name, "rc": rc, "seconds": round(time.perf_counter() - t0, 1)}


def plan_of(text: str) -> list[tuple[str, float | None]]:
    """``--plan``'s runs, each name with the % of host time it plants (``p<N>``: N; a plain run: None), or
    ValueError naming the form."""
    names = text.split(",")
    if "" in names or any(n.startswith("p") and not n[1:].replace(".", "", 1).isdigit() for n in names):
        raise ValueError(f"--plan {text!r}: run names, comma-separated; p<N> (N a number) plants N %")
    return [(n, float(n[1:]) if n.startswith("p") else None) for n in names]


def run_entry(name: str, pct: float | None, args, into: Path, state: dict) -> dict:
    """One run of the plan, planting ``pct`` % (None: none): run it (``run_one``), or why it was skipped;
    ``state`` carries the slowest run so far, the start and the last plain run (a planted run's size comes
    from it)."""
    left = args.deadline - (time.perf_counter() - state["t0"]) if args.deadline else None
    if left is not None and left < 1.1 * state["slowest"]:
        return {"skipped": f"{left:.0f} s left, the slowest run took {state['slowest']:.0f} s"}
    env, entry = {}, {}
    if pct is not None:
        last = state["last_plain"]
        base = host_us(into / last, args.planted_executor) if last else None  # a name, or a path
        if base is None:
            return {"skipped": "no run before it timed the planted executor"}
        us = pct / 100 * base
        env[planted.VARIABLE] = f"{args.planted_executor}={us:.3f}"
        entry = {
            "planted_executor": args.planted_executor,
            "planted_us": us,
            "planted_pct": pct,
            "sized_from": Path(last).name,
            "sized_from_host_us": base,
        }
    done = run_one(name, into, args.runner_args, env)
    state["slowest"] = max(state["slowest"], done["seconds"])
    print(f"run_pairs: {name}: rc {done['rc']}, {done['seconds']} s", flush=True)
    if pct is None and done["rc"] in (0, 1):
        state["last_plain"] = name
    return {**done, **entry}


def run(args) -> int:
    into = Path(args.into)
    into.mkdir(parents=True, exist_ok=True)
    log_path = into / "runs.json"
    log = json.loads(log_path.read_text()) if log_path.is_file() else []
    state = {
        "t0": time.perf_counter(),
        "slowest": 0.0,
        "last_plain": Path(args.size_from).resolve() if args.size_from else None,
    }
    for name, pct in args.plan:
        log.append({"name": name, **run_entry(name, pct, args, into, state), "call": args.call})
        log_path.write_text(json.dumps(log, indent=1))  # after each run: a call cut short keeps what it ran
    return 0


def pack(args) -> int:
    """The run folders of a folder of pairs into its ``RUNS`` archive (xz: a tenth of the JSON), removed."""
    folder = Path(args.folder)
    names = sorted(p.name for p in folder.iterdir() if p.is_dir())
    with tarfile.open(folder / RUNS, "w:xz") as tar:
        for name in names:
            tar.add(folder / name, arcname=name)
    for name in names:
        shutil.rmtree(folder / name)
    print(f"run_pairs: {len(names)} runs packed into {folder / RUNS}")
    return 0


_unpacked: dict[Path, tempfile.TemporaryDirectory] = {}


def runs_of(folder: Path) -> Path:
    """Where a folder of pairs keeps its run folders: the folder itself, or its ``RUNS`` archive unpacked
    once per process into a temporary folder."""
    archive = folder / RUNS
    if not archive.is_file():
        return folder
    if archive not in _unpacked:
        _unpacked[archive] = tempfile.TemporaryDirectory(prefix="run-pairs-")
        with tarfile.open(archive) as tar:
            tar.extractall(_unpacked[archive].name, filter="data")
    return Path(_unpacked[archive].name)


def load(folder: Path, name: str) -> dict:
    return compare.load_run(runs_of(folder) / name)


def ran(folder: Path, pairs: list[list[str]], what: str) -> list[list[str]]:
    """The pairs of ``pairs`` whose both runs were made (results in the folder); the others named as not run."""
    made = [p for p in pairs if all(any((runs_of(folder) / r).glob(f"*{results.SUFFIX}")) for r in p)]
    for p in pairs:
        if p not in made:
            print(f"run_pairs: {what} pair {p[0]} -> {p[1]}: not run")
    return made


def pair_rows(folder: Path, a: str, b: str, effects: dict | None) -> list[dict]:
    """``compare``'s rows of run B against run A (``effects``: the minimum effects judged with; None: the
    raw moves only)."""
    return compare.compare(load(folder, a), load(folder, b), effects=effects)["rows"]


def estimate(args) -> int:
    moves, pairs, sources, devices = [], 0, [], set()
    for folder in map(Path, args.folders):
        plan = json.loads((folder / "plan.json").read_text())
        made = ran(folder, plan["estimate"], "estimation")
        moves += [e for a, b in made for e in pair_rows(folder, a, b, {})]
        pairs += len(made)
        devices.add(plan["device"])
        here = folder.resolve()
        sources.append(str(here.relative_to(ROOT) if here.is_relative_to(ROOT) else here))
    if len(devices) != 1:
        print(f"run_pairs: error: the folders' plans name {len(devices)} devices ({', '.join(sorted(devices))})")
        return 2
    found = {**run_to_run.estimate(moves), "pairs": pairs, "source": ", ".join(sources)}
    print(json.dumps(found, indent=1))
    if args.write:
        run_to_run.write(devices.pop(), found)
        print(f"run_pairs: kept in {run_to_run.PATH}")
    return 0


def check(args) -> int:
    folder = Path(args.folder)
    plan = json.loads((folder / "plan.json").read_text())
    effects = run_to_run.effects(plan["device"])  # the measured ones of one machine, as compare judges runs of one
    held_out = ran(folder, plan["held_out"], "held-out")
    same = [e for a, b in held_out for e in pair_rows(folder, a, b, effects)]
    tally = run_to_run.tally_same(same)
    ok = bool(held_out)
    print(f"held-out same-tree pairs ({len(held_out)}): share called 'same' per kind")
    for kind, (n_same, n) in tally.items():
        passed = n_same >= plan["same_share"] * n
        ok &= passed
        print(f"  {kind}: {n_same} of {n} ({100 * n_same / n:.1f}%) {'pass' if passed else 'FAIL'}")
    print("planted pairs: the planted executor's host numbers")
    log = {r["name"]: r for r in json.loads((folder / "runs.json").read_text()) if "rc" in r}
    for a, b in ran(folder, plan["planted"], "planted"):
        if log[b].get("sized_from") != a:
            print(f"  {a} -> {b}: not a planted pair ({b} was sized from {log[b].get('sized_from')})")
            continue
        rows = [e for e in pair_rows(folder, a, b, effects) if run_to_run.planted_row(e, log[b]["planted_executor"])]
        for e in rows:
            floor = "-" if e.get("min_effect") is None else f"{100 * e['min_effect']:.2g}%"
            expected = abs(e["ratio"] - 1) >= e["min_effect"] if e.get("min_effect") is not None else None
            passed = expected is not True or (e["verdict"] == "changed" and e["ratio"] > 1)  # slower, as planted
            ok &= passed
            print(
                f"  {b} ({log[b]['planted_pct']:g}%, {log[b]['planted_us']:.3g} µs) {e['notebook']} {e['row']} "
                f"{e['metric']}: {100 * (e['ratio'] - 1):+.2f}%, min effect "
                f"{floor}: {e['decided']}"
                f"{'' if passed else '  FAIL'}"
            )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="runs of the plan, one runner.py call each")
    r.add_argument("--plan", required=True, help="run names, comma-separated; p<N>: N %% planted")
    r.add_argument("--into", required=True, help="folder of the kept runs")
    r.add_argument("--deadline", type=float, help="seconds after which no run starts that would not finish")
    r.add_argument("--planted-executor", default="thunder", help="the executor a p<N> run slows (default: thunder)")
    r.add_argument("--call", default="", help="a label of this machine call, kept per run")
    r.add_argument("--size-from", help="a kept run whose 02 sizes a p<N> run that no run of this plan precedes")
    r.add_argument("runner_args", nargs=argparse.REMAINDER, help="-- then runner.py's arguments")
    e = sub.add_parser("estimate", help="the minimum effect per kind")
    e.add_argument("folders", nargs="+", help="folders of pairs of one device, each with its plan.json")
    e.add_argument("--write", action="store_true", help="keep it in latency_lab/core/run_to_run.json")
    k = sub.add_parser("pack", help="the run folders into runs.tar.xz (after the runs)")
    k.add_argument("folder", help="a folder of pairs")
    c = sub.add_parser("check", help="the held-out and planted pairs, judged as compare judges runs of one machine")
    c.add_argument("folder", help="a folder of pairs with its plan.json")
    args = ap.parse_args(argv)
    if args.command == "run" and args.runner_args[:1] == ["--"]:
        args.runner_args = args.runner_args[1:]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "run":
            args.plan = plan_of(args.plan)
        return {"run": run, "pack": pack, "estimate": estimate, "check": check}[args.command](args)
    except (OSError, ValueError, KeyError) as e:  # a folder without plan.json or runs, a run that cannot be read
        print(f"run_pairs.py {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
