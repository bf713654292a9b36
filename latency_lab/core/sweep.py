"""A sweep declared as data, in the spirit of triton's ``perf_report``: named axes with their values,
the executors, and a function that makes one point's case (what to build on, its inputs, how to check
its output). ``run`` builds every (point, executor) right after the other (``harness.prepare`` and a
plan), then times all of them in the same interleaved rounds with the host reference, so points and
executors compare within rounds, and finally frees them. Every (point, executor) is a row with its
axis values, measured or with its reason.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

from . import harness, timing
from .harness import Rounds
from .measurement import Measurement
from .progress import say
from .rows import PointRow


@dataclass
class Case:
    """What one point builds on: a module (or function), the call's keyword arguments, an output
    check (``check(measurement)`` raises on a mismatch, returns a record), its bandwidth floor, and extra
    plan steps run after the standard ones."""

    module: object
    kwargs: dict
    check: Callable[[Measurement], dict]
    floor_ms: float | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class Sweep:
    """Axes (name -> values, every combination is a point), executors, and ``make(point) -> Case``."""

    name: str
    axes: dict[str, tuple]
    executors: list
    make: Callable[[dict], Case]

    def points(self) -> list[dict]:
        names = list(self.axes)
        return [dict(zip(names, values)) for values in itertools.product(*self.axes.values())]


def label(point: dict) -> str:
    """``layers=2, tokens=6``: a point as text (also its rows' key in the rounds)."""
    return ", ".join(f"{k}={v}" for k, v in point.items())


@dataclass
class Built:
    """One (point, executor): the executor measured on the point's case."""

    point: dict
    measured: Measurement
    case: Case

    @property
    def key(self) -> str:
        return f"{self.measured.name} @ {label(self.point)}"


# Dynamo's counters of the compile caches a first call can hit: Inductor's FX-graph cache and
# AOTAutograd's cache (nvFuser's in-process cache and kernel DB have no counter).
CACHE_COUNTERS = {
    "inductor": ("fxgraph_cache_hit", "fxgraph_cache_miss"),
    "aot_autograd": ("autograd_cache_hit", "autograd_cache_miss"),
}


def compile_cache_counts() -> dict[str, int]:
    """The counters of ``CACHE_COUNTERS`` so far in this process."""
    from torch._dynamo.utils import counters

    return {name: counters[group][name] for group, names in CACHE_COUNTERS.items() for name in names}


def cache_use_since(before: dict[str, int]) -> dict:
    """What the compile caches counted since ``before``: each counter's increase, and ``hits``, the
    cache hits in all (0: nothing this call compiled came from a cache that has a counter)."""
    now = compile_cache_counts()
    change = {name: now[name] - before[name] for name in now}
    return {**change, "hits": sum(v for name, v in change.items() if name.endswith("_hit"))}


def build(
    sweeps: Sweep | list[Sweep], params, profile_steps: int = 5, progress: Callable[[str], None] = say
) -> list[Built]:
    """Every point's case, then every executor on every point, each measured right after its first
    call: the compile caches its first call hit (``cache_use_since``), its output check, warm-up,
    kernels per step (``timing.profile_kernels``), the case's extra steps, and the GPU memory the
    build holds (``harness.memory_held``, from an emptied allocator cache before and after). A point
    that several sweeps declare is built once. Builds go executor by executor (registry order), so
    every torch.compile CUDA-graph recording precedes every thunder CUDA-graph capture
    (``registry.THUNDER_CUDAGRAPHS_HAZARD``) when the sweeps list executors in registry order; the
    result is in point order, executors within."""
    sweeps = [sweeps] if isinstance(sweeps, Sweep) else list(sweeps)
    cases: dict[str, tuple[dict, Case, list]] = {}
    for s in sweeps:
        for point in s.points():
            if label(point) not in cases:
                progress(f"{s.name}: {label(point)}")
                cases[label(point)] = (point, s.make(point), s.executors)
    executors = {ex.name: ex for _, _, exs in cases.values() for ex in exs}
    done: dict[tuple[str, str], Built] = {}
    for ex in executors.values():
        if problem := ex.check(params.device):  # said once, not at every point
            progress(f"{ex.label}: {problem[0]} at every point: {problem[1]}")
        for key, (point, case, exs) in cases.items():
            if ex.name in {e.name for e in exs}:
                said = (lambda text: None) if problem else (lambda text, k=key: progress(f"{k} · {text}"))
                done[key, ex.name] = _build_one(ex, point, case, params, profile_steps, said)
    return [done[key, ex.name] for key, (_, _, exs) in cases.items() for ex in exs]


def _build_one(ex, point: dict, case: Case, params, profile_steps: int, progress: Callable[[str], None]) -> Built:
    before_memory = harness.memory(params.device, empty=True)
    before_caches = compile_cache_counts()
    plan = {
        "compile caches": lambda p: cache_use_since(before_caches),  # first: right after the first call
        "output": case.check,
        "warm-up": lambda p: timing.warm_up(p.fn, case.kwargs, params.warmup),
        "kernels": lambda p: timing.profile_kernels(p.fn, case.kwargs, params.device, profile_steps),
        **case.extra,
    }
    m = harness.build_and_measure([ex], case.module, case.kwargs, plan, params.device, progress)[ex.name]
    m.output = None  # checked; the builds of a sweep live together until the rounds end
    if m.ok:
        m.steps["memory"] = harness.memory_held(before_memory, harness.memory(params.device, empty=True))
    return Built(point, m, case)


def time_all(built: list[Built], params, probes: dict[str, dict] | None = None) -> Rounds:
    """All ok (point, executor) pairs in the same interleaved rounds (``harness.rounds``), keyed by
    ``Built.key``. ``built`` is left as it is: ``row`` reads a pair whose blocks stopped early as partial
    (or failed)."""
    entries = [
        harness.Entry(b.key, b.measured.fn, b.case.kwargs, (probes or {}).get(b.key, {}))
        for b in built
        if b.measured.ok
    ]
    return harness.rounds(entries, params.device, params.warmup, params.iters, params.repeats)


def run(
    sweep: Sweep | list[Sweep], params, probes: Callable[[list[Built]], dict] | None = None
) -> tuple[list[Built], Rounds]:
    """``build``, then ``time_all`` (with the probes ``probes(built)`` returns); the caller takes its rows,
    then ``release``s."""
    built = build(sweep, params)
    timed = time_all(built, params, probes(built) if probes else None)
    return built, timed


def row(b: Built, timed: Rounds, kind: type[PointRow] = PointRow, **more) -> PointRow:
    """A (point, executor) row (``rows.PointRow``, or its ``kind`` with ``more`` fields): identity, axis
    values, first call and the compile-cache hits during it, output check, wall and host time with
    their quartiles (from the rounds), kernels per step and kernel time, floor and its ratio, and the
    GPU memory the build holds (MiB; on a GPU). Its status is the build's as the rounds left it
    (``harness.settle``: partial or failed where its blocks stopped early)."""
    p = harness.settle(b.measured, timed.entries.get(b.key))
    kernels, memory = p.record("kernels"), p.record("memory")
    out = kind.of(
        p,
        axes=dict(b.point),
        first_call_cache_hits=p.record("compile caches").get("hits"),
        rel_err=p.record("output").get("rel_err"),
        kernel_ms=kernels.get("kernel_ms"),
        kernels_per_step=kernels.get("kernels_per_step"),
        floor_ms=b.case.floor_ms,
        held_allocated_mib=memory.get("allocated_mib"),
        held_reserved_mib=memory.get("reserved_mib"),
        **more,
    )
    out.note(kernels.get("reason"))
    out.note(memory.get("reason"))
    return out


def release(built: list[Built], device: str) -> dict:
    """Free every build of the sweep (``harness.release``); what the CUDA allocator holds afterwards."""
    return harness.release([b.measured for b in built], device)


def model_case(params, bandwidth: float | None = None) -> Case:
    """The seed's model built at ``params`` (layers, tokens, cache mode), its step's kwargs, eager's
    logits as the output check and the step's bandwidth floor."""
    from . import model

    setup = model.build(params)
    reference = model.logits_of(setup.model(**setup.kwargs)).detach().clone()
    floor = model.bandwidth_floor(setup, bandwidth)["floor_ms_measured"]
    return Case(
        setup.model, setup.kwargs, lambda p: harness.check_output(p, reference, params.dtype, params.layers), floor
    )
