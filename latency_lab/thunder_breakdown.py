"""A Thunder call taken apart: its phases (cache lookup + prologue, computation, epilogue) timed alone
and inside the call, and every call the computation function makes (fusion regions, ops outside them)
recorded with its inputs and run alone: host time, kernels launched and their device time.

Works for any ``thunder.jit``-like callable (``thunder.jit``, ``thunder.compile``): those carry
``thunder.compile_data`` / ``compile_stats`` with the cache entries (prologue, computation and
epilogue functions) of thunder 0.2.6. ``thunderfx`` hands each Dynamo graph to a thunder function of
its own: its phases in the call are summed over them; its regions are not recorded. Anything else gets
a reason instead of numbers.
"""

from __future__ import annotations

import inspect
import time
import types
from dataclasses import dataclass
from typing import Callable

from . import profiler_timeline as pt
from . import timing, traces
from .executors import describe

PROFILE_REPEATS = 2  # profiled runs of each recorded call (kernels and device time are their mean)
NVFUSER_INPUTS = "nvFuser wrapper's own store_inputs -> last_inputs (thunder option nv_store_fusion_inputs)"
RECORDED_INPUTS = "recorded by wrapping the computation function's callables"


def jit_parts(fn):
    """(compile data, compile stats) of a thunder.jit-like callable with a cache entry, else None."""
    import thunder

    cd, cs = thunder.compile_data(fn), thunder.compile_stats(fn)
    if cd is None or cs is None or not getattr(cs, "interpreter_cache", None):
        return None
    return cd, cs


def not_jit_reason(executor_name: str, part: str) -> str:
    return (f"{executor_name} is not a thunder.jit callable (no thunder.compile_data with a cache entry): "
            f"its {part} are not taken apart here")


def host_us(fn: Callable, device: str, calls: int) -> dict:
    """µs for ``fn()`` to return, device drained between calls (``timing.host_submit``)."""
    s = timing.host_submit(lambda: fn(), {}, device, calls)
    return {"us": s["median"] * 1e3, "iqr_us": s["iqr"] * 1e3, "n": s["n"]}


def cached_call(fn, kwargs: dict):
    """Thunder's own cache lookup + prologue for ``kwargs``: the cache entry it picks (undecorated), the
    computation's inputs and what the prologue passes to the epilogue."""
    cd, cs = jit_parts(fn)
    picked, inps, pro_to_epi = cd.get_computation_and_inputs(**kwargs)
    entry = next(e for e in cs.interpreter_cache if e.prologue_fn is picked.prologue_fn)
    return entry, inps, pro_to_epi


def thunder_functions(fn) -> list:
    """The thunder.jit-like functions behind ``fn`` that have run: itself, or thunderfx's (one per Dynamo graph)."""
    return [f for f in traces.thunder_functions(fn) if jit_parts(f)]


def in_call(fn, kwargs: dict, device: str, calls: int) -> dict[str, list[float]]:
    """µs samples of the parts of whole calls, from thunder's own timestamps (``compile_stats`` of each
    thunder function behind ``fn``: its call span and the computation's span inside it, summed over
    the functions) around a perf_counter span of the whole call."""
    stats = [jit_parts(f)[1] for f in thunder_functions(fn)]
    samples: dict[str, list[float]] = {k: [] for k in ("whole", "outside", "lookup", "computation", "after")}
    with timing.gc_paused():
        for _ in range(calls):
            timing.sync(device)
            t0 = time.perf_counter_ns()
            fn(**kwargs)
            t1 = time.perf_counter_ns()
            spans = [(cs.last_trace_host_start, cs.last_trace_host_execution_start, cs.last_trace_host_execution_stop,
                      cs.last_trace_host_stop) for cs in stats]
            inside = sum(he - hs for hs, _, _, he in spans)
            for key, ns in (("whole", t1 - t0), ("outside", (t1 - t0) - inside), ("lookup", sum(es - hs for hs, es, _, _ in spans)),
                            ("computation", sum(ee - es for _, es, ee, _ in spans)), ("after", sum(he - ee for _, _, ee, he in spans))):
                samples[key].append(ns / 1e3)
    timing.sync(device)
    return samples


def phases(fn, kwargs: dict, device: str, calls: int) -> list[dict]:
    """The phases of a Thunder call, one row each: µs (median), IQR and the method that measured it.
    In whole calls (thunder's own timestamps, summed over thunderfx's functions): cache lookup +
    prologue, the computation function, what follows it, and what lies outside thunder's spans. Alone,
    for a single thunder.jit-like function (``alone_phases``)."""
    n, single = len(thunder_functions(fn)), jit_parts(fn) is not None
    within = in_call(fn, kwargs, device, calls)
    method = "in the call: thunder.compile_stats timestamps" + ("" if single else f", summed over {n} thunder function(s)")
    rows = []
    for phase, key in (("whole call", "whole"), ("cache lookup + prologue", "lookup"),
                       ("computation function", "computation"), ("epilogue and call statistics", "after"),
                       ("outside thunder's span" + (" (nn.Module.__call__, ThunderModule.forward)" if single
                                                    else " (Dynamo's guards and graph code)"), "outside")):
        s = timing.stats(within[key])
        rows.append({"phase": phase, "us": s["median"], "iqr_us": s["iqr"], "n": s["n"],
                     "method": method + (" and perf_counter" if key in ("whole", "outside") else "")})
    return rows + (alone_phases(fn, kwargs, device, calls) if single else [])


def alone_phases(fn, kwargs: dict, device: str, calls: int) -> list[dict]:
    """Each cached function run alone on the same inputs, as the call runs it: thunder's cache lookup +
    prologue (``compile_data(fn).get_computation_and_inputs``), the cache info it checks, the cache
    entry's prologue (in thunder's compile-data context), computation and epilogue; the cache search is
    what the first leaves after the next two."""
    import thunder
    from thunder.core.compile_data import compile_data_and_stats

    cd, cs = jit_parts(fn)
    entry, inps, pro_to_epi = cached_call(fn, kwargs)
    out = entry.computation_fn(*inps)
    if entry.backward_fn:  # with autograd the computation returns (data for autograd, saved tensors)
        out = out[0]["output"]

    def cache_info():  # what the cache entries are checked against: dtype/device defaults, autocast, aliases
        cd.populate_cache_info(thunder._get_cache_info(), **kwargs)

    def prologue():  # as thunder runs it: inside its compile-data context
        with compile_data_and_stats(cd, cs):
            return entry.prologue_fn(**kwargs)

    alone = {
        "cache lookup + prologue": lambda: cd.get_computation_and_inputs(**kwargs),
        "cache info (populate_cache_info)": cache_info,
        "prologue": prologue,
        "computation function": lambda: entry.computation_fn(*inps),
    }
    if entry.epilogue_fn is not None:
        alone["epilogue"] = lambda: entry.epilogue_fn(*pro_to_epi, *out)
    token = thunder._cache_info_ctx.set({})  # the context a call sets up, kept for the prologue alone
    try:
        cache_info()
        measured = {phase: host_us(f, device, calls) for phase, f in alone.items()}
    finally:
        thunder._cache_info_ctx.reset(token)
    rows = [{"phase": phase, **m, "method": "alone: the cached function on the same inputs, device drained between calls"}
            for phase, m in measured.items()]
    lookup = measured["cache lookup + prologue"]["us"] - measured["cache info (populate_cache_info)"]["us"] - measured["prologue"]["us"]
    rows.append({"phase": "cache search", "us": lookup, "iqr_us": None, "n": None,
                 "method": "derived: cache lookup + prologue alone - cache info alone - prologue alone"})
    return rows


@dataclass
class Call:
    """One call the computation function made, with the inputs it was made with."""

    index: int
    name: str  # as the trace calls it: nvFusion0, torch.nn.functional.linear, Tensor.__getitem__ ...
    kind: str  # nvFusion, TorchCompile, CUDAGraph (regions), op, bookkeeping
    fn: Callable
    args: tuple
    kwargs: dict
    inputs: str = RECORDED_INPUTS


class _Recorder:
    """A callable that appends each call (callable, inputs) to ``calls`` and then makes it."""

    def __init__(self, fn, name: str, calls: list):
        self._fn, self._name, self._calls = fn, name, calls

    def __call__(self, *args, **kwargs):
        self._calls.append((self._name, self._fn, args, kwargs))
        return self._fn(*args, **kwargs)


class _Namespace:
    """A module or class whose callable attributes come back as ``_Recorder``s (``torch.nn.functional.
    linear`` in a trace is ``torch`` -> ``nn`` -> ``functional`` -> ``linear``); calling it (a class,
    e.g. ``torch.device``) builds the object unrecorded."""

    def __init__(self, obj, name: str, calls: list):
        self._obj, self._name, self._calls = obj, name, calls

    def __getattr__(self, attr):
        return _instrument(getattr(self._obj, attr), f"{self._name}.{attr}", self._calls)

    def __call__(self, *args, **kwargs):
        return self._obj(*args, **kwargs)


def _instrument(value, name: str, calls: list):
    if isinstance(value, types.ModuleType) or inspect.isclass(value):
        return _Namespace(value, name, calls)
    return _Recorder(value, name, calls) if callable(value) else value


def _kind(name: str, regions: dict[str, str]) -> str:
    if name in regions:
        return regions[name]
    short = name.rsplit(".", 1)[-1]
    return "bookkeeping" if short in traces.BOOKKEEPING or short.startswith("unpack_") else "op"


def record_calls(fn, kwargs: dict) -> list[Call]:
    """Run the cached computation function once more, from its own code, with every global it calls
    wrapped in a recorder: the fusion regions (trace-level callables) and the torch ops outside them.
    nvFuser regions also keep their inputs the wrapper's own way (``store_inputs``) where it has one."""
    import thunder
    import torch

    entry, inps, _ = cached_call(fn, kwargs)
    comp = inspect.unwrap(entry.computation_fn)
    trace = thunder.last_traces(fn)[-1]
    regions = {b.sym.name: traces.fusion_kind(b) for b in trace.bound_symbols if traces.is_fusion(b)}
    calls: list = []
    instrumented = {k: v if k.startswith("__") else _instrument(v, k, calls) for k, v in comp.__globals__.items()}
    wrappers = {k: v for k, v in comp.__globals__.items() if k in regions and hasattr(v, "store_inputs")}
    for w in wrappers.values():
        w.store_inputs = True
    try:
        with torch.no_grad():
            types.FunctionType(comp.__code__, instrumented, comp.__name__, comp.__defaults__, comp.__closure__)(*inps)
    finally:
        for w in wrappers.values():
            w.store_inputs = False
    recorded = [Call(i, name, _kind(name, regions), f, a, k) for i, (name, f, a, k) in enumerate(calls)]
    for c in recorded:
        w = wrappers.get(c.name)
        if w is not None and w.last_inputs is not None:
            c.args, c.inputs = tuple(w.last_inputs), NVFUSER_INPUTS
            w.last_inputs = None
    return recorded


def execute_only(c: Call) -> Call | None:
    """For an nvFuser region: its ``FusionDefinition.execute`` alone (no thunder wrapper around it, the
    way NVIDIA/Fuser measured host latency per fusion), when the wrapper keeps its last definition."""
    fd = getattr(c.fn, "last_used", None)
    if c.kind != "nvFusion" or fd is None:
        return None
    device = getattr(fd, "_selected_device", None)
    run = (lambda *a: fd.execute(a, device=device)) if device is not None else (lambda *a: fd.execute(a))
    repro = "present" if hasattr(fd, "last_repro_script") else "absent"
    return Call(c.index, f"{c.name} fd.execute", "nvFuser execute (inside the region above)", run, c.args, {},
                f"{c.inputs}; FusionDefinition.last_repro_script {repro} in the installed nvFuser")


def measure_calls(calls: list[Call], device: str, host_calls: int) -> list[dict]:
    """Each call run alone on its recorded inputs: host µs per call, and from one profile of all of
    them kernels per call, their device µs and host µs per kernel. A call that fails alone is a row
    with its error."""
    rows, ok = [], []
    for c in calls:
        row = {"#": c.index, "call": c.name, "kind": c.kind, "inputs": c.inputs}
        try:
            m = host_us(lambda c=c: c.fn(*c.args, **c.kwargs), device, host_calls)
            row.update(host_us=m["us"], host_iqr_us=m["iqr_us"])
            ok.append((len(rows), c))
        except Exception as e:  # a call that cannot run alone is a row with its reason
            row["error"] = describe(e, 200)
        rows.append(row)
    if not ok:
        return rows
    trace = pt.profile_calls([(str(i), lambda c=c: c.fn(*c.args, **c.kwargs)) for i, c in ok], device, PROFILE_REPEATS)
    by_label: dict[str, list[dict]] = {}
    for w in pt.windows(pt.spans_from_chrome(trace)):
        by_label.setdefault(w.label, []).append(pt.window_metrics(w))
    for i, _ in ok:
        ms = by_label.get(str(i), [])
        if device.startswith("cuda") and ms:
            kernels = sum(m["kernels"] for m in ms) / len(ms)
            rows[i].update(kernels=kernels, kernel_us=sum(m["kernel_us"] for m in ms) / len(ms),
                           host_us_per_kernel=rows[i]["host_us"] / kernels if kernels else None)
    return rows
