"""Notebook 08's tables beside the verdicts: each worker's level (how the slots differ), the in-place parts of
a Thunder step paired per round against the A/A control's, logits against A's, kernels per step of A and B,
and the step's work counted in A, A', B and the planted ops (``count_rows``)."""

from __future__ import annotations

import math
import statistics

from ...core import model, paired
from ...core.harness import Rounds
from ...core.parameters import Params
from ...instruments import counts
from .remote import TWIN, A, B, Worker, WorkerError, entry_name, ops_label, usable, worker_label
from .rows import CountRow, KernelRow, LevelRow, LogitsRow, PartRow
from .tables import arm_series, unit_of, workers_of


def level_rows(timed: Rounds, params: Params) -> list[LevelRow]:
    """Every worker's level (host time, % against the mean of A's workers' levels, each against its round's
    centre): how the slots and processes differ, kept as data (the verdicts pair the arms on each slot)."""
    rows = []
    for name in params.executors:
        arms = arm_series(timed, name, "host_ms")
        if A not in arms:
            continue
        every = [s for group in arms.values() for s in group]
        centre = paired.centres(every)
        base = [x.value for s in arms[A] if (x := paired.level(s, centre))]
        ref = statistics.fmean(base) if base else 0.0
        for worker, arm, t in workers_of(timed, name):
            if x := paired.level(paired.Series(unit_of(worker), t.host_ms, t.keep()), centre):
                level = 100 * (math.exp(x.value - ref) - 1)
                rows.append(LevelRow(name, worker, arm, level, 100 * x.within_se, x.rounds))
    return rows


def parts_rows(timed: Rounds, params: Params) -> list[PartRow]:
    """Per Thunder configuration and in-place part: A' against A (the A/A control), and B against A,
    each paired per round (``paired.difference``). A part of B **moved** when its test calls it and
    its whole interval lies beyond the control's interval for the same part (what two workers of build
    A differ by in this run); the control's own rows show what no change looks like, part by part."""
    rows = []
    for name in params.executors:
        a = timed.entries.get(entry_name(name, worker_label(A, 0)))
        if a is None or "parts" not in a.probes:
            continue
        control = {}
        for other in (TWIN, B):
            b = timed.entries.get(entry_name(name, worker_label(other, 0)))
            if b is None:
                continue
            pa, pb = a.probes["parts"], b.probes["parts"]
            reason = next((x.get("reason") for x in pa + pb if "reason" in x), None)
            if reason:
                rows.append(PartRow(name, other, None, reason=reason))
                continue
            n = min(len(pa), len(pb))
            for part in dict.fromkeys([*pa[0]["us"], *pb[0]["us"]] if n else []):
                d = paired.difference(*([x["us"].get(part, 0.0) for x in side[:n]] for side in (pa, pb)))
                if d is None:
                    continue
                if other == TWIN:
                    control[part] = (d["diff_lo_us"], d["diff_hi_us"])
                else:
                    lo, hi = control.get(part, (0.0, 0.0))
                    d["control_lo_us"], d["control_hi_us"] = lo, hi
                    d["moved"] = d["moved"] and (d["diff_lo_us"] > hi or d["diff_hi_us"] < lo)
                rows.append(PartRow(name, other, part, **d))
    return rows


def logits_rows(built: dict, params: Params) -> list[LogitsRow]:
    """Per executor, A' and B's first-call logits against A's (``model.compare_to_eager``'s tolerance)."""
    import torch

    def logits(arm, name):
        r = built[worker_label(arm, 0)][name]
        return torch.frombuffer(bytearray(r["logits"]), dtype=torch.float32).reshape(r["shape"])

    rows = []
    for name in params.executors:
        for who in (TWIN, B):
            if not (usable(built, worker_label(A, 0), name) and usable(built, worker_label(who, 0), name)):
                continue
            check = model.compare_to_eager(logits(who, name), logits(A, name), "float32", params.layers)
            check = {**check, "tolerance": model.tolerance(params.dtype, params.layers)}
            check["passed"] = check["rel_err"] is not None and check["rel_err"] <= check["tolerance"]
            rows.append(LogitsRow(name, f"{who} vs A", **check))
    return rows


def kernel_rows(workers: dict[str, Worker], built: dict, params: Params) -> list[KernelRow]:
    """Kernels per step and kernel ms per step of each executor in A and B (the first worker of each,
    the profiler), and B - A (``KernelRow``)."""
    rows = []
    arms = [arm for arm in (A, B) if worker_label(arm, 0) in workers]
    for name in params.executors:
        row = {}
        for arm in arms:
            label = worker_label(arm, 0)
            if not usable(built, label, name):
                continue
            try:
                k = workers[label].call("kernels", executor=name, steps=max(3, min(params.iters, 10)))
            except WorkerError as e:
                row[f"{arm}_reason"] = str(e)
                continue
            if "reason" in k:
                row["reason"] = k["reason"]
                continue
            row[f"{arm.lower()}_kernels_per_step"] = k["kernels_per_step"]
            row[f"{arm.lower()}_kernel_ms"] = k["kernel_ms"]
        rows.append(KernelRow(name, **row))
    return rows


def count_rows(workers: dict[str, Worker], built: dict, params: Params) -> list[CountRow]:
    """Per executor, the step's work counted in the first worker of A and of A', B and the planted ops arm
    (``worker.Worker.counts``, after the rounds), each against A's: per counter A's count, the arm's and the
    change, and on the Python rows the functions whose starts changed. An identical build changes nothing; the
    planted ops change exactly their own calls."""
    rows = []
    others = [TWIN, B, *([ops_label(params.planted_ops)] if params.planted_ops else [])]
    for name in params.executors:
        counted = {}
        for arm in (A, *others):
            label = worker_label(arm, 0)
            if label not in workers or not usable(built, label, name):
                continue
            variant = workers[label].variants[-1]
            try:
                counted[arm] = workers[label].call("counts", executor=name, variant=variant)
            except WorkerError as e:
                rows.append(CountRow(name, arm, "all", reason=str(e)))
        if A not in counted:
            continue
        base = counts.Counts.from_dict(counted[A])
        for arm in (x for x in others if x in counted):
            diff = counts.difference(base, counts.Counts.from_dict(counted[arm]))
            for counter, v in diff["counters"].items():
                steady = counter not in counted[A]["unsteady"] and counter not in counted[arm]["unsteady"]
                functions = diff["functions"] if counter == "python_function_starts" else {}
                rows.append(CountRow(name, arm, counter, v["a"], v["b"], v["change"], steady, functions))
            for counter, why in counted[arm]["unavailable"].items():
                rows.append(CountRow(name, arm, counter, reason=why))
    return rows
