"""Notebook 07's row types (``rows.Record``) besides ``row_types.LeverRow`` and ``CombinationRow``: the
configurations beside the baseline, their in-place parts against the baseline's, and the counterfactual
model (the baseline's regions alone are ``thunder_breakdown.CallRow``s)."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.rows import Record
from ...instruments.thunder_breakdown import PartRow


@dataclass
class ConfigurationRow(Record):
    """A configuration 07 sets beside the baseline (the compile options it passes, its lever, what it
    runs), or a remedy the seed names that this Thunder has no switch for (unavailable, with its reason)."""

    executor: str
    options: str | None = None
    lever: str | None = None
    what_it_runs: str | None = None
    status: str | None = None
    reason: str | None = None


@dataclass
class LeverPartRow(PartRow):
    """An in-place part of a configuration's call (``thunder_breakdown.PartRow``) with the µs it saves
    against the baseline's same part (``savings.part_deltas``; None for the baseline itself)."""

    saved_vs_baseline_us: float | None = None


@dataclass
class CounterfactualRow(Record):
    """The baseline's step as measured, or modelled at a lower host cost per nvFuser kernel
    (``findings.counterfactual``): that cost, the host and wall time per step, and the wall over the
    bandwidth floor."""

    model: str
    us_per_kernel: float
    host_ms: float
    wall_ms: float
    floor_ratio_x: float | None = None
