"""Compare two runs: ``python runner.py compare RUN_A RUN_B``; or more: ``compare RUN_A RUN_B RUN_C ...``.

A run is a folder of ``<notebook>.results.json`` files (``environment.json`` and ``summary.json``
beside them are used when present: the environment, and where each notebook ran), named by its id
under ``--output-dir``, by a path, or ``latest`` (the last usable run there: one interrupted after some
notebooks finished compares on those).
Per notebook both runs hold, per row (executor; op, size and executor in the op benchmarks) and
metric (the vocabulary's names: ``metrics.is_metric``), B against A by one rule (``run_to_run.judge``):
**changed** when B's move is beyond chance given both runs' intervals and the run-to-run spread measured
for that kind of number, and beyond that kind's measured minimum effect; **same** otherwise. A count is
exact, on another machine too: kernels per step, and the step's counted work in 02 and 05 (Python function
starts and C calls, kernels launched, CUDA runtime calls, device allocations: ``changed: +2 per step (+0.4%
of A)``, naming the functions whose starts changed; **not judged** where a run could not count it, or its
steps n and n + 1 differed). **Not comparable** when the runs did not measure the same thing: another
stack (device, GPU, Python, torch, Thunder, nvFuser, transformers), other parameters of that notebook,
or a headline over the host's fast blocks in one run and over all blocks in the other. The parameters and
environments that differ come first. Rows, metrics and notebooks found in one run only, and files that
cannot be read, are listed as skipped.
The report is printed and written as ``compare-<A>-vs-<B>.html`` and ``.json`` beside the runs, in the
folder that holds RUN_B (RUN_A's when B is a published copy), or into ``--out``: never into a run.

With more than two runs (``many``), A is set against each other run as above, and the pairs
are merged into one page: per number A's value and range, then each other run's value, range, ratio
to A and verdict; the seed's tables get one column per run (``runner.py --ray``'s fleet page).
"""

# This module reads the run folders and runs the command (its docstring is the command's --help). The
# parts live beside it: rows (a notebook's rows, each number read as a metrics.Stat),
# pair (the rule, two runs), page (the two-run report as text and HTML) and
# many (more than two runs). Callers use them through this module's names (__all__).

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ...core import results
from .. import run_folder, scheduler
from .many import compare_many, many_text, write_many
from .page import entries_table, tally, text, to_html, write
from .pair import CompareError, ab_resolution, compare, resolution

__all__ = [  # pair's and page's names callers use as compare.<name>, and this module's
    "CompareError",
    "ab_resolution",
    "compare",
    "resolution",
    "entries_table",
    "tally",
    "text",
    "to_html",
    "write",
    "load_run",
    "main",
    "parser",
    "ran_on",
    "report_folder",
    "resolve_run",
    "resolve_runs",
    "two_runs",
]


def resolve_run(name: str, output_dir: Path) -> Path:
    """The folder of a run given as a path, a run id under ``output_dir`` or ``latest``: the last usable
    run there (``run_folder.last_usable``, where the runner points its ``latest`` link)."""
    if name == run_folder.LATEST:
        if last := run_folder.last_usable(output_dir):
            return last.resolve()
        raise CompareError(f"no run for {name!r}: no run folder under {output_dir} holds a *{results.SUFFIX} file")
    for candidate in (output_dir / name, Path(name)):
        if candidate.is_dir():
            return candidate.resolve()
    raise CompareError(f"run {name!r} not found (neither a folder nor a run id under {output_dir})")


def two_runs(name_a: str, name_b: str, output_dir: Path) -> tuple[Path, Path]:
    """The folders of runs A and B (``resolve_run``): two runs, not one folder named twice (by a
    link such as ``latest`` too)."""
    a, b = resolve_run(name_a, output_dir), resolve_run(name_b, output_dir)
    if a == b:
        raise CompareError(f"run A {name_a!r} and run B {name_b!r} are the same folder ({a}): give two runs")
    return a, b


def resolve_runs(names: list[str], output_dir: Path) -> list[Path]:
    """The folders of the runs named (``resolve_run``), none twice; two runs as ``two_runs`` says it."""
    if len(names) == 2:
        return list(two_runs(*names, output_dir))
    paths = [resolve_run(n, output_dir) for n in names]
    for i, path in enumerate(paths):
        if path in paths[:i]:
            first = names[paths.index(path)]
            raise CompareError(f"runs {first!r} and {names[i]!r} are the same folder ({path}): give each run once")
    return paths


def load_run(path: Path) -> dict:
    """A run's results per notebook, its environment and its parameters."""
    found = sorted(path.glob(f"*{results.SUFFIX}"))
    if not found:
        what = "no notebook of that run finished" if run_folder.is_run(path) else "not a run folder"
        raise CompareError(f"{path} holds no *{results.SUFFIX} file: {what}")
    notebooks, unreadable = {}, []
    for f in found:
        try:
            notebooks[f.name[: -len(results.SUFFIX)]] = results.load(f)
        except ValueError as e:  # its message names the file
            unreadable.append(str(e))
        except OSError as e:
            unreadable.append(f"{f.name}: {e.strerror or e}")
    if not notebooks:
        raise CompareError(f"{path}: no readable results file: {'; '.join(unreadable)}")
    env = next((d["environment"] for d in notebooks.values() if d["environment"]), {})
    if (path / "environment.json").is_file():
        try:
            found_env = json.loads((path / "environment.json").read_text(encoding="utf-8"))
            if not isinstance(found_env, dict):
                raise ValueError(f"a JSON object expected, found a {type(found_env).__name__}")
            env = found_env
        except (ValueError, OSError) as e:
            unreadable.append(f"environment.json: {e}")
    where, unread_summary = ran_on(path)
    return {
        "name": path.name,
        "path": str(path),
        "notebooks": notebooks,
        "environment": env,
        "ran_on": where,
        "unreadable": [*unreadable, *unread_summary],
    }


def ran_on(path: Path) -> tuple[dict[str, str], list[str]]:
    """Where each notebook of a run ran ("cpu", "GPU 2", ...), from its ``summary.json`` ({} without
    one), and why that file could not be read (none when it could)."""
    if not (path / "summary.json").is_file():
        return {}, []
    try:
        summary = json.loads((path / "summary.json").read_text())
        return {n["name"]: scheduler.ran_on(n.get("gpu")) for n in summary["notebooks"]}, []
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # truncated, or not a summary
        return {}, [f"summary.json: {type(e).__name__}: {e}"]


def report_folder(report: dict, out: str | None) -> Path:
    """Where the report goes: ``out``, else beside the runs (the folder holding RUN_B, or RUN_A's where B is a
    published copy); never into a run, nor into a published copy (``runner.py publish``, such as the committed
    ``outputs/reference-h100``)."""
    if out:
        if run_folder.is_published(Path(out)):
            raise CompareError(
                f"--out {out} is a published copy of a run; nothing writes into one: choose another folder"
            )
        return Path(out)
    paths = [r["path"] for r in report["runs"]] if "runs" in report else [report["a"]["path"], report["b"]["path"]]
    for path in reversed(paths):
        if not run_folder.is_published(Path(path)):
            return Path(path).parent
    which = "both runs are" if len(paths) == 2 else "all runs are"
    raise CompareError(f"{which} published copies, which nothing writes into: give --out DIR for the report")


def parser() -> argparse.ArgumentParser:
    """``runner.py compare``'s options (its description: this module's docstring)."""
    ap = argparse.ArgumentParser(
        prog="runner.py compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("run_a", help="run A (the baseline): a run id under --output-dir, a path, or latest")
    ap.add_argument("run_b", help="run B: a run id, a path, or latest")
    more = "more runs: each set against A beside B (one page)"
    ap.add_argument("more", nargs="*", default=[], metavar="RUN", help=more)  # with a default: not listed as required
    ap.add_argument("--output-dir", default="outputs", help="folder that holds the runs (default: outputs)")
    ap.add_argument("--out", help="folder for the report (default: the folder holding RUN_B, beside the runs)")
    ap.add_argument("--all", action="store_true", help="print every row, difference and skipped item")
    return ap


EXIT_UNREADABLE, EXIT_ERROR = 1, 2  # compared, but a file of a run could not be read; not compared


def main(argv: list[str]) -> int:
    """``runner.py compare``: print the report and write it (``write``, ``many.write_many``);
    0; 1 where a results file or run record could not be read (a warning first in the report and on
    the page, the rest compared); 2 with a one-line error where the runs cannot be compared."""
    args = parser().parse_args(argv)
    try:
        root = Path(args.output_dir)
        runs = [load_run(path) for path in resolve_runs([args.run_a, args.run_b, *args.more], root)]
        if len(runs) == 2:
            report = compare(*runs)
            page, data = write(report, report_folder(report, args.out))
        else:
            report = compare_many(runs)
            page, data = write_many(report, report_folder(report, args.out))
    except (ValueError, OSError) as e:
        print(f"runner.py compare: error: {e}", file=sys.stderr)
        return EXIT_ERROR
    print(text(report, every_row=args.all) if len(runs) == 2 else many_text(report))
    print(f"report: {page}\ndata: {data}")
    return EXIT_UNREADABLE if any(run["unreadable"] for run in runs) else 0
