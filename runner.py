#!/usr/bin/env python
"""Run the latency-lab notebooks headlessly (papermill, real kernel) into ``outputs/<run-id>/``, and its
subcommands ``ab``, ``bisect``, ``compare`` and ``publish``. Its options and help: ``latency_lab/run/cli.py``
(``python runner.py --help``); every option, output file and error: docs/cli.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

if __name__ == "__main__":  # a Python without the suite's packages hands over to .venv (tasks.py)
    import tasks

    tasks.use_suite_python(__file__, sys.argv[1:])
    from latency_lab.run.interrupts import SIGNALS, quit_at_once  # (imports no torch)

    for _s in SIGNALS:  # until main's own, nothing made yet: one line and stop at once
        signal.signal(_s, quit_at_once)

from latency_lab.core import compile_cache, environment, parameters, planted, results
from latency_lab.core.parameters import SCHEMA, ParameterError, clip, short, validate
from latency_lab.run import (
    cli,
    fleet,
    interrupts,
    notebook_changes,
    notebook_run,
    report,
    run_folder,
    scheduler,
    subcommands,
)
from latency_lab.run.cli import EXIT_FAILED, EXIT_SETUP, SETTABLE, parse_overrides, run_values
from latency_lab.run.run_folder import SetupError, check_writable


def parse_args(argv=None) -> argparse.Namespace:
    return cli.run_parser().parse_args(argv)


def check_args(args: argparse.Namespace) -> None:
    if args.timeout <= 0:
        raise SetupError(f"invalid --timeout {args.timeout}: allowed seconds > 0")
    if args.notebooks is not None and not [t for t in args.notebooks.split(",") if t.strip()]:
        raise SetupError(
            f"invalid --notebooks {short(args.notebooks)}: allowed a comma list of numbers or names, e.g. 01,02"
        )
    if not args.output_dir.strip():
        raise SetupError("invalid --output-dir '': allowed a folder path")
    run_folder.check_run_id(args.run_id)
    fleet.check_options(args)


def list_notebooks(notebooks: dict[str, Path]) -> None:
    """Each notebook's parameters with the package's defaults (what a run injects), not the file's values."""
    for name, path in notebooks.items():
        print(name)
        defaults = parameters.notebook_defaults(name)
        for pname in (n for n in notebook_run.declared_names(path) if n in SETTABLE):
            print(f"    {pname:14s} = {defaults[pname]!r:<12} {SCHEMA[pname][1]}")


def list_quietly(notebooks: dict[str, Path]) -> int:
    """``list_notebooks``, ending quietly (0) when the reader stops early (``runner.py --list | head``)."""
    try:
        list_notebooks(notebooks)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to fail at exit
    return 0


def cache_folder(mode: str, run_dir: Path) -> Path | None:
    """The run's fresh compile-cache folder (``--compile-cache run``), or None; a folder that cannot
    be made is a setup error, and the run folder made just before is removed again (it is empty)."""
    if mode != "run":
        return None
    try:
        return compile_cache.make(run_dir.name)
    except OSError as e:
        run_dir.rmdir()
        raise SetupError(
            f"cannot make the run's compile-cache folder in {tempfile.gettempdir()}: "
            f"{e.strerror or e} (or use --compile-cache default)"
        ) from None


def ignored_by(values: dict, declared: dict[str, list[str]]) -> dict[str, list[str]]:
    """Per given parameter, the selected notebooks that do not declare it (and so ignore it)."""
    return {
        name: [nb for nb, names in declared.items() if name not in names]
        for name in values
        if any(name not in names for names in declared.values())
    }


def prepare_run(args: argparse.Namespace):
    """Everything that can be wrong with the input, checked before any notebook starts."""
    check_args(args)
    notebooks = notebook_run.select(notebook_run.discover(Path(args.notebook_dir)), args.notebooks)
    if not notebooks:
        raise SetupError(f"no notebooks found in {args.notebook_dir}")
    values = run_values(args)
    checked = fleet.checked_values(values) if args.ray is not None else values  # a GPU on the nodes, not here
    declared = {name: notebook_run.declared_names(path) for name, path in notebooks.items()}
    known = sorted(n for n in set().union(*declared.values()) if n in SETTABLE)
    for name in parse_overrides(args.param):
        if name == "output_dir":
            raise ParameterError(name, values[name], "no value: the runner sets it; use --output-dir")
        if name not in known:
            raise ParameterError(name, values[name], "parameters of the selected notebooks: " + ", ".join(known))
    params = validate(checked)
    # what each notebook runs with (its own defaults and the values given), checked before any notebook starts
    injected = {name: notebook_run.injected_parameters(name, checked, path) for name, path in notebooks.items()}
    root = run_folder.output_root(args.output_dir)
    check_writable(root, args.output_dir)
    return notebooks, values, declared, params, root, injected


def main(argv=None, typed: list[str] | None = None) -> int:
    """``runner.py``; ``typed``: the command as typed where another (``ab``) made ``argv`` from it."""
    args = parse_args(argv)
    with interrupts.Stop().installed() as stop:
        try:
            return run(args, typed if typed is not None else argv, stop)
        except interrupts.Interrupted as e:  # a second signal while the first one was handled, before the run
            return e.code


def run(args: argparse.Namespace, argv, stop: interrupts.Stop) -> int:
    """Check the input, make the run folder, run the notebooks, then finish the run (``finish``),
    whatever stopped it: a signal (``stop``), a write that failed, or the last notebook's end."""
    try:
        if args.list:
            return list_quietly(notebook_run.select(notebook_run.discover(Path(args.notebook_dir)), args.notebooks))
        notebooks, values, declared, params, root, injected = prepare_run(args)
        stop.watch(sys.stdout)  # from here a reader of a piped output that leaves stops the run
        planted.here()  # a malformed LATENCY_LAB_PLANTED stops the run here, before any folder is made
        if args.ray is not None:
            cluster = fleet.connect(args)
            stop.hold()
            run_dir, cache_root = run_folder.new_run_dir(root, args.run_id, params.preset, "ray"), None
        else:
            slots = scheduler.plan(args.gpus, params.device, cpu_slots=args.cpu_slots)
            stop.hold()  # the run folder and its cache folder are made whole; a signal meanwhile waits for arm()
            run_dir = run_folder.new_run_dir(root, args.run_id, params.preset, params.device)
            cache_root = cache_folder(args.compile_cache, run_dir)
    except ValueError as e:  # ParameterError and SetupError included
        print(f"runner.py: error: {e}", file=sys.stderr)
        return EXIT_SETUP
    except interrupts.Interrupted as e:
        print(f"runner.py: {interrupts.BEFORE_START.format(e)}", file=sys.stderr)
        return e.code
    started, t0 = datetime.now().isoformat(timespec="seconds"), time.perf_counter()
    meta = {
        "run_id": run_dir.name,
        "started": started,
        "command": shlex.join([Path(sys.executable).name, "runner.py", *(argv if argv is not None else sys.argv[1:])]),
        "device": params.device,
        "parameters": {"given": values, "resolved": {**params.to_dict(), "output_dir": str(run_dir.resolve())}},
        "compile_cache": {"mode": args.compile_cache},
    }
    if args.ray is not None:
        return run_fleet(fleet.Fleet(cluster["types"], notebooks, values, run_dir, args), stop, cluster, meta, t0)
    run_injected = {name: {**given, "output_dir": str(run_dir.resolve())} for name, given in injected.items()}
    local = LocalRun(notebooks, run_injected, params, run_dir, slots, args.timeout, meta)
    kernels = {**compile_cache.environment(cache_root), results.RUN_DIR: str(run_dir.resolve())}
    try:
        try:
            stop.arm()
            for name, skipped in ignored_by(
                {k: v for k, v in values.items() if k not in ("preset", "device")}, declared
            ).items():
                print(f"note: -p {name} is not a parameter of {', '.join(skipped)}, which run without it", flush=True)
            with notebook_run.kernel_environment(kernels):
                local.run_notebooks()
        except Exception as e:  # a write that failed (a full disk), or a bug: the run is finished all the same
            meta["stopped"] = f"{type(e).__name__}: {e}"
            if not isinstance(e, OSError):
                traceback.print_exc()
        finally:
            stop.hold()
    except interrupts.Interrupted:
        pass  # stop.received says which signal
    outcomes = scheduler.in_order(list(notebooks), local.outcomes)
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    return finish(stop, root, run_dir, cache_root, meta, outcomes)


def run_fleet(tasks: fleet.Fleet, stop: interrupts.Stop, cluster: dict, meta: dict, t0: float) -> int:
    """``--ray``: the tasks submitted and collected (``fleet.Fleet``), whatever stops them (a signal,
    an error) ending the run as ``finish`` does: the running tasks cancelled, each type's folder and
    the fleet page written; one line and the exit status. ``latest`` is left as it is."""
    import ray

    meta["ray"] = {"address": cluster["address"], "types": tasks.types}
    meta["device"] = tasks.values["device"]  # as given: each node resolves it
    types = ", ".join(tasks.types)
    print(
        f"run {tasks.dir} · {len(tasks.notebooks)} notebooks × GPU types {types} · Ray {cluster['address']}", flush=True
    )
    try:
        try:
            stop.arm()
            tasks.run()
        except Exception as e:  # a write that failed, or a bug: the run is finished all the same
            meta["stopped"] = f"{type(e).__name__}: {e}"
            if not isinstance(e, OSError):
                traceback.print_exc()
        finally:
            stop.hold()
    except KeyboardInterrupt:  # Interrupted, or the KeyboardInterrupt Ray raises in its place from ray.wait
        stop.received = stop.received or signal.SIGINT
    interrupted = stop.received and signal.Signals(stop.received).name
    tasks.cancel(interrupted or "stopped")
    meta.update(seconds=round(time.perf_counter() - t0, 1), interrupted=interrupted)
    try:
        summaries = tasks.finish(meta)
    except Exception as e:  # a full disk: what was written stays
        _say(f"runner.py: error: could not write the fleet's pages: {type(e).__name__}: {e}", file=sys.stderr)
        summaries, meta["stopped"] = [], meta.get("stopped") or str(e)
    finally:
        ray.shutdown()
    if meta.get("stopped"):
        _say(f"runner.py: error: the run stopped: {clip(meta['stopped'], 300)}", file=sys.stderr)
    if tasks.unwritten:
        _say(f"runner.py: error: could not write {', '.join(tasks.unwritten)}", file=sys.stderr)
    page = tasks.dir / "index.html"
    if interrupted:
        _say(f"INTERRUPTED ({interrupted}) · {page}")
        return 128 + stop.received
    failed = [
        f"{t} {n['name']}"
        for t, sm in zip(tasks.types, summaries)
        for n in sm["notebooks"]
        if n["status"] not in ("ok", report.UNAVAILABLE)
    ]
    rows = [
        f"{t} {n['name']}: {', '.join(n['failed_rows'])}"
        for t, sm in zip(tasks.types, summaries)
        for n in sm["notebooks"]
        if n.get("failed_rows")
    ]
    _say(
        f"{'FAILED: ' + ', '.join(failed) if failed else 'all tasks ok'}"
        f"{' · FAILED ROWS: ' + '; '.join(rows) if rows else ''} · {meta['seconds']} s · {page}"
    )
    return EXIT_FAILED if failed or rows or meta.get("stopped") or tasks.unwritten or not summaries else 0


def finish(
    stop: interrupts.Stop, root: Path, run_dir: Path, cache_root: Path | None, meta: dict, outcomes: list
) -> int:
    """The end of every run, signals held: kernels killed (after an interrupt or an error), the cut
    notebook's time and partial files kept, the compile cache removed, summary and pages written
    (each whole or not at all), ``latest`` pointed at the last usable run (``run_folder.last_usable``:
    this one, unless it wrote no results); then one line and the exit status."""
    interrupted = stop.received and signal.Signals(stop.received).name
    if interrupted or meta.get("stopped"):
        notebook_run.kill_children()
        notebook_run.settle_event_loop()
    for o in outcomes:
        if o.status == "interrupted":
            notebook_run.cut(o, run_dir, interrupted or meta.get("stopped") or "stopped")
    if cache_root:
        meta["compile_cache"].update(compile_cache.close(cache_root))
    run_folder.remove_temporaries(run_dir)  # a full disk's half-written files: their space is needed now
    summary = report.summarize(run_dir, {**meta, "interrupted": interrupted}, outcomes)
    unwritten = report.write(run_dir, summary)
    run_folder.remove_temporaries(run_dir)
    problems = [f"could not write {', '.join(unwritten)}"] if unwritten else []
    before = run_folder.latest_target(root)
    last = run_folder.last_usable(root)
    problems += filter(None, [last and run_folder.point_latest(root, last)])
    if meta.get("stopped"):
        problems.insert(0, f"the run stopped: {clip(meta['stopped'], 300)}")
    for problem in problems:
        _say(f"runner.py: error: {problem}", file=sys.stderr)
    if not run_folder.usable(run_dir):
        _say(f"note: no notebook of this run wrote results; {run_folder.latest_moved(root, before, last)}")
    page = run_dir / "index.html" if (run_dir / "index.html").is_file() else run_dir
    if interrupted:
        _say(f"INTERRUPTED ({interrupted}) · {page}")
        return 128 + stop.received
    failed = [n["name"] for n in summary["notebooks"] if n["status"] not in ("ok", report.UNAVAILABLE)]
    rows = [f"{n['name']}: {', '.join(n['failed_rows'])}" for n in summary["notebooks"] if n.get("failed_rows")]
    unavailable = [n["name"] for n in summary["notebooks"] if n["status"] == report.UNAVAILABLE]
    _say(
        f"{'FAILED: ' + ', '.join(failed) if failed else 'all notebooks ok'}"
        f"{' (' + ', '.join(unavailable) + ': nothing it measures can run here)' if unavailable else ''}"
        f"{' · FAILED ROWS: ' + '; '.join(rows) if rows else ''} · {summary['seconds']} s · {page}"
    )
    return EXIT_FAILED if failed or rows or problems else 0


def _say(text: str, file=None) -> None:
    """Print, unless the terminal is gone (a hang-up): the run folder says it all."""
    try:
        print(text, file=file or sys.stdout, flush=True)
    except OSError:
        pass


@dataclass
class LocalRun:
    """The notebooks of one run on this machine, one after another or side by side on its GPUs or
    shares of its CPU cores (``slots``); ``meta`` and ``outcomes`` are its record, kept whole when a
    signal cuts it short."""

    notebooks: dict[str, Path]
    injected: dict[str, dict]  # per notebook, the parameters it runs with (``notebook_run.injected_parameters``)
    params: parameters.Params
    run_dir: Path
    slots: list
    timeout: int
    meta: dict
    outcomes: list[notebook_run.Outcome] = field(default_factory=list)

    def run_notebooks(self) -> None:
        """Record the environment, then each notebook, its outcome added as soon as it starts."""
        from latency_lab.core import harness  # torch, once a run starts

        harness.set_threads(self.params)  # the record names the threads the notebooks set (the runner times nothing)
        environment.quiet_known_noise()  # and what they filter (the kernels inherit KINETO_LOG_LEVEL)
        self.meta["environment"] = environment.collect(self.params.device)
        results.write_atomic(self.run_dir / "environment.json", json.dumps(self.meta["environment"], indent=1))
        self.meta["notebook_changes"] = notebook_changes.changes(self.notebooks)
        for name, change in self.meta["notebook_changes"].items():
            print(f"note: {name} is not the committed notebook: {change}", flush=True)
        kernel = notebook_run.kernel_name()
        slots, count = self.slots, len(self.notebooks)
        where = (
            f"device {self.params.device}"
            if len(slots) == 1
            else f"{len(slots)} shares of the CPU cores side by side"
            if slots[0].gpu == "cpu"
            else f"GPUs {', '.join(s.gpu for s in slots)} side by side"
        )
        print(f"run {self.run_dir} · {count} notebooks · {where} · kernel {kernel}", flush=True)
        if len(slots) > 1:
            scheduler.run_side_by_side(
                self.notebooks, self.injected, slots, self.run_dir, kernel, self.timeout, self.outcomes
            )
            return
        for i, (name, path) in enumerate(self.notebooks.items(), 1):
            print(f"[{i}/{count}] {name} ...", flush=True)
            self.outcomes.append(
                notebook_run.Outcome(name, status="interrupted", gpu=slots[0].gpu, started=time.perf_counter())
            )
            with notebook_run.kernel_environment(slots[0].env), notebook_run.forwarded_progress(sys.stdout):
                o = notebook_run.execute(
                    path, self.run_dir, self.injected[name], kernel, self.timeout, progress_bar=sys.stderr.isatty()
                )
            o.gpu = slots[0].gpu
            self.outcomes[-1] = o
            detail = "" if o.status == "ok" else f": {notebook_run.error_line(o.error)}"
            print(f"[{i}/{count}] {name} {o.status} in {o.seconds:.1f} s{detail}", flush=True)


def ab(argv: list[str]) -> int:
    """``runner.py ab``: the builds from their flags (``builds.parse``: a missing interpreter or folder,
    a bad variable is exit 2 before any work), then ``main`` on notebook 08 with them as parameters."""
    args, rest = cli.ab_parser().parse_known_args(argv)
    try:
        if args.b is None and not args.b_path and not args.b_env:
            raise SetupError("give build B: --b PYTHON, --b-path FOLDER or --b-env NAME=VALUE (runner.py ab --help)")
        if "--notebooks" in rest or any(r.startswith("--notebooks=") for r in rest):
            raise SetupError("runner.py ab runs notebook 08 only: leave out --notebooks")
        specs = {side: subcommands.ab_build(args, side) for side in ("a", "b")}
        given = ["-p", f"build_a={specs['a']!r}", "-p", f"build_b={specs['b']!r}", *subcommands.ab_values(args)]
    except ValueError as e:
        print(f"runner.py ab: error: {e}", file=sys.stderr)
        return EXIT_SETUP
    return main(["--notebooks", results.AB_BUILDS, *rest, *given], typed=["ab", *argv])


if __name__ == "__main__":
    if sys.argv[1:2] == ["compare"]:  # python runner.py compare RUN_A RUN_B (latency_lab/run/compare.py)
        from latency_lab.run.compare import command as compare

        sys.exit(compare.main(sys.argv[2:]))
    if sys.argv[1:2] == ["publish"]:
        sys.exit(subcommands.publish_command(sys.argv[2:]))
    if sys.argv[1:2] == ["ab"]:
        sys.exit(ab(sys.argv[2:]))
    if sys.argv[1:2] == ["bisect"]:
        sys.exit(subcommands.bisect_command(sys.argv[2:]))
    sys.exit(main())
