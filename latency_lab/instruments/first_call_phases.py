"""A Thunder first call split into phases by the ``perf_counter_ns`` stamps thunder records
(``thunder.compile_stats``): interpreting the model's Python, the transforms and the prologue, the
computation's first run. Read per jitted module right after its first call (``first_call_phases``),
then per configuration as notebook 03's table (``first_call_table``) and one sentence of its findings
(``first_call_finding``).
"""

from __future__ import annotations

from ..pages.tables import number
from .trace_analysis import thunder_functions

# A first call's phases, from the perf_counter_ns stamps thunder records: interpreting the model's
# Python into the initial trace; the transforms (fusion passes) and the prologue built and run; the
# computation's first run, which compiles each fusion (nvFuser, Inductor) or records CUDA graphs.
PHASES = (
    ("interpret_s", "last_trace_tracing_start", "last_trace_tracing_stop"),
    ("transform_s", "last_trace_tracing_stop", "last_trace_host_execution_start"),
    ("first_run_s", "last_trace_host_execution_start", "last_trace_host_execution_stop"),
)


def first_call_phases(jm) -> dict:
    """The phases of ``jm``'s first call in seconds (read before a second call overwrites the run's
    stamps); None for a phase thunder did not stamp. thunderfx's several functions are summed."""
    import thunder

    out = {}
    for name, start, stop in PHASES:
        spans = [
            (getattr(cs, start, -1), getattr(cs, stop, -1)) for cs in map(thunder.compile_stats, thunder_functions(jm))
        ]
        out[name] = sum(b - a for a, b in spans) / 1e9 if spans and all(0 <= a <= b for a, b in spans) else None
    return out


def first_call_table(rows: list[dict]) -> list[dict]:
    """Per configuration, its first call split into thunder's phases; ``other`` is the rest of the
    measured call (cache-key checks, the module wrapper, thunderfx's Dynamo capture, the closing
    synchronize). A configuration without a first call is a row with its status and reason."""
    out = []
    for r in rows:
        phases = r.get("first_call_phases") or {}
        total = r.get("first_call_s") if r["status"] == "ok" else None
        known = [phases.get(name) for name, *_ in PHASES]
        complete = total is not None and None not in known
        out.append(
            {
                "executor": r["executor"],
                "status": r["status"],
                "first_call_s": total,
                **{name: phases.get(name) for name, *_ in PHASES},
                "other_s": total - sum(known) if complete else None,
                "interpret_pct": 100 * phases["interpret_s"] / total if complete else None,
                "reason": r.get("reason"),
            }
        )
    return out


def first_call_finding(rows: list[dict]) -> str | None:
    """Each first call measured here, by phase in seconds, and the share of interpreting in the
    configurations ``thunder.jit`` builds (thunderfx's thunder interprets Dynamo's graphs instead)."""
    from ..core.registry import REGISTRY

    table = [t for t in first_call_table(rows) if t["other_s"] is not None]
    if not table:
        return None
    parts = "; ".join(
        f"{t['executor']} {number(t['first_call_s'])} s (interpreting {number(t['interpret_s'])} s, "
        f"transforms {number(t['transform_s'])} s, first run {number(t['first_run_s'])} s, "
        f"other {number(t['other_s'])} s)"
        for t in table
    )
    text = f"First call by thunder's own timestamps: {parts}."
    jit = [t["interpret_pct"] for t in table if REGISTRY[t["executor"]].entry_point != "dynamo.thunderfx"]
    if jit:
        share = number(jit[0]) if len(jit) == 1 else f"{number(min(jit))}-{number(max(jit))}"
        text += f" Interpreting the model's Python is {share}% of a thunder.jit configuration's first call."
    return text
