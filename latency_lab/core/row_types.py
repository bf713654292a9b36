"""The studies' row types (``rows.Record``): one dataclass per kind of results row, named by the catalog
for the sections ``compare`` reads back (``catalog.Entry.compared``)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from .metrics import Stat, host_bound
from .rows import PointRow, Record, StepRow, column


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


@dataclass
class AvailabilityRow(Record):
    """01: one executor and whether it can run here (status, and the reason where it cannot)."""

    executor: str
    label: str
    runs: str | None = column("what it runs", default=None)
    status: str | None = None
    reason: str | None = None


@dataclass
class TraceSummaryRow(Record):
    """03: one Thunder configuration's final trace in numbers: bound symbols, fusion regions, ops left
    outside them, bookkeeping symbols, the prologue's bound symbols, its first call and its executors."""

    executor: str
    label: str | None = None
    status: str | None = None
    bound_symbols: int | None = None
    fusion_regions: int | None = None
    unfused_ops: int | None = None
    bookkeeping: int | None = None
    prologue_bound_symbols: int | None = None
    first_call_s: float | None = None
    thunder_executors: str | None = None
    reason: str | None = None
    notes: str | None = None


@dataclass
class GraphRow(Record):
    """05: a CUDA-graph variant against the same executor without graphs, in the same rounds: both walls
    and hosts, the within-round wall ratio, the host time removed and the GPU memory each holds."""

    with_graphs: str
    without: str
    wall_with_ms: float | None = None
    wall_without_ms: float | None = None
    wall_ratio_x: Stat | None = None
    host_with_ms: float | None = None
    host_without_ms: float | None = None
    host_removed_pct: float | None = None
    allocated_with_mib: float | None = None
    allocated_without_mib: float | None = None
    reserved_with_mib: float | None = None
    reserved_without_mib: float | None = None
    reason: str | None = None


@dataclass
class GradeRow(Record):
    """05: one grade of a seed claim: the claim, the executor, the value graded and its grade."""

    claim: str
    executor: str
    value: float | None
    grade: str


@dataclass
class FitRow(Record):
    """06: a straight line over depth, per executor and metric: fixed and per-layer cost with standard
    errors (the per-layer cost's interval), RMS residual, the host's per-layer cost in units of the host
    reference, the depths fitted, and a flag for a negative cost (left out); a reason where none was fitted.
    A row has the columns of what it holds (``lacks``): a line's, the host reference's, or the reason."""

    executor: str
    metric: str
    fixed_ms: float | None = None
    fixed_se_ms: float | None = None
    per_layer_ms: float | None = None
    per_layer_se_ms: float | None = None
    per_layer_lo_ms: float | None = None
    per_layer_hi_ms: float | None = None
    rms_residual_ms: float | None = None
    per_layer_per_ref_x: float | None = None
    per_layer_per_ref_lo_x: float | None = None
    per_layer_per_ref_hi_x: float | None = None
    depths: str | None = None
    flag: str | None = None
    reason: str | None = None

    def lacks(self) -> set[str]:
        """Without a line (no depths): everything but the executor, metric and reason; with one: the reason,
        and the per-reference columns where the line has none."""
        names = [f.name for f in fields(self)]
        if self.depths is None:
            return set(names) - {"executor", "metric", "reason"}
        per_ref = {n for n in names if "_per_ref_" in n} if self.per_layer_per_ref_x is None else set()
        return {"reason", *per_ref}


@dataclass
class ComparisonRow(Record):
    """08's key table: one executor, comparison (``B vs A``, the A/A control, a planted arm; ``ARM build`` for
    an arm that could not run the executor, without numbers) and metric: A's and the arm's levels, their
    ratio with its interval, the change and the move the run resolves (%), the test's p and call, its words
    (``verdict``), the slots and rounds behind it, whether only fast blocks counted, the spread between slots
    against the rounds' noise, for a build's row whether the same executor's controls passed, and the
    interval's level after Holm held the arm's numbers together."""

    executor: str
    comparison: str
    planted_pct_asked: float | None = None  # the delay the arm plants, % of A's host time (None: none)
    metric: str | None = None
    status: str | None = None
    reason: str | None = None
    a_ms: float | None = None
    b_ms: float | None = None
    ratio_x: float | None = None
    ratio_lo_x: float | None = None
    ratio_hi_x: float | None = None
    change_pct: float | None = None
    resolution_pct: float | None = None
    p: float | None = None
    verdict: str | None = None
    called: bool | None = None
    workers_a: int | None = None
    workers_b: int | None = None
    rounds: int | None = None
    fast_only: bool | None = None
    between_sd_pct: float | None = None
    within_se_pct: float | None = None
    df: float | None = None
    controls: str | None = None  # a build's row: "passed", or why its verdict is withheld
    confidence: float | None = None  # the interval's level (below the run's where Holm held numbers together)
    family: int | None = None  # how many numbers of the arm were held together with this one
    steady_pct: float | None = None  # the share of rounds whose slot's group of blocks kept one host state
