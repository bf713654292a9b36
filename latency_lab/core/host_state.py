"""The host's speed state, and the statistics that survive it.

A contended virtual CPU (the H200 machine's host, and the 2-core CPU machine too) runs in at least
two speed states that flip within 0.1-5 s, in proportions that change over minutes: the suite's
pure-Python reference loop reads ~1.0 ms in the fast state and ~1.5-2.0 ms in the slow one. A median
over all blocks lands wherever the proportion puts it; the fast state's numbers reproduce.

So every block is timed between two host references (``harness.rounds``); a reference is **fast**
when it is at most ``FAST_FACTOR`` x the 10th percentile of all references of the same rounds, and a
block is fast when both of its references are. A headline is the median over fast blocks (or over
fast rounds for a within-round ratio or difference), and its **interval** is what a second run is
promised to land in: the bootstrap's 95% interval of that median, widened by sqrt(2) (the second
run's own estimate has the same error), widened further to cover the medians of ``CHUNKS``
consecutive time slices of the same samples (the fast state itself drifts by a few % over a minute;
resampling alone does not see that), and never narrower than ``RUN_TO_RUN`` of the value either side
(what a second run differs by that no statistic of one run sees: ``floored``). Host time per
reference (``per_reference``) takes the **steady** blocks instead, fast or slow: those the host kept
one state across.
"""

from __future__ import annotations

import math
import random
import statistics

FAST_FACTOR = 1.25  # a reference within 25% of the 10th percentile of the rounds' references is fast
MIN_FAST = 6  # fewer fast samples than this: the headline falls back to all samples, and says so
CHUNKS = 4  # consecutive time slices whose medians the interval must cover
# The least half-width of an interval, relative to its value: what two runs of the same tree, one right
# after the other, differ by that no statistic within one run sees (the host's state mix changes over
# minutes). Measured on an H100 machine (2026-12-05, runs of 05-07 a few minutes apart): host per
# reference moved 2-10%, host ms 0.3-6% where the intervals' bootstrap and slices gave +-1-3%.
RUN_TO_RUN = 0.10
# The part of that move one point of a fitted line makes on its own, apart from the rest of its line: a
# slope is a difference of its points, so a slope near zero (CUDA graphs' host per layer, ~9 us) moves by
# more than RUN_TO_RUN of itself. Measured on the H100 (two runs of 06 minutes apart): torch.compile +
# CUDA graphs' host moved -2.4% at 1 layer and +0.9% at 4, so its slope moved +17% and left a +-10% floor.
POINT_TO_POINT = RUN_TO_RUN / 2
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
    """The interval a second run's median is promised to land in (module docstring): bootstrap 95%
    of the median x sqrt(2), widened to the medians of ``CHUNKS`` consecutive slices. ``samples``
    in time order."""
    xs = [float(x) for x in samples]
    if not xs:
        raise ValueError("interval() needs at least one sample")
    m = statistics.median(xs)
    boot_lo, boot_hi = bootstrap(xs)
    lo = m - math.sqrt(2) * (m - boot_lo)
    hi = m + math.sqrt(2) * (boot_hi - m)
    size = len(xs) // CHUNKS
    if size >= 2:
        chunks = [statistics.median(xs[i * size : (i + 1) * size]) for i in range(CHUNKS)]
        lo, hi = min(lo, *chunks), max(hi, *chunks)
    return floored(m, lo, hi)


def bootstrap(samples) -> tuple[float, float]:
    """The bootstrap's ``CONFIDENCE`` interval of the median of ``samples`` (``BOOTSTRAP`` resamples,
    seeded): the statistic's own interval, for this run."""
    xs = [float(x) for x in samples]
    rng = random.Random(SEED)
    boot = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(BOOTSTRAP))
    tail = (1 - CONFIDENCE) / 2
    return quantile(boot, tail), quantile(boot, 1 - tail)


def floored(value: float, lo: float, hi: float) -> tuple[float, float]:
    """``(lo, hi)`` widened to at least ``RUN_TO_RUN`` x ``|value|`` either side of ``value``."""
    margin = RUN_TO_RUN * abs(value)
    return min(lo, value - margin), max(hi, value + margin)


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
    right after it). Host work is Python like the reference loop and slows with it, so this ratio
    survives a change of state that the value in ms does not (the H200's two runs of 05-07, 82/39/55%
    then 15/15/16% slow: host ms moved up to 46%, host per reference at most 13%). Its headline takes
    the ``steady`` blocks."""
    return [v / ((b + a) / 2) for v, b, a in zip(values, before, after)]


METHOD = (
    f"median over fast blocks (both adjacent host references within {FAST_FACTOR:g} x their 10th percentile); "
    f"interval: bootstrap {CONFIDENCE:.0%} of the median x sqrt(2), widened to cover {CHUNKS} consecutive time slices "
    f"and to at least +-{RUN_TO_RUN:.0%} of the value (what two runs differ by); "
    f"host per reference: median over steady blocks (its two references within {FAST_FACTOR:g} x of each other)"
)


def _slope(points) -> float:
    """Least-squares slope through ``(x, y)`` points."""
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def slope_interval(lines) -> tuple[float, float, float]:
    """The slope of ``sum(sign * line)`` (each line a list of ``(x, samples, keep)``: the blocks of one
    executor at depth x) fitted through the points' fast-state medians, and its interval by the same
    method as ``interval``: the fit over bootstrap resamples of every point's blocks (95%, x sqrt(2)),
    widened to the fits over ``CHUNKS`` consecutive time slices, to ``RUN_TO_RUN`` of the slope and to
    what the points moving by ``POINT_TO_POINT`` each would move it (``_points_floor``). ``lines`` is
    ``[(sign, line), ...]``."""
    chosen = [(sign, [(x, select(s, k)[0] if k is not None else list(s)) for x, s, k in line]) for sign, line in lines]

    def fit(pick) -> float:
        return sum(sign * _slope([(x, statistics.median(pick(xs))) for x, xs in line]) for sign, line in chosen)

    value = fit(lambda xs: xs)
    rng = random.Random(SEED)
    boot = sorted(fit(lambda xs: rng.choices(xs, k=len(xs))) for _ in range(BOOTSTRAP // 4))
    tail = (1 - CONFIDENCE) / 2
    lo = value - math.sqrt(2) * (value - quantile(boot, tail))
    hi = value + math.sqrt(2) * (quantile(boot, 1 - tail) - value)
    if min(len(xs) for _, line in chosen for _, xs in line) >= 2 * CHUNKS:

        def chunk(i):
            return lambda xs: xs[i * (len(xs) // CHUNKS) : (i + 1) * (len(xs) // CHUNKS)]

        slices = [fit(chunk(i)) for i in range(CHUNKS)]
        lo, hi = min(lo, *slices), max(hi, *slices)
    lo, hi = floored(value, lo, hi)
    margin = _points_floor([[(x, statistics.median(xs)) for x, xs in line] for _, line in chosen])
    return value, min(lo, value - margin), max(hi, value + margin)


def _points_floor(lines) -> float:
    """How far the slope of ``sum(sign * line)`` moves when each point of each line moves by
    ``POINT_TO_POINT`` of its value on its own (independently): the least half-width of its interval."""
    variance = 0.0
    for points in lines:
        mx = statistics.fmean(x for x, _ in points)
        sxx = sum((x - mx) ** 2 for x, _ in points)
        variance += sum(((x - mx) * POINT_TO_POINT * y / sxx) ** 2 for x, y in points)
    return math.sqrt(variance)
