"""Two loaded runs compared, B against A (``compare``): per notebook both hold, per row and metric
(``rows``) and per counter of each executor's counted step (``counted``), each number judged by one rule
(``run_to_run.judge``) with the run-to-run effects of its kind (a count exactly), or not comparable where
the runs did not measure the same thing (another stack, other parameters, a headline over the host's fast
blocks in one run and over all blocks in the other); with what differs between the runs and what was
skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ...core import metrics, results, run_to_run
from ...core.verdicts import CHANGED, NOT_COMPARABLE, NOT_JUDGED, SAME, phrase
from .. import notebook_run
from . import counted
from .page import shown
from .rows import by_key, metric_names, read_rows, stat

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


@dataclass(frozen=True)
class NumberPair:
    """One number of a row as both runs hold it: A's and B's (``metrics.Stat``)."""

    a: metrics.Stat
    b: metrics.Stat

    @property
    def both(self) -> bool:
        """Whether both runs measured the number."""
        return self.a.median is not None and self.b.median is not None


@dataclass(frozen=True)
class Judging:
    """How one notebook's numbers are judged: with ``effects`` (per kind), or not at all where
    ``not_comparable`` says why; host-bound numbers not judged where ``hosts_apart`` says why, a kind
    with no effect measured across machines where ``machines_apart`` says why the runs' machines may
    differ, and first calls where ``caches_apart`` says why their compile caches were not alike."""

    notebook: str
    effects: dict
    not_comparable: str | None = None
    hosts_apart: str | None = None
    machines_apart: str | None = None
    caches_apart: str | None = None


def compare_notebook(a: dict, b: dict, judging: Judging) -> tuple[list[dict], list[str]]:
    """Rows of the comparison for one notebook (each number judged as ``judging`` says), and what was
    skipped in it."""
    name, not_comparable = judging.notebook, judging.not_comparable
    rows_a, rows_b = read_rows(name, a), read_rows(name, b)
    (by_a, twice_a), (by_b, twice_b) = by_key(rows_a), by_key(rows_b)
    metrics_a, metrics_b = metric_names(rows_a), metric_names(rows_b)
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
            out.append(_word_entry(name, key, "status", ra.get("status"), rb.get("status"), not_comparable))
        if ra.get("grade") is not None or rb.get("grade") is not None:
            out.append(_word_entry(name, key, "grade", ra.get("grade"), rb.get("grade"), not_comparable))
        for m in common:
            pair = NumberPair(stat(ra, m), stat(rb, m))
            if pair.a.median is not None or pair.b.median is not None:
                out.append(_entry(judging, key, m, pair))
    found, missed = counted.pairs(name, a, b)
    return out + [_count_entry(judging, c) for c in found], skipped + missed


def _fast_only_differs(fa: bool | None, fb: bool | None) -> str | None:
    """Why a number is not comparable when one run's headline is over the fast blocks and the other's
    over all blocks (``Stat.fast_only``), else None."""
    if fa is None or fb is None or fa == fb:
        return None
    return phrase(
        NOT_COMPARABLE, f"{'fast blocks' if fa else 'all blocks'} in A, {'fast blocks' if fb else 'all blocks'} in B"
    )


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
        judged = run_to_run.Judged(NOT_COMPARABLE, not_comparable)
    else:
        judged = run_to_run.Judged(
            *((CHANGED, phrase(CHANGED, f"{word} {a} -> {b}")) if a != b else (SAME, phrase(SAME, f"{word} {a}")))
        )
    return _row(notebook, key, word, judged, a=a, b=b)


def _entry(judging: Judging, key: str, metric: str, pair: NumberPair) -> dict:
    """One number of both runs, judged B against A (``run_to_run.judge``), not comparable (the
    notebook's reason, or a headline over the fast blocks in one run only), or, for a host-bound number
    of a notebook whose host moved too far (``Judging.hosts_apart``), not judged."""
    a, b = pair.a.median, pair.b.median
    kind = run_to_run.kind(metric)
    effect = run_to_run.effect_of(judging.effects, kind, run_to_run.executor_of({"row": key}))
    not_comparable = judging.not_comparable or _fast_only_differs(pair.a.fast_only, pair.b.fast_only)
    if not pair.both:
        judged = run_to_run.Judged(NOT_JUDGED, phrase(NOT_JUDGED, "measured in one run only"))
    elif not_comparable:
        judged = run_to_run.Judged(NOT_COMPARABLE, not_comparable)
    elif judging.hosts_apart and kind in run_to_run.HOST_BOUND:
        judged = run_to_run.Judged(NOT_JUDGED, phrase(NOT_JUDGED, judging.hosts_apart))
    elif judging.machines_apart and kind != run_to_run.COUNT and effect is None:
        why = f"{judging.machines_apart}, no cross-machine effect measured for {kind}"
        judged = run_to_run.Judged(NOT_JUDGED, phrase(NOT_JUDGED, why))
    elif judging.caches_apart and kind == run_to_run.FIRST_CALL:
        judged = run_to_run.Judged(NOT_JUDGED, phrase(NOT_JUDGED, judging.caches_apart))
    else:
        judged = run_to_run.judge(kind, a, b, pair.a.interval, pair.b.interval, effect)
    judged_here = judged.verdict in (CHANGED, SAME)
    return _row(
        judging.notebook,
        key,
        metric,
        judged,
        kind=kind,
        a=a,
        b=b,
        ratio=b / a if pair.both and a else None,
        resolution=resolution(a, pair.a.interval, pair.b.interval, effect, kind) if judged_here else None,
        a_q1_q3=pair.a.spread,
        b_q1_q3=pair.b.spread,
        a_interval=pair.a.interval,
        b_interval=pair.b.interval,
    )


def _count_entry(judging: Judging, c: counted.CountPair) -> dict:
    """One counter of an executor's step in both runs (``counted``): not comparable where the notebook's
    runs are not (another stack, other parameters), not judged where a run could not count it steadily, else
    judged exactly (``run_to_run.judge``: any difference is changed, on another machine too); a changed
    count of function starts with the functions whose starts changed (``functions``, ``functions_changed``)."""
    if judging.not_comparable:
        judged = run_to_run.Judged(NOT_COMPARABLE, judging.not_comparable)
    elif c.unjudged:
        judged = run_to_run.Judged(NOT_JUDGED, phrase(NOT_JUDGED, c.unjudged))
    else:
        judged = run_to_run.judge(run_to_run.COUNT, c.a, c.b, None, None, None)
    ratio = c.b / c.a if c.a and c.b is not None else None
    row = _row(judging.notebook, c.executor, c.metric, judged, kind=run_to_run.COUNT, a=c.a, b=c.b, ratio=ratio)
    if judged.verdict == CHANGED and c.functions:
        row.update(functions=c.functions, functions_changed=c.functions_changed)
    return row


def resolution(a, interval_a, interval_b, effect: dict | None, kind: str | None) -> float | None:
    """The smallest move of this number the rule could call changed, as a fraction of A's value: its
    kind's minimum effect, or the move the test needs (1.96 standard errors of both intervals and the
    run-to-run sigma) where that is larger. None where nothing is judged."""
    if effect is None or kind == run_to_run.COUNT or not metrics.is_number(a) or not a:
        return None
    ses = [run_to_run.standard_error(i, a) for i in (interval_a, interval_b) if i]
    if kind not in run_to_run.ONE_SAMPLE and len(ses) < 2:
        return None
    test = run_to_run.Z95 * (sum(x * x for x in ses) + effect["sigma"] ** 2) ** 0.5
    return max(effect["min_effect"], test)


def ab_resolution(run: dict) -> float | None:
    """What 08's A/A control of a run says that run resolves (%, host time, the median over its
    executors), or None where the run has no 08."""
    data = run["notebooks"].get(results.AB_BUILDS) or {}
    rows = read_rows(results.AB_BUILDS, data) if data else []
    controls = [r for r in rows if (r.get("comparison") or "").startswith("A' vs A") and r.get("metric") == "host_ms"]
    values = sorted(m for r in controls if (m := stat(r, "resolution_pct").median) is not None)
    return values[len(values) // 2] if values else None


def stack_differences(a: dict, b: dict) -> list[str]:
    """What differs in the two runs' stacks (``STACK``: device, GPU, Python, the compilers' versions),
    as ``name: A -> B``; [] where either run has no environment record."""
    if not a["environment"] or not b["environment"]:
        return []
    fa, fb = flatten(a["environment"]), flatten(b["environment"])
    return [f"{k} {shown(fa.get(k))} -> {shown(fb.get(k))}" for k in STACK if fa.get(k) != fb.get(k)]


def machines_apart(a: dict, b: dict) -> str | None:
    """Why two loaded runs may come from different machines (the ``machine`` their environments
    record, ``environment.machine_id``), or None where both record the same one."""
    ma, mb = a["environment"].get("machine"), b["environment"].get("machine")
    if ma and ma == mb:
        return None
    if ma and mb:
        return f"another machine ({ma} -> {mb})"
    return f"not known to be one machine ({' and '.join(s for s, m in (('A', ma), ('B', mb)) if not m)} recorded none)"


def caches_apart(a: dict, b: dict) -> str | None:
    """Why first calls of two loaded runs are not judged (they follow the compile caches): the caches
    differ, or neither run started its own (``per run``), so their state at a first call is not known."""
    ca, cb = a["environment"].get("compile_cache"), b["environment"].get("compile_cache")
    if ca == cb and str(ca).startswith("per run"):
        return None
    if ca != cb:
        return f"first calls follow the compile caches, which differ ({shown(ca)} -> {shown(cb)})"
    return f"first calls follow the compile caches, whose state is not known ({shown(ca)})"


def common_notebooks(a: dict, b: dict) -> list[str]:
    """The notebooks both runs hold, in A's order; ``CompareError`` (saying what each holds and what could
    not be read) where there is none."""
    common = [n for n in a["notebooks"] if n in b["notebooks"]]
    if not common:
        unreadable = "".join(
            f"; unreadable in {run['name']}: {'; '.join(run['unreadable'])}" for run in (a, b) if run["unreadable"]
        )
        raise CompareError(
            f"runs {a['name']} ({', '.join(a['notebooks'])}) and {b['name']} "
            f"({', '.join(b['notebooks'])}) have no notebook in common{unreadable}"
        )
    return common


def compare(a: dict, b: dict, effects: dict | None = None) -> dict:
    """The comparison of two loaded runs (``compare.load_run``), B against A, each number judged with
    ``effects`` (per kind; None: those measured for A's device, between runs of one machine or, where
    the runs' machines may differ, between machines: ``run_to_run.effects``), the changed ones held
    together to a false discovery rate (``run_to_run.hold_false_discoveries``)."""
    common = common_notebooks(a, b)
    device = a["environment"].get("device")
    given, apart = effects is not None, machines_apart(a, b)
    effects = effects if given else run_to_run.effects(device, across=apart is not None)
    skipped = [f"{n}: only in A ({a['name']})" for n in a["notebooks"] if n not in b["notebooks"]]
    skipped += [f"{n}: only in B ({b['name']})" for n in b["notebooks"] if n not in a["notebooks"]]
    skipped += [f"unreadable in {side}: {u}" for side, run in (("A", a), ("B", b)) for u in run["unreadable"]]
    stack = stack_differences(a, b)
    parameters = parameter_differences(a, b, common)
    rows, hosts = [], []
    for n in common:
        params = [d["name"] for d in parameters if n in d["notebooks"]]
        why = (
            phrase(NOT_COMPARABLE, "another stack")
            if stack
            else phrase(NOT_COMPARABLE, "parameters differ")
            if params
            else None
        )
        da, db = a["notebooks"][n], b["notebooks"][n]
        hosts_moved = None if stack else run_to_run.hosts_apart(da, db, effects)  # another stack: nothing is judged
        hosts += [f"{n}: {hosts_moved}"] if hosts_moved else []
        judging = Judging(n, effects, why, hosts_moved, apart, caches_apart(a, b))
        got, missed = compare_notebook(da, db, judging)
        rows += got
        skipped += missed
    multiple = run_to_run.hold_false_discoveries(rows)
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
        "machines": {"a": a["environment"].get("machine"), "b": b["environment"].get("machine"), "apart": apart},
        "stack": stack,
        "hosts": hosts,
        "skipped": skipped,
        "rows": rows,
        "effects": effects,
        "effects_source": {"source": "given by the caller"} if given else run_to_run.source(device, apart is not None),
        "multiple": multiple,
        "unreadable": {side: run["unreadable"] for side, run in (("A", a), ("B", b)) if run["unreadable"]},
        "ab_resolution_pct": next((r for r in (ab_resolution(b), ab_resolution(a)) if r is not None), None),
    }
