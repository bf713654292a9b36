"""The host's speed state, and the statistics that survive it.

A contended virtual CPU runs in at least two speed states that flip within seconds, in proportions
that change over minutes; the suite's pure-Python reference loop reads up to about twice as long in
the slow state (FINDINGS.md has the machines where this was measured). A median
over all blocks lands wherever the proportion puts it; the fast state's numbers reproduce.

So every block is timed between two host references (``harness.rounds``); a reference is **fast**
when it is at most ``FAST_FACTOR`` x the 10th percentile of all references of the same rounds, and a
block is fast when both of its references are. A headline is the median over fast blocks (or over
fast rounds for a within-round ratio or difference), and its **interval** is the statistic's own: the
bootstrap's 95% interval of that median over the blocks (of a fitted slope, the fit over resampled
blocks). What a second run of the same tree differs by, which no statistic of one run sees, is a
separate, measured quantity (``run_to_run``), used by ``compare``. Host time per reference
(``per_reference``) takes the fast blocks too, and ``slow_state_bias`` measures how far it reads
lower in the slow state.
"""

from __future__ import annotations

import math
import random
import statistics

FAST_FACTOR = 1.25  # a reference within 25% of the 10th percentile of the rounds' references is fast
MIN_FAST = 6  # fewer fast samples than this: the headline falls back to all samples, and says so
BOOTSTRAP = 2000
CONFIDENCE = 0.95
SEED = 0  # the bootstrap's resampling is seeded: the same samples give the same interval


def quantile(xs, q: float) -> float:
    """The ``q`` quantile of ``xs`` (linear interpolation between order statistics)."""
    s = sorted(xs)
    if not s:
        raise ValueError("quantile() needs at least one sample")
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)


def cutoff(references) -> float | None:
    """The slowest a fast reference may read: ``FAST_FACTOR`` x the 10th percentile; None without any."""
    refs = [r for r in references if r is not None]
    return FAST_FACTOR * quantile(refs, 0.10) if refs else None


def fast(before: float | None, after: float | None, cut: float | None) -> bool:
    """Whether a block ran in the fast state: both adjacent references at or below ``cut``."""
    return cut is not None and before is not None and after is not None and before <= cut and after <= cut


def steady(before: float | None, after: float | None) -> bool:
    """Whether the host kept one state across a block: its two references within ``FAST_FACTOR`` of
    each other. Host per reference means something only then; a block the state flipped in (or one
    reference caught a pause: 4.8 ms against 0.87 ms on the CPU machine) has no reference of its own."""
    return before is not None and after is not None and max(before, after) <= FAST_FACTOR * min(before, after)


def slow_share(references, cut: float | None) -> float | None:
    """The share of references that read slower than ``cut`` (how contended the host was)."""
    refs = [r for r in references if r is not None]
    return sum(r > cut for r in refs) / len(refs) if refs and cut is not None else None


def interval(samples) -> tuple[float, float]:
    """The statistic's own interval: the bootstrap's 95% interval of the median of ``samples``."""
    if not len(samples):
        raise ValueError("interval() needs at least one sample")
    return bootstrap(samples)


def bootstrap(samples) -> tuple[float, float]:
    """The bootstrap's ``CONFIDENCE`` interval of the median of ``samples`` (``BOOTSTRAP`` resamples,
    seeded): the statistic's own interval, for this run."""
    xs = [float(x) for x in samples]
    rng = random.Random(SEED)
    boot = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(BOOTSTRAP))
    tail = (1 - CONFIDENCE) / 2
    return quantile(boot, tail), quantile(boot, 1 - tail)


def select(samples, keep) -> tuple[list[float], bool]:
    """The samples whose ``keep`` flag is set, when there are at least ``MIN_FAST`` of them (True),
    else every sample (False: the host was never fast long enough, and the headline says so)."""
    xs = list(samples)
    chosen = [x for x, k in zip(xs, keep) if k]
    return (chosen, True) if len(chosen) >= MIN_FAST else (xs, False)


def sign_test(differences) -> float | None:
    """Two-sided sign test: the probability of a split of positive against negative differences at
    least this uneven when each sign is equally likely (zeros dropped); None without differences."""
    pos = sum(d > 0 for d in differences)
    n = pos + sum(d < 0 for d in differences)
    if n == 0:
        return None
    k = min(pos, n - pos)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


SEPARATED_P = 0.05


def separated(differences, lo: float | None, hi: float | None) -> bool:
    """Whether a paired difference is real: the sign test says p < ``SEPARATED_P`` and its interval
    excludes zero."""
    p = sign_test(differences)
    return p is not None and p < SEPARATED_P and lo is not None and hi is not None and (lo > 0 or hi < 0)


def per_reference(values, before, after) -> list[float]:
    """Each block's value in units of its host reference (the mean of the references right before and
    right after it). Its headline takes the fast blocks, as the value in ms does: the reference loop
    slows more than a step in the slow state, so per reference reads lower there (``slow_state_bias``)."""
    return [v / ((b + a) / 2) for v, b, a in zip(values, before, after)]


def slow_state_bias(per_ref, before, after, fast_flags) -> float | None:
    """How per reference reads in the slow state against the fast one: the median over slow ``steady``
    blocks (both references slow, within ``FAST_FACTOR`` of each other) over the median over fast
    blocks; None with fewer than ``MIN_FAST`` of either."""
    slow = [x for x, b, a, f in zip(per_ref, before, after, fast_flags) if not f and steady(b, a)]
    quick = [x for x, f in zip(per_ref, fast_flags) if f]
    if len(slow) < MIN_FAST or len(quick) < MIN_FAST:
        return None
    return statistics.median(slow) / statistics.median(quick)


METHOD = (
    f"median over fast blocks (both adjacent host references within {FAST_FACTOR:g} x their 10th percentile); "
    f"interval: the bootstrap's {CONFIDENCE:.0%} interval of that median (the statistic's own; what two runs "
    "differ by is measured apart: run_to_run); host per reference: the same fast blocks, with its slow-state bias "
    "(slow steady blocks over fast ones) beside it"
)


def _slope(points) -> float:
    """Least-squares slope through ``(x, y)`` points."""
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def slope_interval(lines) -> tuple[float, float, float]:
    """The slope of ``sum(sign * line)`` (each line a list of ``(x, samples, keep)``: the blocks of one
    executor at depth x) fitted through the points' fast-state medians, and its interval: the fits over
    bootstrap resamples of every point's blocks (95%). ``lines`` is ``[(sign, line), ...]``."""
    chosen = [(sign, [(x, select(s, k)[0] if k is not None else list(s)) for x, s, k in line]) for sign, line in lines]

    def fit(pick) -> float:
        return sum(sign * _slope([(x, statistics.median(pick(xs))) for x, xs in line]) for sign, line in chosen)

    value = fit(lambda xs: xs)
    rng = random.Random(SEED)
    boot = sorted(fit(lambda xs: rng.choices(xs, k=len(xs))) for _ in range(BOOTSTRAP // 4))
    tail = (1 - CONFIDENCE) / 2
    return value, quantile(boot, tail), quantile(boot, 1 - tail)
