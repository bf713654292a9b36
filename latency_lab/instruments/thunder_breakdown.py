"""A Thunder step taken apart where it runs, and its regions run alone as a cross-check.

In place (``InSitu``; its timestamps and statements: ``call_stamps``): the cache entry's computation
function is swapped for a copy of itself, compiled from its own trace, with a timestamp before every
statement; thunder's own per-call stamps (``compile_stats``: the call, the cache check, the prologue,
the computation) frame it. Steady-state calls of the real step then give, per call, every phase and
every statement of the computation: each fusion region, each op outside fusions, each bookkeeping call
and the glue between them (dels, unpacking, the return), measured, not inferred. The timestamps' own
cost is calibrated in every block and subtracted, and the corrected total is closed against the plain
step's host time measured in the same rounds: the remainder tests the instrumentation, not a sum that
holds by definition.

Alone (``record_calls``, ``measure_calls``): every call the computation makes is recorded with its
inputs and run by itself from an idle GPU, the way NVIDIA/Fuser issues 3469 and 3507 measured host
latency per fusion; nvFuser regions also as ``FusionDefinition.execute`` alone. These numbers are
compared with the in-place ones, never summed into the in-place parts; one profile of them gives each
region's kernels.

Works for ``thunder.jit``-like callables (``thunder.jit``, ``thunder.compile``), whose
``compile_data``/``compile_stats`` hold the cache entries of thunder 0.2.6; anything else (eager,
torch.compile, ``thunderfx``'s several functions) gets a reason instead of numbers.
"""

from __future__ import annotations

import inspect
import statistics
import time
import types
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from ..core import timing
from ..core.harness import describe
from ..core.metrics import Stat
from ..core.rows import Record, optional
from . import profiler_timeline, trace_analysis
from .call_stamps import (
    NOW,
    PHASES,
    STAMP,
    STARTUP,
    CallStamps,
    calibration_ns,
    call_kind,
    classify,
    phases_us,
    stamped,
    statements_us,
)

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
    """Why ``executor_name``'s ``part`` are not taken apart: it is no single thunder.jit callable."""
    return (
        f"{executor_name} is not a single thunder.jit callable (no thunder.compile_data with a cache entry): "
        f"its {part} are not taken apart here"
    )


def cached_call(fn, kwargs: dict):
    """Thunder's own cache lookup + prologue for ``kwargs``: the cache entry it picks (undecorated), its
    index in the cache, the computation's inputs and what the prologue passes to the epilogue."""
    cd, cs = jit_parts(fn)
    picked, inps, pro_to_epi = cd.get_computation_and_inputs(**kwargs)
    index = next(i for i, e in enumerate(cs.interpreter_cache) if e.prologue_fn is picked.prologue_fn)
    return cs.interpreter_cache[index], index, inps, pro_to_epi


# --- in place ---------------------------------------------------------------------------------------


def kind_label(kind: str) -> str:
    """A statement kind as the tables name it: ``nvFusion regions``, ``ops outside fusions``, ..."""
    return {
        "op": "ops outside fusions",
        "glue": "glue (dels, unpacking, return)",
        "bookkeeping": "bookkeeping calls",
    }.get(kind, f"{kind} regions")


class InSitu:
    """Instrumented steady-state calls of a thunder.jit-like callable (module docstring)."""

    def __init__(self, fn, kwargs: dict):
        if jit_parts(fn) is None:
            raise TypeError("not a thunder.jit-like callable with a cache entry")
        self.fn, self.kwargs = fn, kwargs
        self.cs = jit_parts(fn)[1]
        self.entry, self.index, _, _ = cached_call(fn, kwargs)
        trace = self.entry.computation_traces[-1]
        original = inspect.unwrap(self.entry.computation_fn)
        name = original.__name__
        # the exact source thunder compiled it from (thunder registers it in linecache), decorators included
        tree, body = stamped(inspect.getsource(original), name)
        regions = {
            b.sym.name: trace_analysis.fusion_kind(b) for b in trace.bound_symbols if trace_analysis.is_fusion(b)
        }
        self.statements = [classify(node, i, regions) for i, node in enumerate(body)]
        self.stamps: list[int] = []
        scope = {**original.__globals__, STAMP: self.stamps.append, NOW: time.perf_counter_ns}
        exec(compile(tree, f"thunder.{name}.stamped", "exec"), scope)
        self.computation = scope[name]

    @contextmanager
    def installed(self):
        """The instrumented copy in the cache entry's place; the original back afterwards."""
        self.cs.interpreter_cache[self.index] = self.entry._replace(computation_fn=self.computation)
        try:
            yield
        finally:
            self.cs.interpreter_cache[self.index] = self.entry

    def calls(self, n: int) -> tuple[list[CallStamps], float]:
        """``n`` back-to-back calls of the real step with the copy installed (no synchronize between
        them), and the timestamp's cost (ns) calibrated right after them."""
        cs, out = self.cs, []
        with self.installed(), timing.gc_paused():
            for _ in range(n):
                self.stamps.clear()
                start = time.perf_counter_ns()
                self.fn(**self.kwargs)
                stop = time.perf_counter_ns()
                out.append(
                    CallStamps(
                        start,
                        cs.last_trace_host_start,
                        cs.last_trace_cache_start,
                        cs.last_prologue_execution_start,
                        cs.last_prologue_execution_stop,
                        cs.last_trace_host_execution_start,
                        cs.last_trace_host_execution_stop,
                        cs.last_trace_host_stop,
                        stop,
                        list(self.stamps),
                    )
                )
        return out, calibration_ns(self.stamps)

    def block(self, n: int) -> dict:
        """One block's record: per phase and per statement the median µs over its ``n`` calls, the
        corrected µs per call (instrumented call less its timestamps; a mean over the calls, the
        statistic of the plain step's host time it is closed on), the timestamps' whole correction per
        call, and the timestamp's cost."""
        calls, stamp_ns = self.calls(n)
        phases = [phases_us(c, stamp_ns) for c in calls]
        per_statement = [statements_us(c, stamp_ns) for c in calls]
        corrected = [(c.stop - c.start - len(c.statements) * stamp_ns) / 1e3 for c in calls]
        return {
            "phases_us": {k: statistics.median(p[k] for p in phases) for k in PHASES},
            "statements_us": [statistics.median(col) for col in zip(*per_statement)],
            "call_us": statistics.fmean(corrected),
            "correction_us": statistics.fmean(len(c.statements) * stamp_ns / 1e3 for c in calls),
            "stamp_ns": stamp_ns,
            "calls": n,
        }


def insitu_probe(p, kwargs: dict, calls: int) -> tuple[InSitu | None, str | None]:
    """An ``InSitu`` for a prepared executor, or the reason it has none."""
    if not p.executor.needs_thunder:
        return None, f"{p.executor.name} is not a Thunder configuration"
    if jit_parts(p.fn) is None:
        return None, not_jit_reason(p.executor.name, "phases and regions")
    try:
        return InSitu(p.fn, kwargs), None
    except Exception as e:  # an entry point or trace this code cannot instrument: a reason, not a crash
        return None, f"cannot instrument the computation: {describe(e)}"


def phase_stats(phases_per_block: dict[str, list[float]], keep: list[bool] | None) -> dict[str, Stat]:
    """Per phase of the call, its statistic over the blocks (``Stat.headline`` over the rounds ``keep``
    picks): what ``summarize`` records as ``phases``, from the samples it records as ``phases_per_block``."""
    return {k: Stat.headline(xs, keep) for k, xs in phases_per_block.items()}


def summarize(insitu: InSitu, blocks: list[dict], host_ms: list[float], fast: list[bool] | None = None) -> dict:
    """The in-place breakdown over the rounds: per phase and per statement a statistic over the
    blocks, per kind (regions, ops, bookkeeping, glue) the sum, and how the parts close on the step: the plain step's
    host time (same rounds) against the corrected instrumented call, round by round. ``fast`` (per
    round: the host ran fast around the step's block, which the instrumented one follows) picks the
    rounds the headlines are taken over (``Stat.headline``). Its statistics are ``Stat``s; a results file
    holds them as their dicts (``studies.base.written``)."""
    if not blocks:
        return {"reason": "no instrumented block ran"}
    keep = fast[: len(blocks)] if fast else None

    def stat(xs) -> Stat:
        return Stat.headline(list(xs), keep)

    phases_per_block = {k: [b["phases_us"][k] for b in blocks] for k in PHASES}
    statements = [stat(b["statements_us"][s.index] for b in blocks) for s in insitu.statements]
    kinds: dict[str, list[float]] = {}
    for b in blocks:
        per_kind: dict[str, float] = {}
        for s in insitu.statements:
            per_kind[s.kind] = per_kind.get(s.kind, 0.0) + b["statements_us"][s.index]
        for k, us in per_kind.items():
            kinds.setdefault(k, []).append(us)
    startup = [sum(b["phases_us"][k] for k in STARTUP) for b in blocks]
    plain = [ms * 1e3 for ms in host_ms[: len(blocks)]]
    remainder = [100 * (h - b["call_us"]) / h for h, b in zip(plain, blocks) if h]
    remainder_us = [h - b["call_us"] for h, b in zip(plain, blocks)]
    correction = [100 * b["correction_us"] / h for h, b in zip(plain, blocks) if h and "correction_us" in b]
    return {
        "phases": phase_stats(phases_per_block, keep),
        "statements": [
            {"index": s.index, "name": s.name, "kind": s.kind, **st.to_dict()}
            for s, st in zip(insitu.statements, statements)
        ],
        "kinds": {k: stat(v) for k, v in kinds.items()},
        "kinds_per_block": kinds,
        "phases_per_block": phases_per_block,
        "startup_us": stat(startup),
        "call_us": stat(b["call_us"] for b in blocks),
        "plain_host_us": stat(plain) if plain else None,
        "remainder_pct": stat(remainder) if len(remainder) == len(blocks) else None,
        "remainder_us": stat(remainder_us) if len(remainder_us) == len(blocks) else None,
        "correction_pct": stat(correction) if len(correction) == len(blocks) else None,
        "fast": keep,
        "stamp_ns": Stat.of(b["stamp_ns"] for b in blocks),
        "blocks": len(blocks),
        "calls_per_block": blocks[0]["calls"],
    }


@dataclass
class PartRow(Record):
    """One in-place part of a configuration's call (``part_rows``): a phase around the computation or its
    statements of one kind (``kind_label``), in µs per call (median over the rounds)."""

    executor: str
    part: str
    us: float | None


def part_rows(executor: str, b: dict) -> list[PartRow]:
    """The in-place parts of ``executor``'s breakdown ``b`` (``summarize``): the phases around the computation
    (the statements left out), then the statements' time by kind."""
    phases = [(k, v) for k, v in b["phases"].items() if k != "statements"]
    kinds = [(kind_label(k), v) for k, v in b["kinds"].items()]
    return [PartRow(executor, part, s.median) for part, s in phases + kinds]


# --- alone (cross-check) --------------------------------------------------------------------------


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
    """``value`` as the recorded computation sees it: a module or class as a ``_Namespace``, a callable as a
    ``_Recorder``, anything else as it is."""
    if isinstance(value, types.ModuleType) or inspect.isclass(value):
        return _Namespace(value, name, calls)
    return _Recorder(value, name, calls) if callable(value) else value


def record_calls(fn, kwargs: dict) -> list[Call]:
    """Run the cached computation function once more, from its own code, with every global it calls
    wrapped in a recorder: the fusion regions (trace-level callables) and the torch ops outside them.
    nvFuser regions also keep their inputs the wrapper's own way (``store_inputs``) where it has one."""
    import thunder
    import torch

    entry, _, inps, _ = cached_call(fn, kwargs)
    comp = inspect.unwrap(entry.computation_fn)
    trace = thunder.last_traces(fn)[-1]
    regions = {b.sym.name: trace_analysis.fusion_kind(b) for b in trace.bound_symbols if trace_analysis.is_fusion(b)}
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
    recorded = [Call(i, name, call_kind(name, regions), f, a, k) for i, (name, f, a, k) in enumerate(calls)]
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
    return Call(c.index, f"{c.name} fd.execute", "nvFuser execute", run, c.args, {}, c.inputs)


@dataclass
class CallRow(Record):
    """One call of ``executor``'s computation function run alone (``measure_calls``): its position among
    the calls, its name and kind, where its inputs came from; its latency from an idle GPU (``alone_us``:
    median and quartiles) where it ran, else its ``error``; on a GPU its kernels per call and their device
    µs. A row holds only the columns it has a value for (``optional``)."""

    executor: str
    index: int
    call: str
    kind: str
    inputs: str
    alone_us: Stat | None = optional()
    error: str | None = optional()
    kernels: float | None = optional()
    kernel_us: float | None = optional()


def measure_calls(calls: list[Call], device: str, host_calls: int, executor: str) -> list[CallRow]:
    """Each call of ``executor``'s computation run alone on its recorded inputs: its latency from an idle
    GPU (``iters`` samples), and from one profile of all of them kernels per call and their device µs. A
    call that fails alone is a row with its error."""
    rows, ok = [], []
    for c in calls:
        row = CallRow(executor, c.index, c.name, c.kind, c.inputs)
        try:
            s = timing.latency_from_idle(lambda c=c: c.fn(*c.args, **c.kwargs), {}, device, host_calls).scaled(1e3)
            row.alone_us = s
            ok.append((len(rows), c))
        except Exception as e:  # a call that cannot run alone is a row with its reason
            row.error = describe(e, 200)
        rows.append(row)
    if not ok or not device.startswith("cuda"):
        return rows
    trace = profiler_timeline.profile_calls(
        [(str(i), lambda c=c: c.fn(*c.args, **c.kwargs)) for i, c in ok], device, PROFILE_REPEATS
    )
    by_label: dict[str, list[dict]] = {}
    for w in profiler_timeline.windows(profiler_timeline.spans_from_chrome(trace)):
        by_label.setdefault(w.label, []).append(profiler_timeline.window_metrics(w))
    for i, _ in ok:
        if ms := by_label.get(str(i)):
            rows[i].kernels = sum(m["kernels"] for m in ms) / len(ms)
            rows[i].kernel_us = sum(m["kernel_us"] for m in ms) / len(ms)
    return rows


def alone(fn, kwargs: dict, device: str, calls: int, executor: str) -> list[CallRow]:
    """Every call of ``executor``'s computation function (``fn``) run alone, and each nvFuser region's
    execute alone."""
    recorded = record_calls(fn, kwargs)
    return measure_calls(recorded + [x for c in recorded if (x := execute_only(c))], device, calls, executor)
