"""Rows as types: one dataclass per kind of results row, its fields named in the suite's vocabulary
(``metrics``: snake_case with a unit suffix).

``as_dict`` is the row as results files and tables hold it: a field holding a ``Stat`` becomes its
median and quartiles, and its interval where it has one, under the field's name (``wall_ms``,
``wall_q1_ms``, ..., ``Stat.flat``); a field holding a dict (a sweep point's axes, declared as data
by each sweep) is spliced in. ``from_dict`` reads that form back into the type. ``columns`` names what a
row of the type can hold besides those, so the notebooks' column lists are checked against their row
types. Columns a type derives (a floor ratio, how busy the GPU is) are computed in ``__post_init__``,
once, where the type is declared.

A row also reads as its results-file form, column by column (``row["wall_ms"]``, ``row.get(...)``), for
code that takes rows as the results files hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from .metrics import INTERVAL_PARTS, SPREAD_PARTS, Stat, fast_only_name, host_bound, join, split_unit


@dataclass(eq=True)
class Row(Mapping):
    """Who and how it went: the executor, its label, its status (ok, unavailable, failed, partial),
    the reason when not ok, and notes."""

    executor: str
    label: str
    status: str
    reason: str | None
    notes: str | None

    @classmethod
    def of(cls, p, **values):
        """The row of a ``measurement.Measurement`` ``p`` (its identity and outcome) with ``values``."""
        return cls(p.executor.name, p.executor.label, p.status, p.reason, "; ".join(p.notes) or None, **values)

    def as_dict(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if _is_stat(f):
                out.update(value.flat(f.name) if value is not None else {f.name: None})
            elif isinstance(value, dict):
                out.update(value)
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, d: dict):
        """The row of this type that ``as_dict`` made ``d`` from (a results file's row): its fields, each
        statistic rebuilt from its columns (``_stat_from``), the columns no field names spliced back into
        the type's dict field (a sweep point's axes), derived columns computed again. Columns this type
        does not hold are left out."""
        values: dict = {}
        named: set[str] = set()
        spliced = None
        for f in fields(cls):
            if f.type == "dict":
                spliced = f.name
                continue
            named.update(_columns_of(f))
            if not f.init or f.name not in d:
                continue
            values[f.name] = _stat_from(d, f.name) if _is_stat(f) else d[f.name]
        if spliced:
            values[spliced] = {k: v for k, v in d.items() if k not in named}
        return cls(**values)

    @classmethod
    def columns(cls) -> list[str]:
        """Every column a row of this type can have (a spliced dict's keys are the row's own)."""
        out = []
        for f in fields(cls):
            if f.type == "dict":
                continue
            base, unit = split_unit(f.name)
            parts = SPREAD_PARTS + INTERVAL_PARTS if _is_stat(f) else ()
            out += [f.name, *(join(f"{base}_{part}", unit) for part in parts)]
        return out

    def __getitem__(self, column: str):
        return self.as_dict()[column]

    def __iter__(self):
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())

    def note(self, text: str | None) -> None:
        """Add ``text`` to the notes (nothing for None)."""
        if text:
            self.notes = "; ".join(filter(None, (self.notes, text)))


def _is_stat(f) -> bool:
    return "Stat" in str(f.type)


def _columns_of(f) -> list[str]:
    """The columns field ``f`` becomes in ``as_dict``: its name, and a statistic's parts and flag."""
    if not _is_stat(f):
        return [f.name]
    base, unit = split_unit(f.name)
    parts = [join(f"{base}_{part}", unit) for part in SPREAD_PARTS + INTERVAL_PARTS]
    return [f.name, *parts, fast_only_name(f.name)]


def _stat_from(d: dict, name: str) -> Stat | None:
    """The statistic ``Stat.flat(name)`` wrote into ``d`` (``Stat.from_flat``); None where ``d`` has no median."""
    return Stat.from_flat(d, name) if d.get(name) is not None else None


def plain_row(p, **values) -> dict:
    """A results row without a type of its own (a Thunder trace row, a build's first call): the identity
    and outcome of ``measurement.Measurement`` ``p`` (``Row.of``), then ``values``, which may replace them."""
    return {**Row.of(p).as_dict(), **values}


@dataclass
class StepRow(Row):
    """An executor's steady-state step: its first call, wall, host and host-per-reference time over
    the blocks (``harness.rounds``), the kernels per step and their time (the profiler)."""

    first_call_s: float | None = None
    wall_ms: Stat | None = None
    host_ms: Stat | None = None
    host_per_ref_x: Stat | None = None  # host time in units of the adjacent host reference
    kernel_ms: float | None = None
    kernels_per_step: int | None = None

    @classmethod
    def of(cls, p, **values):
        """The row of a ``measurement.Measurement`` ``p``: its identity and outcome, its first call and its
        blocks' statistics (``timed``), then ``values``, which may replace them."""
        return super().of(p, **{"first_call_s": p.first_call_s, **cls.timed(p.timed), **values})

    @staticmethod
    def timed(t) -> dict:
        """The three statistics of a ``rounds.Timed`` (None for each without one), as fields."""
        return {"wall_ms": t and t.wall, "host_ms": t and t.host, "host_per_ref_x": t and t.host_per_ref}

    @property
    def wall(self) -> float | None:
        return self.wall_ms and self.wall_ms.median

    @property
    def host(self) -> float | None:
        return self.host_ms and self.host_ms.median

    @property
    def busy_pct(self) -> float | None:
        """How busy the GPU is: kernel time over the wall, in % (None without either)."""
        return 100 * self.kernel_ms / self.wall if self.wall and self.kernel_ms is not None else None

    def per_floor(self, floor_ms: float | None) -> float | None:
        """The wall over the bandwidth floor (None without either)."""
        return self.wall / floor_ms if self.wall and floor_ms else None


@dataclass
class ExecutorRow(StepRow):
    """02: one executor in the suite's rounds, with the seed's derived columns (CPU overhead = wall -
    kernel time, per kernel), how busy the GPU is, whether the step is host-bound, the floor ratio,
    ``%timeit``'s mean and the two ABBA passes' agreement."""

    copies_per_step: int | None = None
    timeit_ms: float | None = None
    timeit_std_ms: float | None = None
    floor_ms: float | None = None
    wall_iqr_pct: float | None = None
    blocks: int | None = None
    pass_ratio_x: float | None = None
    noisy: bool | None = None
    cpu_overhead_ms: float | None = field(init=False, default=None)
    overhead_per_kernel_us: float | None = field(init=False, default=None)
    gpu_busy_pct: float | None = field(init=False, default=None)
    host_bound: bool | None = field(init=False, default=None)
    floor_ratio_x: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        wall, kernel, count = self.wall, self.kernel_ms, self.kernels_per_step
        if wall and kernel is not None:
            self.cpu_overhead_ms = wall - kernel
            self.overhead_per_kernel_us = (wall - kernel) * 1e3 / count if count else None
        self.gpu_busy_pct, self.host_bound = self.busy_pct, host_bound(self.host, kernel)
        self.floor_ratio_x = self.per_floor(self.floor_ms)


@dataclass
class HostStepRow(StepRow):
    """05: one executor's plain step beside its taken-apart one: the GPU memory it holds, how busy the
    GPU is and whether the step is host-bound."""

    allocated_mib: float | None = None
    reserved_mib: float | None = None
    gpu_busy_pct: float | None = field(init=False, default=None)
    host_bound: bool | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.gpu_busy_pct, self.host_bound = self.busy_pct, host_bound(self.host, self.kernel_ms)


@dataclass
class PointRow(StepRow):
    """04 and 06: one (point, executor) of a sweep (``sweep.row``): the compile caches its first call
    hit, its output's error against eager, the floor and its ratio, the GPU memory the build holds,
    and the point's axes (the sweep's own names: layers, tokens, op, size, ...)."""

    axes: dict = field(default_factory=dict)
    first_call_cache_hits: int | None = None
    rel_err: float | None = None
    floor_ms: float | None = None
    held_allocated_mib: float | None = None
    held_reserved_mib: float | None = None
    floor_ratio_x: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.floor_ratio_x = self.per_floor(self.floor_ms)


@dataclass
class LeverRow(StepRow):
    """07: one Thunder configuration against the baseline in the same rounds: its options and lever,
    its trace's regions, the host time it saves per step (and per reference), the paired test's
    verdict and p, where the saving lands in place, and the floor ratio."""

    options: str | None = None
    lever: str | None = None
    nvfusion_regions: int | None = None
    other_regions: int | None = None
    bound_symbols: int | None = None
    host_saved_us: Stat | None = None
    host_saved_per_ref_x: Stat | None = None
    saving: str | None = None
    saving_p: float | None = None
    largest_change: str | None = None
    floor_ms: float | None = None
    floor_ratio_x: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.floor_ratio_x = self.per_floor(self.floor_ms)


@dataclass
class CombinationRow(StepRow):
    """07: an entry of the combination rounds (the levers that save, together) at a depth, with its
    within-round wall ratio to the baseline and to the reference."""

    key: str = ""
    layers: int | None = None
    combined: bool = False
    vs_baseline_x: Stat | None = None
    vs_reference_x: Stat | None = None


@dataclass
class ExplorerRow(StepRow):
    """00: one executor of an explorer run: its wall's spread, how often the host read slow, whether
    the row is noisy, the method and every block's wall, and the host reference."""

    wall_iqr_pct: float | None = None
    host_slow_pct: float | None = None
    noisy: bool | None = None
    method: str | None = None
    blocks_ms: list | None = None
    host_reference_ms: float | None = None


@dataclass
class OpRow(PointRow):
    """04: one (op, size, executor): its tokens, the intra-op threads, and its overhead against eager at
    the same op and size within rounds (the median difference and the median ratio, each with its interval)."""

    tokens: int | None = None
    threads: int | None = None
    overhead_vs_eager_us: Stat | None = None
    vs_eager_x: Stat | None = None


@dataclass
class ScalingRow(PointRow):
    """06: one build of the sweeps: the sweeps its point belongs to (``depth, prompt`` for the shared
    one), prefill or decode, its key in the rounds, and for a decode build its greedy loop's numbers
    and how many of its tokens equal eager's (where they first differ: eager's margin in ulps, and
    whether that is a near-tie)."""

    sweep: str = ""
    step: str = "prefill"
    key: str = ""
    decode_tokens: int | None = None
    loop_ms: Stat | None = None  # the greedy loop of decode_tokens tokens, one per round
    tpot_ms: Stat | None = None  # time per output token: the loop over its tokens
    tokens_per_s: float | None = None
    tokens_match_eager: int | None = None
    divergence_ulps: float | None = None
    near_tie: bool | None = None
