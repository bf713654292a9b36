"""Timing primitives: a block of back-to-back calls timed twice at once (CUDA events for the wall,
``perf_counter`` for the host), the host's own speed (a fixed Python loop), first-call time, a call's
latency from an idle GPU, and kernel count/time from ``torch.profiler``.

Steady state means back to back: in a block, the host issues ``iters`` calls without synchronizing,
so its time per call is what it takes to issue one step while the previous ones run. The wall of the
same block can never be shorter than that (the end event is recorded after the last call returned),
which is why wall and host time of one block are comparable. ``latency_from_idle`` is the other
quantity, one call issued after the device was drained; only the sections that need it use it, and
they name it so. On a CPU the event timer falls back to ``perf_counter``, and wall = host.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import torch

from .metrics import Stat
from .phases import phase


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def use_device(device: str) -> None:
    """Make ``device`` (``cuda:N``) the current CUDA device, so that CUDA events, streams, the
    profiler and ``torch.device("cuda")`` all refer to it; nothing to do on a CPU."""
    if device.startswith("cuda") and (index := torch.device(device).index) is not None:
        torch.cuda.set_device(index)


def method_name(device: str) -> str:
    """What the wall timer uses on ``device``."""
    return "cuda-events" if device.startswith("cuda") else "perf_counter"


@contextmanager
def gc_paused():
    """Python's garbage collector off while timing, as ``timeit`` does: a collection of a heap that
    holds compiled objects takes longer than hundreds of calls."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def first_call(fn: Callable, kwargs: dict, device: str):
    """Seconds for the first call (tracing and compilation included) and its output."""
    sync(device)
    t0 = time.perf_counter()
    out = fn(**kwargs)
    sync(device)
    return time.perf_counter() - t0, out


@phase("warm-up")
def warm_up(fn: Callable, kwargs: dict, calls: int) -> dict:
    """``calls`` untimed calls: caches, autotuning and CUDA-graph recording happen here."""
    for _ in range(calls):
        fn(**kwargs)
    return {"calls": calls}


@dataclass(frozen=True)
class Block:
    """One block of ``iters`` back-to-back calls: ms per call between two CUDA events (the wall) and
    ms per call the host spent issuing them (``perf_counter`` around the same calls)."""

    wall_ms: float
    host_ms: float


def block(fn: Callable, kwargs: dict, device: str, iters: int) -> Block:
    """Time ``iters`` back-to-back calls once: the device is drained before the block and after it,
    never between its calls. The start event is recorded before the host clock starts and the end
    event after it stops, so on a GPU ``wall_ms >= host_ms`` up to the events' own few µs."""
    if not device.startswith("cuda"):
        with gc_paused():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn(**kwargs)
            ms = (time.perf_counter() - t0) * 1e3 / iters
        return Block(ms, ms)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with gc_paused():
        torch.cuda.synchronize(device)
        start.record()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(**kwargs)
        t1 = time.perf_counter()
        end.record()
        torch.cuda.synchronize(device)
    return Block(start.elapsed_time(end) / iters, (t1 - t0) * 1e3 / iters)


HOST_REFERENCE_LOOPS = 20_000


def host_reference_ms(loops: int = HOST_REFERENCE_LOOPS) -> float:
    """ms for a fixed pure-Python loop: the host's own speed, timed beside the executors so that a
    drift of the machine (clock, a busy neighbour) shows apart from the executors."""
    with gc_paused():
        t0 = time.perf_counter()
        total = 0
        for i in range(loops):
            total += i * i
        return (time.perf_counter() - t0) * 1e3


@phase("rounds")
def latency_from_idle(fn: Callable, kwargs: dict, device: str, calls: int) -> Stat:
    """ms for one call to return when the device was drained before it (``calls`` samples): the
    latency of a call issued to an idle GPU, not a steady-state cost. Sections that run one region
    or op alone use it and say so."""
    samples = []
    with gc_paused():
        for _ in range(calls):
            sync(device)
            t0 = time.perf_counter()
            fn(**kwargs)
            samples.append((time.perf_counter() - t0) * 1e3)
    sync(device)
    return Stat.of(samples)


def timeit_record(result) -> dict:
    """The fields of IPython's ``TimeitResult`` (from ``%timeit -o``), in ms per loop."""
    per_loop = [t / result.loops * 1e3 for t in result.all_runs]
    return {
        "mean_ms": result.average * 1e3,
        "std_ms": result.stdev * 1e3,
        "loops": result.loops,
        "runs": result.repeat,
        "runs_ms": per_loop,
    }


# Device-side ranges that are not kernels: torch.compile wraps each compiled graph in a user annotation
# ("Torch-Compiled Region: 0/0", "CompiledFunction"), which the profiler reports on the device too.
ANNOTATION_NAMES = ("Torch-Compiled Region", "CompiledFunction", "## ")


def device_event_kind(event) -> str | None:
    """``kernel``, ``copy`` (memcpy/memset) or ``annotation`` for a device-side profiler event, None for
    a host-side one. Only kernels count as kernels; the rest is reported under its own name."""
    from torch.autograd import DeviceType

    if event.device_type != DeviceType.CUDA:
        return None
    if getattr(event, "is_user_annotation", False) or event.key.startswith(ANNOTATION_NAMES):
        return "annotation"
    return "copy" if event.key.startswith(("Memcpy", "Memset")) else "kernel"


@phase("profile")
def profile_kernels(fn: Callable, kwargs: dict, device: str, steps: int, top: int = 12) -> dict:
    """Device kernels per step and their summed device time per step, from ``torch.profiler``
    (CUDA activity), averaged over ``steps`` profiled steps after one unprofiled call."""
    if not device.startswith("cuda"):
        return {"reason": "no device kernels on CPU"}
    from torch.profiler import ProfilerActivity, profile

    fn(**kwargs)
    sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            fn(**kwargs)
        sync(device)
    return kernel_summary(prof.key_averages(), steps, top)


def kernel_summary(events, steps: int, top: int = 12) -> dict:
    """Kernels per step and their device time per step from profiler averages (``key_averages()``);
    memcpy/memset and annotation ranges are counted apart, never as kernels."""
    by_kind: dict[str, list] = {"kernel": [], "copy": [], "annotation": []}
    for e in events:
        if (kind := device_event_kind(e)) is not None:
            by_kind[kind].append(e)
    kernels = by_kind["kernel"]
    by_time = sorted(kernels, key=lambda e: e.self_device_time_total, reverse=True)
    return {
        "steps": steps,
        "kernels_per_step": sum(e.count for e in kernels) / steps,
        "kernel_ms": sum(e.self_device_time_total for e in kernels) / steps / 1e3,
        "copies_per_step": sum(e.count for e in by_kind["copy"]) / steps,
        "copy_ms": sum(e.self_device_time_total for e in by_kind["copy"]) / steps / 1e3,
        "annotations_per_step": sum(e.count for e in by_kind["annotation"]) / steps,
        "top_kernels": [
            {"name": e.key[:120], "calls_per_step": e.count / steps, "device_us": e.self_device_time_total / steps}
            for e in by_time[:top]
        ],
    }
