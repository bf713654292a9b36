"""Arm X against arm A, each arm k worker processes timed in the same rounds: the estimate, its
interval and the call from one procedure (docs/method.md, "Two builds in the same rounds").

The process is the level that varies: two workers of one build keep offsets of 1-2% for their whole
life. So each worker is one replicate. Per round, the centre is the mean log time of every block in
it (what moves every worker in a round cancels); a worker's **level** is the median over its rounds of
its log time less the centre; the change is the difference of the two arms' mean levels, and
its 95% interval is Welch's t interval over the workers. **Changed** exactly when that interval
excludes no change; **same** otherwise, with the half-width as the resolution. ``difference`` reads
one in-place part of the step paired per round between two workers.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from . import host_state
from .verdicts import CHANGED, NOT_JUDGED, SAME, phrase

CONFIDENCE = 0.95
# The rounds add nothing more when the workers' levels spread this many times more (in variance) than
# the rounds' own noise explains: only more workers narrow the interval then.
PROCESS_BOUND = 4.0
METHOD = (
    "per worker, the median over its rounds of log time less the round's mean log time; the change is the "
    "difference of the two arms' mean levels (ratio exp(d)), its 95% interval Welch's t interval over the "
    "workers; changed exactly when that interval excludes no change (docs/method.md)"
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
    """One worker's blocks of one entry: the number per round (None where it had none) and whether each
    block ran fast."""

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
    """One worker's level (``level``) and what its rounds say of its own precision."""

    value: float  # median over its rounds of log time less the round's centre
    rounds: int
    fast_only: bool  # every one of its blocks ran in the host's fast state
    within_se: float  # the rounds' own standard error of that median (MAD-based, independent rounds assumed)


def level(series: Series, centre: list[float | None]) -> Level | None:
    """A worker's level against the rounds' centres: the median over all of its rounds of its log time less
    the round's centre (every worker over the same kind of rounds: choosing fast blocks per worker mixed
    states, since a worker with fewer than 6 fast blocks fell back to all of them); None without a round."""
    chosen = [math.log(v) - c for v, c in zip(series.values, centre) if v and v > 0 and c is not None]
    if not chosen:
        return None
    mid = statistics.median(chosen)
    sd = 1.4826 * statistics.median(abs(x - mid) for x in chosen)  # robust: a few slow blocks do not inflate it
    fast = bool(series.fast) and all(series.fast)
    return Level(mid, len(chosen), fast, 1.2533 * sd / math.sqrt(len(chosen)))


@dataclass(frozen=True)
class Change:
    """Arm X against arm A for one number (module docstring). ``ratio`` is X / A, ``lo`` and ``hi`` its
    interval; ``p`` Welch's two-sided p; None where an arm has fewer than 2 workers."""

    metric: str
    a: float  # A's median time over its workers' blocks (ms)
    b: float  # X's on the same scale: ``a`` times ``ratio``, so that a, b and the change agree (X's own
    # median over its blocks can sit on the other side of A's: the rounds' centres set the levels apart)
    ratio: float
    lo: float | None
    hi: float | None
    p: float | None
    workers_a: int
    workers_b: int
    rounds: int  # the fewest rounds a worker's level was read over
    fast_only: bool
    between_sd: float | None  # the pooled spread of the workers' levels within an arm (log units ~ fraction)
    within_se: float  # the median worker's own standard error from its rounds
    df: float | None

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

    def rounds_can_help(self) -> bool:
        """Whether more rounds would still narrow the interval: the workers' levels spread less than
        ``PROCESS_BOUND`` times (in variance) what their rounds' noise explains."""
        if self.between_sd is None:
            return True
        return self.between_sd**2 < PROCESS_BOUND * self.within_se**2

    def workers_for(self, target: float) -> int | None:
        """Workers per arm that would bring the half-width to ``target`` (a fraction), at this spread."""
        if not self.between_sd or target <= 0:
            return None
        k = 2
        while k < 1000 and t_quantile(0.975, 2 * (k - 1)) * self.between_sd * math.sqrt(2 / k) > target:
            k += 1
        return k

    def text(self, who: str = "B") -> str:
        """One line: ``changed: B slower by 3.1% (2.4-3.8%)``, ``same: this run resolves ±0.6% (...)``, or
        ``not judged: ...``."""
        if not self.judged:
            return phrase(
                NOT_JUDGED, f"fewer than 2 workers of an arm measured ({self.workers_a} and {self.workers_b})"
            )
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


def change(
    metric: str, a: list[Series], b: list[Series], every: list[Series], confidence: float = CONFIDENCE
) -> Change | None:
    """``Change`` of arm ``b`` against arm ``a`` (each a list of workers' ``Series`` of ``metric``);
    ``every``: all workers of the same rounds, whose blocks make the rounds' centres; ``confidence``: the
    interval's (a change is called at p < 1 - confidence). None when an arm has no worker with a round."""
    centre = centres(every)
    la = [x for s in a if (x := level(s, centre))]
    lb = [x for s in b if (x := level(s, centre))]
    if not la or not lb:
        return None
    ya, yb = [x.value for x in la], [x.value for x in lb]
    d, half, p, df = welch([(-1.0, ya), (1.0, yb)], confidence)
    lo = hi = between = None
    if half is not None:
        lo, hi = math.exp(d - half), math.exp(d + half)
        pooled = ((len(ya) - 1) * statistics.variance(ya) + (len(yb) - 1) * statistics.variance(yb)) / (
            len(ya) + len(yb) - 2
        )
        between = math.sqrt(pooled)

    def ms(arm):
        return statistics.median(v for s in arm for v in s.values if v)

    return Change(
        metric,
        ms(a),
        ms(a) * math.exp(d),
        math.exp(d),
        lo,
        hi,
        p,
        len(la),
        len(lb),
        min(x.rounds for x in la + lb),
        all(x.fast_only for x in la + lb),
        between,
        statistics.median(x.within_se for x in la + lb),
        df,
    )


def welch(groups: list[tuple[float, list[float]]], confidence: float = CONFIDENCE):
    """A contrast of group means, sum of weight x mean over ``groups`` (weight, the workers' levels), with
    Welch-Satterthwaite's t interval: (estimate, half-width, two-sided p, df); the last three None where a
    group has fewer than 2 levels."""
    d = sum(w * statistics.fmean(y) for w, y in groups)
    if any(len(y) < 2 for _, y in groups):
        return d, None, None, None
    parts = [w * w * statistics.variance(y) / len(y) for w, y in groups]
    se = math.sqrt(sum(parts))
    if se > 0:
        df = sum(parts) ** 2 / sum(v * v / (len(y) - 1) for v, (_, y) in zip(parts, groups))
    else:
        df = sum(len(y) for _, y in groups) - len(groups)
    half = t_quantile(1 - (1 - confidence) / 2, df) * se
    p = 2 * (1 - t_cdf(abs(d) / se, df)) if se > 0 else (0.0 if d else 1.0)
    return d, half, p, df


def side_of(
    metric: str, a: list[Series], b: list[Series], m: list[Series], every: list[Series], confidence: float = CONFIDENCE
) -> dict | None:
    """Where arm ``m`` lies between arms ``a`` and ``b``: the contrast of its mean level against the mean
    of theirs (2 m - a - b, log units) with its interval and p (``welch``), and the share of the change from
    a to b that m carries (0: at a, 1: at b); None when an arm has no level or fewer than 2."""
    centre = centres(every)
    levels = [[x.value for s in arm if (x := level(s, centre))] for arm in (a, b, m)]
    if any(len(y) < 2 for y in levels):
        return None
    ya, yb, ym = levels
    d, half, p, df = welch([(-1.0, ya), (-1.0, yb), (2.0, ym)], confidence)
    span = statistics.fmean(yb) - statistics.fmean(ya)
    return {
        "metric": metric,
        "vs_middle_pct": 100 * (math.exp(d / 2) - 1),  # m against the geometric middle of a and b
        "lo_pct": 100 * (math.exp((d - half) / 2) - 1),
        "hi_pct": 100 * (math.exp((d + half) / 2) - 1),
        "p": p,
        "df": df,
        "share": None if span == 0 else (statistics.fmean(ym) - statistics.fmean(ya)) / span,
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
