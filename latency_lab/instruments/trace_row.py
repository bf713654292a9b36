"""A Thunder configuration's trace row, taken right after its first call: the call's phases, compile
statistics of it and of a second (cached) call, and its final trace analysed (``trace_analysis``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..core.failures import describe
from ..core.harness import prepare
from ..core.registry import Executor
from ..core.rows import Row, optional
from .first_call_phases import first_call_phases
from .trace_analysis import analyze, compile_stats, thunder_functions


@dataclass
class TraceRow(Row):
    """A Thunder configuration's row: its first call and that call's phases (s), then its final trace
    analysed (``trace_analysis.analyze``: functions, executors, symbols and lines, the seed's counter, the
    composition, fusion regions, unfused ops, the prologue, the trace's text) and the compile statistics
    of the first and a second call. A row that did not get that far has only its identity and reason."""

    first_call_s: float | None = optional()
    first_call_phases: dict | None = optional()
    thunder_functions: int | None = optional()
    thunder_executors: list | None = optional()
    bound_symbols: int | None = optional()
    trace_lines: int | None = optional()
    counter: dict | None = optional()
    composition: dict | None = optional()
    regions: list | None = optional()
    unfused: dict | None = optional()
    prologue_bound_symbols: int | None = optional()
    prologue_lines: int | None = optional()
    trace: str | None = optional()
    compile_stats: dict | None = optional()


def build_row(executor: Executor, module, kwargs: dict, device: str) -> TraceRow:
    """One configuration's row: jit and first call (compile), then ``trace_row`` it."""
    return trace_row(prepare(executor, module, kwargs, device), kwargs)


def trace_row(prepared, kwargs: dict) -> TraceRow:
    """The row of an executor built and called once, taken right after that first call: its
    phases and compile statistics, a second (cached) call and its statistics, the trace analysed.
    Unavailable or failing: the row has the reason. Never raises and never changes ``prepared``,
    so notebook 02 can take it between its own measurements."""
    if not prepared.ok:
        return TraceRow.of(prepared)
    try:
        fns = thunder_functions(prepared.fn)
        jm = fns[0] if len(fns) == 1 else prepared.fn  # several (thunderfx): no single set of statistics
        first, phases = compile_stats(jm), first_call_phases(prepared.fn)
        prepared.fn(**kwargs)
        stats = {"first_call": first, "second_call": compile_stats(jm)}
        analysis = analyze(prepared.fn)
    except Exception as e:
        return replace(TraceRow.of(prepared), status="failed", reason=f"trace analysis: {describe(e)}")
    return TraceRow.of(
        prepared, first_call_s=prepared.first_call_s, first_call_phases=phases, **analysis, compile_stats=stats
    )
