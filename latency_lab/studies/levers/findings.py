"""Notebook 07's findings: the counterfactual model (the baseline's step at a lower host cost per nvFuser
kernel, ``counterfactual``) and the sentences over the rows: the levers ranked by their saving, those that
could not be measured, the counterfactual, and the combination at every depth (``findings``)."""

from __future__ import annotations

from ...core.harness import Rounds
from ...core.metrics import Stat
from ...core.rounds import host_moved_note
from ...core.row_types import CombinationRow, LeverRow
from ...instruments.thunder_breakdown import CallRow
from ...pages.tables import number
from .rows import CounterfactualRow
from .savings import BASELINE, REFERENCE, ranked

COUNTERFACTUAL_US_PER_KERNEL = (10.0, 5.0, 1.0)


def counterfactual(
    taken_apart: dict[str, dict], regions: list[CallRow], timed: Rounds, kernel_ms: float | None, floor_ms: float | None
) -> list[CounterfactualRow]:
    """The baseline's step if each nvFusion region's host cost were ``c`` µs per kernel, for each
    ``COUNTERFACTUAL_US_PER_KERNEL``: host = measured host - measured nvFusion host in place + c x its
    kernels; wall = the larger of that host time and the measured kernel time (a host-bound step waits
    for its host; the GPU cannot beat its kernels). Assumptions: every other part keeps its measured
    cost, and kernels overlap the host perfectly once the host is faster."""
    b = taken_apart.get(BASELINE) or {}
    t = timed.entries.get(BASELINE)
    nv = b.get("kinds", {}).get("nvFusion")
    kernels = sum(r.kernels or 0 for r in regions if r.executor == BASELINE and r.kind == "nvFusion")
    if not (nv and kernels and t and t.host):
        return []
    host_us = t.host.median * 1e3

    def row(model: str, us_per_kernel: float, host: float, wall: float) -> CounterfactualRow:
        return CounterfactualRow(model, us_per_kernel, host, wall, wall / floor_ms if floor_ms else None)

    rows = [row("measured", nv.median / kernels, host_us / 1e3, t.wall.median)]
    for c in COUNTERFACTUAL_US_PER_KERNEL:
        host = (host_us - nv.median + c * kernels) / 1e3
        wall = max(host, kernel_ms) if kernel_ms is not None else host
        rows.append(row(f"{number(c)} µs per nvFuser kernel", c, host, wall))
    return rows


def _landing(row: LeverRow) -> str:
    """Where a lever's saving lands most, as a clause, or nothing."""
    return f"; largest in-place change: {row.largest_change}" if row.largest_change else ""


def ranking_text(rows: list[LeverRow], timed: Rounds) -> str:
    """The levers that saved host time, best first, each with its verdict, interval and sign test."""
    order = ranked(rows)
    if not order:
        return "No lever ran beside the baseline here, so none is ranked."
    parts = [
        f"{r.executor} {number(r.host_saved_us.median)} µs ({r.saving}; interval {number(r.host_saved_us.lo)} to "
        f"{number(r.host_saved_us.hi)}, sign test p {number(r.saving_p)}{_landing(r)})"
        for r in order
    ]
    base = next((r for r in rows if r.executor == BASELINE), None)
    note = host_moved_note(timed, order[0].host_saved_us.median / 1e3 / base.host) if base and base.host else ""
    return (
        "Host time saved per step against Thunder-nvFuser, within the rounds where both ran fast, best first "
        "(changed only when a sign test over those rounds gives p < 0.05 and the interval excludes zero, else same): "
        + "; ".join(parts)
        + "."
        + note
    )


def failed_text(rows: list[LeverRow]) -> str | None:
    """The configurations this run could not measure, with their status and reason, or None."""
    bad = [r for r in rows if r.status != "ok"]
    if not bad:
        return None
    return (
        "Levers this run could not measure: " + "; ".join(f"{r.executor} ({r.status}: {r.reason})" for r in bad) + "."
    )


def _median(s: Stat | None) -> float | None:
    """The median of ``s``, or None."""
    return s and s.median


def combination_text(
    combo: list[CombinationRow], depth_of: dict[str, int], floor_of: dict[int, float | None]
) -> list[str]:
    """Per depth: the combination against the baseline and torch.compile (within-round ratios), and its
    distance from the bandwidth floor."""
    out = []
    for depth in sorted(set(depth_of.values())):
        here = {r.executor: r for r in combo if depth_of.get(r.key) == depth}
        combined = next((r for n, r in here.items() if n not in (BASELINE, REFERENCE) and r.combined), None)
        if combined is None or combined.wall is None:
            out.append(f"At {depth} layer{'s' if depth > 1 else ''}: no combination was measured.")
            continue
        ref, base = here.get(REFERENCE), here.get(BASELINE)
        text = (
            f"At {depth} layer{'s' if depth > 1 else ''}: {combined.executor} "
            f"{number(combined.wall)} ms wall, "
            f"x{number(_median(combined.vs_baseline_x))} of Thunder-nvFuser's ({number(base and base.wall)} ms)"
        )
        if ref and ref.wall:
            vs = combined.vs_reference_x
            low = None if vs is None else vs.lo if vs.lo is not None else vs.q1
            reaches = low is not None and low <= 1.0
            text += f" and x{number(_median(vs))} of torch.compile's ({number(ref.wall)} ms): " + (
                "it reaches torch.compile's wall" if reaches else "it does not reach torch.compile's wall"
            )
        if floor_of.get(depth):
            text += f"; x{number(combined.wall / floor_of[depth])} the bandwidth floor"
        out.append(text + " (ratios within rounds).")
    return out


def counterfactual_text(model: list[CounterfactualRow], rows: list[LeverRow]) -> str | None:
    """The counterfactual's walls beside torch.compile's and the best lever's measured ones, or None."""
    if not model:
        return None
    ref = next((r for r in rows if r.executor == REFERENCE and r.wall), None)
    best = next(iter(ranked(rows)), None)
    parts = [f"{m.model}: {number(m.wall_ms)} ms wall" for m in model[1:]]
    text = (
        "Counterfactual (model, not measured): Thunder-nvFuser's nvFusion regions cost "
        f"{number(model[0].us_per_kernel)} µs "
        f"of host time per kernel in place; at " + "; ".join(parts)
    )
    if ref:
        text += f"; torch.compile measured {number(ref.wall)} ms"
    if best:
        text += f"; the best lever, {best.executor}, measured {number(best.wall)} ms"
    return text + "."


def findings(rows, timed, model, combo, depth_of, floor_of) -> list[str]:
    """07's sentences: the ranking, the failures, the counterfactual and the combination at every depth."""
    return [
        t
        for t in (
            ranking_text(rows, timed),
            failed_text(rows),
            counterfactual_text(model, rows),
            *combination_text(combo, depth_of, floor_of),
        )
        if t
    ]
