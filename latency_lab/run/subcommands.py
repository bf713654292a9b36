"""``runner.py``'s subcommands that are not a run of notebooks: ``bisect`` (which change moved the step) and
``publish`` (a small copy of a run), and the flags ``ab`` and ``bisect`` share (``ab_values``, ``ab_build``)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from ..core.parameters import SCHEMA, ParameterError
from . import cli, report, run_folder
from .cli import EXIT_SETUP, run_values
from .run_folder import SetupError, check_writable


def ab_values(args: argparse.Namespace) -> list[str]:
    """``--resolve``, ``--budget``, ``--workers`` as ``-p`` pairs."""
    given = []
    for flag, name, unit in (("resolve", "resolve_pct", "%"), ("budget", "budget_s", "s"), ("workers", "workers", "")):
        value = getattr(args, flag)
        if value is not None:
            given += ["-p", f"{name}={ab_number(flag, value, unit)!r}"]
    return given


def ab_number(flag: str, text: str, unit: str) -> float | int:
    """``--resolve 1%``, ``--budget 180s``, ``--workers 6`` as numbers (the unit optional); the range is
    the parameter's to check."""
    body = text.strip().removesuffix(unit) if unit else text.strip()
    try:
        return int(body) if flag == "workers" else float(body)
    except ValueError:
        example = {"resolve": "1%", "budget": "180s", "workers": "6"}[flag]
        raise ParameterError(f"--{flag}", text, f"a number{' of ' + unit if unit else ''}, e.g. {example}") from None


def ab_build(args: argparse.Namespace, side: str) -> dict:
    """One side's flags as a build (``latency_lab.core.builds``), checked."""
    from latency_lab.core import builds

    env = {}
    for pair in getattr(args, f"{side}_env"):
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ParameterError(f"--{side}-env", pair, "NAME=VALUE")
        env[name] = value
    spec = {"python": getattr(args, side) or "", "path": getattr(args, f"{side}_path"), "env": env}
    try:
        return builds.parse(f"build_{side}", spec).to_dict()
    except ParameterError as e:
        if e.cause is None:
            raise
        flags = f"--{side} takes a Python interpreter, --{side}-path existing folders"
        raise SetupError(f"{e.cause} ({flags})") from None


def bisect_command(argv: list[str]) -> int:
    """``runner.py bisect``: the range, the parameters and the good and bad builds checked (exit 2 before
    any timing), then the bisection (``latency_lab.run.bisect``) into a run folder of its own; its outcome is
    the last line."""
    from . import bisect, bisect_builds, bisect_page

    args, rest = cli.bisect_parser().parse_known_args(argv)
    cands = None
    try:
        run_args = cli.run_parser().parse_args([*rest, *ab_values(args)])
        if run_args.notebooks is not None:
            raise SetupError("runner.py bisect runs notebook 08's steps only: leave out --notebooks")
        run_folder.check_run_id(run_args.run_id)
        values = run_values(run_args)
        bisect.step_params(values, {}, {})  # the values and the one executor, before any build is made
        if args.repo is not None:
            cands = bisect_builds.Commits(args.repo, args.good, args.bad)
        else:
            cands = bisect_builds.Releases(args.package, args.good, args.bad)
        need = ("torch", "transformers")
        for flag, c in (("good", cands.items[0]), ("bad", cands.items[-1])):
            try:
                why = bisect_builds.why_not(cands.build(c), values.get("cache_mode", SCHEMA["cache_mode"][0]), need)
                need = bisect_builds.imported(cands.build(c))  # bad must import what good does
            except RuntimeError as e:
                why = str(e)
            if why:
                raise SetupError(f"invalid --{flag} {c.name}: the build cannot run the step: {why}")
        params = bisect.step_params(values, cands.build(cands.items[0]), cands.build(cands.items[-1]))
        root = run_folder.output_root(run_args.output_dir)
        check_writable(root, run_args.output_dir)
        run_dir = run_folder.new_run_dir(root, run_args.run_id, f"bisect-{params.preset}", params.device)
    except (ValueError, RuntimeError) as e:
        if cands is not None:
            cands.close()
        print(f"runner.py bisect: error: {e}", file=sys.stderr)
        return EXIT_SETUP
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as Ctrl-C: the steps done are kept and written
    try:
        data = bisect.run(cands, params, by_counts=not args.no_counts)
    finally:
        cands.close()
    page, out = bisect_page.write(data, run_dir)
    print(bisect_page.text(data))
    print(f"wrote {page} and {out}")
    print(f"bisect: {bisect_page.outcome(data)['text']}")  # the outcome, the last line
    return 130 if data["status"] == "interrupted" else 0


def publish_command(argv: list[str]) -> int:
    """``runner.py publish RUN [RUN ...] DEST``: a small copy of a run, or of runs that together hold
    the suite (results, summary, environment, index)."""
    args = cli.publish_parser().parse_args(argv)
    try:
        summary, files = report.publish([Path(r) for r in args.run], Path(args.dest), allow_incomplete=args.incomplete)
    except (ValueError, OSError) as e:
        print(f"runner.py publish: error: {e}", file=sys.stderr)
        return EXIT_SETUP
    missing = report.incomplete(summary)
    print(f"published run {summary.get('run_id')} ({'; '.join(missing) if missing else 'complete'}) to {args.dest}")
    print("  " + " · ".join(f"{n['name']} {n['status']}" for n in summary["notebooks"]))
    print(
        f"  {', '.join(f.name for f in files)}: {len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.2f} MB"
    )
    if not (Path(args.dest) / "environment.json").is_file():
        print("  no environment.json: the run has no environment record")
    return 0
