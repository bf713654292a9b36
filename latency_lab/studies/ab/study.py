"""Notebook 08, two builds in the same rounds: did a change of the stack (another Thunder, nvFuser or
transformers, a branch, a variable) move the step? ``run(params) -> Result``, written by ``Result.save``.

Each arm is ``workers`` worker processes (``worker``, in the build's own interpreter, driven over execnet
channels), one per core slot: worker i of every arm is pinned to slot i's core. The arms: A; A' (more
workers of build A from a second instance of its code: the A/A control); one arm of build A per planted delay
of ``planted_pct`` % of A's host time (the sensitivity, against a change it knows); and B. They start in an
order balanced over the slots, and a calibration worker outside the arms sizes the plants. One coordinator
(this process, which times nothing itself) runs the rounds slot by slot (``remote.slot_order``): a round
visits the slots in a random order and on each runs every arm's block back to back, each block between host
references in the worker's own process, which synchronizes before it answers. Rounds are added until
``budget_s`` ends or only more slots could help (``stop_reason``), and B's interval is read against the target
``resolve_pct``.

Every arm is read against A alike (``paired.change``: per slot and round log(X / A), the slot is the
replicate, Student's t over the slots; each arm's numbers held together, ``tables.held``), and B's verdict
stands only when the same executor's controls pass (``tables.gate``). The workers and the rounds' entries are
``remote``; the tables ``tables``; this module holds the run (``Session``, ``run``), its ``Result`` and
findings.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ...core import builds, environment, harness, paired, results
from ...core.harness import Rounds
from ...core.parameters import Params
from ...core.phases import phase
from ...core.progress import say
from ...core.row_types import ComparisonRow
from ...core.verdicts import NOT_JUDGED
from ...instruments import counts
from ...pages.tables import number
from ..base import Study, saved
from .extras import count_rows, kernel_rows, level_rows, logits_rows, parts_rows
from .remote import (
    CALIBRATION,
    TWIN,
    A,
    B,
    arm_usable,
    calibrate,
    cost_rows,
    entries_for,
    ops_label,
    pin,
    planted_cost,
    planted_label,
    slot_order,
    start_and_build,
    stop_all,
    worker_label,
    workers_for,
)
from .rows import ArmExecutorRow, BuildRow, ControlRow, CostRow, CountRow, KernelRow, LevelRow, LogitsRow, PartRow
from .stopping import Stopping, half_width_pct, stop_reason, widest
from .tables import (
    build_rows,
    by_arm,
    change_rows,
    control_rows,
    executor_rows,
    failed_entries,
)

KEY_COLUMNS = [
    "executor",
    "comparison",
    "planted_pct_asked",
    "metric",
    "a_ms",
    "b_ms",
    "ratio_x",
    "ratio_lo_x",
    "ratio_hi_x",
    "change_pct",
    "resolution_pct",
    "p",
    "between_sd_pct",
    "verdict",
    "controls",
    "status",
    "reason",
]


# What the page shows of the key table: the verdict carries the change and its interval in words
PAGE_COLUMNS = ["executor", "comparison", "metric", "a_ms", "ratio_x", "p", "verdict", "status", "reason"]


def count_findings(r: Result) -> list[str]:
    """Per executor, B's and the planted ops' counted work against A's in one sentence each: exact, so a change
    of one Python call per step reads as one (``instruments.counts.text``)."""
    out = []
    for name in r.params.executors:
        for arm in dict.fromkeys(c.against for c in r.counts if c.executor == name and c.against != TWIN):
            rows = [c for c in r.counts if c.executor == name and c.against == arm and c.change is not None]
            if not rows:
                continue
            diff = {
                "counters": {c.counter: {"a": c.a, "b": c.b, "change": c.change} for c in rows},
                "functions": next((c.functions for c in rows if c.functions), {}),
            }
            out.append(f"**{name}, counted** ({arm} against A, one step each): {counts.text(diff)}.")
    return out


@dataclass(kw_only=True)
class Result(Study):
    """Notebook 08's run: the builds, the verdicts (B against A and the controls), kernels, parts,
    logits, findings, and the rounds."""

    NOTEBOOK = results.AB_BUILDS
    TITLE = "B against A and the controls, paired per round"
    COLUMNS = KEY_COLUMNS

    findings: list[str] = saved()
    builds: list[BuildRow] = saved()  # per arm: the build, its versions and folders' git state
    differs: list[str] = saved()  # what differs between A and B (empty: the same stack, or no B)
    controls: list[ControlRow] = saved()  # the planted delays: known against found
    kernels: list[KernelRow] = saved()
    counts: list[CountRow] = saved(default_factory=list)  # the step's work counted, A', B, the ops against A
    parts: list[PartRow] = saved()
    logits: list[LogitsRow] = saved()
    executors: list[ArmExecutorRow] = saved()  # per executor and arm: status, reason, first call
    levels: list[LevelRow] = saved()  # per worker: its level against A's (the spread between processes)
    stopping: Stopping | None = saved(write=lambda s: s and asdict(s))
    delays_us: dict = saved("planted_delays_us", default_factory=dict)
    # what each delay adds in one process (``remote.planted_cost``)
    planted_us: dict = saved("planted_cost_us", default_factory=dict)
    costs: list[CostRow] = saved("block_costs", default_factory=list)  # ``cost_rows``
    method: str = saved(default=paired.METHOD)
    timed: Rounds | None = saved(default=None)
    table: list[ComparisonRow]  # the key table: per executor, comparison and metric

    def key_table_rows(self) -> list[ComparisonRow]:
        return self.table


def differs_text(r: Result) -> str:
    """What the page opens with: what differs between A and B, or that this run has no B."""
    if r.params.build_b is None:
        return (
            "**No build B:** this run times only the controls, two arms of build A and arms of A with a planted "
            "delay: what it could resolve on this machine. `python runner.py ab --b-path FOLDER` adds a B."
        )
    if not r.differs:
        return "**A and B import the same versions from the same folders:** B differs only by its variables."
    return "**What differs between A and B:** " + "; ".join(r.differs) + "."


def planted_text(c: ControlRow) -> str:
    """One planted delay (a row of ``control_rows``): its size against what the rounds found."""
    interval = f" ({c.found_lo_pct:+.2g} to {c.found_hi_pct:+.2g}%)" if c.found_lo_pct is not None else ""
    kernels = (
        f"; {c.kernels_per_step_added:+.3g} kernels and {c.kernel_us_added:+.3g} µs of kernel time per step"
        if c.kernel_us_added is not None
        else ""
    )
    return (
        f"**{c.comparison.removesuffix(' vs A')}**, {c.planted_pct:.2g}% as measured ({c.plant}: "
        f"{c.planted_us:.3g} µs per step in one process{kernels}), in {c.executor}'s host time: found "
        f"{c.found_pct:+.2g}%{interval}, "
        + ("detected" if c.detected else "not detected")
        + (", its interval covering the planted size." if c.covered else ", its interval missing the planted size.")
    )


def parts_text(r: Result) -> list[str]:
    """B's in-place parts in the verdicts' words, under the same gate: not judged where B's host time is not
    (its reason), else changed (the whole interval beyond the A/A control's for that part) or same."""
    out, judged = [], []
    verdicts = {x.executor: x.verdict for x in r.table if x.comparison == "B vs A" and x.metric == "host_ms"}
    for name in dict.fromkeys(p.executor for p in r.parts if p.against == B):
        verdict = verdicts.get(name, NOT_JUDGED)
        if verdict.startswith(NOT_JUDGED):
            out.append(f"**{name}, B's in-place parts:** {verdict}, as its host time.")
        else:
            judged.append(name)
    changed = [p for p in r.parts if p.moved and p.against == B and p.executor in judged]
    how = "(first worker of each arm, paired per round, the whole interval beyond the A/A control's for that part"
    if changed:
        out.append(
            f"**B's in-place parts, changed** {how}; a part can change by less than the step's interval): "
            + "; ".join(f"{p.executor} {p.part} {p.diff_us:+.3g} µs" for p in changed)
            + "; every other part same."
        )
    elif judged:
        out.append(f"**B's in-place parts:** same, every one {how}).")
    return out


def findings(r: Result) -> list[str]:
    """Sentences from the tables: what differs, how far the rounds resolved and why they stopped, each
    executor's verdict, the controls, the spread between processes, which part moved."""
    out = [differs_text(r)]
    if r.stopping:
        out.append(f"**{r.stopping.text()}**")
    for row in r.table:
        if row.comparison.endswith(" build"):
            who = row.comparison.removesuffix(" build")
            out.append(f"**{who} could not run {row.executor}** ({row.status}): {row.reason}.")
    for row in r.table:
        if row.comparison == "B vs A" and row.ratio_x is not None:
            out.append(f"**{row.executor}**, {row.metric.removesuffix('_ms')} time per step: {row.verdict}.")
    aa = [x for x in r.table if x.comparison.startswith("A' vs A") and x.ratio_x is not None]
    false_calls = [x for x in aa if x.called]
    if aa:
        called = ", ".join(f"{x.executor} {x.metric} ({x.verdict})" for x in false_calls)
        out.append(
            f"**A/A control:** {len(aa) - len(false_calls)} of {len(aa)} numbers of two arms of build A read "
            "no change" + (f"; {called} did not, so B's verdict for that executor is not judged." if called else ".")
        )
    out += [planted_text(c) for c in r.controls]
    spread = [x for x in r.table if x.comparison.startswith("A' vs A") and x.metric == "host_ms"]
    for x in spread:
        if x.between_sd_pct is not None:
            out.append(
                f"**Between slots** ({x.executor}, host time, A' against A): the slots' paired changes spread "
                f"{x.between_sd_pct:.2g}% (SD over {x.workers_b} slots), against {x.within_se_pct:.2g}% that each "
                f"slot's {x.rounds}+ rounds leave; the interval is Student's t over the slots."
            )
    family = max((x.family or 1 for x in r.table if x.comparison == "B vs A"), default=1)
    if family > 1:
        out.append(
            f"**B's {family} numbers are held together** (Holm's step-down over executors and metrics): each "
            f"interval is at the level its step of the procedure used ({r.params.confidence:.0%} for the family), "
            "so that the chance of any false call among them stays at most "
            f"{1 - r.params.confidence:.0%}."
        )
    out += parts_text(r)
    out += count_findings(r)
    bad = [x for x in r.logits if not x.passed]
    if bad:
        out.append(
            "**Logits differ** beyond the tolerance: "
            + ", ".join(f"{x.executor} {x.against} (rel err {number(x.rel_err)})" for x in bad)
            + "."
        )
    elif r.logits:
        out.append(f"Logits agree with A's within the tolerance for {len(r.logits)} of {len(r.logits)} comparisons.")
    return out


class Session:
    """The workers of one run, started, built and pinned once (``with Session(params) as s``), their plants
    sized against A; ``trial`` times them in rounds until resolved (docs/method.md) and reads the verdicts."""

    def __init__(self, params: Params, more: tuple = ()):
        """``more``: builds beyond A and B, (name, ``builds.Build``), each an arm read against A like B."""
        self.params = params
        self.started = time.perf_counter()
        self.cache_root = Path(tempfile.mkdtemp(prefix="latency-lab-ab-"))
        self.workers = workers_for(params, self.cache_root, more)
        self.by_label = {w.label: w for w in self.workers}
        self.hello, self.built, self.delays, self.cores = {}, {}, {}, {}
        self.planted_us: dict = {}  # per executor and planted arm: what it adds in one process (``planted_cost``)
        self.build_s = 0.0
        self.build_times: dict = {}  # ``start_and_build``'s seconds
        self.entries: list = []

    def __enter__(self) -> Session:
        try:
            with phase("build"):
                self.hello, self.built, self.build_times = start_and_build(self.workers, self.params)
            for arm, group in by_arm(self.workers).items():
                bad = [w for w in group if (self.built.get(w.label) or {}).get("error")]
                print(
                    f"arm {arm}: {len(group)} workers, {group[0].build.text()}: {len(group) - len(bad)} built"
                    + (f" ({self.built[bad[0].label]['error']})" if bad else "")
                )
            self.cores = pin(self.workers)
            for name in self.params.executors:
                calibrates = arm_usable(self.workers, self.built, CALIBRATION, name)
                if not (calibrates and arm_usable(self.workers, self.built, TWIN, name)):
                    continue
                host_ms = calibrate(calibrates[0], name, self.params)
                if host_ms:
                    self.delays[name] = {p: p / 100 * host_ms * 1e3 for p in self.params.planted_pct}
                    self.planted_us[name] = {
                        planted_label(p): planted_cost(calibrates[0], name, self.params, us)
                        for p, us in self.delays[name].items()
                    }
                if self.params.planted_ops:
                    ops = ops_label(self.params.planted_ops)
                    self.planted_us.setdefault(name, {})[ops] = planted_cost(calibrates[0], name, self.params)
            self.build_s = time.perf_counter() - self.started
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Every worker stopped (side by side), the caches removed."""
        with phase("close"):
            stop_all(self.workers)
            shutil.rmtree(self.cache_root, ignore_errors=True)

    def timed_until_resolved(self, shuffle: int, extras: bool) -> tuple[Rounds | None, Stopping]:
        """Rounds added 2 x ``repeats`` at a time until the next batch would pass ``budget_s`` or more rounds
        cannot help (``stop_reason``)."""
        p = self.params
        start = time.perf_counter()
        batches: list[Rounds] = []
        timed, batch_s, reason, needed, trace = None, 0.0, "", None, []
        self.entries = entries_for(self.workers, self.built, p, self.delays, parts=extras)
        while True:
            entries = [e for e in self.entries if not e.worker.error]
            if not entries:
                reason = (
                    "no executor has 2 workers of A and of A' that built it" if not batches else "every worker stopped"
                )
                break
            groups = {e.executor: [x for x in entries if x.executor == e.executor] for e in entries}
            t0 = time.perf_counter()
            seed = f"{shuffle}-{len(batches)}"
            batch = [
                harness.rounds(g, p.device, p.warmup, p.iters, p.repeats, order=lambda e, r: slot_order(e, r, seed))
                for g in groups.values()
            ]
            batch_s = time.perf_counter() - t0
            batches += batch
            timed = harness.Rounds.merged(batches)
            c = widest(timed, p)
            spent = time.perf_counter() - self.started
            hw = half_width_pct(c)
            trace.append([timed.rounds, round(spent, 1), hw])
            say(
                f"rounds: {timed.rounds} · ±{hw:.2g}% against ±{p.resolve_pct:g}% · {spent:.0f} s of {p.budget_s:g} s"
                if hw is not None
                else f"rounds: {timed.rounds} · no interval yet · {spent:.0f} s of {p.budget_s:g} s"
            )
            stop = stop_reason(c, spent, batch_s, p)
            if stop is not None:
                reason, needed = stop
                break
        return timed, self.stopping(timed, reason, needed, trace, start)

    def stopping(self, timed: Rounds | None, reason: str, needed: int | None, trace: list, start: float) -> Stopping:
        """Where the rounds stopped and why: the widest primary interval of ``timed`` against the target, the
        slots it would take (``needed`` where more rounds could not help), and the builds' seconds
        plus the rounds' since ``start`` (``time.perf_counter`` when they began)."""
        p = self.params
        c = widest(timed, p) if timed else None
        hw = half_width_pct(c)
        return Stopping(
            p.resolve_pct,
            hw,
            hw is not None and hw <= p.resolve_pct,
            reason,
            timed.rounds if timed else 0,
            self.build_s,
            self.build_s + time.perf_counter() - start,
            needed if needed is not None else (c.workers_for(p.resolve_pct / 100) if c is not None else None),
            trace,
            self.build_split(),
            p.workers,
        )

    def build_split(self) -> dict:
        """Where ``build_s`` went: the workers, how many built at once, the seconds until all had started and
        built, then sizing the plants; a worker's median seconds of set-up, model and first calls."""
        if not self.build_times:
            return {}
        records = [r for b in self.built.values() for r in b.values() if isinstance(r, dict) and "set_up_s" in r]

        def median(key: str) -> float | None:
            values = [r[key] for r in records if r.get(key) is not None]
            return statistics.median(values) if values else None

        return {
            "workers": len(self.workers),
            **self.build_times,
            "sized_s": self.build_s - self.build_times["built_s"],
            **{key: median(key) for key in ("set_up_s", "model_s", "first_call_s")},
        }

    def trial(self, shuffle: int, extras: bool = True) -> Result:
        """One set of rounds of every entry until resolved (``shuffle``: the seed of their order), read
        against A; ``extras``: the in-place parts and the kernels too."""
        p = self.params
        timed, stopping = self.timed_until_resolved(shuffle, extras)
        say(stopping.text())
        table = change_rows(timed, p, self.planted_us) if timed else []
        table += failed_entries(p, self.built, self.workers)
        hello = self.hello
        a, b = worker_label(A, 0), worker_label(B, 0)
        both = "packages" in hello.get(b, {}) and "packages" in hello.get(a, {})
        with phase("profile"):  # after the rounds: a profiled worker is not timed again
            kernels = kernel_rows(self.by_label, self.built, p) if extras else []
            counted = count_rows(self.by_label, self.built, p) if extras else []
        result = Result(
            params=p,
            env={},
            builds=build_rows(self.workers, hello, self.cores),
            differs=builds.differences(hello[a], hello[b]) if both else [],
            table=table,
            controls=control_rows(table, self.delays, self.planted_us, timed, p) if timed else [],
            kernels=kernels,
            counts=counted,
            parts=parts_rows(timed, p) if timed else [],
            logits=logits_rows(self.built, p),
            executors=executor_rows(self.workers, self.built, p),
            levels=level_rows(timed, p) if timed else [],
            stopping=stopping,
            findings=[],
            timed=timed,
            delays_us=self.delays,
            planted_us=self.planted_us,
            costs=cost_rows(self.entries),
        )
        return replace(result, findings=findings(result))


def run(params: Params) -> Result:
    """Start, build and pin the workers, size the planted delays, time every entry in the same rounds
    until the budget, then read B and the controls against A (module docstring)."""
    env = environment.collect(params.device)
    print(
        f"device {params.device} · {params.layers} layer(s) · {params.arms} arms on {params.workers} core slots "
        f"(A, A'{', planted' if params.planted_pct else ''}{', B' if params.build_b is not None else ''}) · "
        f"{params.warmup} + {params.iters} calls per block · rounds until {params.budget_s:g} s, builds included, "
        f"read against ±{params.resolve_pct:g}%"
    )
    with Session(params) as session:
        result = replace(session.trial(params.seed), env=env)
    for row in result.table:  # the verdicts in the runner's output too, not only on the page
        if row.verdict and (row.comparison == "B vs A" or row.metric == "host_ms"):
            say(f"{row.executor} {row.metric.removesuffix('_ms')} · {row.comparison}: {row.verdict}")
    return result
