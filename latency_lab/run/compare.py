"""Compare two runs: ``python runner.py compare RUN_A RUN_B``; or more: ``compare RUN_A RUN_B RUN_C ...``.

A run is a folder of ``<notebook>.results.json`` files (``environment.json`` and ``summary.json``
beside them are used when present: the environment, and where each notebook ran), named by its id
under ``--output-dir``, by a path, or ``latest`` (the last usable run there: one interrupted after some
notebooks finished compares on those).
Per notebook both runs hold, per row (executor; op, size and executor in the op benchmarks) and
metric (the vocabulary's names: ``metrics.is_metric``), B against A by one rule (``run_to_run.judge``):
**changed** when B's move is beyond chance given both runs' intervals and the run-to-run spread measured
for that kind of number, and beyond that kind's measured minimum effect; **same** otherwise; a kernel
count is exact. **Not comparable** when the runs did not measure the same thing: another stack (device,
GPU, Python, torch, Thunder, nvFuser, transformers), other parameters of that notebook, or a headline
over the host's fast blocks in one run and over all blocks in the other. The parameters and
environments that differ come first. Rows, metrics and notebooks found in one run only, and files that
cannot be read, are listed as skipped.
The report is printed and written as ``compare-<A>-vs-<B>.html`` and ``.json`` into RUN_B's folder
(RUN_A's when B is a published copy, which nothing writes into), or into ``--out``.

With more than two runs (``compare_many``), A is set against each other run as above, and the pairs
are merged into one page: per number A's value and range, then each other run's value, range, ratio
to A and verdict; the seed's tables get one column per run (``runner.py --ray``'s fleet page).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core import metrics, results, run_to_run
from ..pages import tables
from . import notebook_run, run_folder, scheduler

KEY_COLUMNS = (
    "op",
    "size",
    "step",
    "layers",
    "tokens",
    "prompt_tokens",
    "executor",
    "with_graphs",
    "without",
    "metric",
    "comparison",
    "claim",
)  # a row's identity, where a notebook's rows have them (``with_graphs``, ``without``: 05's CUDA-graph ratios;
# ``metric``: 06's fit rows, one per fitted metric; ``comparison``: 08's B, A/A and planted rows;
# ``claim``: 05's grades)
WITHIN_ROUNDS = ("combination", "graphs")  # 07's and 05's rows of within-round ratios, beside the main rows
GRADED = ("grades",)  # 05's grades of the seed's claims: a word per claim and executor, compared as it stands
# What a run measured with: two runs that differ in one of these did not measure the same thing.
STACK = (
    "device",
    "gpu.name",
    "python",
    "torch_cuda_build",
    "packages.torch",
    "packages.lightning-thunder",
    "packages.nvfuser",
    "packages.transformers",
    "packages.triton",
)
IGNORED_PARAMS = ("output_dir",)
IGNORED_ENV = ("collected",)


class CompareError(ValueError):
    """A comparison that cannot be made; the message says which run or file and why."""


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
    return {
        "name": path.name,
        "path": str(path),
        "notebooks": notebooks,
        "environment": env,
        "ran_on": ran_on(path, unreadable),
        "unreadable": unreadable,
    }


def ran_on(path: Path, unreadable: list[str]) -> dict[str, str]:
    """Where each notebook of a run ran ("cpu", "GPU 2", ...), from its ``summary.json``; {} without one."""
    if not (path / "summary.json").is_file():
        return {}
    try:
        summary = json.loads((path / "summary.json").read_text())
        return {n["name"]: scheduler.ran_on(n.get("gpu")) for n in summary["notebooks"]}
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # truncated, or not a summary
        unreadable.append(f"summary.json: {type(e).__name__}: {e}")
        return {}


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(a: dict, b: dict, ignored: tuple[str, ...]) -> list[dict]:
    fa, fb = flatten(a), flatten(b)
    return [
        {"name": k, "a": fa.get(k), "b": fb.get(k)}
        for k in sorted(set(fa) | set(fb))
        if k not in ignored and fa.get(k) != fb.get(k)
    ]


def shown(value) -> str:
    """A value that differs between the runs, as text: ``(none)`` where a run has none, a list of
    records (``quieted_noise``) as their names (each one's first value), else as ``tables.number``."""
    if value is None:
        return "(none)"
    if isinstance(value, list) and value and all(isinstance(v, dict) and v for v in value):
        return "; ".join(str(next(iter(v.values()))) for v in value)
    return tables.number(value)


def taken(notebook: str) -> list[str] | None:
    """The parameters ``notebook`` takes (its parameters cell in the suite's notebooks, and the ones
    every notebook applies); None for a notebook that is not among them."""
    path = notebook_run.NOTEBOOK_DIR / f"{notebook}.ipynb"
    return notebook_run.declared_names(path) if path.is_file() else None


def parameter_differences(a: dict, b: dict, common: list[str]) -> list[dict]:
    """Parameters that differ, per name, with the notebooks where they do; of each notebook only
    those it takes (its results file holds every parameter, ``depths`` in 02 too)."""
    found: dict[tuple, dict] = {}
    for nb in common:
        names = taken(nb)
        for d in differences(a["notebooks"][nb]["params"], b["notebooks"][nb]["params"], IGNORED_PARAMS):
            if names is not None and d["name"] not in names:
                continue
            key = (d["name"], json.dumps(d["a"]), json.dumps(d["b"]))
            found.setdefault(key, {**d, "notebooks": []})["notebooks"].append(nb)
    return list(found.values())


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def table_rows(data: dict) -> list[dict]:
    """The notebook's rows: its ``rows`` section (06: ``points``) when it is a list of executor rows (it
    holds more than the key table, intervals included), else the key table's rows with their intervals;
    then its rows of within-round ratios (``WITHIN_ROUNDS``) and its fit rows (06: fixed and per-layer
    costs per executor and metric) where it has them."""
    extra = [data.get(name) for name in (*WITHIN_ROUNDS, "fit_rows", *GRADED)]
    extra = [r for section in extra if isinstance(section, list) for r in section if isinstance(r, dict)]
    for section in (data.get("rows"), data.get("points")):
        if isinstance(section, list) and section and all(isinstance(r, dict) and "executor" in r for r in section):
            return section + extra
    table = data["key_table"]
    rows = [dict(zip(table["columns"], r)) for r in table["rows"]]
    for metric, pairs in (table.get("intervals") or {}).items():
        lo, hi = metrics.interval_names(metric)
        for row, (a, b) in zip(rows, pairs):
            row.update({lo: a, hi: b})
    return rows + extra


def metric_names(data: dict, rows: list[dict]) -> list[str]:
    """The measured quantities of the rows (the vocabulary's metrics), spreads and shapes left out."""
    names = [
        c
        for c in dict.fromkeys(c for r in rows for c in r)
        if c not in KEY_COLUMNS and (metrics.spread_names(c) is not None or c.endswith(metrics.COUNTS))
    ]
    return [c for c in names if any(_number(r.get(c)) for r in rows)]


def row_key(row: dict) -> str:
    keys = [str(row[c]) for c in KEY_COLUMNS if row.get(c) is not None]
    return " · ".join(keys) if keys else str(next(iter(row.values()), ""))


def by_key(rows: list[dict]) -> tuple[dict[str, dict], list[str]]:
    """Rows by ``row_key``, and the keys that more than one row has (those cannot be paired)."""
    keys = [row_key(r) for r in rows]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    return {k: r for k, r in zip(keys, rows) if k not in twice}, twice


def spread(row: dict, metric: str) -> tuple[float, float] | None:
    """The q1-q3 range measured for ``metric`` of ``row`` (its ``_q1``/``_q3`` columns); None where
    the notebook measured no spread (counts, first calls)."""
    names = metrics.spread_names(metric)
    if names and all(_number(row.get(n)) for n in names):
        return row[names[0]], row[names[1]]
    return None


def interval(row: dict, metric: str) -> tuple[float, float] | None:
    """The statistic's own 95% interval of ``metric`` of ``row`` (its ``_lo``/``_hi`` columns); None where
    the notebook printed none (counts, kernel time)."""
    names = metrics.interval_names(metric)
    if names and all(_number(row.get(n)) for n in names):
        return row[names[0]], row[names[1]]
    return None


def compare_notebook(
    name: str, a: dict, b: dict, effects: dict, not_comparable: str | None = None, hosts_apart: str | None = None
) -> tuple[list[dict], list[str]]:
    """Rows of the comparison for one notebook (each number judged by ``run_to_run.judge`` with
    ``effects``, or ``not_comparable`` with that reason; a host-bound number not judged where
    ``hosts_apart`` says why), and what was skipped in it."""
    rows_a, rows_b = table_rows(a), table_rows(b)
    (by_a, twice_a), (by_b, twice_b) = by_key(rows_a), by_key(rows_b)
    metrics_a, metrics_b = metric_names(a, rows_a), metric_names(b, rows_b)
    common = [m for m in metrics_a if m in metrics_b and run_to_run.kind(m) is not None]
    unjudged = [m for m in metrics_a if m in metrics_b and run_to_run.kind(m) is None]
    skipped = [
        f"{name}: metric {m!r} only in {side}"
        for side, ms, other in (("A", metrics_a, metrics_b), ("B", metrics_b, metrics_a))
        for m in ms
        if m not in other
    ]
    if unjudged:
        skipped.append(f"{name}: not judged, of no kind the run-to-run pairs measure: {', '.join(unjudged)}")
    skipped += [
        f"{name}: row {k!r} appears more than once in {side}"
        for side, keys in (("A", twice_a), ("B", twice_b))
        for k in keys
    ]
    skipped += [
        f"{name}: row {k!r} only in {side}"
        for side, keys, other in (("A", by_a, by_b), ("B", by_b, by_a))
        for k in keys
        if k not in other
    ]
    out = []
    for key in (k for k in by_a if k in by_b):
        ra, rb = by_a[key], by_b[key]
        if ra.get("status") != rb.get("status"):
            out.append(_word_entry(name, key, "status", ra.get("status"), rb.get("status")))
        if ra.get("grade") is not None or rb.get("grade") is not None:
            out.append(_word_entry(name, key, "grade", ra.get("grade"), rb.get("grade"), not_comparable))
        for m in common:
            if _number(ra.get(m)) or _number(rb.get(m)):
                why = not_comparable or _fast_only_differs(fast_only(a, ra, m), fast_only(b, rb, m))
                out.append(_entry(name, key, m, ra, rb, effects, why, hosts_apart))
    return out, skipped


ROUND_STATS = {"wall_ms": "wall", "host_ms": "host", "host_per_ref_x": "host_per_ref"}  # a rounds record's statistics


def fast_only(data: dict, row: dict, metric: str) -> bool | None:
    """Whether ``metric`` of ``row`` is a median over the host's fast blocks (True) or over all blocks
    (False): its ``_fast_only`` column, else (a run older than that column) its entry's rounds record;
    None where neither says."""
    if (flag := row.get(metrics.fast_only_name(metric))) is not None:
        return flag
    record = (data.get("rounds") or {}).get(row.get("executor")) if isinstance(data.get("rounds"), dict) else None
    stat = (record or {}).get(ROUND_STATS.get(metric, ""))
    return stat.get("fast_only") if isinstance(stat, dict) else None


def _fast_only_differs(fa: bool | None, fb: bool | None) -> str | None:
    """Why a number is not comparable when one run's headline is over the fast blocks and the other's
    over all blocks (``Stat.fast_only``), else None."""
    if fa is None or fb is None or fa == fb:
        return None
    return f"not comparable: {'fast blocks' if fa else 'all blocks'} in A, {'fast blocks' if fb else 'all blocks'} in B"


NUMBERS = ("kind", "a", "b", "ratio", "resolution", "a_q1_q3", "b_q1_q3", "a_interval", "b_interval")


def _row(notebook: str, key: str, metric: str, judged: run_to_run.Judged, **numbers) -> dict:
    """One comparison row: which number, what both runs measured (``NUMBERS``; None where not given)
    and the verdict with what it was decided on."""
    return {
        "notebook": notebook,
        "row": key,
        "metric": metric,
        **{k: numbers.get(k) for k in NUMBERS},
        "min_effect": judged.min_effect,
        "p": judged.p,
        "verdict": judged.verdict,
        "decided": judged.decided,
    }


def _word_entry(notebook: str, key: str, word: str, a, b, not_comparable: str | None = None) -> dict:
    """A word of both runs (a row's status, a claim's grade): changed where it differs, else same (or
    ``not_comparable``, with that reason)."""
    if not_comparable:
        judged = run_to_run.Judged("not comparable", not_comparable)
    else:
        judged = run_to_run.Judged(
            *(("changed", f"changed: {word} {a} -> {b}") if a != b else ("same", f"same: {word} {a}"))
        )
    return _row(notebook, key, word, judged, a=a, b=b)


def _entry(
    notebook: str, key: str, metric: str, ra: dict, rb: dict, effects: dict, not_comparable: str | None, hosts_apart
) -> dict:
    """One number of both runs, judged B against A (``run_to_run.judge``), not comparable, or, for a
    host-bound number of a notebook whose host moved too far (``hosts_apart``: why), not judged."""
    a, b = ra.get(metric), rb.get(metric)
    interval_a, interval_b = interval(ra, metric), interval(rb, metric)
    kind = run_to_run.kind(metric)
    effect = effects.get(kind)
    both = _number(a) and _number(b)
    if not both:
        judged = run_to_run.Judged("not judged", "not judged: measured in one run only")
    elif not_comparable:
        judged = run_to_run.Judged("not comparable", not_comparable)
    elif hosts_apart and kind in run_to_run.HOST_BOUND:
        judged = run_to_run.Judged("not judged", f"not judged: {hosts_apart}")
    else:
        judged = run_to_run.judge(kind, a, b, interval_a, interval_b, effect)
    judged_here = judged.verdict in ("changed", "same")
    return _row(
        notebook,
        key,
        metric,
        judged,
        kind=kind,
        a=a,
        b=b,
        ratio=b / a if both and a else None,
        resolution=resolution(a, interval_a, interval_b, effect, kind) if judged_here else None,
        a_q1_q3=spread(ra, metric),
        b_q1_q3=spread(rb, metric),
        a_interval=interval_a,
        b_interval=interval_b,
    )


def resolution(a, interval_a, interval_b, effect: dict | None, kind: str | None) -> float | None:
    """The smallest move of this number the rule could call changed, as a fraction of A's value: its
    kind's minimum effect, or the move the test needs (1.96 standard errors of both intervals and the
    run-to-run sigma) where that is larger. None where nothing is judged."""
    if effect is None or kind == run_to_run.COUNT or not _number(a) or not a:
        return None
    ses = [run_to_run.standard_error(i, a) for i in (interval_a, interval_b) if i]
    if kind not in run_to_run.ONE_SAMPLE and len(ses) < 2:
        return None
    test = run_to_run.Z95 * (sum(x * x for x in ses) + effect["sigma"] ** 2) ** 0.5
    return max(effect["min_effect"], test)


AB_HINT = (
    "Across two runs a change under that resolution is not told from what moves between them; for a change of "
    "the stack, time both builds in the same rounds: python runner.py ab --b-path FOLDER (or --b PYTHON)"
)


def ab_resolution(run: dict) -> float | None:
    """What 08's A/A control of a run says that run resolves (%, host time, the median over its
    executors), or None where the run has no 08."""
    data = run["notebooks"].get(results.AB_BUILDS) or {}
    rows = [r for r in table_rows(data) if r.get("comparison", "").startswith("A' vs A")] if data else []
    values = sorted(
        r["resolution_pct"] for r in rows if r.get("metric") == "host_ms" and _number(r.get("resolution_pct"))
    )
    return values[len(values) // 2] if values else None


def stack_differences(a: dict, b: dict) -> list[str]:
    """What differs in the two runs' stacks (``STACK``: device, GPU, Python, the compilers' versions),
    as ``name: A -> B``; [] where either run has no environment record."""
    if not a["environment"] or not b["environment"]:
        return []
    fa, fb = flatten(a["environment"]), flatten(b["environment"])
    return [f"{k} {shown(fa.get(k))} -> {shown(fb.get(k))}" for k in STACK if fa.get(k) != fb.get(k)]


def compare(a: dict, b: dict, effects: dict | None = None) -> dict:
    """The comparison of two loaded runs (``load_run``), B against A, each number judged with
    ``effects`` (per kind; None: those measured for A's device, ``run_to_run.effects``)."""
    common = [n for n in a["notebooks"] if n in b["notebooks"]]
    if not common:
        unreadable = "".join(
            f"; unreadable in {run['name']}: {'; '.join(run['unreadable'])}" for run in (a, b) if run["unreadable"]
        )
        raise CompareError(
            f"runs {a['name']} ({', '.join(a['notebooks'])}) and {b['name']} "
            f"({', '.join(b['notebooks'])}) have no notebook in common{unreadable}"
        )
    device = a["environment"].get("device")
    given = effects is not None
    effects = effects if given else run_to_run.effects(device)
    skipped = [f"{n}: only in A ({a['name']})" for n in a["notebooks"] if n not in b["notebooks"]]
    skipped += [f"{n}: only in B ({b['name']})" for n in b["notebooks"] if n not in a["notebooks"]]
    skipped += [f"unreadable in {side}: {u}" for side, run in (("A", a), ("B", b)) for u in run["unreadable"]]
    stack = stack_differences(a, b)
    parameters = parameter_differences(a, b, common)
    rows, hosts = [], []
    for n in common:
        params = [d["name"] for d in parameters if n in d["notebooks"]]
        why = "not comparable: another stack" if stack else "not comparable: parameters differ" if params else None
        da, db = a["notebooks"][n], b["notebooks"][n]
        apart = None if stack else run_to_run.hosts_apart(da, db, effects)  # another stack: nothing is judged
        hosts += [f"{n}: {apart}"] if apart else []
        got, missed = compare_notebook(n, da, db, effects, why, apart)
        rows += got
        skipped += missed
    return {
        "a": {"name": a["name"], "path": a["path"]},
        "b": {"name": b["name"], "path": b["path"]},
        "notebooks": common,
        "parameters": parameters,
        "ran_on": [
            {"name": n, "a": a["ran_on"].get(n) or "not recorded", "b": b["ran_on"].get(n) or "not recorded"}
            for n in common
        ],
        "environment": differences(a["environment"], b["environment"], IGNORED_ENV),
        "stack": stack,
        "hosts": hosts,
        "skipped": skipped,
        "rows": rows,
        "effects": effects,
        "effects_source": {"source": "given by the caller"} if given else run_to_run.source(device),
        "ab_resolution_pct": next((r for r in (ab_resolution(b), ab_resolution(a)) if r is not None), None),
    }


def fmt_range(v) -> str:
    """An interval or a q1-q3 spread as ``lo-hi``; blank where none was measured."""
    return f"{tables.number(v[0])}-{tables.number(v[1])}" if v else ""


TABLE = (
    ("notebook", "notebook"),
    ("row", "row"),
    ("metric", "metric"),
    ("A", "a"),
    ("A interval", "a_interval"),
    ("A q1-q3", "a_q1_q3"),
    ("B", "b"),
    ("B interval", "b_interval"),
    ("B q1-q3", "b_q1_q3"),
    ("B / A", "ratio"),
    ("resolves ±%", "resolution"),
    ("verdict", "decided"),
)  # (header, key of a comparison row)
RANGES = ("a_interval", "a_q1_q3", "b_interval", "b_q1_q3")


def cell(entry: dict, key: str) -> str:
    """A comparison row's cell as text: numbers as ``tables.number`` prints them, spreads as ``q1-q3``,
    the resolution in %."""
    if key == "resolution":
        return "" if entry.get(key) is None else tables.number(100 * entry[key])
    return fmt_range(entry[key]) if key in RANGES else tables.number(entry[key])


def tally(report: dict) -> str:
    """What the comparison found, in a few sentences: how many numbers changed (higher or lower in B),
    stayed the same, could not be compared or judged, the minimum effects judged with, and the
    resolution."""
    numbers = [e for e in report["rows"] if e["metric"] not in ("status", "grade")]
    count = {v: sum(e["verdict"] == v for e in numbers) for v in ("changed", "same", "not comparable", "not judged")}
    higher = sum(e["verdict"] == "changed" and e["b"] > e["a"] for e in numbers)
    status = sum(e["metric"] == "status" for e in report["rows"])
    grades = [e for e in report["rows"] if e["metric"] == "grade"]
    regraded = sum(e["verdict"] == "changed" for e in grades)
    out = (
        f"{len(numbers)} numbers: {count['changed']} changed ({higher} higher in B, {count['changed'] - higher} "
        f"lower), {count['same']} same, {count['not comparable']} not comparable, {count['not judged']} not judged"
        f"{f'; {status} rows changed status' if status else ''}"
        f"{f'; {regraded} of {len(grades)} grades of the seed claims changed' if grades else ''}."
    )
    if report.get("hosts"):
        out += f" Host-bound numbers not judged where {'; '.join(report['hosts'])}."
    if report.get("stack"):
        out += f" Not comparable: another stack ({'; '.join(report['stack'])}); time both in one run: runner.py ab."
    elif report.get("parameters"):
        differ = ", ".join(f"{d['name']} in {', '.join(d['notebooks'])}" for d in report["parameters"])
        out += f" Not comparable where parameters differ: {differ}."
    noisy = sum(e.get("decided", "").startswith("too noisy") for e in numbers)
    if noisy:
        out += f" {noisy} not judged as too noisy: an interval wider than {100 * run_to_run.NOISY:.3g}% of its value."
    if report.get("stack"):
        return out  # nothing was judged: no minimum effect or resolution applies
    effects, where = report.get("effects") or {}, report.get("effects_source") or {}
    if effects:
        kinds = ", ".join(f"{k} {100 * v['min_effect']:.2g}%" for k, v in effects.items())
        pairs, folder = where.get("pairs", "?"), where.get("source", "?")
        out += f" Minimum effects (measured from {pairs} same-tree run pairs, {folder}): {kinds}; kernel counts exact."
    else:
        out += " No same-tree run pairs were measured on this device: only kernel counts are judged."
    resolved = sorted(e["resolution"] for e in numbers if e.get("resolution") is not None)
    if resolved:
        ab = report.get("ab_resolution_pct")
        median = 100 * resolved[len(resolved) // 2]
        out += (
            f" Resolution (the smallest move each number could be called changed by): median ±{median:.3g}%, "
            f"finest ±{100 * resolved[0]:.3g}%. {AB_HINT}"
            + (f"; this machine's 08 resolved ±{ab:.2g}% of host time within one run." if ab is not None else ".")
        )
    return out


def text(report: dict) -> str:
    """The report as plain text: differences, skipped items, then the table."""
    lines = [f"A: {report['a']['path']}", f"B: {report['b']['path']}"]
    lines.append("ran on:")
    lines += [f"  {d['name']}: {d['a']} -> {d['b']}" for d in report["ran_on"]]
    for title, items in (
        ("parameters that differ", report["parameters"]),
        ("environment that differs", report["environment"]),
    ):
        lines.append(f"{title}:" + ("" if items else " none"))
        lines += [
            f"  {d['name']}: {shown(d['a'])} -> {shown(d['b'])}"
            + (f"  ({', '.join(d['notebooks'])})" if "notebooks" in d else "")
            for d in items
        ]
    if report["skipped"]:
        lines.append("skipped: " + "; ".join(report["skipped"]))
    header = [h for h, _ in TABLE]
    body = [[cell(e, k) for _, k in TABLE] for e in report["rows"]]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    for r in [header, *body]:
        lines.append(
            "  ".join(
                c.rjust(w) if 3 <= i < len(r) - 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))
            ).rstrip()
        )
    return "\n".join([*lines, tally(report)])


def entries_table(entries: list[dict], with_notebook: str | None = None, style: bool = False):
    """Comparison rows as one table (``tables.html_table``): row, metric, A and B with their
    spreads, B / A and the verdict (rows beyond the spread, or changed, marked ``beyond``);
    ``with_notebook``: the notebook first, under that header; ``style``: with the stylesheet
    (outside the pages)."""
    shown = ((with_notebook, "notebook"), *TABLE[1:]) if with_notebook else TABLE[1:]
    rows = [[tables.Cell(cell(e, k), "num") if k in RANGES else e[k] for _, k in shown] for e in entries]
    beyond = ["beyond" if e["verdict"] == "changed" else "" for e in entries]
    return tables.html_table(rows, [h for h, _ in shown], row_classes=beyond, style=style)


def _differences_table(items: list[dict]):
    """What differs between the runs (name, A, B and, for parameters, the notebooks); None for nothing."""
    if not items:
        return None
    notebooks = "notebooks" in items[0]
    rows = [
        [d["name"], shown(d["a"]), shown(d["b"]), *([", ".join(d["notebooks"])] if notebooks else [])] for d in items
    ]
    return tables.html_table(rows, ["name", "A", "B", *(["notebooks"] if notebooks else [])])


def to_html(report: dict) -> str:
    """A self-contained page (``templates/compare.html.j2``): differences at the top, skipped items,
    one table per notebook."""
    return str(
        tables.render(
            "compare.html.j2",
            title=f"latency-lab compare: {report['a']['name']} (A) vs {report['b']['name']} (B)",
            a=report["a"]["path"],
            b=report["b"]["path"],
            tally=tally(report),
            differences=[
                ("Ran on", _differences_table(report["ran_on"])),
                ("Parameters that differ", _differences_table(report["parameters"])),
                ("Environment that differs", _differences_table(report["environment"])),
            ],
            skipped=report["skipped"],
            notebooks=[
                (nb, entries_table([r for r in report["rows"] if r["notebook"] == nb])) for nb in report["notebooks"]
            ],
        )
    )


# --- N runs: A against each other run ------------------------------------------------------------------

PER_RUN = ("b", "b_interval", "b_q1_q3", "ratio", "verdict", "decided")  # of a pair's row


def compare_many(runs: list[dict]) -> dict:
    """Run A (the first of ``runs``) against each other run, pair by pair (``compare``: the same
    verdicts), merged: one line per number A and some other run hold, with A's value and, per other
    run, its value, ranges, ratio to A and verdict (None where that run lacks the number); per
    notebook where each run ran, and the parameters and environment entries that differ anywhere."""
    a, others = runs[0], runs[1:]
    pairs = [compare(a, b) for b in others]
    lines: dict[tuple, dict] = {}
    for i, pair in enumerate(pairs):
        for e in pair["rows"]:
            key = (e["notebook"], e["row"], e["metric"])
            line = lines.setdefault(key, {**{k: e[k] for k in TABLE_KEYS_A}, "others": [None] * len(pairs)})
            line["others"][i] = {k: e[k] for k in PER_RUN}
    notebooks = [n for n in a["notebooks"] if any(n in p["notebooks"] for p in pairs)]
    rows = sorted(lines.values(), key=lambda line: notebooks.index(line["notebook"]))
    return {
        "runs": [{"name": r["name"], "path": r["path"]} for r in runs],
        "notebooks": notebooks,
        "ran_on": [{"name": n, "runs": [r["ran_on"].get(n) or "not recorded" for r in runs]} for n in notebooks],
        "parameters": _differing(pairs, "parameters"),
        "environment": _differing(pairs, "environment"),
        "skipped": [f"{b['name']}: {s}" for b, p in zip(others, pairs) for s in p["skipped"]],
        "tallies": [f"{b['name']} against {a['name']}: {tally(p)}" for b, p in zip(others, pairs)],
        "seed_tables": seed_tables(runs),
        "rows": rows,
    }


TABLE_KEYS_A = ("notebook", "row", "metric", "a", "a_interval", "a_q1_q3")


def _differing(pairs: list[dict], section: str) -> list[dict]:
    """Entries of ``section`` (parameters, environment) that differ between A and any other run:
    name, A's value and each other run's (None where that pair did not differ: the same as A)."""
    found: dict[str, dict] = {}
    for i, pair in enumerate(pairs):
        for d in pair[section]:
            entry = found.setdefault(d["name"], {"name": d["name"], "a": d["a"], "others": [_SAME] * len(pairs)})
            entry["others"][i] = d["b"]
    return list(found.values())


_SAME = "= A"  # an entry that differs in another pair only


def seed_tables(runs: list[dict]) -> list[dict]:
    """The seed's tables (``seed_numbers.seed_tables``) with one column per run that measured the
    seed's step on a GPU (``report.seed_step``); none without such a run."""
    from ..core.seed_numbers import seed_tables as tables_of
    from .report import seed_step

    merged: dict[str, dict] = {}
    shown = [r for r in runs if seed_step(r["notebooks"].get(results.EXECUTOR_TIMING) or {})]
    for i, run in enumerate(shown):
        for t in tables_of(run["notebooks"][results.EXECUTOR_TIMING].get("rows") or []):
            title = t["title"].replace(" and here", " and each run")
            table = merged.setdefault(
                title,
                {
                    "title": title,
                    "columns": [t["columns"][0], t["columns"][1]]
                    + [t["columns"][2].replace("here", r["name"], 1) for r in shown],
                    "rows": {},
                },
            )
            for label, seed, here, _ in t["rows"]:
                table["rows"].setdefault(label, [label, seed] + [None] * len(shown))[2 + i] = here
    return [{**t, "rows": list(t["rows"].values())} for t in merged.values()]


def _range(entry: dict, side: str) -> str:
    """A run's interval for a number, else its q1-q3 (so marked); blank where it has neither."""
    if entry.get(f"{side}_interval"):
        return fmt_range(entry[f"{side}_interval"])
    return f"q1-q3 {fmt_range(entry[f'{side}_q1_q3'])}" if entry.get(f"{side}_q1_q3") else ""


def many_columns(report: dict) -> list[str]:
    """The wide table's headers: row, metric, A's value and range, then per other run its value,
    range, ratio to A and verdict."""
    a, others = report["runs"][0]["name"], [r["name"] for r in report["runs"][1:]]
    return [
        "row",
        "metric",
        a,
        f"{a} range",
        *(f"{b}{s}" for b in others for s in ("", " range", f" / {a}", " verdict")),
    ]


def many_cells(line: dict) -> list:
    """One line of the wide table (``many_columns``), a verdict beyond the spread marked."""
    cells = [line["row"], line["metric"], line["a"], _range(line, "a")]
    for o in line["others"]:
        if o is None:
            cells += [None, None, None, "not in this run"]
        else:
            cells += [
                o["b"],
                _range(o, "b"),
                o["ratio"],
                tables.Cell(o["decided"], "differs" if o["verdict"] == "changed" else ""),
            ]
    return cells


def many_text(report: dict) -> str:
    """The N-run report as plain text: the runs, where each notebook ran, what differs, skipped
    items, the wide table and one tally per other run."""
    names = [r["name"] for r in report["runs"]]
    lines = [f"{'A: ' if i == 0 else ''}{r['name']}: {r['path']}" for i, r in enumerate(report["runs"])]
    lines.append("ran on (" + " | ".join(names) + "):")
    lines += [f"  {d['name']}: {' | '.join(d['runs'])}" for d in report["ran_on"]]
    for title, items in (
        ("parameters that differ", report["parameters"]),
        ("environment that differs", report["environment"]),
    ):
        lines.append(f"{title}:" + ("" if items else " none"))
        lines += [f"  {d['name']}: {' | '.join(shown(v) for v in [d['a'], *d['others']])}" for d in items]
    if report["skipped"]:
        lines.append("skipped: " + "; ".join(report["skipped"]))
    header = ["notebook", *many_columns(report)]
    body = [
        [line["notebook"], *(tables.number(c.value if isinstance(c, tables.Cell) else c) for c in many_cells(line))]
        for line in report["rows"]
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *body]]
    return "\n".join([*lines, *report["tallies"]])


def many_html(report: dict, title: str | None = None, status=None) -> str:
    """The N-run page (``templates/compare_many.html.j2``): ``status`` (a fleet's table of tasks)
    first, where each notebook ran, what differs, the seed's tables, skipped items, then one wide
    table per notebook."""
    names = [r["name"] for r in report["runs"]]

    def differing(items):
        rows = [[d["name"], *(shown(v) for v in [d["a"], *d["others"]])] for d in items]
        return tables.html_table(rows, ["name", *names]) if rows else None

    return str(
        tables.render(
            "compare_many.html.j2",
            title=title or f"latency-lab compare: {' vs '.join(names)}",
            runs=report["runs"],
            status=status,
            tallies=report["tallies"],
            differences=[
                (
                    "Ran on",
                    tables.html_table([[d["name"], *d["runs"]] for d in report["ran_on"]], ["notebook", *names]),
                ),
                ("Parameters that differ", differing(report["parameters"])),
                ("Environment that differs", differing(report["environment"])),
            ],
            seed_tables=[tables.html_table(t) for t in report["seed_tables"]],
            skipped=report["skipped"],
            notebooks=[(nb, _many_table(report, nb)) for nb in report["notebooks"]],
        )
    )


def _many_table(report: dict, notebook: str):
    """The wide table of ``notebook``'s numbers (lines with one beyond the spread marked); None
    where it has none (its results hold no metric, as 01's)."""
    lines = [line for line in report["rows"] if line["notebook"] == notebook]
    if not lines:
        return None
    beyond = ["beyond" if any(o and o["verdict"] == "changed" for o in line["others"]) else "" for line in lines]
    return tables.html_table([many_cells(line) for line in lines], many_columns(report), row_classes=beyond)


def write_many(report: dict, folder: Path) -> tuple[Path, Path]:
    """The N-run page and its JSON as ``compare-A-vs-B-vs-C`` (``compare-A-vs-N-runs`` when the
    names would make too long a file name) in ``folder``."""
    names = [r["name"] for r in report["runs"]]
    stem = "compare-" + "-vs-".join(names)
    if len(stem) > 200:
        stem = f"compare-{names[0]}-vs-{len(names) - 1}-runs"
    folder.mkdir(parents=True, exist_ok=True)
    page, data = folder / f"{stem}.html", folder / f"{stem}.json"
    results.write_atomic(page, many_html(report))
    results.write_atomic(data, json.dumps(report, indent=1, default=str))
    return page, data


def report_folder(report: dict, out: str | None) -> Path:
    """Where the report goes: ``out``, else RUN_B's folder, else RUN_A's; never a published copy
    (``runner.py publish``, such as the committed ``outputs/reference-h100``)."""
    if out:
        if run_folder.is_published(Path(out)):
            raise CompareError(
                f"--out {out} is a published copy of a run; nothing writes into one: choose another folder"
            )
        return Path(out)
    paths = [r["path"] for r in report["runs"]] if "runs" in report else [report["a"]["path"], report["b"]["path"]]
    for path in reversed(paths):
        if not run_folder.is_published(Path(path)):
            return Path(path)
    which = "both runs are" if len(paths) == 2 else "all runs are"
    raise CompareError(f"{which} published copies, which nothing writes into: give --out DIR for the report")


def write(report: dict, folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"compare-{report['a']['name']}-vs-{report['b']['name']}"
    page, data = stem.with_suffix(".html"), stem.with_suffix(".json")
    results.write_atomic(page, to_html(report))
    results.write_atomic(data, json.dumps(report, indent=1, default=str))
    return page, data


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="runner.py compare", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("run_a", help="run A (the baseline): a run id under --output-dir, a path, or latest")
    ap.add_argument("run_b", help="run B: a run id, a path, or latest")
    more = "more runs: each set against A beside B (one page)"
    ap.add_argument("more", nargs="*", default=[], metavar="RUN", help=more)  # with a default: not listed as required
    ap.add_argument("--output-dir", default="outputs", help="folder that holds the runs (default: outputs)")
    ap.add_argument("--out", help="folder for the report (default: RUN_B's folder)")
    args = ap.parse_args(argv)
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
        return 2
    print(text(report) if len(runs) == 2 else many_text(report))
    print(f"report: {page} · {data}")
    return 0
