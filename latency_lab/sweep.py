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
from .harness import Prepared, Rounds


@dataclass
class Case:
    """What one point builds on: a module (or function), the call's keyword arguments, an output
    check (``check(prepared)`` raises on a mismatch, returns a record), its bandwidth floor, and extra
    plan steps run after the standard ones."""

    module: object
    kwargs: dict
    check: Callable[[Prepared], dict]
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
    """One (point, executor): the prepared executor, its measurements and the point's case."""

    point: dict
    prepared: Prepared
    measured: dict
    case: Case

    @property
    def key(self) -> str:
        return f"{self.prepared.name} @ {label(self.point)}"


def build(sweep: Sweep, params, profile_steps: int = 5, progress: Callable[[str], None] = print) -> list[Built]:
    """Every point's case and every executor on it, each measured right after its first call: its
    output check, warm-up, kernels per step (``timing.profile_kernels``) and the case's extra steps."""
    built = []
    for point in sweep.points():
        case = sweep.make(point)
        plan = {"output": case.check,
                "warm-up": lambda p, c=case: timing.warm_up(p.fn, c.kwargs, params.warmup),
                "kernels": lambda p, c=case: timing.profile_kernels(p.fn, c.kwargs, params.device, profile_steps),
                **case.extra}
        progress(f"{sweep.name}: {label(point)}")
        prepared, measured = harness.build_and_measure(sweep.executors, case.module, case.kwargs, plan, params.device,
                                                       progress)
        built += [Built(point, p, measured.get(n, {}), case) for n, p in prepared.items()]
    return built


def time_all(built: list[Built], params, probes: dict[str, dict] | None = None) -> Rounds:
    """All ok (point, executor) pairs in the same interleaved rounds (``harness.rounds``), keyed by
    ``Built.key``; a pair whose blocks stop early becomes partial (or failed)."""
    entries = [harness.Entry(b.key, b.prepared.fn, b.case.kwargs, (probes or {}).get(b.key, {}))
               for b in built if b.prepared.ok]
    timed = harness.rounds(entries, params.device, params.warmup, params.iters, params.repeats)
    harness.apply_errors({b.key: b.prepared for b in built if b.key in timed.timed}, timed)
    return timed


def run(sweep: Sweep, params, probes: Callable[[list[Built]], dict] | None = None) -> tuple[list[Built], Rounds]:
    """``build``, then ``time_all`` (with the probes ``probes(built)`` returns); the caller takes its rows,
    then ``release``s."""
    built = build(sweep, params)
    timed = time_all(built, params, probes(built) if probes else None)
    return built, timed


def row(b: Built, timed: Rounds) -> dict:
    """A (point, executor) row: identity, axis values, first call, output check, wall and host time
    with their quartiles (from the rounds), kernels per step and kernel time, floor and its ratio."""
    t = timed.timed.get(b.key)
    kernels = b.measured.get("kernels") or {}
    out = b.prepared.row(**b.point, first_call_s=b.prepared.first_call_s,
                         rel_err=(b.measured.get("output") or {}).get("rel_err"))
    wall, host = (t.wall, t.host) if t else (None, None)
    out.update(**(wall.flat("wall_ms") if wall else {"wall_ms": None}), **(host.flat("host_ms") if host else {"host_ms": None}),
               kernel_ms=kernels.get("kernel_ms"), kernels_per_step=kernels.get("kernels_per_step"),
               floor_ms=b.case.floor_ms)
    out["floor_ratio_x"] = out["wall_ms"] / b.case.floor_ms if out["wall_ms"] and b.case.floor_ms else None
    if kernels.get("reason"):
        out["notes"] = "; ".join(filter(None, (out["notes"], kernels["reason"])))
    return out


def release(built: list[Built], device: str) -> dict:
    """Free every build of the sweep (``harness.release``); what the CUDA allocator holds afterwards."""
    return harness.release([b.prepared for b in built], device)


def model_case(params, bandwidth: float | None = None) -> Case:
    """The seed's model built at ``params`` (layers, tokens, cache mode), its step's kwargs, eager's
    logits as the output check and the step's bandwidth floor."""
    from . import model

    setup = model.build(params)
    reference = model.logits_of(setup.model(**setup.kwargs)).detach().clone()
    floor = model.bandwidth_floor(setup, bandwidth)["floor_ms_measured"]
    return Case(setup.model, setup.kwargs, lambda p: harness.check_output(p, reference, params.dtype, params.layers), floor)
