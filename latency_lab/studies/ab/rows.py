"""Notebook 08's row types (``rows.Record``), one per section of its results file; the key table's is
``row_types.ComparisonRow`` (``compare`` reads it back). A column a row has only at times is ``optional``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.rows import Record, optional


@dataclass
class BuildRow(Record):
    """Per arm: what its build is, its workers and their cores, its first worker's Python and package
    versions (a column per distribution), the start's error, each folder's git state and that in words."""

    arm: str
    build: str
    workers: int
    cores: str
    python: str | None
    error: str | None
    packages: dict = field(default_factory=dict)  # distribution: its version, or "missing (why)"
    folders: list = field(default_factory=list)  # {"folder", "git": builds.git_state}, one per folder
    git: str | None = None


@dataclass
class ArmExecutorRow(Record):
    """Per executor and arm: how many of its workers built it, the first failure's status and reason, and
    the median first call."""

    executor: str
    arm: str
    status: str
    built: str  # "k of n"
    reason: str | None = None
    first_call_s: float | None = None


@dataclass
class ControlRow(Record):
    """A planted arm's host-time row: what was planted (the delay asked, or the ops) and what it adds in one
    process (µs, and % of A's host time: the planted size; for the ops, kernels and kernel µs too), the
    change found with its interval and its error against the size, whether the interval covers the size,
    and whether it was detected."""

    executor: str
    comparison: str
    plant: str
    planted_pct_asked: float | None
    delay_us: float | None
    planted_us: float
    planted_us_se: float | None
    planted_pct: float
    planted_se_pct: float
    kernels_per_step_added: float | None
    kernel_us_added: float | None
    found_pct: float
    found_lo_pct: float | None
    found_hi_pct: float | None
    error_pp: float | None = field(init=False, default=None)  # found - planted, percentage points
    covered: bool
    detected: bool
    verdict: str

    def __post_init__(self) -> None:
        self.error_pp = self.found_pct - self.planted_pct


@dataclass
class LevelRow(Record):
    """One worker's level: its host time in % against the mean of A's workers' levels, the standard
    error its rounds leave, and how many rounds it read."""

    executor: str
    worker: str
    arm: str
    level_pct: float
    within_se_pct: float
    rounds: int


MEASURED = ("a_us", "b_us", "diff_us", "diff_lo_us", "diff_hi_us", "p", "moved", "rounds")


@dataclass
class PartRow(Record):
    """One in-place part of a Thunder configuration, an arm against A paired per round (``paired.difference``:
    the medians, B - A with its interval, the sign test's p, whether it moved, the rounds) and for B the A/A
    control's interval for the part; or, without a part, why none could be read."""

    executor: str
    against: str
    part: str | None
    reason: str | None = optional()
    a_us: float | None = None
    b_us: float | None = None
    diff_us: float | None = None
    diff_lo_us: float | None = None
    diff_hi_us: float | None = None
    p: float | None = None
    moved: bool | None = None
    rounds: int | None = None
    control_lo_us: float | None = optional()
    control_hi_us: float | None = optional()

    def lacks(self) -> set[str]:
        """``Record.lacks``, and a row without a part lacks the paired columns too."""
        return super().lacks() | (set(MEASURED) if self.part is None else set())


@dataclass
class LogitsRow(Record):
    """An arm's first-call logits against A's (``model.compare_to_eager``), within the tolerance or not; the
    shapes where they differ."""

    executor: str
    against: str
    max_abs_diff: float | None
    rel_err: float | None
    tolerance: float
    passed: bool
    mismatch: str | None = optional()


@dataclass
class KernelRow(Record):
    """An executor's kernels per step and kernel ms per step in A and B (the first worker of each, the
    profiler) and B - A, or why an arm has none: its worker's error (``A_reason``), none on a CPU
    (``reason``). A CPU has no kernels in any arm, so ``reason`` never sits beside an arm's numbers."""

    executor: str
    A_reason: str | None = optional()
    reason: str | None = optional()
    a_kernels_per_step: float | None = optional()
    a_kernel_ms: float | None = optional()
    B_reason: str | None = optional()
    b_kernels_per_step: float | None = optional()
    b_kernel_ms: float | None = optional()
    diff_kernels_per_step: float | None = optional(init=False)
    diff_kernel_us: float | None = optional(init=False)

    def __post_init__(self) -> None:
        if self.a_kernel_ms is not None and self.b_kernel_ms is not None:
            self.diff_kernels_per_step = self.b_kernels_per_step - self.a_kernels_per_step
            self.diff_kernel_us = 1e3 * (self.b_kernel_ms - self.a_kernel_ms)


@dataclass
class CostRow(Record):
    """What one block of an entry of the rounds cost the run (median ms): the request as the coordinator
    saw it, the same inside the worker, and the channel's share."""

    entry: str
    request_ms: float
    in_worker_ms: float
    channel_ms: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.channel_ms = self.request_ms - self.in_worker_ms


@dataclass
class CountRow(Record):
    """One executor's counted work per step (``instruments.counts``), an arm's first worker against A's: the
    counter, A's and the arm's counts and the change (exact: one step each, counted apart from any timing),
    whether both counted steps of each agreed, and the functions whose starts per step changed (B - A, largest
    first) on the Python rows; or, without a count, why."""

    executor: str
    against: str
    counter: str
    a: float | None = None
    b: float | None = None
    change: float | None = None
    steady: bool | None = None
    functions: dict = field(default_factory=dict)
    reason: str | None = optional()
