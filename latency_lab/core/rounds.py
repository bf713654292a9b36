"""The interleaved rounds, the suite's one way to compare wall and host times: ``rounds`` times every
``Entry`` in rounds, each round giving every entry one block (warm-up calls, then ``iters`` back-to-back
calls timed by CUDA events and ``perf_counter`` at once), forward then reverse order, each block between
two timings of a fixed pure-Python loop (the host reference). What they measured is a ``Rounds``: per
entry its ``Timed`` blocks, the host reference per round, within-round ratios and the results records.

The host's speed state flips faster than a round lasts (``host_state``): a block counts as fast when both
of its references are, headlines are medians over fast blocks (and ratios over rounds where both blocks
were fast), each with the interval a second run lands in. ``state_text`` and ``host_moved_note`` say so
in the findings.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Callable

from . import host_state, timing
from .failures import describe, lost_context
from .metrics import Stat
from .phases import phase
from .progress import say

HOST_REFERENCE = "host reference"  # the fixed Python loop timed in every round


def pass_of(round_index: int) -> int:
    """The pass (0 or 1) of a round, in ABBA order: rounds 0, 3, 4, 7, ... make pass 1 and rounds 1, 2,
    5, 6, ... pass 2, so that a steady drift of the machine falls on both passes alike."""
    return (0, 1, 1, 0)[round_index % 4]


@dataclass(frozen=True)
class Reading:
    """One entry's block in one round: the host reference right before it, the block, the reference
    right after it, and its probes' records."""

    before_ms: float
    block: timing.Block
    after_ms: float
    probed: dict


def measure_block(fn: Callable, kwargs: dict, device: str, warmup: int, iters: int, probes: dict) -> Reading:
    """One block between two host references in this process: ``warmup`` calls, then ``iters`` timed
    calls (``timing.block``, which synchronizes before it returns), then the probes."""
    before = timing.host_reference_ms()
    timing.warm_up(fn, kwargs, warmup)
    b = timing.block(fn, kwargs, device, iters)
    after = timing.host_reference_ms()
    return Reading(before, b, after, {k: probe() for k, probe in probes.items()})


@dataclass
class Entry:
    """One callable timed in the rounds: a name, the call, and probes run right after its block in
    every round (e.g. an instrumented call of the same step), each returning a record. ``measure``
    times one block; an entry whose step runs in another process (``studies.ab``) overrides it."""

    name: str
    fn: Callable
    kwargs: dict
    probes: dict[str, Callable[[], object]] = field(default_factory=dict)

    in_process = True  # its step runs in this process (whose CUDA context the rounds watch)

    def measure(self, device: str, warmup: int, iters: int) -> Reading:
        return measure_block(self.fn, self.kwargs, device, warmup, iters, self.probes)


def arrangement(entries: list, r: int, shuffle: int | None = None) -> list:
    """The entries' order in round ``r``: forward on even rounds and reverse on odd ones (each entry's
    mean position is the same), and with ``shuffle`` (a seed) a fresh permutation for every pair of
    rounds, so that no two entries are always neighbours."""
    order = list(entries)
    if shuffle is not None:
        random.Random(f"{shuffle}-{r // 2}").shuffle(order)
    return order if r % 2 == 0 else order[::-1]


@dataclass
class Timed:
    """An entry's blocks over the rounds (ms per call), its probes' records per round, and the error
    that stopped it early (its blocks before the error stand)."""

    name: str
    wall_ms: list[float] = field(default_factory=list)
    host_ms: list[float] = field(default_factory=list)
    probes: dict[str, list] = field(default_factory=dict)
    error: str | None = None
    reference_before_ms: list[float] = field(default_factory=list)  # the host reference right before each block
    reference_after_ms: list[float] = field(default_factory=list)  # and right after it
    fast: list[bool] = field(default_factory=list)  # per block: both references fast (set by ``rounds``)
    round_reference_ms: list[float] = field(default_factory=list)  # per block: its round's reference (``rounds``)

    def keep(self) -> list[bool] | None:
        """Per block, whether it counts for a headline: whether the host was fast around it; None where
        no reference was timed."""
        return self.fast if len(self.fast) == len(self.wall_ms) and self.fast else None

    @property
    def wall(self) -> Stat | None:
        return Stat.headline(self.wall_ms, self.keep()) if self.wall_ms else None

    @property
    def host(self) -> Stat | None:
        return Stat.headline(self.host_ms, self.keep()) if self.host_ms else None

    @property
    def host_per_ref_x(self) -> list[float]:
        """Per block, its host time over its adjacent host reference (``host_state.per_reference``)."""
        if len(self.reference_before_ms) != len(self.host_ms):
            return []
        return host_state.per_reference(self.host_ms, self.reference_before_ms, self.reference_after_ms)

    @property
    def host_per_ref(self) -> Stat | None:
        xs = self.host_per_ref_x
        return Stat.headline(xs, self.keep()) if xs else None

    def slow_state_bias(self) -> float | None:
        """How host per reference reads in the slow state against the fast one (``host_state.slow_state_bias``)."""
        xs = self.host_per_ref_x
        return (
            host_state.slow_state_bias(xs, self.reference_before_ms, self.reference_after_ms, self.fast) if xs else None
        )

    def followed_by(self, later: Timed) -> Timed:
        """This entry's blocks, then ``later``'s (the same entry in a later set of rounds)."""
        lists = ("wall_ms", "host_ms", "reference_before_ms", "reference_after_ms", "fast", "round_reference_ms")
        probes = {k: self.probes.get(k, []) + later.probes.get(k, []) for k in {**self.probes, **later.probes}}
        joined = {f: getattr(self, f) + getattr(later, f) for f in lists}
        return replace(self, **joined, probes=probes, error=later.error or self.error)

    def mark(self, cut: float | None) -> None:
        """Flag each block fast or not against the rounds' ``cut``."""
        self.fast = [host_state.fast(b, a, cut) for b, a in zip(self.reference_before_ms, self.reference_after_ms)]

    def passes(self) -> list[Stat | None]:
        """The wall's statistics per ABBA pass."""
        return [
            Stat.of(xs) if (xs := [w for i, w in enumerate(self.wall_ms) if pass_of(i) == k]) else None for k in (0, 1)
        ]

    def pass_ratio(self) -> float | None:
        first, second = self.passes()
        return second.median / first.median if first and second and first.median else None


@dataclass
class Rounds:
    """What ``rounds`` measured: per entry its ``Timed``, the host reference per round (ms), and the
    method and sizes of the blocks."""

    entries: dict[str, Timed]  # by executor (or key): its blocks
    reference_ms: list[float]
    method: str
    warmup: int
    iters: int
    rounds: int

    @property
    def reference(self) -> Stat | None:
        return Stat.of(self.reference_ms) if self.reference_ms else None

    @classmethod
    def merged(cls, parts: list[Rounds]) -> Rounds:
        """Sets of rounds run one after another (of the same method and block sizes) as one: every
        entry's blocks (an entry in several sets: its blocks in their order, its last error), the host
        references of all, and the blocks marked fast against their common cut-off (the host's states
        are the machine's, whichever set a block ran in). ``parts`` are left as they are: the merged
        rounds hold copies of their entries."""
        first = parts[0]
        entries: dict[str, Timed] = {}
        for r in parts:
            for n, t in r.entries.items():
                entries[n] = replace(t) if n not in entries else entries[n].followed_by(t)
        done = cls(
            entries,
            [x for r in parts for x in r.reference_ms],
            first.method,
            first.warmup,
            first.iters,
            sum(r.rounds for r in parts),
        )
        cut = done.cutoff_ms
        for t in done.entries.values():
            t.mark(cut)
        return done

    def references(self) -> list[float]:
        """Every host reference of the rounds: the two around each block."""
        return [x for t in self.entries.values() for x in (*t.reference_before_ms, *t.reference_after_ms)]

    @property
    def cutoff_ms(self) -> float | None:
        return host_state.cutoff(self.references())

    def slow_share(self) -> float | None:
        """The share of host references that read slow: how contended the host was."""
        return host_state.slow_share(self.references(), self.cutoff_ms)

    def fast_blocks(self) -> tuple[int, int]:
        """Blocks that ran in the fast state, and all blocks."""
        return sum(sum(t.fast) for t in self.entries.values()), sum(len(t.wall_ms) for t in self.entries.values())

    def per_round(self, name: str, metric: str) -> list[float]:
        """An entry's ``metric`` per round; host per reference (``host_per_ref_x``) in units of the round's
        one reference, the same for every block of the round."""
        t = self.entries[name]
        if metric == "host_per_ref_x":
            return [h / r for h, r in zip(t.host_ms, t.round_reference_ms or self.reference_ms)]
        return getattr(t, metric)

    def paired(self, a: str, b: str, metric: str, combine: Callable[[float, float], float]) -> Stat | None:
        """``combine(a, b)`` round by round (both measured in the same round) over the rounds where both
        blocks ran fast (all rounds when too few did), with its interval over those rounds."""
        if a not in self.entries or b not in self.entries:
            return None
        ta, tb = self.entries[a], self.entries[b]
        xs, ys = self.per_round(a, metric), self.per_round(b, metric)
        ka, kb = ta.keep(), tb.keep()
        pairs = [
            (combine(x, y), fa and fb) for x, y, fa, fb in zip(xs, ys, ka or [False] * len(xs), kb or [False] * len(ys))
        ]
        pairs = [(v, k) for v, k in pairs if v is not None]
        if not pairs:
            return None
        values, keep = zip(*pairs)
        return Stat.headline(values, keep if ka and kb else None)

    def slow_state_bias(self) -> float | None:
        """The median over entries of ``Timed.slow_state_bias``; None where no entry has one."""
        found = sorted(b for t in self.entries.values() if (b := t.slow_state_bias()) is not None)
        return found[len(found) // 2] if found else None

    def drift_pct(self) -> float | None:
        """How far the host moved during the rounds: the host reference's range (max - min) over its
        median, in %. A level change in a few rounds shows here even when the IQR stays small."""
        ref = self.reference
        return 100 * (ref.max - ref.min) / ref.median if ref and ref.median else None

    def ratio(self, a: str, b: str, metric: str = "wall_ms") -> Stat | None:
        """``a`` over ``b`` round by round (``paired``): a drift of the host moves both sides alike."""
        return self.paired(a, b, metric, lambda x, y: x / y if y else None)

    def record(self, name: str) -> dict:
        """The entry's results record: wall and host statistics, passes, every block, its error."""
        t = self.entries[name]
        first, second = t.passes()
        return {
            "method": self.method,
            "warmup": self.warmup,
            "iters": self.iters,
            "rounds": len(t.wall_ms),
            "wall": t.wall and t.wall.to_dict(),
            "host": t.host and t.host.to_dict(),
            "host_per_ref": t.host_per_ref and t.host_per_ref.to_dict(),
            "host_per_ref_slow_bias": t.slow_state_bias(),
            "passes": [p and p.to_dict() for p in (first, second)],
            "pass_ratio": t.pass_ratio(),
            "wall_ms": t.wall_ms,
            "host_ms": t.host_ms,
            "reference_before_ms": t.reference_before_ms,
            "reference_after_ms": t.reference_after_ms,
            "fast": t.fast,
            "fast_blocks": sum(t.fast),
            "error": t.error,
        }

    def sections(self) -> dict:
        """A results file's ``rounds`` (every entry's blocks) and ``host_reference``, as every study saves them."""
        return {"rounds": {n: self.record(n) for n in self.entries}, "host_reference": self.reference_record()}

    def reference_record(self) -> dict:
        ref = self.reference
        return {
            "loops": timing.HOST_REFERENCE_LOOPS,
            "stat": ref and ref.to_dict(),
            "per_round_ms": self.reference_ms,
            "drift_pct": self.drift_pct(),
            "cutoff_ms": self.cutoff_ms,
            "slow_share": self.slow_share(),
            "host_per_ref_slow_bias": self.slow_state_bias(),
            "fast_blocks": self.fast_blocks()[0],
            "blocks": self.fast_blocks()[1],
            "method": host_state.METHOD,
        }


@phase("rounds")
def rounds(
    entries: list[Entry],
    device: str,
    warmup: int,
    iters: int,
    repeats: int,
    progress: Callable[[str], None] = say,
    shuffle: int | None = None,
    order: Callable[[list, int], list] | None = None,
) -> Rounds:
    """Every entry in ``2 x repeats`` interleaved rounds after one discarded warm-up round. In each
    round every entry runs one block (``warmup`` calls, then ``iters`` timed calls; ``timing.block``)
    between two host references, and then its probes, in forward order on even rounds and reverse
    order on odd ones (``arrangement``; ``shuffle``: permuted per pair of rounds; ``order(entries, r)``: another
    arrangement, e.g. 08's slot by slot). ``reference_ms`` per
    round is the median of that round's references. A failure ends that entry's blocks; a lost CUDA
    context of this process ends everyone's."""
    timed = {e.name: Timed(e.name, probes={k: [] for k in e.probes}) for e in entries}
    reference: list[float] = []
    total = 2 * repeats
    progress(f"rounds: a warm-up round, then {total}")
    for r in range(-1, total):
        round_refs: list[float] = []
        for e in order(entries, r) if order else arrangement(entries, r, shuffle):
            t = timed[e.name]
            if t.error:
                continue
            if e.in_process and (lost := lost_context(device)):
                for other in timed.values():
                    other.error = other.error or lost
                break
            try:
                m = e.measure(device, warmup, iters)
            except Exception as err:  # one entry's failure is its row's reason
                t.error = f"{'warm-up round' if r < 0 else f'round {r + 1}'}: {describe(err)}"
                continue
            if r >= 0:
                t.wall_ms.append(m.block.wall_ms)
                t.host_ms.append(m.block.host_ms)
                t.reference_before_ms.append(m.before_ms)
                t.reference_after_ms.append(m.after_ms)
                round_refs += [m.before_ms, m.after_ms]
                for k, v in m.probed.items():
                    t.probes.setdefault(k, []).append(v)
        if r >= 0:
            reference.append(Stat.of(round_refs or [timing.host_reference_ms()]).median)
            for t in timed.values():
                t.round_reference_ms += [reference[-1]] * (len(t.host_ms) - len(t.round_reference_ms))
        if r + 1 in (total // 4, total // 2, 3 * total // 4, total):
            progress(f"rounds: {r + 1} of {total} done")
    done = Rounds(timed, reference, timing.method_name(device), warmup, iters, total)
    cut = done.cutoff_ms
    for t in timed.values():
        t.mark(cut)
    return done


def host_moved_note(rounds_: Rounds, difference: float) -> str:
    """A caveat for a finding that reports a relative ``difference`` (0.2 = 20%) between two rows: said
    when the host reference moved by more than that during the rounds; empty otherwise."""
    drift = rounds_.drift_pct()
    if drift is None or drift / 100 <= abs(difference):
        return ""
    return (
        f" (the host reference moved by {drift:.0f}% during these rounds, more than this difference; "
        "the ratio is taken within rounds where both blocks ran fast)"
    )


HOST_STATE_NOTE = (
    "A notebook's headlines (ms, and host time per host reference: each block's host time over the mean of "
    "the two reference loops around it) are medians over the blocks that ran while the host read fast (its "
    f"reference loop under {host_state.FAST_FACTOR:g}x its 10th percentile). A run that is slow most of the "
    "time has a slow 10th percentile, and its headlines are slow-state ones. Intervals: the bootstrap's 95% "
    "interval of each median (the run's own; what two runs of the same tree differ by is measured apart, and "
    "compare uses it). Kernel times do not move with the host."
)  # said once, on the run's index; each notebook says its own numbers (``state_text``)


def state_text(rounds_: Rounds) -> str:
    """What the host did during the rounds: its slow share, the fast blocks the headlines are over, and
    how host per reference reads in the slow state; the how and why once, on the index (``HOST_STATE_NOTE``)."""
    share, cut = rounds_.slow_share(), rounds_.cutoff_ms
    if share is None:
        return "No host reference was timed."
    fast_n, blocks = rounds_.fast_blocks()
    return (
        f"The host read slow (its reference loop above {cut:.3g} ms) in {100 * share:.3g}% of "
        f"{len(rounds_.references())} references; {fast_n} of {blocks} blocks ran fast, and the headlines are "
        "medians over those. "
        + (
            f"Host per reference read ×{bias:.3g} in the slow state against the fast one (median over entries). "
            if (bias := rounds_.slow_state_bias()) is not None
            else f"Fewer than {host_state.MIN_FAST} slow steady blocks per entry: how host per reference reads in the "
            "slow state was not measured here. "
        )
        + "How a slow host is dealt with: the run's index, under The host's state."
    )
