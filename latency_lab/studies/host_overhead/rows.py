"""Notebook 05's row types (``rows.Record``) besides ``row_types.HostStepRow``: the in-place parts' closing
row, the phases of one call and the regions in place beside alone (the parts themselves are
``thunder_breakdown.PartRow``s)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.metrics import Stat
from ...core.rows import Record
from ...instruments.thunder_breakdown import PartRow


@dataclass
class RemainderRow(PartRow):
    """The parts' last row per configuration: the plain step's host time less the instrumented call's
    (µs, and % of the plain step; medians over the rounds)."""

    remainder_pct: float | None = None


@dataclass
class PhaseRow(Record):
    """One phase of a configuration's call, in place: µs per call over the rounds (median, quartiles and
    its interval, ``thunder_breakdown.phase_stats``)."""

    executor: str
    phase: str
    us: Stat


@dataclass
class RegionRow(Record):
    """One region or op of a configuration's computation (a statement of its in-place breakdown): in
    place (µs per call, median and quartiles over the rounds), alone from an idle GPU through Thunder's
    wrapper and, for an nvFuser region, its ``fd.execute`` alone, the kernels it launches alone, and each
    time per kernel."""

    executor: str
    statement: int
    call: str
    kind: str
    in_place_us: Stat
    alone_us: float | None = None
    execute_alone_us: float | None = None
    kernels: float | None = None
    in_place_us_per_kernel: float | None = field(init=False, default=None)
    alone_us_per_kernel: float | None = field(init=False, default=None)
    execute_alone_us_per_kernel: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        k = self.kernels

        def per_kernel(us: float | None) -> float | None:
            return us / k if k and us is not None else None

        self.in_place_us_per_kernel = per_kernel(self.in_place_us.median)
        self.alone_us_per_kernel = per_kernel(self.alone_us)
        self.execute_alone_us_per_kernel = per_kernel(self.execute_alone_us)
