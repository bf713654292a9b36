"""Notebook 08's tables, read from its rounds and its workers' records: the key table (per executor,
comparison and metric, the paired change against A, ``paired.change``) and its rows for what could not be
compared; the planted controls, known against found; the in-place parts, paired per round against the A/A
control's; logits against A's; kernels per step of A and B; each worker's build and versions; and each
executor's status per worker.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path

from ...core import builds, host_state, paired
from ...core.harness import Rounds
from ...core.parameters import Params
from ...core.rounds import Timed
from ...core.row_types import ComparisonRow
from ...core.verdicts import NOT_JUDGED, phrase
from .remote import TWIN, A, B, Worker, entry_name, planted_arms
from .rows import ArmExecutorRow, BuildRow, ControlRow

COMPARISON = {B: "B vs A", TWIN: "A' vs A (A/A control)"}


def comparison_of(arm: str) -> str:
    return COMPARISON.get(arm, f"{arm} vs A")


def workers_of(timed: Rounds, name: str) -> list[tuple[str, str, Timed]]:
    """Executor ``name``'s entries (``name · ARM #i``) as (worker, arm, its blocks)."""
    prefix = entry_name(name, "")
    return [
        (key.removeprefix(prefix), key.removeprefix(prefix).rsplit(" #", 1)[0], t)
        for key, t in timed.entries.items()
        if key.startswith(prefix)
    ]


def unit_of(worker: str) -> str:
    """A worker's unit (its slot, ``remote.worker_label``): what follows ``#``."""
    return worker.rsplit(" #", 1)[1]


def arm_series(timed: Rounds, name: str, metric: str) -> dict[str, list[paired.Series]]:
    """Per arm, its workers' ``paired.Series`` of ``metric`` for executor ``name``."""
    out: dict[str, list[paired.Series]] = {}
    for worker, arm, t in workers_of(timed, name):
        out.setdefault(arm, []).append(paired.Series(unit_of(worker), getattr(t, metric), t.keep()))
    return out


def steady_groups(timed: Rounds, name: str) -> dict[str, list[bool]]:
    """Per unit and round, whether its group of blocks (every arm's block of executor ``name`` on that slot in
    that round, back to back on one core) kept one host state: every host reference around them within
    ``host_state.FAST_FACTOR`` of the others (``host_state.steady`` over the group)."""
    refs: dict[str, list[list[float]]] = {}
    for worker, _, t in workers_of(timed, name):
        rounds = refs.setdefault(unit_of(worker), [])
        for r, pair in enumerate(zip(t.reference_before_ms, t.reference_after_ms)):
            if r == len(rounds):
                rounds.append([])
            rounds[r] += [x for x in pair if x]
    return {unit: [bool(g) and host_state.steady(min(g), max(g)) for g in rounds] for unit, rounds in refs.items()}


def metrics_for(device: str) -> tuple[str, ...]:
    """The numbers read against A: host and wall time per step (on a CPU the wall is the host time)."""
    return ("host_ms", "wall_ms") if device.startswith("cuda") else ("host_ms",)


def changes(timed: Rounds, params: Params, name: str, metric: str) -> dict[str, paired.Change]:
    """Per arm other than A, its ``paired.Change`` against A for executor ``name`` and ``metric``, each alone
    (``held`` holds a run's numbers together)."""
    arms = arm_series(timed, name, metric)
    if A not in arms:
        return {}
    steady = steady_groups(timed, name)
    known = (B, TWIN, *plant_labels(params))
    out = {}
    for arm in (*known, *(x for x in arms if x not in (A, *known))):
        if arm in arms and (c := paired.change(metric, arms[A], arms[arm], steady, params.confidence)):
            out[arm] = c
    return out


def held(timed: Rounds, params: Params) -> dict[tuple[str, str], dict[str, paired.Change]]:
    """Per executor and metric, every arm's change against A (``changes``), each arm's numbers over the
    executors and metrics held together (``paired.held_together``): a run asks one question per arm, and its
    chance of any false call stays at most 1 - confidence."""
    found = {(n, m): changes(timed, params, n, m) for n in params.executors for m in metrics_for(params.device)}
    arms = dict.fromkeys(arm for by_arm in found.values() for arm in by_arm)
    for arm in arms:
        keys = [k for k, by_arm in found.items() if arm in by_arm]
        for k, c in zip(keys, paired.held_together([found[k][arm] for k in keys], params.confidence)):
            found[k][arm] = c
    return found


def is_build(arm: str, params: Params) -> bool:
    """Whether an arm is a build read against A (B, a bisection's midpoint), not a control of A's."""
    return arm not in (A, TWIN, *plant_labels(params))


def plant_labels(params: Params) -> list[str]:
    """The planted arms (``remote.planted_arms``)."""
    return [label for label, _ in planted_arms(params)]


def change_rows(timed: Rounds, params: Params, costs: dict) -> list[ComparisonRow]:
    """The key table: per executor, comparison and metric, the change against A (``held``); a build's verdict
    (B's, ``is_build``) gated by the same executor's controls (``gate``; ``costs``: per executor and planted
    arm, what the plant adds in one process, ``remote.planted_cost``)."""
    rows, asked = [], dict(planted_arms(params))
    every = held(timed, params)
    for name in params.executors:
        found = {metric: every[name, metric] for metric in metrics_for(params.device)}
        for metric, by_arm in found.items():
            for arm, c in by_arm.items():
                row = change_row(name, comparison_of(arm), asked.get(arm), metric, c, arm_errors(timed, name, (A, arm)))
                if is_build(arm, params):
                    sizes = {
                        label: None if (x := costs.get(name, {}).get(label)) is None else planted_size(timed, name, x)
                        for label in plant_labels(params)
                    }
                    row = gated(row, gate(found, metric, sizes))
                rows.append(row)
    return rows


def arm_errors(timed: Rounds, name: str, arms: tuple[str, ...]) -> str:
    """The errors that stopped any worker of ``arms`` early for executor ``name``, joined."""
    return "; ".join(sorted({t.error for _, arm, t in workers_of(timed, name) if t.error and arm in arms}))


def change_row(
    name: str, comparison: str, planted: float | None, metric: str, c: paired.Change, error: str
) -> ComparisonRow:
    """An arm's row of the key table: its change against A for ``metric``; ``planted``: the delay the arm
    plants, % of A's host time (None: none)."""
    who = "B" if comparison == "B vs A" else comparison.split(" vs ")[0]
    return ComparisonRow(
        executor=name,
        comparison=comparison,
        planted_pct_asked=planted,
        metric=metric,
        status="ok" if c.judged and not error else "partial",
        reason=error or (None if c.judged else "fewer than 2 workers of an arm measured"),
        a_ms=c.a,
        b_ms=c.b,
        ratio_x=c.ratio,
        ratio_lo_x=c.lo,
        ratio_hi_x=c.hi,
        change_pct=c.change_pct,
        resolution_pct=None if c.resolution is None else 100 * c.resolution,
        p=c.p,
        verdict=c.text(who),
        called=c.called,
        workers_a=c.workers_a,
        workers_b=c.workers_b,
        rounds=c.rounds,
        fast_only=c.fast_only,
        between_sd_pct=None if c.between_sd is None else 100 * c.between_sd,
        within_se_pct=100 * c.within_se,
        df=c.df,
        confidence=c.confidence,
        family=c.family,
        steady_pct=c.steady_pct,
    )


def planted_share(timed: Rounds, name: str, us: float) -> float:
    """A planted delay's share of A's median host time per step over the rounds (the blocks the levels read,
    ``paired.level``), a fraction: the change the delay makes there."""
    a = [v for s in arm_series(timed, name, "host_ms").get(A, []) for v in s.values]
    return us / (1e3 * statistics.median(a)) if a else float("nan")


def planted_size(timed: Rounds, name: str, cost: dict) -> tuple[float, float]:
    """A plant's size and its standard error, fractions of A's step (``planted_share`` of ``planted_cost``)."""
    return planted_share(timed, name, cost["us"]), planted_share(timed, name, cost.get("us_se", 0.0))


def covers(ratio: float, lo: float | None, hi: float | None, size: float, size_se: float) -> bool:
    """Whether a change ``ratio`` (interval ``lo``-``hi``) agrees with a plant measured as ``size`` ±
    ``size_se`` (fractions): their difference in log units within the root sum of squares of the interval's
    half-width and 1.96 x the size's error (the planted size is measured too, not known)."""
    if lo is None or hi is None:
        return False
    reach = math.hypot(math.log(hi / lo) / 2, 1.96 * size_se / (1 + size))
    return abs(math.log(ratio) - math.log1p(size)) <= reach


def gate(found: dict, metric: str, planted: dict[str, tuple[float, float] | None]) -> list[str]:
    """Why one executor's controls fail a build's ``metric`` (docs/method.md), from its changes per metric and
    arm (``held``) and each planted arm's size and its error as fractions of A's step (None: not measured): the
    A/A control called changed; a planted control that disagrees with its size (``covers``); a planted control
    at least twice its own interval's half-width not detected (a smaller one is below what its own interval
    resolves). Empty: they pass."""
    why = []
    aa = found.get(metric, {}).get(TWIN)
    if aa is None or not aa.judged:
        why.append("no A/A control")
    elif aa.called:
        why.append(f"A/A called {aa.change_pct:+.2g}%")
    for label, measured in planted.items():
        c = found.get("host_ms", {}).get(label)
        if c is None or not c.judged or measured is None:
            why.append(f"{label} not measured")
            continue
        size, size_se = measured
        if not covers(c.ratio, c.lo, c.hi, size, size_se):
            why.append(
                f"planted {100 * size:.2g}% (±{196 * size_se:.2g} pp): found {100 * (c.lo - 1):+.2g} to "
                f"{100 * (c.hi - 1):+.2g}%, apart"
            )
        elif size >= 2 * c.half_width and not (c.called and c.ratio > 1):
            why.append(f"planted {100 * size:.2g}% (over twice its ±{100 * c.half_width:.2g}% resolved) not detected")
    return why


def gated(row: ComparisonRow, why: list[str]) -> ComparisonRow:
    """A build's row with its verdict withheld when its controls failed (``gate``)."""
    if not why:
        return replace(row, controls="passed")
    failed = "; ".join(why)
    who = row.comparison.split(" vs ")[0]
    return replace(
        row,
        controls=failed,
        called=False,
        verdict=phrase(NOT_JUDGED, f"the controls failed ({failed}); {who} {row.change_pct:+.2g}%"),
    )


def control_rows(
    table: list[ComparisonRow], delays: dict, costs: dict, timed: Rounds, params: Params
) -> list[ControlRow]:
    """Each planted arm's host-time row: what was planted (the delay asked, or the ops) and what it adds in one
    process (µs, and % of A's host time in these rounds: the planted size; for the ops, kernels and kernel µs
    too), the change found with its interval, whether the interval covers the planted size, and whether it
    was detected."""
    out = []
    plants = {comparison_of(label): label for label, _ in planted_arms(params)}
    for r in table:
        cost = costs.get(r.executor, {}).get(plants.get(r.comparison))
        if r.metric != "host_ms" or cost is None or r.ratio_x is None:
            continue
        size, size_se = planted_size(timed, r.executor, cost)
        lo, hi, pct = r.ratio_lo_x, r.ratio_hi_x, r.planted_pct_asked
        out.append(
            ControlRow(
                executor=r.executor,
                comparison=r.comparison,
                plant="busy wait" if pct is not None else f"{params.planted_ops} ops inside the step",
                planted_pct_asked=pct,
                delay_us=None if pct is None else delays[r.executor][pct],
                planted_us=cost["us"],
                planted_us_se=cost.get("us_se"),
                planted_pct=100 * size,
                planted_se_pct=100 * size_se,
                kernels_per_step_added=cost.get("kernels_per_step"),
                kernel_us_added=cost.get("kernel_us"),
                found_pct=r.change_pct,
                found_lo_pct=None if lo is None else 100 * (lo - 1),
                found_hi_pct=None if hi is None else 100 * (hi - 1),
                covered=covers(r.ratio_x, lo, hi, size, size_se),
                detected=bool(r.called) and r.change_pct > 0,
                verdict=r.verdict,
            )
        )
    return out


def by_arm(workers: list[Worker]) -> dict[str, list[Worker]]:
    out: dict[str, list[Worker]] = {}
    for w in workers:
        out.setdefault(w.arm, []).append(w)
    return out


def build_rows(workers: list[Worker], hello: dict, cores: dict | None = None) -> list[BuildRow]:
    """Per arm: what the build is, its workers and their cores, python and package versions (of its
    first worker), and each folder's git state."""
    rows = []
    for arm, group in by_arm(workers).items():
        first = group[0]
        h = hello.get(first.label) or {}
        errors = [e for w in group if (e := (hello.get(w.label) or {}).get("error"))]
        folders = [{"folder": f, "git": builds.git_state(f)} for f in first.build.path]
        rows.append(
            BuildRow(
                arm=arm,
                build=first.build.text(),
                workers=len(group),
                cores=", ".join(str((cores or {}).get(w.label, "-")) for w in group),
                python=h.get("python"),
                error="; ".join(errors[:1]) or None,
                packages={
                    dist: info.get("version") or f"missing ({info.get('error')})"
                    for dist, info in (h.get("packages") or {}).items()
                },
                folders=folders,
                git="; ".join(git_text(f["folder"], f["git"]) for f in folders if f["git"]) or None,
            )
        )
    return rows


def git_text(folder: str, git: dict) -> str:
    """A folder's git state in a few words: ``lightning-thunder at 1a2b3c4d5e (my-branch, with changes)``."""
    changes = ", with changes" if git["dirty"] else ""
    return f"{Path(folder).name} at {git['commit'][:10]} ({git['branch']}{changes})"


def record_of(built: dict, w: Worker, name: str) -> dict:
    r = built.get(w.label) or {}
    return r.get(name) or {"status": "failed", "reason": r.get("error") or w.error or "not built"}


def executor_rows(workers: list[Worker], built: dict, params: Params) -> list[ArmExecutorRow]:
    """Per executor and arm: how many of its workers built it, the first failure's reason, and the median
    first call."""
    rows = []
    for name in params.executors:
        for arm, group in by_arm(workers).items():
            records = [record_of(built, w, name) for w in group]
            ok = [r for r in records if r["status"] == "ok"]
            bad = [r for r in records if r["status"] != "ok"]
            firsts = [r["first_call_s"] for r in ok if r.get("first_call_s") is not None]
            rows.append(
                ArmExecutorRow(
                    executor=name,
                    arm=arm,
                    status="ok" if not bad else bad[0]["status"],
                    built=f"{len(ok)} of {len(records)}",
                    reason=bad[0].get("reason") if bad else None,
                    first_call_s=statistics.median(firsts) if firsts else None,
                )
            )
    return rows


def failed_entries(params: Params, built: dict, workers: list[Worker]) -> list[ComparisonRow]:
    """Key-table rows for what could not be compared: an executor A's workers could not run (one row),
    else each other arm with a worker that could not run it, with the first reason."""
    rows = []
    for name in params.executors:
        for arm, group in by_arm(workers).items():
            bad = [r for w in group if (r := record_of(built, w, name))["status"] != "ok"]
            if not bad:
                continue
            rows.append(
                ComparisonRow(
                    executor=name,
                    comparison=f"{arm} build",
                    planted_pct_asked=group[0].planted_pct,
                    status=bad[0]["status"],
                    reason=f"{len(bad)} of {len(group)} workers: {bad[0].get('reason')}",
                )
            )
            if arm == A:
                break
    return rows
