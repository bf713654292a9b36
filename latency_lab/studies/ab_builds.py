"""Notebook 08, two builds in the same rounds: did a change of the stack (another Thunder, nvFuser or
transformers, a branch, a variable) move the step? ``run(params) -> Result``, written by ``Result.save``.

One worker process per build (``ab_worker``, in the build's own interpreter, driven over an execnet
channel), each built once, with its own compile caches. One coordinator (this process, which times
nothing itself) gives every worker's entries of one executor a block in turn in the same interleaved
rounds (``harness.rounds``: forward then reverse, the order permuted per pair of rounds; one set of
rounds per executor, so that the blocks compared are neighbours in time), each block between host
references in the worker's own process, which synchronizes before it answers. The host's speed state
flips within 0.1-5 s, so 08 times many short blocks (``NOTEBOOK_DEFAULTS``: 2 warm-up and 10 timed
calls, 120 rounds) rather than a few long ones: two blocks a few tens of ms apart mostly share a state.

Controls in every run: a second worker of build A (A') gives the run's own false-alarm check (A'
against A), and A' with a planted pure-Python delay of ``planted_pct`` % of A's host time per step
gives its sensitivity (the delay is known; the estimate must find it). B against A, A' against A and
each planted entry against A are read alike (``paired.change``): the median per-round ratio, its
bootstrap interval, a signed-rank test, and a call only beyond the measured minimum effect.

The workers and the rounds' entries are ``ab_remote``; the tables read from the rounds and the workers'
records are ``ab_tables``; this module holds the run (``Session``, ``run``), its ``Result`` and findings.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..core import builds, environment, harness, paired, results
from ..core.harness import Rounds
from ..core.parameters import Params
from ..core.progress import say
from ..pages.tables import number
from .ab_remote import TWIN, A, B, calibrate, cost_rows, entries_for, start_and_build, usable, workers_for
from .ab_tables import (
    build_rows,
    change_rows,
    control_rows,
    executor_rows,
    failed_entries,
    kernel_rows,
    logits_rows,
    metrics_for,
    parts_rows,
)
from .study import Study, rounds_text

KEY_COLUMNS = [
    "executor",
    "comparison",
    "metric",
    "a_ms",
    "b_ms",
    "ratio_x",
    "ratio_lo_x",
    "ratio_hi_x",
    "change_pct",
    "resolution_pct",
    "p",
    "verdict",
    "status",
    "reason",
]


# What the page shows of the key table: the verdict carries the change and its interval in words
PAGE_COLUMNS = ["executor", "comparison", "metric", "a_ms", "ratio_x", "p", "verdict", "status", "reason"]


@dataclass
class Result(Study):
    """Notebook 08's run: the builds, the verdicts (B against A and the controls), kernels, parts,
    logits, findings, and the rounds."""

    NOTEBOOK = results.AB_BUILDS
    TITLE = "B against A and the controls, paired per round"
    COLUMNS = KEY_COLUMNS

    builds: list[dict]  # per worker: the build, its versions and folders' git state
    differs: list[str]  # what differs between A and B (empty: the same stack, or no B)
    table: list[dict]  # the key table: per executor, comparison and metric
    controls: list[dict]  # the planted delays: known against found
    kernels: list[dict]
    parts: list[dict]
    logits: list[dict]
    executors: list[dict]  # per executor and worker: status, reason, first call
    min_effect: dict
    findings: list[str]
    timed: Rounds | None = None
    delays_us: dict = field(default_factory=dict)
    costs: list[dict] = field(default_factory=list)  # ``cost_rows``

    def key_table_rows(self) -> list[dict]:
        return self.table

    def sections(self) -> dict:
        return {
            "findings": self.findings,
            "builds": self.builds,
            "differs": self.differs,
            "controls": self.controls,
            "kernels": self.kernels,
            "parts": self.parts,
            "logits": self.logits,
            "executors": self.executors,
            "min_effect": self.min_effect,
            "planted_delays_us": self.delays_us,
            "block_costs": self.costs,
            "method": paired.METHOD,
            **(self.timed.sections() if self.timed else {}),
        }


def differs_text(r: Result) -> str:
    """What the page opens with: what differs between A and B, or that this run has no B."""
    if r.params.build_b is None:
        return (
            "**No build B:** this run times only the controls, two workers of build A and A with a planted delay: "
            "what it could resolve on this machine. `python runner.py ab --b-path FOLDER` adds a B."
        )
    if not r.differs:
        return "**A and B import the same versions from the same folders:** B differs only by its variables."
    return "**What differs between A and B:** " + "; ".join(r.differs) + "."


def findings(r: Result) -> list[str]:
    """Sentences from the tables: what differs, each executor's verdict, the controls, which part moved."""
    out = [differs_text(r)]
    for row in r.table:
        if row["comparison"] == f"{B} build":
            out.append(f"**B could not run {row['executor']}** ({row['status']}): {row['reason']}.")
        elif row["comparison"] == "B vs A" and row["status"] != "ok" and row["metric"] == "host_ms":
            out.append(
                f"**B's {row['executor']} stopped early** ({row['reason']}): its verdict below is from "
                f"{row.get('rounds') or 0} rounds."
            )
    for row in r.table:
        if row["comparison"] == "B vs A" and row.get("ratio_x") is not None:
            out.append(f"**{row['executor']}**, {row['metric'].removesuffix('_ms')} time per step: {row['verdict']}.")
    aa = [x for x in r.table if x["comparison"].startswith("A' vs A") and x.get("ratio_x") is not None]
    false_calls = [x for x in aa if x["called"]]
    if aa:
        called = ", ".join(f"{x['executor']} {x['metric']} ({x['verdict']})" for x in false_calls)
        out.append(
            f"**A/A control:** {len(aa) - len(false_calls)} of {len(aa)} numbers of two workers of build A read "
            "no change"
            + (f"; {called} did not, so this run's verdicts are not to be trusted at that size." if called else ".")
        )
    for c in r.controls:
        out.append(
            f"**Planted {c['planted_pct']:.2g}%** ({c['planted_us']:.3g} µs) in {c['executor']}'s host time: found "
            f"{c['found_pct']:+.2g}% ({c['error_pp']:+.2g} percentage points), "
            + ("detected." if c["detected"] else f"not detected ({c['verdict']}).")
        )
    moved = [p for p in r.parts if p.get("moved") and p["against"] == B]
    if moved:
        out.append(
            "**Parts of B that moved** (in place, paired per round, the whole interval beyond the A/A control's "
            "for the same part): "
            + "; ".join(f"{p['executor']} {p['part']} {p['diff_us']:+.3g} µs" for p in moved)
            + "."
        )
    elif any(p["against"] == B for p in r.parts):
        out.append("No in-place part of B moved beyond its paired interval and the A/A control's for that part.")
    aa = [p for p in r.parts if p["against"] == TWIN and p.get("part")]
    if aa:

        def reach(p):
            return max(abs(p["diff_lo_us"]), abs(p["diff_hi_us"]))

        widest = max(aa, key=reach)
        out.append(
            f"In the A/A control, {sum(bool(p['moved']) for p in aa)} of {len(aa)} in-place parts read moved by "
            f"their test alone (two workers of one build differ part by part; the widest interval, "
            f"{widest['executor']} {widest['part']}, reaches {reach(widest):.3g} µs)"
            + (": a part of B counts only beyond its own A/A interval." if r.params.build_b is not None else ".")
        )
    bad = [x for x in r.logits if not x["passed"]]
    if bad:
        out.append(
            "**Logits differ** beyond the tolerance: "
            + ", ".join(f"{x['executor']} {x['against']} (rel err {number(x['rel_err'])})" for x in bad)
            + "."
        )
    elif r.logits:
        out.append(f"Logits agree with A's within the tolerance for {len(r.logits)} of {len(r.logits)} comparisons.")
    if not r.min_effect:
        out.append(
            "No minimum effect was measured for this kind of machine (min_effect.json): changes are called on the "
            "test and the interval alone."
        )
    return out


class Session:
    """The workers of one run, started and built once (``with Session(params) as s``), their planted
    delays sized against A; ``trial`` times them in a new set of rounds and reads the verdicts, as
    often as asked (``tools/ab_benchmark.py`` runs many trials on one session)."""

    def __init__(self, params: Params):
        self.params = params
        self.cache_root = Path(tempfile.mkdtemp(prefix="latency-lab-ab-"))
        self.workers = workers_for(params, self.cache_root)
        self.by_label = {w.label: w for w in self.workers}
        self.hello, self.built, self.delays = {}, {}, {}

    def __enter__(self) -> Session:
        try:
            self.hello, self.built = start_and_build(self.workers, self.params)
            for w in self.workers:
                print(f"worker {w.label}: {w.build.text()}: {w.error or 'built'}")
            for name in self.params.executors:
                if usable(self.built, A, name) and usable(self.built, TWIN, name):
                    host_ms = calibrate(self.by_label[A], name, self.params)
                    if host_ms:
                        self.delays[name] = {p: p / 100 * host_ms * 1e3 for p in self.params.planted_pct}
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Every worker stopped, the caches removed."""
        for w in self.workers:
            w.stop()
        shutil.rmtree(self.cache_root, ignore_errors=True)

    def trial(self, shuffle: int, min_effect: dict | None = None, extras: bool = True) -> Result:
        """One set of rounds of every entry (``shuffle``: the seed of their order), read against A with
        ``min_effect`` (default: ``min_effect.json``'s for this device); ``extras``: the in-place parts
        and the kernels too."""
        p = self.params
        entries = entries_for(self.by_label, self.built, p, self.delays, parts=extras)
        groups = {e.executor: [x for x in entries if x.executor == e.executor] for e in entries}
        timed = harness.Rounds.merged(
            [harness.rounds(g, p.device, p.warmup, p.iters, p.repeats, shuffle=shuffle) for g in groups.values()]
        )
        effects = paired.min_effects(p.device) if min_effect is None else min_effect
        table = change_rows(timed, p, {k: v for k, v in effects.items() if k in metrics_for(p.device)})
        table += failed_entries(p, self.built, self.by_label)
        hello = self.hello
        both = "packages" in hello.get(B, {}) and "packages" in hello[A]
        result = Result(
            params=p,
            env={},
            builds=build_rows(self.workers, hello),
            differs=builds.differences(hello[A], hello[B]) if both else [],
            table=table,
            controls=control_rows(table, self.delays, timed),
            kernels=kernel_rows(self.by_label, self.built, p) if extras else [],
            parts=parts_rows(timed, p),
            logits=logits_rows(self.built, p),
            executors=executor_rows(self.workers, self.built, p),
            min_effect=effects,
            findings=[],
            timed=timed,
            delays_us=self.delays,
            costs=cost_rows(entries),
        )
        return replace(result, findings=findings(result))


def run(params: Params) -> Result:
    """Start and build the workers, size the planted delays, time every entry in the same rounds,
    then read B and the controls against A (module docstring)."""
    env = environment.collect(params.device)
    print(
        f"device {params.device} · {params.layers} layer(s) · builds A{', B' if params.build_b is not None else ''} "
        f"(and A' of A) · {rounds_text(params)}"
    )
    with Session(params) as session:
        result = replace(session.trial(params.seed), env=env)
    for row in result.table:  # the verdicts in the runner's output too, not only on the page
        if row.get("verdict") and (row["comparison"] == "B vs A" or row["metric"] == "host_ms"):
            say(f"{row['executor']} {row['metric'].removesuffix('_ms')} · {row['comparison']}: {row['verdict']}")
    return result
