"""``runner.py``'s command line: the parsers of a run, of ``ab``, ``bisect`` and ``publish`` (``compare.parser`` is
compare's own), with their help and exit statuses. Every option, output file and error: docs/cli.md."""

from __future__ import annotations

import argparse

from ..core.parameters import MAX_VALUE_CHARS, SCHEMA, ParameterError, clip, parse_value, short
from . import notebook_run, report
from .run_folder import SetupError

SETTABLE = [name for name in SCHEMA if name != "output_dir"]  # output_dir: the runner sets it (--output-dir)
EXIT_FAILED, EXIT_SETUP = 1, 2  # a notebook or an executor row failed; bad input or output folder (EXIT_HELP)

RUN_HELP = """Run the latency-lab notebooks headlessly (papermill, real kernel) into ``outputs/<run-id>/``.

    python runner.py                          # every notebook, seed preset, automatic device
    python runner.py --preset tiny            # small model of the same architecture (CPU tests)
    python runner.py --notebooks 01,02 -p cache_mode=static -p executors=eager,thunder
    python runner.py --list                   # notebooks and their parameters
    python runner.py ab --b-path ~/src/lightning-thunder   # two builds in the same rounds (notebook 08)
    python runner.py bisect --repo PATH --good REV --bad REV   # which commit (or --package release) moved it
    python runner.py compare RUN_A RUN_B      # two runs side by side (ids, paths or latest)
    python runner.py publish RUN DEST         # a small copy of a run to commit or send
    python runner.py --ray [ADDRESS]          # on a Ray cluster: one run folder per GPU type, one fleet page

Each run writes executed notebooks, HTML, one results JSON per notebook, environment.json,
summary.json and index.html; ``outputs/latest`` points at the last usable run. Invalid parameters are
rejected before any notebook starts; a failing notebook is marked in the index and the others run.
"""

EXIT_HELP = """exit status: 0 every notebook and row ok; 1 a notebook or an executor row failed, or a file could
not be written (the run completes); 2 bad input or output folder (nothing written); 130, 143, 129
interrupted by Ctrl-C, SIGTERM, SIGHUP. Every option, output file and error: docs/cli.md."""


def run_parser() -> argparse.ArgumentParser:
    """``runner.py``'s own options (a run of the notebooks)."""
    ap = argparse.ArgumentParser(
        description=RUN_HELP, epilog=EXIT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--preset", help="model preset: seed (default) or tiny")
    ap.add_argument("--device", help="auto (default: CUDA when present), cpu, cuda, cuda:N")
    ap.add_argument("--notebooks", help="comma list of numbers or names, e.g. 01,02 (default: all)")
    ap.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a notebook parameter; VALUE is a Python literal or a plain string (repeatable)",
    )
    ap.add_argument("--output-dir", default="outputs", help="folder that holds the runs (default: outputs)")
    ap.add_argument("--run-id", help="name of the run folder, a plain name (default: timestamp-preset-device)")
    ap.add_argument(
        "--compile-cache",
        choices=("run", "default"),
        default="run",
        help="run (default): Inductor's cache and nvFuser's kernel DB fresh per run, shared by its "
        "notebooks; default: the tools' own (Inductor's machine-wide cache, no kernel DB)",
    )
    _placement_options(ap)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds a single cell may run, > 0 (default: 1800)")
    ap.add_argument("--notebook-dir", default=str(notebook_run.NOTEBOOK_DIR), help=argparse.SUPPRESS)
    ap.add_argument("--list", action="store_true", help="list notebooks and their parameters, then exit")
    return ap


def _placement_options(ap: argparse.ArgumentParser) -> None:
    """Where a run's notebooks run: side by side on GPUs (``--gpus``) or CPU cores (``--cpu-slots``), or on
    a Ray cluster (``--ray``, ``--accelerators``, ``--runtime-env``)."""
    ap.add_argument(
        "--gpus",
        metavar="0,1,2,3|all",
        help="run the notebooks side by side, one GPU each: each kernel sees only its GPU and is pinned "
        "to its share of the CPU cores; a notebook that reads another's results starts after it. "
        "One GPU chosen: one after another on it. On a CPU (--device cpu, or no GPU) or a machine "
        "with one GPU it changes nothing (default: one after another on --device)",
    )
    ap.add_argument(
        "--cpu-slots",
        type=int,
        default=1,
        metavar="N",
        help="on a CPU run: N notebooks side by side, each kernel pinned to its share of the physical cores; "
        "quicker, but their timings then share caches and memory: for checks, not for numbers to quote "
        "(default 1: one after another)",
    )
    ap.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on a Ray cluster: each notebook one task per GPU type, one GPU each; ADDRESS: HOST:PORT, "
        "ray://HOST:PORT or auto (none: RAY_ADDRESS, else a cluster running here, else Ray started here). "
        "One run folder per type and a fleet page side by side (needs latency-lab[cluster])",
    )
    ap.add_argument(
        "--accelerators",
        metavar="H100,H200,L40S",
        help="with --ray: the GPU types to run on, as Ray names them (accelerator_type:<T>; default: every "
        "type the cluster has)",
    )
    ap.add_argument("--runtime-env", metavar="FILE", help="with --ray: a JSON file, Ray's runtime_env for the tasks")


AB_HELP = """Notebook 08 on two builds of the stack, timed in the same rounds by K worker processes each.

Build A is this environment unless --a, --a-path or --a-env say otherwise; build B is what --b,
--b-path and --b-env give (at least one of them). Every other argument is runner.py's own and applies
to both builds alike (--preset, --device, -p executors=..., -p layers=..., -p planted_pct=[1,5],
--run-id, --output-dir). Example:

    python runner.py ab --b-path ~/src/lightning-thunder -p executors=thunder
    python runner.py ab --b ~/venvs/nightly/bin/python --b-env NVFUSER_DISABLE=kernel_reuse
    python runner.py ab --b-path ~/src/lightning-thunder --resolve 1% --budget 180s --workers 8

Each build runs in K worker processes (an arm), beside the controls: A' (K more workers of A, the A/A
control) and A behind a planted delay of twice the target. Rounds are added until B's interval is as
narrow as --resolve, the budget ends, or only more workers could help. B's verdict is "not judged"
when the controls fail. The method: docs/method.md.
"""


def ab_parser() -> argparse.ArgumentParser:
    """``runner.py ab``'s own options (the builds); the rest are ``run_parser``'s."""
    ap = argparse.ArgumentParser(
        prog="runner.py ab",
        description=AB_HELP,
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    ap.add_argument(
        "--resolve",
        metavar="PCT%",
        help="stop adding rounds once B's interval is this narrow on each side, e.g. 1%% (default: 1%% on a GPU, "
        "5%% on a CPU; -p resolve_pct)",
    )
    ap.add_argument(
        "--budget",
        metavar="SECONDS[s]",
        help="seconds in all, builds included, e.g. 120s (default: 120 on a GPU, 180 on a CPU; -p budget_s)",
    )
    ap.add_argument(
        "--workers",
        metavar="K",
        help="core slots, a worker of every arm on each (default: GPU the cores less one up to 12; CPU 4; -p workers)",
    )
    for side in ("a", "b"):
        ap.add_argument(f"--{side}", metavar="PYTHON", help=f"build {side.upper()}'s interpreter (a venv's bin/python)")
        ap.add_argument(
            f"--{side}-path",
            action="append",
            default=[],
            metavar="FOLDER",
            help="first on its module path (repeatable)",
        )
        ap.add_argument(
            f"--{side}-env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a variable of its process (repeatable)",
        )
    return ap


BISECT_HELP = """The first build between a good and a bad one whose step moved: each step times the midpoint
against the current good and bad builds in the same rounds (notebook 08's workers, A/A control and
stopping rule; bad must read changed against good) and never guesses.

    python runner.py bisect --repo ~/src/lightning-thunder --good v0.2.5 --bad main -p executors=thunder
    python runner.py bisect --package transformers --good 4.44.0 --bad 4.51.3 -p cache_mode=none

Every other argument is runner.py's own (--preset, --device, -p executors=ONE, -p ...,
--output-dir, --run-id). Writes bisect.html and bisect.json into outputs/<run-id>/; the same command
run again resumes from the steps kept in the cache (~/.cache/latency-lab).
"""


def bisect_parser() -> argparse.ArgumentParser:
    """``runner.py bisect``'s own options (the range and the stopping rule); the rest are ``run_parser``'s."""
    ap = argparse.ArgumentParser(
        prog="runner.py bisect",
        description=BISECT_HELP,
        epilog="exit status: 0 the bisection ended (found, or why not); 2 bad input (nothing timed); 130 interrupted "
        "(the steps done are kept). Every option: docs/cli.md.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--repo", metavar="PATH", help="a git checkout: its commits from --good to --bad")
    where.add_argument("--package", metavar="NAME", help="a package on the index: its releases from --good to --bad")
    ap.add_argument("--good", required=True, metavar="REV|VERSION", help="the last build known good")
    ap.add_argument("--bad", required=True, metavar="REV|VERSION", help="a build known bad, after --good")
    ap.add_argument("--resolve", metavar="PCT%", help="per step, as runner.py ab's (-p resolve_pct)")
    ap.add_argument("--budget", metavar="SECONDS[s]", help="per step, builds included (-p budget_s)")
    ap.add_argument("--workers", metavar="K", help="worker processes per build (-p workers)")
    ap.add_argument(
        "--no-counts",
        action="store_true",
        help="time every midpoint (default: a midpoint counted like one end, where the ends' counts differ, takes "
        "its side untimed)",
    )
    return ap


def publish_parser() -> argparse.ArgumentParser:
    """``runner.py publish``'s options (its help: ``report.publish``'s docstring)."""
    ap = argparse.ArgumentParser(
        prog="runner.py publish",
        description=report.publish.__doc__,
        epilog="exit status: 0 published; 2 a run that cannot be published or a DEST that exists (nothing written). "
        "Example: python runner.py publish outputs/latest outputs/reference-h100",
    )
    ap.add_argument("run", nargs="+", help="a run folder (or outputs/latest); several: one suite run in parts")
    ap.add_argument("dest", help="a new folder, e.g. outputs/reference-h100")
    ap.add_argument(
        "--incomplete",
        action="store_true",
        help="publish a run that was interrupted or has notebooks or rows that are not ok",
    )
    return ap


def parse_overrides(pairs: list[str]) -> dict:
    """``-p NAME=VALUE`` pairs as values: each name once, each value at most ``MAX_VALUE_CHARS`` long."""
    values = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParameterError("-p", pair, "NAME=VALUE with NAME one of " + ", ".join(SETTABLE))
        if len(text) > MAX_VALUE_CHARS:
            raise ParameterError(name, text, f"a value of at most {MAX_VALUE_CHARS:,} characters")
        if name in values:
            raise ParameterError(
                name, parse_value(text), f"one -p {clip(name, 60)}: it is given twice (first {short(values[name], 40)})"
            )
        values[name] = parse_value(text)
    return values


def run_values(args: argparse.Namespace) -> dict:
    """The parameters given: ``--preset`` / ``--device`` and ``-p``; the two spellings of one
    parameter must agree."""
    values = parse_overrides(args.param)
    for name in ("preset", "device"):
        flag = getattr(args, name)
        if flag is not None and name in values and values[name] != flag:
            raise SetupError(
                f"--{name} {clip(flag, 60)} and -p {name}={clip(str(values[name]), 60)} disagree: give one"
            )
        if name not in values:
            values[name] = flag or SCHEMA[name][0]
    return values
