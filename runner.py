#!/usr/bin/env python
"""Run the latency-lab notebooks headlessly (papermill, real kernel) into ``outputs/<run-id>/``.

    python runner.py                          # every notebook, seed preset, automatic device
    python runner.py --preset tiny            # small model of the same architecture (CPU tests)
    python runner.py --notebooks 01,02 -p cache_mode=static -p executors=eager,thunder
    python runner.py --list                   # notebooks and their parameters
    python runner.py compare RUN_A RUN_B      # two runs side by side (ids, paths or latest)

Each run writes executed notebooks, HTML, one results JSON per notebook, environment.json,
summary.json and index.html; ``outputs/latest`` points at the newest run. Invalid parameters are
rejected before any notebook starts; a failing notebook is marked in the index and the others run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path

if __name__ == "__main__":  # a Python without the suite's packages hands over to .venv (tasks.py)
    import tasks

    tasks.use_suite_python(__file__, sys.argv[1:])

from latency_lab import environment, notebook_run, report
from latency_lab.params import SCHEMA, ParameterError, parse_value, validate


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="seed", help="model preset: seed (default) or tiny")
    ap.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N")
    ap.add_argument("--notebooks", help="comma list of numbers or names, e.g. 01,02 (default: all)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                    help="set a notebook parameter; VALUE is a Python literal or a plain string (repeatable)")
    ap.add_argument("--output-dir", default="outputs", help="folder that holds the runs (default: outputs)")
    ap.add_argument("--run-id", help="name of the run folder (default: timestamp-preset-device)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a single cell may run (default: 1800)")
    ap.add_argument("--notebook-dir", default=str(notebook_run.NOTEBOOK_DIR), help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="list notebooks and their parameters, then exit")
    return ap.parse_args(argv)


def parse_overrides(pairs: list[str]) -> dict:
    values = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ParameterError("-p", pair, "NAME=VALUE with NAME one of " + ", ".join(SCHEMA))
        values[name.strip()] = parse_value(text)
    return values


def list_notebooks(notebooks: dict[str, Path]) -> None:
    for name, path in notebooks.items():
        print(name)
        for pname, info in notebook_run.declared_parameters(path).items():
            print(f"    {pname:12s} = {info['default']:<12s} {info.get('help') or SCHEMA.get(pname, ('', ''))[1]}")


def new_run_dir(root: Path, run_id: str | None, preset: str, device: str) -> Path:
    """A fresh run folder; an existing one is never reused."""
    root.mkdir(parents=True, exist_ok=True)
    if run_id:
        path = root / run_id
        if path.exists():
            raise FileExistsError(f"invalid --run-id {run_id!r}: {path} exists and runs are never overwritten")
        path.mkdir()
        return path
    base = f"{datetime.now():%Y%m%d-%H%M%S}-{preset}-{device.replace(':', '')}"
    for n in range(1, 1000):
        path = root / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run folder for {base} in {root}")


def point_latest(root: Path, run_dir: Path) -> None:
    link, tmp = root / "latest", root / ".latest.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        notebooks = notebook_run.select(notebook_run.discover(Path(args.notebook_dir)), args.notebooks)
        if args.list:
            list_notebooks(notebooks)
            return 0
        overrides = parse_overrides(args.param)
        values = {"preset": args.preset, "device": args.device, **overrides}
        declared = {name: notebook_run.declared_parameters(path) for name, path in notebooks.items()}
        known = set().union(*declared.values())
        for name in overrides:
            if name == "output_dir":
                raise ParameterError(name, overrides[name], "no value: the runner sets it; use --output-dir")
            if name not in known:
                raise ParameterError(name, overrides[name], "parameters of the selected notebooks: " + ", ".join(sorted(known)))
        params = validate(values)
        if not notebooks:
            raise ValueError(f"no notebooks found in {args.notebook_dir}")
        run_dir = new_run_dir(Path(args.output_dir), args.run_id, params.preset, params.device)
    except (ValueError, FileExistsError) as e:
        print(f"runner.py: error: {e}", file=sys.stderr)
        return 2

    started, t0 = datetime.now().isoformat(timespec="seconds"), time.perf_counter()
    env = environment.collect(params.device)
    (run_dir / "environment.json").write_text(json.dumps(env, indent=1))
    tty = sys.stderr.isatty()
    kernel = notebook_run.kernel_name()
    print(f"run {run_dir} · {len(notebooks)} notebooks · device {params.device} · kernel {kernel}", flush=True)
    outcomes = []
    for i, (name, path) in enumerate(notebooks.items(), 1):
        print(f"[{i}/{len(notebooks)}] {name} ...", flush=True)
        given = {k: v for k, v in values.items() if k in declared[name]}
        outcome = notebook_run.execute(path, run_dir, {**given, "output_dir": str(run_dir.resolve())},
                                       kernel, args.timeout, progress=tty)
        detail = "" if outcome.status == "ok" else f": {outcome.error['ename']}: {str(outcome.error['evalue'])[:300]}"
        print(f"[{i}/{len(notebooks)}] {name} {outcome.status} in {outcome.seconds:.1f} s{detail}", flush=True)
        outcomes.append(outcome)

    meta = {"run_id": run_dir.name, "started": started, "seconds": round(time.perf_counter() - t0, 1),
            "command": shlex.join([Path(sys.executable).name, "runner.py", *(argv if argv is not None else sys.argv[1:])]),
            "device": params.device, "parameters": {"given": values, "resolved": params.to_dict()}, "environment": env}
    summary = report.summarize(run_dir, meta, outcomes)
    report.write(run_dir, summary)
    point_latest(Path(args.output_dir), run_dir)
    failed = [n["name"] for n in summary["notebooks"] if n["status"] != "ok"]
    print(f"{'FAILED: ' + ', '.join(failed) if failed else 'all ok'} · {summary['seconds']} s · {run_dir / 'index.html'}")
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:  # python runner.py compare RUN_A RUN_B (latency_lab/compare.py)
        from latency_lab import compare

        sys.exit(compare.main(sys.argv[2:]))
    sys.exit(main())
