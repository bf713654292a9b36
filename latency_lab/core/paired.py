"""Arm X against arm A, paired on the slots (docs/method.md, "Two builds in the same rounds"): the estimate,
its interval and the call from one procedure.

Every arm has one worker process on each **unit** (a core slot), and a round runs the arms' blocks of one
unit back to back on its core. So per unit and round the arms are compared within milliseconds on the same
core: d = log(X / A). Per unit, the median over its rounds (those whose group of blocks kept one host state,
``steady``); the change is the mean over units, and its interval Student's t over the units (each unit holds
its own processes, so the spread between processes, with all the rounds add, is the interval's whole width).
**Changed** exactly when that interval excludes no change; **same** otherwise, with the half-width as the
resolution. Several numbers are held together by Holm's step-down (``held_together``). ``difference`` reads
one in-place part of the step paired per round.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

from . import host_state
from .verdicts import CHANGED, NOT_JUDGED, SAME, phrase

CONFIDENCE = 0.95
# The rounds add nothing more when the units' paired changes spread this many times more (in variance) than
# the rounds' own noise explains: only more units (slots) narrow the interval then.
PROCESS_BOUND = 4.0
METHOD = (
    "per unit (a core slot, with one worker process of every arm), the median over its rounds of "
    "log(X / A), X's and A's blocks back to back on that core in each round (rounds whose group of blocks "
    "changed host state left out while at least half stay); the change is the mean over units (ratio exp(d)), "
    "its interval Student's t over the units, its numbers held together by Holm's step-down; changed exactly "
    "when that interval excludes no change (docs/method.md)"
)


def pct(x: float, sign: str = "") -> str:
    """A percentage in 2 significant digits, without an exponent (``1e+02`` reads 100)."""
    return f"{x:{sign}.2g}" if abs(x) < 99.5 else f"{x:{sign}.0f}"


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (``q`` in (0.5, 1)) with ``df`` > 0 degrees of freedom, by bisection on its
    distribution function."""
    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < q else (lo, mid)
    return (lo + hi) / 2


def t_cdf(t: float, df: float) -> float:
    """Student's t distribution function at ``t`` (the regularized incomplete beta function)."""
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2, 0.5, x)
    return 1 - tail if t >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Lentz's continued fraction)."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):
        return 1 - _betainc(b, a, 1 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    f, c, d = 1.0, 1.0, 0.0
    for i in range(400):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1 + num * d
        d = 1 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1 + num / (c if abs(c) > 1e-300 else 1e-300)
        f *= c * d
        if abs(1 - c * d) < 1e-14:
            break
    return front * (f - 1)


@dataclass(frozen=True)
class Series:
    """One worker's blocks of one entry: its unit (the slot every arm has one worker on), the
    number per round (None where it had none) and whether each block ran fast."""

    unit: str
    values: list
    fast: list | None = None


def centres(workers: list[Series]) -> list[float | None]:
    """Per round, the mean log time of every block measured in it (all workers of every arm)."""
    n = max((len(s.values) for s in workers), default=0)
    out = []
    for r in range(n):
        logs = [math.log(s.values[r]) for s in workers if r < len(s.values) and s.values[r] and s.values[r] > 0]
        out.append(statistics.fmean(logs) if logs else None)
    return out


@dataclass(frozen=True)
class Level:
    """One worker's level against the rounds' centres (``level``) and the rounds' own standard error of it."""

    value: float  # median over its rounds of log time less the round's centre
    rounds: int
    within_se: float


def level(series: Series, centre: list[float | None]) -> Level | None:
    """A worker's level: the median over its rounds of its log time less the round's centre (what the page
    shows of how the slots' speeds differ); None without a round."""
    chosen = [math.log(v) - c for v, c in zip(series.values, centre) if v and v > 0 and c is not None]
    if not chosen:
        return None
    mid, se = robust_centre(chosen)
    return Level(mid, len(chosen), se)


def robust_centre(xs: list[float]) -> tuple[float, float]:
    """The median of ``xs`` and its standard error from their spread (MAD-based; independent samples assumed)."""
    mid = statistics.median(xs)
    sd = 1.4826 * statistics.median(abs(x - mid) for x in xs)  # robust: a few odd rounds do not inflate it
    return mid, 1.2533 * sd / math.sqrt(len(xs))


@dataclass(frozen=True)
class UnitChange:
    """One unit's paired change: the median over its rounds of the contrast (log units), its rounds' own
    standard error, the rounds read and the rounds whose group kept one host state."""

    unit: str
    value: float
    within_se: float
    rounds: int
    steady: int


def unit_changes(
    arms: list[tuple[float, list[Series]]], steady: dict[str, list[bool]] | None = None
) -> list[UnitChange]:
    """Per unit that every arm of ``arms`` (weight, its workers' series) has a worker on, the contrast
    sum(weight x log value) per round where every arm measured, its median over the rounds whose group of
    blocks kept one host state (``steady``: per unit and round; all rounds where fewer than half did), and its
    standard error."""
    by_unit = [{s.unit: s for s in series} for _, series in arms]
    out = []
    for unit in sorted(set.intersection(*(set(x) for x in by_unit)), key=str):
        rows = zip(*(u[unit].values for u in by_unit))
        flags = (steady or {}).get(unit)
        pairs = []
        for r, values in enumerate(rows):
            if all(v and v > 0 for v in values):
                d = sum(w * math.log(v) for (w, _), v in zip(arms, values))
                pairs.append((d, True if flags is None or r >= len(flags) else flags[r]))
        if not pairs:
            continue
        kept = [d for d, ok in pairs if ok]
        chosen = kept if 2 * len(kept) >= len(pairs) else [d for d, _ in pairs]
        mid, se = robust_centre(chosen)
        out.append(UnitChange(unit, mid, se, len(chosen), len(kept)))
    return out


@dataclass(frozen=True)
class Change:
    """Arm X against arm A for one number (module docstring). ``ratio`` is X / A, ``lo`` and ``hi`` its
    interval at ``confidence``; ``p`` Student's two-sided p over the units; None where fewer than 2 units."""

    metric: str
    a: float  # A's median time over its workers' blocks (ms)
    b: float  # X's on the same scale: ``a`` times ``ratio``, so that a, b and the change agree
    ratio: float
    lo: float | None
    hi: float | None
    p: float | None
    workers_a: int  # the units read: one process of each arm on each
    workers_b: int
    rounds: int  # the fewest rounds a unit's change was read over
    fast_only: bool
    between_sd: float | None  # the spread of the units' changes (log units ~ fraction)
    within_se: float  # the median unit's own standard error from its rounds
    df: float | None
    se: float | None = None  # the standard error of the mean change (log units)
    confidence: float = CONFIDENCE  # the interval's level (below the run's where Holm held numbers together)
    family: int = 1  # how many numbers were held together with this one (``held_together``)
    steady_pct: float | None = None  # the share of rounds whose group of blocks kept one host state

    @property
    def judged(self) -> bool:
        return self.p is not None

    @property
    def half_width(self) -> float | None:
        """The interval's half-width, relative to no change (a fraction)."""
        return None if self.lo is None else (self.hi - self.lo) / 2

    @property
    def resolution(self) -> float | None:
        """What this run resolves: the half-width."""
        return self.half_width

    @property
    def called(self) -> bool:
        return self.judged and (self.lo > 1 or self.hi < 1)  # the interval excludes no change

    @property
    def verdict(self) -> str:
        return NOT_JUDGED if not self.judged else CHANGED if self.called else SAME

    @property
    def change_pct(self) -> float:
        return 100 * (self.ratio - 1)

    def covers(self, ratio: float) -> bool:
        return self.judged and self.lo <= ratio <= self.hi

    def at(self, confidence: float, family: int) -> Change:
        """This change with its interval at ``confidence``, held together with ``family`` numbers."""
        if self.se is None or self.df is None:
            return replace(self, confidence=confidence, family=family)
        half = t_quantile(1 - (1 - confidence) / 2, self.df) * self.se
        d = math.log(self.ratio)
        return replace(self, lo=math.exp(d - half), hi=math.exp(d + half), confidence=confidence, family=family)

    def rounds_can_help(self) -> bool:
        """Whether more rounds would still narrow the interval: the units' changes spread less than
        ``PROCESS_BOUND`` times (in variance) what their rounds' noise explains."""
        if self.between_sd is None:
            return True
        return self.between_sd**2 < PROCESS_BOUND * self.within_se**2

    def workers_for(self, target: float) -> int | None:
        """Units (slots) that would bring the half-width to ``target`` (a fraction) at this spread."""
        if not self.between_sd or target <= 0:
            return None
        n = 2
        q = 1 - (1 - self.confidence) / 2
        while n < 1000 and t_quantile(q, n - 1) * self.between_sd / math.sqrt(n) > target:
            n += 1
        return n

    def text(self, who: str = "B") -> str:
        """One line: ``changed: B slower by 3.1% (2.4-3.8%)``, ``same: this run resolves ±0.6% (...)``, or
        ``not judged: ...``."""
        if not self.judged:
            return phrase(NOT_JUDGED, f"fewer than 2 slots with a worker of both arms measured ({self.workers_b})")
        interval = f"{pct(100 * (self.lo - 1), '+')} to {pct(100 * (self.hi - 1), '+')}%"
        if self.called:
            lo, hi = sorted(abs(100 * (x - 1)) for x in (self.lo, self.hi))
            way = "slower" if self.ratio > 1 else "faster"
            return phrase(CHANGED, f"{who} {way} by {pct(abs(self.change_pct))}% ({pct(lo)}-{pct(hi)}%)")
        return phrase(
            SAME, f"this run resolves ±{100 * self.half_width:.2g}% ({who} {self.change_pct:+.2g}%, {interval})"
        )

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "change_pct": self.change_pct,
            "resolution_pct": None if self.resolution is None else 100 * self.resolution,
            "verdict": self.verdict,
            "text": self.text(),
        }


def student(values: list[float], confidence: float = CONFIDENCE):
    """The mean of ``values`` with Student's t interval: (mean, half-width, two-sided p, df, se); the last
    four None with fewer than 2 values."""
    d = statistics.fmean(values)
    if len(values) < 2:
        return d, None, None, None, None
    df = len(values) - 1
    se = statistics.stdev(values) / math.sqrt(len(values))
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    p = 2 * (1 - t_cdf(abs(d) / se, df)) if se > 0 else (0.0 if d else 1.0)
    return d, half, p, df, se


def change(
    metric: str,
    a: list[Series],
    b: list[Series],
    steady: dict[str, list[bool]] | None = None,
    confidence: float = CONFIDENCE,
) -> Change | None:
    """``Change`` of arm ``b`` against arm ``a`` (each a list of workers' ``Series`` of ``metric``, one per
    unit), paired per unit and round (``unit_changes``; ``steady``: per unit and round, whether its group of
    blocks kept one host state); ``confidence``: the interval's. None when no unit has both arms measured."""
    units = unit_changes([(-1.0, a), (1.0, b)], steady)
    if not units:
        return None
    ys = [u.value for u in units]
    d, half, p, df, se = student(ys, confidence)
    lo = hi = None
    if half is not None:
        lo, hi = math.exp(d - half), math.exp(d + half)
    fast = [f for s in a + b for f in (s.fast or [False])]

    def ms(arm):
        return statistics.median(v for s in arm for v in s.values if v)

    rounds = sum(u.rounds for u in units)
    return Change(
        metric,
        ms(a),
        ms(a) * math.exp(d),
        math.exp(d),
        lo,
        hi,
        p,
        len(units),
        len(units),
        min(u.rounds for u in units),
        bool(fast) and all(fast),
        statistics.stdev(ys) if len(ys) > 1 else None,
        statistics.median(u.within_se for u in units),
        df,
        se,
        confidence,
        1,
        100 * sum(u.steady for u in units) / max(1, sum(u.rounds for u in units)) if rounds else None,
    )


def held_together(found: list[Change], confidence: float = CONFIDENCE) -> list[Change]:
    """Several numbers held together by Holm's step-down at ``1 - confidence`` (in ``found``'s order): the
    smallest p at alpha / m, the next at alpha / (m - 1), ... until one is not called; that one and every later
    one at the level it failed at. Each comes back with its interval at its own level, so that each is called
    exactly when its interval excludes no change, and the family's chance of any false call stays at most alpha."""
    judged = sorted((c.p, i) for i, c in enumerate(found) if c.judged)
    m, alpha = len(judged), 1 - confidence
    out = list(found)
    level = None
    for step, (p, i) in enumerate(judged):
        if level is None and p >= alpha / (m - step):
            level = alpha / (m - step)
        out[i] = found[i].at(1 - (level or alpha / (m - step)), m)
    return out


def side_of(
    metric: str,
    a: list[Series],
    b: list[Series],
    m: list[Series],
    steady: dict[str, list[bool]] | None = None,
    confidence: float = CONFIDENCE,
) -> dict | None:
    """Where arm ``m`` lies between arms ``a`` and ``b``: per unit and round the contrast 2 log m - log a -
    log b (``unit_changes``), its mean over units with Student's interval and p, and the share of the change
    from a to b that m carries (0: at a, 1: at b); None with fewer than 2 units."""
    units = unit_changes([(-1.0, a), (-1.0, b), (2.0, m)], steady)
    span = unit_changes([(-1.0, a), (1.0, b)], steady)
    if len(units) < 2:
        return None
    d, half, p, df, _ = student([u.value for u in units], confidence)
    spread = statistics.fmean(u.value for u in span) if span else 0.0
    return {
        "metric": metric,
        "vs_middle_pct": 100 * (math.exp(d / 2) - 1),  # m against the geometric middle of a and b
        "lo_pct": 100 * (math.exp((d - half) / 2) - 1),
        "hi_pct": 100 * (math.exp((d + half) / 2) - 1),
        "p": p,
        "df": df,
        "share": None if spread == 0 else (d / 2 + spread / 2) / spread,
        "called": (d - half) > 0 or (d + half) < 0,
    }


def difference(a: list[float], b: list[float]) -> dict | None:
    """B - A per round (same order) for a part of the step in µs: median, its bootstrap 95% interval,
    the sign test's p, and whether it moved (p < 0.05 and the interval excludes zero)."""
    diffs = [y - x for x, y in zip(a, b)]
    if not diffs:
        return None
    lo, hi = host_state.bootstrap(diffs)
    p = host_state.sign_test(diffs)
    return {
        "a_us": statistics.median(a),
        "b_us": statistics.median(b),
        "diff_us": statistics.median(diffs),
        "diff_lo_us": lo,
        "diff_hi_us": hi,
        "p": p,
        "moved": host_state.separated(diffs, lo, hi),
        "rounds": len(diffs),
    }
