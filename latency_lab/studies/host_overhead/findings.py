"""Notebook 05's findings: the seed's hypotheses about Thunder's host time graded against this run's
numbers (``grades``, ``grade``), whether CUDA graphs cure it (``cure_verdict``), and the sentences that
say so (``findings``), all read from the in-place breakdown, the regions alone, the profiled step and
the graph rows that ``host_overhead`` measured.

The seed's hypotheses are graded two-sided against the seed's numbers, in ``compare``'s words with the
seed's claim as A: ``same: holds`` inside the seed's range, ``changed: higher`` or ``changed: lower``
outside it, ``same: at the edge`` where the interval straddles a bound.
"""

from __future__ import annotations

from ...core.metrics import Stat
from ...core.rounds import Rounds, host_moved_note
from ...core.row_types import GradeRow, GraphRow
from ...core.verdicts import CHANGED, SAME, phrase
from ...instruments import thunder_breakdown
from ...pages.tables import number
from .rows import RegionRow

# The seed's hypotheses as ranges: a measured median inside holds, outside is changed (higher or lower).
SEED_STARTUP_US = (200.0, 300.0)  # "~250 µs of start-up time" per step
SEED_NVFUSER_US_PER_KERNEL = (20.0, 30.0)  # "around 20 to 30 us per kernel"
SEED_WRAPPER_US = 20.0  # "The FusionDefinition caching from Thunder looks slow on the order of 20+us per fusion"
GRAPHS_CURE = 0.8  # graphs "cure" when the wall with them is <= 80% of without, within rounds
CLOSES = 10.0  # % of the plain step's host time the in-place parts may leave unexplained


def nvfusion_per_kernel(taken_apart: dict[str, dict], regions: list[RegionRow], name: str) -> Stat | None:
    """In-place host µs per kernel over all nvFusion regions of ``name``, per round (total nvFusion µs
    over total nvFusion kernels), over the rounds where the host ran fast, with its interval."""
    kernels = sum(r.kernels or 0 for r in regions if r.executor == name and r.kind == "nvFusion")
    per_block = (taken_apart.get(name) or {}).get("kinds_per_block", {}).get("nvFusion")
    keep = (taken_apart.get(name) or {}).get("fast")
    return Stat.headline([us / kernels for us in per_block], keep) if kernels and per_block else None


def alone_costs(regions: list[RegionRow], name: str) -> dict | None:
    """``name``'s nvFusion regions alone, in the same statistic as in place (totals over regions): µs
    per kernel through Thunder's wrapper and in ``fd.execute`` alone, and the wrapper's µs per fusion
    (wrapper - execute); over the regions that have both. None without any."""
    both = [
        r
        for r in regions
        if r.executor == name and r.kind == "nvFusion" and r.kernels
        if r.alone_us is not None and r.execute_alone_us is not None
    ]
    if not both:
        return None
    kernels = sum(r.kernels for r in both)
    wrapped, execute = sum(r.alone_us for r in both), sum(r.execute_alone_us for r in both)
    return {
        "regions": len(both),
        "kernels": kernels,
        "alone_us_per_kernel": wrapped / kernels,
        "execute_us_per_kernel": execute / kernels,
        "wrapper_us_per_fusion": (wrapped - execute) / len(both),
    }


HOLDS, EDGE = phrase(SAME, "holds"), phrase(SAME, "at the edge")  # the seed's claim as A (``verdicts``)
HIGHER, LOWER, DOES_NOT_HOLD = (phrase(CHANGED, w) for w in ("higher", "lower", "does not hold"))


def grade(value: float | Stat, band: tuple[float, float]) -> str:
    """``HOLDS`` inside the seed's range, ``HIGHER`` or ``LOWER`` outside it; for a statistic with an
    interval, by the interval: higher or lower only when all of it lies outside the range, holds when
    all of it lies inside, else ``EDGE`` (the interval straddles a bound)."""
    if not isinstance(value, Stat) or value.lo is None:
        m = value.median if isinstance(value, Stat) else value
        return LOWER if m < band[0] else HIGHER if m > band[1] else HOLDS
    if value.hi < band[0]:
        return LOWER
    if value.lo > band[1]:
        return HIGHER
    return HOLDS if band[0] <= value.lo and value.hi <= band[1] else EDGE


def _us(value: float | None) -> str:
    return "n/a" if value is None else f"{number(value / 1e3)} ms" if abs(value) >= 1e3 else f"{number(value)} µs"


def _spread(s: Stat) -> str:
    """The statistic's interval where it has one (``host_state.interval``), else its IQR."""
    return f"interval {_us(s.lo)}-{_us(s.hi)}" if s.lo is not None else f"IQR {_us(s.q1)}-{_us(s.q3)}"


def parts_text(taken_apart: dict[str, dict]) -> list[str]:
    """Per instrumented configuration: its largest in-place parts and whether they close on the step."""
    out = []
    for n, b in taken_apart.items():
        if "phases" not in b:
            out.append(f"{n}: no in-place breakdown ({b.get('reason')}).")
            continue
        parts = {
            **{k: v.median for k, v in b["phases"].items() if k != "statements"},
            **{thunder_breakdown.kind_label(k): v.median for k, v in b["kinds"].items()},
        }
        top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        rem = b["remainder_pct"] and b["remainder_pct"].median
        verdict = "close" if rem is not None and abs(rem) <= CLOSES else "do not close"
        out.append(
            f"{n}: host {_us(b['plain_host_us'].median)} per step; largest in-place parts "
            + ", ".join(f"{k} {_us(v)}" for k, v in top)
            + f". The in-place parts {verdict} on the plain step of the same rounds "
            f"(remainder {number(rem)}% of it, median over {b['blocks']} rounds of the plain step's mean host time per "
            f"call against the instrumented call's; within ±{CLOSES:.0f}% closes)." + closure_scope(b)
        )
    return out


def closure_scope(b: dict) -> str:
    """What the closure can and cannot detect, from the breakdown's own numbers."""
    corr = b.get("correction_pct") and b["correction_pct"].median
    text = (
        " The closure tests the instrumented call as a whole (a copy of the computation that ran slower or "
        "faster than the original would leave a remainder); it cannot see time moved from one part to another"
    )
    if corr is None:
        return text + "."
    return text + (
        f", and the timestamps' whole correction is {number(corr)}% of the step, so an error in their "
        "calibration moves the remainder by less than that."
    )


def startup_of(taken_apart: dict[str, dict]) -> str | None:
    """The Thunder configuration whose in-place start-up is graded: thunder where it was taken apart,
    else the first that was; None without one."""
    if "thunder" in taken_apart and "startup_us" in taken_apart["thunder"]:
        return "thunder"
    return next((n for n, b in taken_apart.items() if "startup_us" in b), None)


def startup_text(taken_apart: dict[str, dict], timelines: dict[str, dict], device: str) -> str:
    """The seed's ~250 µs start-up per step, graded on Thunder's in-place time before its computation's
    first statement, with the profiled call-to-first-kernel against eager's as a cross-check."""
    name = startup_of(taken_apart)
    if name is None:
        return "Start-up per step (seed: ~250 µs): no Thunder configuration was taken apart in place here."
    s = taken_apart[name]["startup_us"]
    lo, hi = SEED_STARTUP_US
    text = (
        f"Start-up per step (seed: ~250 µs that Thunder spends and eager does not, read as {lo:.0f}-{hi:.0f} µs). "
        f"Before the computation's first statement, in place: {_us(s.median)} for {name} ({_spread(s)}; call "
        f"entry, cache info, cache search, prologue, bookkeeping): {grade(s, SEED_STARTUP_US)}"
        + ("." if device.startswith("cuda") else " (on this CPU machine's host; the seed's ran beside a GPU).")
    )
    eager, here = ((timelines.get(n) or {}).get("call_to_first_kernel_us") for n in ("eager", name))
    if device.startswith("cuda") and eager is not None and here is not None:
        text += (
            f" Call to first kernel beyond eager's, profiled (one step under the profiler, which adds its own "
            f"host cost): {_us(here - eager)} ({name} {_us(here)}, eager {_us(eager)}): "
            f"{grade(here - eager, SEED_STARTUP_US)}."
        )
    return text


def per_kernel_text(taken_apart: dict[str, dict], regions: list[RegionRow], device: str) -> str:
    """The seed's two per-fusion costs, each graded on its own claim: nvFuser's 20-30 µs of host time
    per kernel (in place, which includes Thunder's wrapper, and ``fd.execute`` alone, which does not)
    and Thunder's FusionDefinition cache at 20+ µs per fusion (the wrapper around ``fd.execute``, alone)."""
    lo, hi = SEED_NVFUSER_US_PER_KERNEL
    parts = []
    for n in taken_apart:
        s = nvfusion_per_kernel(taken_apart, regions, n)
        if s is None:
            continue
        text = (
            f"{n}: in place, Thunder's wrapper included, {_us(s.median)} per kernel ({_spread(s)} over rounds; total "
            f"nvFusion µs over its kernels): {grade(s, SEED_NVFUSER_US_PER_KERNEL)}"
        )
        if c := alone_costs(regions, n):
            own = grade(c["execute_us_per_kernel"], SEED_NVFUSER_US_PER_KERNEL)
            cache = HOLDS if c["wrapper_us_per_fusion"] >= SEED_WRAPPER_US else LOWER
            text += (
                f"; alone from an idle GPU (totals over {c['regions']} regions, {number(c['kernels'])} kernels): "
                f"{_us(c['alone_us_per_kernel'])} per kernel through the wrapper, "
                f"{_us(c['execute_us_per_kernel'])} in fd.execute alone (nvFuser's own: {own}); the wrapper adds "
                f"{_us(c['wrapper_us_per_fusion'])} per fusion (seed: 20+ µs per fusion for Thunder's "
                f"FusionDefinition cache: {cache})"
            )
        parts.append(text)
    if not parts:
        return f"nvFuser host time per kernel (seed: {lo:.0f}-{hi:.0f} µs): " + (
            "needs CUDA and nvFuser." if not device.startswith("cuda") else "no nvFusion region was measured."
        )
    return f"nvFuser host time per kernel (seed: {lo:.0f}-{hi:.0f} µs): " + "; ".join(parts) + "."


def graphs_text(graphs: list[GraphRow], timed: Rounds, device: str) -> str:
    cures = [g for g in graphs if g.wall_ratio_x is not None]
    if not cures:
        return "CUDA graphs as the cure: " + (
            "needs CUDA." if not device.startswith("cuda") else "no graph variant ran beside its baseline."
        )
    parts = [
        f"{g.with_graphs} runs at x{number(r.median)} the wall of {g.without} "
        f"(within rounds, IQR x{number(r.q1)}-x{number(r.q3)}"
        + (f", interval x{number(r.lo)}-x{number(r.hi)}" if r.interval else "")
        + f"; removes {number(g.host_removed_pct)}% of its host time): {cure_verdict(g)}"
        + host_moved_note(timed, 1 - r.median)
        for g in cures
        for r in [g.wall_ratio_x]
    ]
    return (
        f"CUDA graphs as the cure (holds when the ratio's interval lies at or under x{GRAPHS_CURE:g} of the wall "
        "without, does not hold when above it, else at the edge; in compare's words, the seed's claim as A): "
        + "; ".join(parts)
        + "."
    )


def cure_verdict(g: GraphRow) -> str:
    """``HOLDS`` / ``EDGE`` / ``DOES_NOT_HOLD`` for a graph row, from its ratio's interval (the median
    where it has none)."""
    r = g.wall_ratio_x
    lo, hi = r.interval or (r.median, r.median)
    return HOLDS if hi <= GRAPHS_CURE else DOES_NOT_HOLD if lo > GRAPHS_CURE else EDGE


def grades(taken_apart, timelines, regions, graphs: list[GraphRow], device: str) -> list[GradeRow]:
    """Each grade of a seed claim that the findings give, as a record (claim, executor, the value graded
    and its grade), so that ``compare`` can set two runs' grades side by side."""

    def record(claim, executor, value, verdict):
        return GradeRow(claim, executor, value, verdict)

    out = []
    if (name := startup_of(taken_apart)) is not None:
        s = taken_apart[name]["startup_us"]
        out.append(record("start-up per step, in place (µs)", name, s.median, grade(s, SEED_STARTUP_US)))
        eager, here = ((timelines.get(n) or {}).get("call_to_first_kernel_us") for n in ("eager", name))
        if device.startswith("cuda") and eager is not None and here is not None:
            out.append(
                record(
                    "call to first kernel beyond eager's (µs)", name, here - eager, grade(here - eager, SEED_STARTUP_US)
                )
            )
    for n in taken_apart:
        if (s := nvfusion_per_kernel(taken_apart, regions, n)) is not None:
            out.append(record("nvFuser per kernel, in place (µs)", n, s.median, grade(s, SEED_NVFUSER_US_PER_KERNEL)))
            if c := alone_costs(regions, n):
                own = c["execute_us_per_kernel"]
                out.append(
                    record("nvFuser per kernel, fd.execute alone (µs)", n, own, grade(own, SEED_NVFUSER_US_PER_KERNEL))
                )
                wrap = c["wrapper_us_per_fusion"]
                out.append(
                    record(
                        "FusionDefinition cache per fusion (µs)", n, wrap, HOLDS if wrap >= SEED_WRAPPER_US else LOWER
                    )
                )
    out += [
        record("CUDA graphs as the cure (wall ratio)", g.with_graphs, g.wall_ratio_x.median, cure_verdict(g))
        for g in graphs
        if g.wall_ratio_x is not None
    ]
    return out


def findings(taken_apart, timelines, regions, graphs, timed: Rounds, device: str) -> list[str]:
    """The findings' sentences: the in-place parts per configuration, then the seed's start-up, its
    per-kernel costs and CUDA graphs as the cure, each with its grade."""
    return [
        *parts_text(taken_apart),
        startup_text(taken_apart, timelines, device),
        per_kernel_text(taken_apart, regions, device),
        graphs_text(graphs, timed, device),
    ]
