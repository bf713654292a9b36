"""B against A, paired per round: the ratio two builds' blocks make in the same round, its interval,
a test over the rounds, and one verdict vocabulary.

Two workers timed in the same interleaved rounds (notebook 08) see the same host state in each round,
so their per-round ratio cancels what moves both. The estimate is the **median per-round ratio**
B / A over the rounds where both blocks ran fast (all rounds when fewer than ``host_state.MIN_FAST``
did); its interval is the bootstrap's 95% interval of that median (``host_state.bootstrap``: the
statistic's own, for this run, nothing added); the test is the Wilcoxon signed-rank test of the
per-round log ratios over the same rounds (``signed_rank_test``). A
change is **called** when the test gives p < ``host_state.SEPARATED_P``, the interval excludes no
change, and the move is at least the **minimum effect**: how far two workers of the same build land
outside their own interval, which no statistic of one run sees (measured by ``tools/ab_benchmark.py``
over A/A trials of fresh worker pairs, kept in ``min_effect.json``). A run's **resolution** is the
smallest change it would have called: the larger of the minimum effect and its interval's half-width.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from . import host_state
from .verdicts import CHANGED, SAME, phrase

MIN_EFFECT_FILE = Path(__file__).with_name("min_effect.json")
METHOD = (
    "median per-round ratio B / A over rounds where both blocks ran fast; interval: bootstrap 95% of that "
    "median (this run's own); test: Wilcoxon signed-rank of the per-round log ratios (p < 0.05); a change is "
    "called beyond the minimum effect (how far A/A trials land outside their interval, min_effect.json)"
)


def min_effects(device: str, file: Path = MIN_EFFECT_FILE) -> dict:
    """The minimum effect per metric (a fraction: 0.004 = 0.4%) for ``device``'s kind (cuda, cpu), with
    where it was measured; ``{}`` when none was measured for that kind."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    data = json.loads(file.read_text()) if file.is_file() else {}
    return data.get(kind) or {}


@dataclass(frozen=True)
class Change:
    """One number of B against A, paired per round (module docstring). ``ratio`` is B / A."""

    metric: str
    a: float  # A's median over the rounds used
    b: float  # B's
    ratio: float
    lo: float
    hi: float
    p: float | None
    rounds: int
    fast_only: bool
    min_effect: float

    @property
    def half_width(self) -> float:
        """The interval's half-width, relative to no change."""
        return (self.hi - self.lo) / 2

    @property
    def resolution(self) -> float:
        """The smallest change this run would have called."""
        return max(self.min_effect, self.half_width)

    @property
    def called(self) -> bool:
        return (
            self.p is not None
            and self.p < host_state.SEPARATED_P
            and (self.lo > 1 or self.hi < 1)
            and abs(self.ratio - 1) >= self.min_effect
        )

    @property
    def verdict(self) -> str:
        """``changed`` or ``same`` (``verdicts``)."""
        return CHANGED if self.called else SAME

    @property
    def change_pct(self) -> float:
        """B's move against A in % (positive: B takes longer)."""
        return 100 * (self.ratio - 1)

    def text(self, who: str = "B") -> str:
        """The verdict in one line: "changed: B faster by 3.1% (2.4-3.8%)" or "same: this run resolves
        ±0.6%" (with the estimate)."""
        if self.called:
            lo, hi = sorted(abs(100 * (x - 1)) for x in (self.lo, self.hi))
            way = "slower" if self.ratio > 1 else "faster"
            return phrase(CHANGED, f"{who} {way} by {abs(self.change_pct):.2g}% ({lo:.2g}-{hi:.2g}%)")
        found = f"{who} {self.change_pct:+.2g}%, {100 * (self.lo - 1):+.2g} to {100 * (self.hi - 1):+.2g}%"
        if (self.lo > 1 or self.hi < 1) and abs(self.ratio - 1) >= self.min_effect:
            p = "too few rounds" if self.p is None else f"p = {self.p:.2g}"
            return phrase(SAME, f"the test over {self.rounds} rounds does not call it ({found}; {p})")
        return phrase(SAME, f"this run resolves ±{100 * self.resolution:.2g}% ({found})")

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "change_pct": self.change_pct,
            "resolution_pct": 100 * self.resolution,
            "verdict": self.verdict,
            "text": self.text(),
        }


def signed_rank_test(differences) -> float | None:
    """Two-sided Wilcoxon signed-rank test that the differences are centred on zero (zeros dropped,
    tied ranks averaged, the normal approximation with its tie correction): more power than a sign
    test where the differences are about symmetric, as per-round log ratios are. None below 6
    differences (too few for the approximation)."""
    ds = [d for d in differences if d != 0]
    n = len(ds)
    if n < 6:
        return None
    order = sorted(range(n), key=lambda i: abs(ds[i]))
    ranks, i = [0.0] * n, 0
    ties = 0.0
    while i < n:
        j = i
        while j + 1 < n and abs(ds[order[j + 1]]) == abs(ds[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    w = sum(r for r, d in zip(ranks, ds) if d > 0)
    mean = n * (n + 1) / 4
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24 - ties / 48)
    return math.erfc(abs(w - mean) / sd / math.sqrt(2)) if sd else 1.0


def change(metric: str, a: list[float], b: list[float], keep_a, keep_b, min_effect: float) -> Change | None:
    """``Change`` of ``b`` against ``a`` (per-round samples in the same order, ``keep_*`` each block's
    fast flag or None); None without a round where both were measured."""
    n = min(len(a), len(b))
    if n == 0:
        return None
    both = [bool(x and y) for x, y in zip(keep_a or [False] * n, keep_b or [False] * n)][:n]
    rows, fast_only = host_state.select(list(zip(a[:n], b[:n])), both)
    rows = [(x, y) for x, y in rows if x > 0 and y > 0]
    if not rows:
        return None
    ratios = [y / x for x, y in rows]
    lo, hi = host_state.bootstrap(ratios)
    return Change(
        metric,
        statistics.median(x for x, _ in rows),
        statistics.median(y for _, y in rows),
        statistics.median(ratios),
        lo,
        hi,
        signed_rank_test([math.log(r) for r in ratios]),
        len(ratios),
        fast_only,
        min_effect,
    )


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
