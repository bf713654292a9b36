"""A Thunder configuration's trace row, taken right after its first call: the call's phases, compile
statistics of it and of a second (cached) call, and its final trace analysed (``trace_analysis``)."""

from __future__ import annotations

from ..core.failures import describe
from ..core.harness import prepare
from ..core.registry import Executor
from ..core.rows import plain_row
from .first_call_phases import first_call_phases
from .trace_analysis import analyze, compile_stats, thunder_functions


def build_row(executor: Executor, module, kwargs: dict, device: str) -> dict:
    """One configuration's row: jit and first call (compile), then ``trace_row`` it."""
    return trace_row(prepare(executor, module, kwargs, device), kwargs)


def trace_row(prepared, kwargs: dict) -> dict:
    """The row of an executor built and called once, taken right after that first call: its
    phases and compile statistics, a second (cached) call and its statistics, the trace analysed.
    Unavailable or failing: the row has the reason. Never raises and never changes ``prepared``,
    so notebook 02 can take it between its own measurements."""
    if not prepared.ok:
        return plain_row(prepared)
    try:
        fns = thunder_functions(prepared.fn)
        jm = fns[0] if len(fns) == 1 else prepared.fn  # several (thunderfx): no single set of statistics
        first, phases = compile_stats(jm), first_call_phases(prepared.fn)
        prepared.fn(**kwargs)
        stats = {"first_call": first, "second_call": compile_stats(jm)}
        analysis = analyze(prepared.fn)
    except Exception as e:
        return plain_row(prepared, status="failed", reason=f"trace analysis: {describe(e)}")
    return plain_row(
        prepared, first_call_s=prepared.first_call_s, first_call_phases=phases, **analysis, compile_stats=stats
    )
