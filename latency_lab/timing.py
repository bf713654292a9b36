"""Timing primitives: CUDA-event step timer (the seed's ``cuda_timer``), host submit time,
first-call time, kernel count/time from ``torch.profiler``, and the statistics every number carries.

Wall times and profiles come from separate calls so that the profiler's overhead never leaks into
wall times. On a CPU the event timer falls back to ``time.perf_counter``.
"""

from __future__ import annotations

import gc
import statistics
import time
from contextlib import contextmanager
from typing import Callable

import torch

NOISY_REL_SPREAD = 0.10  # a row whose IQR exceeds 10% of its median is flagged as noisy


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def use_device(device: str) -> None:
    """Make ``device`` (``cuda:N``) the current CUDA device, so that CUDA events, streams, the
    profiler and ``torch.device("cuda")`` all refer to it; nothing to do on a CPU."""
    if device.startswith("cuda") and (index := torch.device(device).index) is not None:
        torch.cuda.set_device(index)


def stats(samples: list[float]) -> dict:
    """Median and spread of ``samples`` (IQR, min, max, mean, std) and a noisy flag."""
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("stats() needs at least one sample")
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if n > 1 else (xs[0],) * 3
    median = statistics.median(xs)
    iqr = q3 - q1
    return {
        "median": median, "iqr": iqr, "q1": q1, "q3": q3, "min": xs[0], "max": xs[-1],
        "mean": statistics.fmean(xs), "std": statistics.stdev(xs) if n > 1 else 0.0, "n": n,
        "rel_spread": iqr / median if median else 0.0,
        "noisy": bool(median and iqr / median > NOISY_REL_SPREAD),
    }


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


def warm_up(fn: Callable, kwargs: dict, calls: int) -> dict:
    """``calls`` untimed calls: caches, autotuning and CUDA-graph recording happen here."""
    for _ in range(calls):
        fn(**kwargs)
    return {"calls": calls}


def method_name(device: str) -> str:
    """What the event timer uses on ``device``."""
    return "cuda-events" if device.startswith("cuda") else "perf_counter"


def event_timer(fn: Callable, kwargs: dict, device: str, warmup: int, iters: int, repeats: int) -> dict:
    """The seed's ``cuda_timer``: ``warmup`` calls, then ``repeats`` blocks of ``iters`` calls between
    two CUDA events; ms per step of each block, with their statistics."""
    warm_up(fn, kwargs, warmup)
    with gc_paused():
        blocks = [_block_ms(fn, kwargs, device, iters) for _ in range(repeats)]
    return {"method": method_name(device), "warmup": warmup, "iters": iters, "repeats": repeats, "blocks_ms": blocks, **stats(blocks)}


def _block_ms(fn: Callable, kwargs: dict, device: str, iters: int) -> float:
    """ms per call over ``iters`` back-to-back calls: CUDA events on a GPU, perf_counter on a CPU."""
    if not device.startswith("cuda"):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(**kwargs)
        return (time.perf_counter() - t0) * 1e3 / iters
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    for _ in range(iters):
        fn(**kwargs)
    end.record()
    torch.cuda.synchronize(device)
    return start.elapsed_time(end) / iters


def host_reference_ms(loops: int = 20_000) -> float:
    """ms for a fixed pure-Python loop: the host's own speed, timed beside the executors so that a
    drift of the machine (clock, a busy neighbour) shows apart from the executors."""
    with gc_paused():
        t0 = time.perf_counter()
        total = 0
        for i in range(loops):
            total += i * i
        return (time.perf_counter() - t0) * 1e3


def host_submit(fn: Callable, kwargs: dict, device: str, calls: int) -> dict:
    """ms for a call to return with no synchronize (the host's share of a step). The device is
    drained between calls, outside the timed region, so a full launch queue never blocks the call."""
    samples = []
    with gc_paused():
        for _ in range(calls):
            sync(device)
            t0 = time.perf_counter()
            fn(**kwargs)
            samples.append((time.perf_counter() - t0) * 1e3)
    sync(device)
    return {"calls": calls, "samples_ms": samples, **stats(samples)}


def timeit_record(result) -> dict:
    """The fields of IPython's ``TimeitResult`` (from ``%timeit -o``), in ms per loop."""
    per_loop = [t / result.loops * 1e3 for t in result.all_runs]
    return {"mean_ms": result.average * 1e3, "std_ms": result.stdev * 1e3, "loops": result.loops,
            "runs": result.repeat, "runs_ms": per_loop, **stats(per_loop)}


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
        "kernel_ms_per_step": sum(e.self_device_time_total for e in kernels) / steps / 1e3,
        "copies_per_step": sum(e.count for e in by_kind["copy"]) / steps,
        "copy_ms_per_step": sum(e.self_device_time_total for e in by_kind["copy"]) / steps / 1e3,
        "annotations_per_step": sum(e.count for e in by_kind["annotation"]) / steps,
        "top_kernels": [{"name": e.key[:120], "calls_per_step": e.count / steps,
                         "us_per_step": e.self_device_time_total / steps} for e in by_time[:top]],
    }


def seed_table_row(wall_ms: float, kernel_ms: float | None, kernels: float | None) -> dict:
    """The DGX H100 table's derived columns: CPU overhead = wall - kernel time, and per kernel."""
    if kernel_ms is None or not kernels:
        return {"cpu_overhead_ms": None, "overhead_per_kernel_us": None}
    overhead = wall_ms - kernel_ms
    return {"cpu_overhead_ms": overhead, "overhead_per_kernel_us": overhead * 1e3 / kernels}
