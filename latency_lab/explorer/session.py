"""The explorer's session: measure one setting (preset, dtype, device, batch, threads, executors, layers,
prompt length, prefill or decode step, cache mode, warm-up and timed calls) with the suite's own code
(``measure``), keep every run so that settings compare, and say what a run found. ``Explorer`` holds the
runs and never raises on a bad setting or a failing executor (the run keeps its error).
"""

from __future__ import annotations

import json
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

from ..core import harness, metrics, results
from ..core.parameters import REPO_ROOT, SAME_MODEL, ParameterError, Params
from ..core.verdicts import NOT_COMPARABLE, phrase
from ..pages import tables
from ..run.compare import command as compare
from .measure import NOISY_SLOW_SHARE, Progress, StopSwitch, measure

# The widgets set all of these; ``seed`` comes from the notebook's parameters.
SETTINGS = (
    "preset",
    "dtype",
    "device",
    "batch_size",
    "threads",
    "executors",
    "layers",
    "seq_len",
    "step",
    "cache_mode",
    "warmup",
    "iters",
    "repeats",
    "seed",
)
COLUMNS = [
    "run",
    "executor",
    "label",
    "status",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "wall_lo_ms",
    "wall_hi_ms",
    "wall_iqr_pct",
    "host_slow_pct",
    "noisy",
    "host_ms",
    "host_per_ref_x",
    "kernels_per_step",
    "kernel_ms",
    "first_call_s",
    "reason",
]
REFERENCE = REPO_ROOT / "outputs" / "reference-h100"


def settings_from(params: Params, step: str = "prefill") -> dict:
    """The explorer's settings for a notebook's validated parameters."""
    d = params.to_dict()
    return {**{k: d[k] for k in SETTINGS if k in d}, "executors": list(params.executors), "step": step}


def describe_settings(settings: dict) -> str:
    """A short label of a run's setting for legends and tables."""
    s = settings
    return (
        f"{s.get('preset')} {s.get('dtype')} {s.get('device')}, {s.get('step', 'prefill')}, "
        f"{s.get('layers')} layer(s), {s.get('batch_size')}x{s.get('seq_len')} tok, cache {s.get('cache_mode')}, "
        f"{s.get('warmup')}+{s.get('iters')}x{s.get('repeats')}, {s.get('threads')} thread(s)"
    )


class Explorer:
    """The runs of one explorer session; traces go to ``output_dir``. ``run`` never raises: a bad
    setting or an error is kept in the run's ``error``, a Stop (or the kernel's interrupt) in its
    ``stopped`` (the kernel stays usable)."""

    def __init__(self, output_dir: str | Path):
        self.output_dir = Path(output_dir)
        self.runs: list[dict] = []

    def run(self, settings: dict, progress: Progress | None = None, stop: StopSwitch | None = None) -> dict:
        """Measure ``settings`` (``measure``) as the next run, keep it and return its record."""
        number = len(self.runs) + 1
        record = {
            "id": number,
            "settings": dict(settings),
            "label": "",
            "params": None,
            "step": None,
            "rows": [],
            "details": {},
            "error": None,
            "stopped": None,
            "calls": None,
            "seconds": None,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        t0 = time.perf_counter()
        try:
            record.update(measure(settings, progress, stop, self.output_dir, f"run{number}"))
        except ParameterError as e:
            record["error"] = str(e)
        except KeyboardInterrupt:  # the kernel's interrupt, while a run blocks the notebook
            record["stopped"] = "interrupted"
        except Exception as e:  # the session goes on; the run says what went wrong
            record["error"] = harness.describe(e) + "\n" + traceback.format_exc(limit=3)
        record["seconds"] = round(time.perf_counter() - t0, 2)
        shown = {**record["params"], "step": record["step"]} if record["params"] else settings
        record["label"] = f"run {number}: {describe_settings(shown)}"
        record["noisy"] = any(r.get("noisy") for r in record["rows"])
        self.runs.append(record)
        return record

    def rows(self) -> list[dict]:
        """The rows of every run that measured, each with its run's number (``legend_html`` says its
        settings), in ``COLUMNS`` order."""
        return [
            {"run": f"run {r['id']}", **{c: row.get(c) for c in COLUMNS[1:]}} for r in self.runs for row in r["rows"]
        ]

    def save(self, path: str | Path) -> Path:
        """Write every run (settings, resolved parameters, rows, details, errors) to ``path`` as JSON."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"runs": self.runs}, indent=1, default=str))
        return path


def summary_line(run: dict) -> str:
    """One line about a run for the status line: what ran, how long, stopped or noisy."""
    if run["error"]:
        return f"{run['label']}: {run['error']}"
    if run["stopped"]:
        return (
            f"{run['label']}: stopped ({run['stopped']}) after {run['seconds']} s; "
            f"{run['calls']} guarded calls ran, none after Stop"
        )
    noisy = [
        f"{r['executor']} (wall IQR {tables.number(r['wall_iqr_pct'])}%, host slow in "
        f"{tables.number(r['host_slow_pct'])}% of its references)"
        for r in run["rows"]
        if r.get("noisy")
    ]
    return f"{run['label']}: {len(run['rows'])} executor(s) in {run['seconds']} s" + (
        f"; noisy: {', '.join(noisy)}: compare within quieter runs" if noisy else ""
    )


def findings(run: dict) -> list[str]:
    """Sentences about one run, generated from its rows."""
    if run["error"] or run["stopped"]:
        why = run["error"] or f"stopped ({run['stopped']})"
        return [f"The explorer's default run did not finish: {why.splitlines()[0]}"]
    ok = sorted((r for r in run["rows"] if r["wall_ms"] is not None), key=lambda r: r["wall_ms"])
    out = [
        f"{run['label']}: "
        + (
            ", ".join(
                f"{r['label']} {r['wall_ms']:.3g} ms (interval {r['wall_lo_ms']:.3g}-{r['wall_hi_ms']:.3g})" for r in ok
            )
            if ok
            else "no executor produced a wall time"
        )
        + "."
    ]
    if len(ok) >= 2:
        fast, slow = ok[0], ok[-1]
        overlap = slow["wall_lo_ms"] <= fast["wall_hi_ms"]
        out.append(
            f"{fast['label']} is the fastest; {slow['label']} takes {slow['wall_ms'] / fast['wall_ms']:.3g}x as long"
            + (" (their intervals overlap: this run cannot order them)." if overlap else ".")
        )
    noisy = [r["label"] for r in ok if r["noisy"]]
    if noisy:
        out.append(
            f"Noisy (wall IQR over {metrics.NOISY_REL_SPREAD:.0%} of the median, or the host slow in over "
            f"{NOISY_SLOW_SHARE:.0%} of the references): {', '.join(noisy)}; the machine was busy or drifting."
        )
    skipped = [f"{r['executor']} ({r['status']})" for r in run["rows"] if r["wall_ms"] is None]
    if skipped:
        out.append("Without a wall time: " + ", ".join(skipped) + ".")
    return out


def reference_rows(timing_results: dict) -> list[dict]:
    """Notebook 02's rows of a run (its results file) in the explorer's columns (the same vocabulary)."""
    return [{c: r.get(c) for c in COLUMNS[1:]} for r in timing_results.get("rows") or []]


def beside_reference(runs: list[dict], environment: dict, reference: Path = REFERENCE) -> dict:
    """``compare.compare`` of each run that measured (B) against the reference run's executor timing
    (A, notebook 02's rows), one section per run; a run of another model or step than A's
    (``parameters.SAME_MODEL``) is shown beside it, not judged."""
    ref = compare.load_run(Path(reference))
    timing_results = ref["notebooks"].get(results.EXECUTOR_TIMING)
    if not timing_results:
        raise compare.CompareError(f"{reference} holds no {results.EXECUTOR_TIMING} results")
    measured = [r for r in runs if r["rows"]]
    if not measured:
        raise compare.CompareError("no explorer run has rows yet: press Run first")
    columns = ["executor", *COLUMNS[2:]]

    def entry(params, rows):  # read as 02's rows (``row_types.ExecutorRow``), the reference's and the run's
        return {
            "notebook": results.EXECUTOR_TIMING,
            "params": params,
            "rows": rows,
            "key_table": {"title": "", "columns": columns, "rows": []},
        }

    ref_entry = entry(timing_results["params"], reference_rows(timing_results))
    a = {
        "name": Path(reference).name,
        "path": str(reference),
        "environment": ref["environment"],
        "unreadable": [],
        "ran_on": ref.get("ran_on") or {},
        "notebooks": {f"run {r['id']}": ref_entry for r in measured},
    }
    b = {
        "name": "explorer",
        "path": "this explorer session",
        "environment": environment,
        "unreadable": [],
        "ran_on": {},
        "notebooks": {f"run {r['id']}": entry(r["params"], r["rows"]) for r in measured},
    }
    report = compare.compare(a, b)
    for d in report["parameters"]:  # other settings: the numbers side by side, no verdict on them
        if d["name"] in SAME_MODEL:
            for e in (e for e in report["rows"] if e["notebook"] in d["notebooks"]):
                e.update(verdict=NOT_COMPARABLE, decided=phrase(NOT_COMPARABLE, f"another {d['name']} than A's"))
    return report
