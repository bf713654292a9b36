"""One Thunder call taken apart by timestamps, without running thunder: the phases of a call
(``PHASES``), the computation function's statements and their kinds (``classify``), its source with a
timestamp before every statement (``stamped``), the timestamp's own cost (``calibration_ns``) and one
call's timestamps as µs per phase and per statement. ``thunder_breakdown.InSitu`` runs them."""

from __future__ import annotations

import ast
import statistics
import time
from dataclasses import dataclass

from . import trace_analysis

CALIBRATION_STAMPS = 200  # empty statements timed per block to price one timestamp
# The phases of one call, in order, from thunder's stamps (``compile_stats``) and the call's own span:
# call entry/exit are nn.Module.__call__ and ThunderModule.forward around thunder's own span.
PHASES = (
    "call entry",
    "cache info",
    "cache search",
    "prologue",
    "cache hit bookkeeping",
    "computation entry",
    "statements",
    "epilogue and statistics",
    "call exit",
)
# What runs before the computation's first statement: the per-step start-up the seed points at.
STARTUP = PHASES[:6]


@dataclass(frozen=True)
class Statement:
    """One top-level statement of the computation function."""

    index: int
    name: str  # the callee (nvFusion0, torch.nn.functional.linear, update_aliases) or del / unpack / return
    kind: str  # nvFusion, TorchCompile, CUDAGraph, op, bookkeeping or glue


def _callee(node: ast.AST) -> str | None:
    """The dotted name a statement calls (``torch.nn.functional.linear``), None if it calls nothing."""
    value = getattr(node, "value", None)
    if not isinstance(value, ast.Call):
        return None
    parts, f = [], value.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    return ".".join([f.id, *reversed(parts)]) if isinstance(f, ast.Name) else None


def call_kind(name: str, regions: dict[str, str]) -> str:
    """The kind of a call the computation makes: its fusion region's kind (by the trace's region names),
    ``bookkeeping`` or ``op``."""
    if name in regions:
        return regions[name]
    short = name.rsplit(".", 1)[-1]
    return "bookkeeping" if short in trace_analysis.BOOKKEEPING or short.startswith("unpack_") else "op"


def classify(node: ast.stmt, index: int, regions: dict[str, str]) -> Statement:
    """A statement's kind: a fusion region (by the trace's region names), a bookkeeping call, an op,
    or glue (a del, an unpacking, the return)."""
    name = _callee(node)
    if name is None:
        glue = {ast.Delete: "del", ast.Return: "return", ast.Assign: "unpack"}.get(type(node), type(node).__name__)
        return Statement(index, glue, "glue")
    return Statement(index, name, call_kind(name, regions))


STAMP = "_latency_lab_stamp"  # name of the timestamp statement's list.append in the copy's globals
NOW = "_latency_lab_now"


def stamped(source: str, name: str) -> tuple[ast.Module, list[ast.stmt]]:
    """``source`` parsed, with ``STAMP(NOW())`` inserted before every top-level statement of function
    ``name``; and those statements."""
    tree = ast.parse(source)
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    body = list(func.body)
    stamp = ast.parse(f"{STAMP}({NOW}())").body[0]
    func.body = [s for stmt in body for s in (stamp, stmt)]
    return ast.fix_missing_locations(tree), body


def calibration_ns(stamps: list[int], now=time.perf_counter_ns) -> float:
    """ns one timestamp statement adds to the interval it opens: the median interval between
    ``CALIBRATION_STAMPS`` timestamps with nothing between them, taken the way the copy takes them."""
    append = stamps.append
    stamps.clear()
    for _ in range(CALIBRATION_STAMPS):
        append(now())
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    stamps.clear()
    return statistics.median(gaps)


@dataclass
class CallStamps:
    """One call's timestamps (ns): around the call, thunder's own, and one per statement."""

    start: int
    host_start: int
    cache_start: int
    prologue_start: int
    prologue_stop: int
    exec_start: int
    exec_stop: int
    host_stop: int
    stop: int
    statements: list[int]


def phases_us(c: CallStamps, stamp_ns: float) -> dict[str, float]:
    """µs of each phase of one call (``PHASES``); ``statements`` runs from the first statement to the
    computation's end (the return and the decorators' exit included), less one timestamp per statement."""
    if not c.statements:
        raise ValueError("no statement timestamps: the instrumented computation did not run")
    n = len(c.statements)
    return {
        k: v / 1e3
        for k, v in {
            "call entry": c.host_start - c.start,
            "cache info": c.cache_start - c.host_start,
            "cache search": c.prologue_start - c.cache_start,
            "prologue": c.prologue_stop - c.prologue_start,
            "cache hit bookkeeping": c.exec_start - c.prologue_stop,
            "computation entry": c.statements[0] - c.exec_start,
            "statements": c.exec_stop - c.statements[0] - n * stamp_ns,
            "epilogue and statistics": c.host_stop - c.exec_stop,
            "call exit": c.stop - c.host_stop,
        }.items()
    }


def statements_us(c: CallStamps, stamp_ns: float) -> list[float]:
    """µs of each statement of one call, less one timestamp each; the last runs to the computation's end."""
    ends = [*c.statements[1:], c.exec_stop]
    return [(b - a - stamp_ns) / 1e3 for a, b in zip(c.statements, ends)]
