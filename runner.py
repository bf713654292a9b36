#!/usr/bin/env python
"""Run the latency-lab notebooks headlessly (papermill, real kernel) into ``outputs/<run-id>/``.

    python runner.py                          # every notebook, seed preset, automatic device
    python runner.py --preset tiny            # small model of the same architecture (CPU tests)
    python runner.py --notebooks 01,02 -p cache_mode=static -p executors=eager,thunder
    python runner.py --list                   # notebooks and their parameters
    python runner.py compare RUN_A RUN_B      # two runs side by side (ids, paths or latest)
    python runner.py publish RUN DEST         # a small copy of a run to commit or send

Each run writes executed notebooks, HTML, one results JSON per notebook, environment.json,
summary.json and index.html; ``outputs/latest`` points at the newest run. Invalid parameters are
rejected before any notebook starts; a failing notebook is marked in the index and the others run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

if __name__ == "__main__":  # a Python without the suite's packages hands over to .venv (tasks.py)
    import tasks

    tasks.use_suite_python(__file__, sys.argv[1:])

from latency_lab import compile_cache, environment, notebook_changes, notebook_run, report, results
from latency_lab import params as P
from latency_lab.params import SCHEMA, ParameterError, parse_value, validate


EXIT_FAILED, EXIT_SETUP = 1, 2  # a notebook or an executor row failed; bad input or output folder
RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


class SetupError(ValueError):
    """Bad input or an unusable output folder: one line on stderr, exit 2, nothing written."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; ``code`` is the exit status (128 + signal number)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.code = 128 + signum


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", help="model preset: seed (default) or tiny")
    ap.add_argument("--device", help="auto (default: CUDA when present), cpu, cuda, cuda:N")
    ap.add_argument("--notebooks", help="comma list of numbers or names, e.g. 01,02 (default: all)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                    help="set a notebook parameter; VALUE is a Python literal or a plain string (repeatable)")
    ap.add_argument("--output-dir", default="outputs", help="folder that holds the runs (default: outputs)")
    ap.add_argument("--run-id", help="name of the run folder, a plain name (default: timestamp-preset-device)")
    ap.add_argument("--compile-cache", choices=("run", "default"), default="run",
                    help="run (default): Inductor's cache and nvFuser's kernel DB fresh per run, shared by its "
                         "notebooks; default: the tools' own (Inductor's machine-wide cache, no kernel DB)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a single cell may run, > 0 (default: 1800)")
    ap.add_argument("--notebook-dir", default=str(notebook_run.NOTEBOOK_DIR), help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="list notebooks and their parameters, then exit")
    return ap.parse_args(argv)


def parse_overrides(pairs: list[str]) -> dict:
    values = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise ParameterError("-p", pair, "NAME=VALUE with NAME one of " + ", ".join(SCHEMA))
        values[name.strip()] = parse_value(text)
    return values


def run_values(args: argparse.Namespace) -> dict:
    """The parameters given: ``--preset`` / ``--device`` and ``-p``; the two spellings of one
    parameter must agree."""
    values = parse_overrides(args.param)
    for name in ("preset", "device"):
        flag = getattr(args, name)
        if flag is not None and name in values and values[name] != flag:
            raise SetupError(f"--{name} {flag} and -p {name}={values[name]} disagree: give one")
        if name not in values:
            values[name] = flag or SCHEMA[name][0]
    return values


def check_args(args: argparse.Namespace) -> None:
    if args.timeout <= 0:
        raise SetupError(f"invalid --timeout {args.timeout}: allowed seconds > 0")
    if args.notebooks is not None and not [t for t in args.notebooks.split(",") if t.strip()]:
        raise SetupError(f"invalid --notebooks {args.notebooks!r}: allowed a comma list of numbers or names, e.g. 01,02")
    if not args.output_dir.strip():
        raise SetupError("invalid --output-dir '': allowed a folder path")
    if args.run_id is not None and (not RUN_ID.fullmatch(args.run_id) or args.run_id == "latest"):
        raise SetupError(f"invalid --run-id {args.run_id!r}: allowed a plain name of letters, digits, '.', '_', '-' "
                         "(no '/', no leading '.', not 'latest')")


def list_notebooks(notebooks: dict[str, Path]) -> None:
    """Each notebook's parameters with the package's defaults (what a run injects), not the file's values."""
    for name, path in notebooks.items():
        print(name)
        defaults = P.notebook_defaults(name)
        for pname in (n for n in declared_names(path) if n in SCHEMA):
            print(f"    {pname:14s} = {defaults[pname]!r:<12} {SCHEMA[pname][1]}")


def declared_names(path: Path) -> list[str]:
    """The parameters a notebook takes: its parameters cell's names and ``params.EVERY_NOTEBOOK``."""
    names = list(notebook_run.declared_parameters(path))
    return names + [n for n in P.EVERY_NOTEBOOK if n not in names]


def notebook_parameters(name: str, values: dict, path: Path) -> dict:
    """What the runner injects into notebook ``name``: every parameter its cell declares and any of its
    own defaults (``params.NOTEBOOK_DEFAULTS``), resolved from ``values`` and the package alone, so an
    edited parameters cell never changes a batch run. An undeclared ``EVERY_NOTEBOOK`` parameter goes
    in when given (else the notebook's setup resolves the same default itself)."""
    names = {*notebook_run.declared_parameters(path), *P.NOTEBOOK_DEFAULTS.get(name, {}),
             *(n for n in P.EVERY_NOTEBOOK if n in values)}
    return P.injected(P.for_notebook(name, values), names)


def output_root(path: str) -> Path:
    """The folder that holds the runs, created if missing; a file, a path under a file or a folder
    that cannot be written is a setup error."""
    root = Path(path)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise SetupError(f"invalid --output-dir {path!r}: it, or a folder above it, is a file") from None
    except OSError as e:
        raise SetupError(f"invalid --output-dir {path!r}: cannot create it ({e.strerror})") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise SetupError(f"invalid --output-dir {path!r}: not writable")
    return root


def new_run_dir(root: Path, run_id: str | None, preset: str, device: str) -> Path:
    """A fresh run folder inside ``root``; an existing one is never reused."""
    if run_id:
        path = root / run_id
        try:
            path.mkdir()
        except FileExistsError:
            raise SetupError(f"invalid --run-id {run_id!r}: {path} exists and runs are never overwritten") from None
        return path
    base = f"{datetime.now():%Y%m%d-%H%M%S}-{preset}-{device.replace(':', '')}"
    for n in range(1, 1000):
        path = root / (base if n == 1 else f"{base}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise SetupError(f"no free run folder for {base} in {root}")


def point_latest(root: Path, run_dir: Path) -> None:
    """``root/latest`` -> ``run_dir``, replaced atomically through a temporary link of this process's own."""
    tmp = root / f".latest.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, root / "latest")


def cache_folder(mode: str, run_dir: Path) -> Path | None:
    """The run's fresh compile-cache folder (``--compile-cache run``), or None; a folder that cannot
    be made is a setup error, and the run folder made just before is removed again (it is empty)."""
    if mode != "run":
        return None
    try:
        return compile_cache.make(run_dir.name)
    except OSError as e:
        run_dir.rmdir()
        raise SetupError(f"cannot make the run's compile-cache folder in {tempfile.gettempdir()}: "
                         f"{e.strerror or e} (or use --compile-cache default)") from None


def ignored_by(values: dict, declared: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per given parameter, the selected notebooks that do not declare it (and so ignore it)."""
    return {name: [nb for nb, names in declared.items() if name not in names]
            for name in values if any(name not in names for names in declared.values())}


def prepare_run(args: argparse.Namespace):
    """Everything that can be wrong with the input, checked before any notebook starts."""
    check_args(args)
    notebooks = notebook_run.select(notebook_run.discover(Path(args.notebook_dir)), args.notebooks)
    if not notebooks:
        raise SetupError(f"no notebooks found in {args.notebook_dir}")
    values = run_values(args)
    declared = {name: declared_names(path) for name, path in notebooks.items()}
    known = set().union(*declared.values())
    for name in parse_overrides(args.param):
        if name == "output_dir":
            raise ParameterError(name, values[name], "no value: the runner sets it; use --output-dir")
        if name not in known:
            raise ParameterError(name, values[name], "parameters of the selected notebooks: " + ", ".join(sorted(known)))
    params = validate(values)
    for name in notebooks:  # a notebook's own defaults with the given values, checked before any notebook starts
        P.for_notebook(name, values)
    root = output_root(args.output_dir)
    return notebooks, values, declared, params, root


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.list:
            list_notebooks(notebook_run.select(notebook_run.discover(Path(args.notebook_dir)), args.notebooks))
            return 0
        notebooks, values, declared, params, root = prepare_run(args)
        run_dir = new_run_dir(root, args.run_id, params.preset, params.device)
        cache_root = cache_folder(args.compile_cache, run_dir)
    except ValueError as e:  # ParameterError and SetupError included
        print(f"runner.py: error: {e}", file=sys.stderr)
        return EXIT_SETUP
    for name, skipped in ignored_by({k: v for k, v in values.items() if k not in ("preset", "device")}, declared).items():
        print(f"note: -p {name} is not a parameter of {', '.join(skipped)}, which run without it", flush=True)

    started, t0 = datetime.now().isoformat(timespec="seconds"), time.perf_counter()
    meta = {"run_id": run_dir.name, "started": started,
            "command": shlex.join([Path(sys.executable).name, "runner.py", *(argv if argv is not None else sys.argv[1:])]),
            "device": params.device,
            "parameters": {"given": values, "resolved": {**params.to_dict(), "output_dir": str(run_dir.resolve())}}}
    outcomes: list[notebook_run.Outcome] = []
    interrupted = None
    previous = {s: signal.signal(s, _raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    meta["compile_cache"] = {"mode": args.compile_cache}
    kernels = {**compile_cache.environment(cache_root), results.RUN_DIR: str(run_dir.resolve())}
    try:
        with notebook_run.kernel_environment(kernels):
            try:
                run_notebooks(notebooks, values, params, run_dir, args, meta, outcomes)
            finally:
                if cache_root:
                    meta["compile_cache"].update(compile_cache.close(cache_root))
    except Interrupted as e:
        interrupted = e
        notebook_run.kill_children()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    outcomes += [notebook_run.Outcome(name, status="not run") for name in list(notebooks)[len(outcomes):]]
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    summary = report.summarize(run_dir, {**meta, "interrupted": interrupted and str(interrupted)}, outcomes)
    report.write(run_dir, summary)
    point_latest(root, run_dir)
    if interrupted:
        print(f"INTERRUPTED ({interrupted}) · {run_dir / 'index.html'}", flush=True)
        return interrupted.code
    failed = [n["name"] for n in summary["notebooks"] if n["status"] != "ok"]
    rows = [f"{n['name']}: {', '.join(n['failed_rows'])}" for n in summary["notebooks"] if n.get("failed_rows")]
    print(f"{'FAILED: ' + ', '.join(failed) if failed else 'all notebooks ok'}"
          f"{' · FAILED ROWS: ' + '; '.join(rows) if rows else ''} · {summary['seconds']} s · {run_dir / 'index.html'}")
    return EXIT_FAILED if failed or rows else 0


def run_notebooks(notebooks, values, params, run_dir, args, meta, outcomes) -> None:
    """Each selected notebook in turn, its outcome appended to ``outcomes`` as soon as it starts."""
    P.apply_threads(params)  # the record names the threads the notebooks set (the runner itself times nothing)
    environment.quiet_known_noise()  # and what they filter (the kernels inherit KINETO_LOG_LEVEL)
    meta["environment"] = environment.collect(params.device)
    (run_dir / "environment.json").write_text(json.dumps(meta["environment"], indent=1))
    meta["notebook_changes"] = notebook_changes.changes(notebooks)
    for name, change in meta["notebook_changes"].items():
        print(f"note: {name} is not the committed notebook: {change}", flush=True)
    kernel = notebook_run.kernel_name()
    print(f"run {run_dir} · {len(notebooks)} notebooks · device {params.device} · kernel {kernel}", flush=True)
    for i, (name, path) in enumerate(notebooks.items(), 1):
        print(f"[{i}/{len(notebooks)}] {name} ...", flush=True)
        injected = notebook_parameters(name, values, path)
        outcomes.append(notebook_run.Outcome(name, status="interrupted"))
        outcomes[-1] = notebook_run.execute(path, run_dir, {**injected, "output_dir": str(run_dir.resolve())},
                                            kernel, args.timeout, progress=sys.stderr.isatty())
        o = outcomes[-1]
        detail = "" if o.status == "ok" else f": {notebook_run.error_line(o.error)}"
        print(f"[{i}/{len(notebooks)}] {name} {o.status} in {o.seconds:.1f} s{detail}", flush=True)


def _raise_interrupted(signum, frame):
    raise Interrupted(signum)


def publish(argv: list[str]) -> int:
    """``runner.py publish RUN DEST``: a small copy of a run (results, summary, environment, index)."""
    ap = argparse.ArgumentParser(prog="runner.py publish", description=report.publish.__doc__)
    ap.add_argument("run", help="a run folder (or outputs/latest)")
    ap.add_argument("dest", help="a new folder, e.g. outputs/reference-h200")
    args = ap.parse_args(argv)
    if not (Path(args.run) / "summary.json").is_file():
        print(f"runner.py publish: error: {args.run} is not a run folder (no summary.json)", file=sys.stderr)
        return EXIT_SETUP
    try:
        files = report.publish(Path(args.run), Path(args.dest))
    except FileExistsError:
        print(f"runner.py publish: error: {args.dest} exists; publish into a new folder", file=sys.stderr)
        return EXIT_SETUP
    print(f"{args.dest}: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:  # python runner.py compare RUN_A RUN_B (latency_lab/compare.py)
        from latency_lab import compare

        sys.exit(compare.main(sys.argv[2:]))
    if sys.argv[1:2] == ["publish"]:
        sys.exit(publish(sys.argv[2:]))
    sys.exit(main())
