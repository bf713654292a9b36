"""Notebook 08's parameters: the builds, core slots (workers per arm), the half-width it stops at, the planted arms, the
confidence level and the budget, with their per-device defaults; ``resolved`` checks them once, for
``parameters.resolved``, and the planted sizes leave it as numbers."""

from __future__ import annotations

import math
import os

from . import builds
from .input_errors import ParameterError, integer, is_number

# 08's per-device defaults: core slots (workers per arm; None: the cores less one, at most CUDA_SLOTS), the
# half-width it stops at (%), the seconds it may take in all, builds included
AB_DEFAULTS = {
    "cuda": {"workers": None, "resolve_pct": 1.0, "budget_s": 160},
    "cpu": {"workers": 4, "resolve_pct": 3.0, "budget_s": 165},
}
CUDA_SLOTS = 12
PLANTED_MIN = 0.1  # % of a step: below it a busy wait is under a µs of a fast step
# CPU seconds one worker takes to start and build (import torch and Thunder, build the model, first calls): 12 s on
# the 2-core CPU machine (12 workers in 73 s); a budget under the builds' share of the cores is refused
AB_BUILD_CPU_S = 12


def resolved(v: dict, device: str) -> dict:
    """08's parameters of ``v`` (every ``parameters.SCHEMA`` name with its raw value) on ``device``: the
    builds, workers, target, planted arms, confidence and budget, or ParameterError."""
    ab = AB_DEFAULTS["cuda" if device.startswith("cuda") else "cpu"]
    chosen = {
        "build_a": builds.parse("build_a", v["build_a"]).to_dict(),
        "build_b": None if v["build_b"] is None else builds.parse("build_b", v["build_b"]).to_dict(),
        "workers": _workers(default_slots(ab["workers"]) if v["workers"] is None else v["workers"], usable_cores()),
        "resolve_pct": _resolve(ab["resolve_pct"] if v["resolve_pct"] is None else v["resolve_pct"]),
    }
    default_plant = max(PLANTED_MIN, 2 * chosen["resolve_pct"])  # twice the target, at least what a plant can be
    chosen["planted_pct"] = _planted(default_plant if v["planted_pct"] is None else v["planted_pct"])
    chosen["planted_ops"] = integer("planted_ops", v["planted_ops"], 0, 100)
    if not is_number(v["confidence"]) or not 0.8 <= v["confidence"] <= 0.9999:
        raise ParameterError("confidence", v["confidence"], "a number in [0.8, 0.9999], e.g. 0.95")
    chosen["confidence"] = float(v["confidence"])
    arms = arm_count(chosen["planted_pct"], chosen["planted_ops"], chosen["build_b"])
    chosen["budget_s"] = _budget(ab["budget_s"] if v["budget_s"] is None else v["budget_s"], arms * chosen["workers"])
    return chosen


def arm_count(planted_pct: tuple[float, ...], planted_ops: int, build_b: dict | None) -> int:
    """08's arms: A, its twin A', one per planted delay, one for the planted ops, and B."""
    return 2 + len(planted_pct) + (planted_ops > 0) + (build_b is not None)


def _planted(value) -> tuple[float, ...]:
    """08's planted delays: a non-empty list of percentages in [``PLANTED_MIN``, 100], each once, sorted.
    Below 0.1% a busy wait is under a µs of a fast step (``time.perf_counter``'s loop cannot make it)."""
    items = [value] if is_number(value) else value
    allowed = f"a number or a non-empty list of numbers in [{PLANTED_MIN:g}, 100], e.g. [1, 5]"
    if not isinstance(items, (list, tuple)) or not items or not all(is_number(x) for x in items):
        raise ParameterError("planted_pct", value, allowed)
    if not all(PLANTED_MIN <= x <= 100 for x in items):
        raise ParameterError("planted_pct", value, allowed)
    chosen = sorted({float(x) for x in items})
    if len({f"{x:g}" for x in chosen}) < len(chosen):  # each names an arm of its own: "A + 1% planted"
        raise ParameterError("planted_pct", value, "numbers in [0.1, 100] that differ in their first 6 digits")
    return tuple(chosen)


def default_slots(given: int | None) -> int:
    """08's default slots: ``given``, or the cores here less one (the coordinator's), at most ``CUDA_SLOTS``
    and at least 2."""
    return given if given is not None else max(2, min(CUDA_SLOTS, usable_cores() - 1))


def _workers(value, cores: int) -> int:
    """08's core slots, one worker of every arm on each: at least 2 (Student's t over slots needs two), at most
    8 per core (slot i runs on core i + 1 mod the cores; only one block runs at a time in the rounds)."""
    allowed = f"an integer from 2 to {8 * cores} (8 per core here)"
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 8 * cores:
        raise ParameterError("workers", value, allowed)
    return value


def _resolve(value) -> float:
    if not is_number(value) or not 0 < value < 50:
        raise ParameterError("resolve_pct", value, "a % in (0, 50), the half-width 08 stops at, e.g. 1")
    return float(value)


def _budget(value, workers: int) -> float:
    """08's budget: more than its ``workers`` take to build on the cores here (``AB_BUILD_CPU_S`` each)."""
    builds_s = math.ceil(workers * AB_BUILD_CPU_S / usable_cores())
    if not is_number(value) or value <= builds_s:
        raise ParameterError(
            "budget_s",
            value,
            f"seconds over {builds_s}, what building its {workers} workers takes on {usable_cores()} cores, e.g. 180",
        )
    return float(value)


def usable_cores() -> int:
    """The cores this process may run on (08 pins worker i of every arm to core slot i)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
