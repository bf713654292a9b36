"""Notebook 07's savings: the host time a configuration saves against the baseline within the same rounds
(``host_saved``, ``saved_per_reference``), whether that saving is beyond chance (``saving_verdict``), where it
lands among the in-place parts (``part_deltas``), and the levers ranked by it (``ranked``, ``best_levers``)."""

from __future__ import annotations

from ...core import host_state, registry
from ...core.harness import Rounds
from ...core.metrics import Stat
from ...core.row_types import LeverRow
from ...core.verdicts import CHANGED, SAME, phrase
from ...instruments import thunder_breakdown

BASELINE = "thunder"
REFERENCE = "torch.compile"  # what the seed measured Thunder against (no CUDA graphs)
SAVES = phrase(CHANGED, "saves")  # a lever whose saving is beyond chance (``saving_verdict``)
COMBINE_AT_MOST = 3


def host_saved(timed: Rounds, name: str, baseline: str = BASELINE) -> Stat | None:
    """Host µs per step the configuration saves against the baseline, round by round over the rounds
    where both ran fast (``Rounds.paired``), with its interval."""
    return timed.paired(baseline, name, "host_ms", lambda b, x: (b - x) * 1e3)


def saved_per_reference(timed: Rounds, name: str, baseline: str = BASELINE) -> Stat | None:
    """The same saving in units of the round's host reference (``Rounds.per_round``: one reference for both
    blocks of a round), paired over the same rounds."""
    return timed.paired(baseline, name, "host_per_ref_x", lambda b, x: b - x)


def saving_verdict(timed: Rounds, name: str, baseline: str = BASELINE) -> tuple[str | None, float | None]:
    """``changed: saves``, ``changed: costs`` or ``same`` (``verdicts``: changed when the sign
    test over the same rounds as ``host_saved`` gives p < 0.05 and the interval excludes zero), and the sign
    test's p."""
    s = host_saved(timed, name, baseline)
    if s is None:
        return None, None
    ta, tb = timed.entries[baseline], timed.entries[name]
    both = [f and g for f, g in zip(ta.fast, tb.fast)] if s.fast_only else None
    diffs = [(b - x) * 1e3 for i, (b, x) in enumerate(zip(ta.host_ms, tb.host_ms)) if both is None or both[i]]
    p = host_state.sign_test(diffs)
    if not host_state.separated(diffs, s.lo, s.hi):
        return SAME, p
    return (SAVES if s.lo > 0 else phrase(CHANGED, "costs")), p


def part_deltas(taken_apart: dict[str, dict], name: str, baseline: str = BASELINE) -> dict[str, float]:
    """Per in-place part (phases around the computation and statement kinds), the baseline's µs less
    this configuration's, round by round (both instrumented in the same round), median over rounds."""

    def per_block(b):
        return {
            **{k: v for k, v in b.get("phases_per_block", {}).items() if k != "statements"},
            **{thunder_breakdown.kind_label(k): v for k, v in b.get("kinds_per_block", {}).items()},
        }

    mine, base = per_block(taken_apart.get(name) or {}), per_block(taken_apart.get(baseline) or {})
    if not mine or not base:
        return {}
    rounds = min(len(v) for v in [*mine.values(), *base.values()])
    zero = [0.0] * rounds
    return {
        k: Stat.of(b - m for b, m in zip(base.get(k, zero), mine.get(k, zero))).median
        for k in dict.fromkeys([*base, *mine])
    }


def ranked(rows: list[LeverRow]) -> list[LeverRow]:
    """Levers (not the baseline, not the reference, not CUDA graphs) that saved host time, best first."""
    levers = [
        r
        for r in rows
        if r.executor in registry.REGISTRY and registry.REGISTRY[r.executor].lever and r.host_saved_us is not None
    ]
    return sorted(levers, key=lambda r: -r.host_saved_us.median)


def best_levers(rows: list[LeverRow]) -> list[str]:
    """The levers to combine: up to ``COMBINE_AT_MOST`` whose saving is separated from zero (``changed: saves``)."""
    return [r.executor for r in ranked(rows) if r.saving == SAVES][:COMBINE_AT_MOST]
