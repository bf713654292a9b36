"""Thunder's final execution trace, taken apart: the seed's symbol counter, fusion regions and the ops
inside them, ops left unfused, the prologue's size and thunder's compile statistics.

A fusion region is a top-level bound symbol whose symbol is a fusion (``sym.is_fusion``): nvFuser's
``nvFusionN``, torch.compile's ``TorchCompileN`` and the CUDA-graph transform's ``CUDAGraphN``. Its
``subsymbols`` are the ops it runs (nvFuser: flattened prims; TorchCompile: the torch-level ops of
the region; CUDAGraph: the trace's bound symbols it captured, nvFusion regions included).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass

from ..core import model, registry, results, seed_numbers
from ..core.harness import describe, prepare
from ..core.parameters import Params
from ..core.registry import Executor
from ..core.rows import plain_row
from ..pages.tables import number
from .study import Study, begin

SAME_MODEL = ("preset", "layers", "batch_size", "seq_len", "dtype", "device", "cache_mode", "seed")

# Symbols that move no data: argument unpacking, deletes, the return, and update_aliases (the
# identity at run time; it records aliasing for in-place ops). Any ``unpack_*`` symbol counts too.
BOOKKEEPING = frozenset(
    {"python_del", "python_return", "comment", "python_print", "update_aliases", "clear_mutable_collection"}
)

# Fusion kind by the name of the executor (or transform class) that made the region.
KIND_BY_EXECUTOR = {
    "nvfuser": "nvFusion",
    "torchcompile": "TorchCompile",
    "torchcompile_cat": "TorchCompile",
    "torchcompile_xentropy": "TorchCompile",
    "CUDAGraphTransform": "CUDAGraph",
}

# The ops the seed found outside nvFuser's regions.
SEED_OPS = ("linear", "matmul", "embedding", "triu")

# thunder.compile_stats(jm) methods, each returning nanoseconds or raising.
# A first call's phases, from the perf_counter_ns stamps thunder records: interpreting the model's
# Python into the initial trace; the transforms (fusion passes) and the prologue built and run; the
# computation's first run, which compiles each fusion (nvFuser, Inductor) or records CUDA graphs.
PHASES = (
    ("interpret_s", "last_trace_tracing_start", "last_trace_tracing_stop"),
    ("transform_s", "last_trace_tracing_stop", "last_trace_host_execution_start"),
    ("first_run_s", "last_trace_host_execution_start", "last_trace_host_execution_stop"),
)

STAT_METHODS = (
    "last_trace_construction_time",
    "last_cache_lookup_time",
    "last_prologue_transformation_time",
    "last_prologue_execution_time",
    "last_computation_execution_time",
)


def executor_name(sym) -> str | None:
    """Name of the executor (or transform) that runs ``sym``; None for bookkeeping prims."""
    ex = getattr(sym, "executor", None)
    return None if ex is None else getattr(ex, "name", None) or type(ex).__name__


def is_fusion(bsym) -> bool:
    return bool(getattr(bsym.sym, "is_fusion", False))


def is_bookkeeping(bsym) -> bool:
    return bsym.sym.name in BOOKKEEPING or bsym.sym.name.startswith("unpack_")


def fusion_kind(bsym) -> str:
    """nvFusion, TorchCompile, CUDAGraph, ...: by the region's executor, else its name less the digits."""
    return KIND_BY_EXECUTOR.get(executor_name(bsym.sym), re.sub(r"\d+$", "", bsym.sym.name))


def category(bsym) -> str:
    """Composition category of a top-level bound symbol."""
    if is_fusion(bsym):
        return f"{fusion_kind(bsym)} regions"
    return "bookkeeping" if is_bookkeeping(bsym) else "unfused ops"


def counter(trace) -> dict[str, int]:
    """The seed's ``Counter(bsym.sym.name for bsym in trace.bound_symbols)``, most common first."""
    return dict(Counter(bsym.sym.name for bsym in trace.bound_symbols).most_common())


def regions(bsyms, parent: str | None = None) -> list[dict]:
    """Every fusion region among ``bsyms`` and, recursively, inside them (a CUDAGraph region holds
    the nvFusion regions it captured): kind, executor, enclosing region and the ops it runs."""
    found = []
    for bsym in bsyms:
        if not is_fusion(bsym):
            continue
        subs = bsym.subsymbols or ()
        ops = Counter(s.sym.name for s in subs if not is_fusion(s) and not is_bookkeeping(s))
        found.append(
            {
                "region": bsym.sym.name,
                "kind": fusion_kind(bsym),
                "executor": executor_name(bsym.sym),
                "inside": parent,
                "n_ops": sum(ops.values()),
                "ops": dict(ops.most_common()),
                "contains": [s.sym.name for s in subs if is_fusion(s)],
            }
        )
        found += regions(subs, bsym.sym.name)
    return found


def unfused(trace) -> dict[str, dict]:
    """Top-level compute ops outside any fusion region: name -> count and executor(s)."""
    out: dict[str, dict] = {}
    for bsym in trace.bound_symbols:
        if not is_fusion(bsym) and not is_bookkeeping(bsym):
            entry = out.setdefault(bsym.sym.name, {"count": 0, "executors": []})
            entry["count"] += 1
            if (ex := executor_name(bsym.sym)) not in entry["executors"]:
                entry["executors"].append(ex)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["count"]))


def composition(trace) -> dict[str, int]:
    """Top-level bound symbols by category: fusion regions per kind, unfused ops, bookkeeping."""
    return dict(Counter(category(bsym) for bsym in trace.bound_symbols))


def compile_stats(jm) -> dict:
    """Thunder's compile statistics for ``jm`` (times in ms); an API missing or raising is a note."""
    import thunder

    values: dict = {}
    notes: list[str] = []
    for name in ("cache_hits", "cache_misses"):
        try:
            values[name] = getattr(thunder, name)(jm)
        except Exception as e:
            notes.append(f"thunder.{name}: {describe(e)}")
    try:
        cs = thunder.compile_stats(jm)
    except Exception as e:
        return {**values, "notes": notes + [f"thunder.compile_stats: {describe(e)}"]}
    if cs is None:
        return {**values, "notes": notes + ["thunder.compile_stats returned None"]}
    values["calls"] = getattr(cs, "calls", None)
    for method in STAT_METHODS:
        try:
            values[method.removeprefix("last_").removesuffix("_time") + "_ms"] = getattr(cs, method)() / 1e6
        except Exception as e:
            notes.append(f"{method}: {describe(e)}")
    return {**values, "notes": notes}


class Merged:
    """The final traces of several thunder functions read as one: thunderfx hands each Dynamo graph
    to its own thunder.jit, and this notebook counts over all of them."""

    def __init__(self, traces):
        self.bound_symbols = [bsym for t in traces for bsym in t.bound_symbols]
        self.text = "\n\n".join(str(t) for t in traces)

    def __str__(self) -> str:
        return self.text


def thunder_functions(jm) -> list:
    """The thunder-jitted functions behind ``jm``: itself, or the ones thunderfx made per Dynamo graph."""
    backend = getattr(jm, "_backend", None)
    if backend is None:
        return [jm]
    return [fn for info in backend.subgraph_infos for fn in info.thunder_compiled_fns]


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


def analyze(jm) -> dict:
    """Everything this notebook reports about the last call of a thunder-jitted module (or of every
    thunder function thunderfx made, counted together)."""
    import thunder

    fns = thunder_functions(jm)
    trace = Merged([thunder.last_traces(fn)[-1] for fn in fns])
    prologue = Merged([thunder.last_prologue_traces(fn)[-1] for fn in fns])
    text = str(trace)
    executors = dict.fromkeys(
        ex.name
        for fn in fns
        for ex in thunder.compile_data(fn).executors_list
        if not str(ex.name).startswith("__ad_hoc")
    )
    return {
        "thunder_functions": len(fns),
        "thunder_executors": list(executors),
        "bound_symbols": len(trace.bound_symbols),
        "trace_lines": len(text.splitlines()),
        "counter": counter(trace),
        "composition": composition(trace),
        "regions": regions(trace.bound_symbols),
        "unfused": unfused(trace),
        "prologue_bound_symbols": len(prologue.bound_symbols),
        "prologue_lines": len(str(prologue).splitlines()),
        "trace": text,
    }


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


def from_run(params, names: list[str]) -> list[dict] | None:
    """The rows of ``names`` that notebook 02 took from its own builds (``trace_row`` right after each
    first call) in this runner run, when 02 ran before with the same model and inputs; else None, and
    the caller builds its own."""
    data = results.of_this_run(params.output_dir, results.EXECUTOR_TIMING)
    if data is None or any(data["params"].get(k) != v for k, v in params.to_dict().items() if k in SAME_MODEL):
        return None
    rows = data.get("thunder_rows") or {}
    return [rows[n] for n in names] if all(rows.get(n) for n in names) else None


def taken_rows(prepared: dict, measured: dict) -> tuple[dict[str, dict], dict[str, dict]]:
    """Notebook 02's Thunder rows for ``from_run`` and what else it measured: per Thunder configuration
    the row its ``trace`` step took, or the executor's own row (unavailable, or failed before that step
    ran); and ``measured`` without the ``trace`` steps, so the results file holds each trace once.
    ``measured`` itself is left as it is."""
    rows = {
        n: (measured.get(n) or {}).get("trace") or plain_row(p) for n, p in prepared.items() if p.executor.needs_thunder
    }
    rest = {n: {step: v for step, v in m.items() if step != "trace"} for n, m in measured.items()}
    return rows, rest


# --- tables and figures over rows returned by ``build_row`` ---------------------------------------


def ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok"]


def summary(rows: list[dict]) -> list[dict]:
    """One line per configuration: status, trace size, regions, unfused ops, prologue, reason."""
    out = []
    for r in rows:
        comp = r.get("composition")
        counts = (
            {
                "fusion_regions": sum(v for k, v in comp.items() if k.endswith(" regions")),
                "unfused_ops": comp.get("unfused ops", 0),
                "bookkeeping": comp.get("bookkeeping", 0),
            }
            if comp
            else {}
        )
        out.append(
            {
                "executor": r["executor"],
                "label": r["label"],
                "status": r["status"],
                "bound_symbols": r.get("bound_symbols"),
                **counts,
                "prologue_bound_symbols": r.get("prologue_bound_symbols"),
                "first_call_s": r.get("first_call_s"),
                "thunder_executors": ", ".join(r.get("thunder_executors") or ()) or None,
                "reason": r["reason"],
                "notes": r["notes"],
            }
        )
    return out


def _natural(name: str) -> list:
    """Sort key that puts nvFusion2 before nvFusion10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def counter_table(rows: list[dict], reference: dict[str, int], reference_label: str) -> list[dict]:
    """Symbol names down, the reference counter and each configuration's counter across; sorted by
    the largest count. A configuration without a trace gets a column of its status."""
    columns = {reference_label: reference}
    columns.update({r["executor"]: r.get("counter") or {} for r in rows})
    names = sorted(
        {n for c in columns.values() for n in c},
        key=lambda n: (-max(c.get(n, 0) for c in columns.values()), _natural(n)),
    )
    table = [{"symbol": n, **{label: c.get(n, 0) for label, c in columns.items()}} for n in names]
    table.append({"symbol": "(total)", **{label: sum(c.values()) for label, c in columns.items()}})
    for r in rows:
        if r["status"] != "ok":
            for line in table:
                line[r["executor"]] = r["status"]
    return table


def _ops_text(ops: dict[str, int]) -> str:
    return ", ".join(f"{n}×{c}" if c > 1 else n for n, c in ops.items())


def region_table(rows: list[dict]) -> list[dict]:
    """One line per fusion region of every configuration, with the ops it runs."""
    return [
        {
            "executor": r["executor"],
            "region": g["region"],
            "kind": g["kind"],
            "made by": g["executor"],
            "inside": g["inside"],
            "n_ops": g["n_ops"],
            "ops": _ops_text(g["ops"]),
            "contains": ", ".join(g["contains"]),
        }
        for r in ok_rows(rows)
        for g in r["regions"]
    ]


def unfused_table(rows: list[dict]) -> list[dict]:
    """Unfused op names down, configurations across (count, with the executor that runs it)."""
    ran = ok_rows(rows)
    names = list(dict.fromkeys(n for r in ran for n in r["unfused"]))
    names.sort(key=lambda n: -max(r["unfused"].get(n, {"count": 0})["count"] for r in ran))
    table = []
    for n in names:
        entries = [r["unfused"].get(n, {"count": 0, "executors": []}) for r in ran]
        table.append(
            {
                "op": n,
                "run by": ", ".join(dict.fromkeys(str(e) for x in entries for e in x["executors"])),
                **{r["executor"]: x["count"] for r, x in zip(ran, entries)},
            }
        )
    return table


def placement(rows: list[dict], ops=SEED_OPS) -> list[dict]:
    """Where the seed's ops ended up: per configuration, how many ran inside fusion regions (by kind)
    and how many outside. Ops nested in a CUDAGraph's nvFusion region count for the innermost region.
    An op found nowhere by name was decomposed into prims (nvFuser regions list prims: triu becomes
    iota, sub, ge, where), fused or not, or is absent from the model."""
    table = []
    for op in ops:
        line = {"op": op}
        for r in ok_rows(rows):
            inside = Counter()
            for g in r["regions"]:
                inside[g["kind"]] += g["ops"].get(op, 0)
            outside = r["unfused"].get(op, {"count": 0})["count"]
            where = ", ".join(f"{n} in {k}" for k, n in inside.items() if n)
            line[r["executor"]] = (
                f"{where or '0 in fusions'}; {outside} outside"
                if where or outside
                else "not found by name (decomposed into prims)"
            )
        table.append(line)
    return table


def _regions(kinds: dict[str, int]) -> str:
    """``9 fusion regions (7 nvFusion, 2 TorchCompile)``."""
    total = sum(kinds.values())
    by_kind = ", ".join(f"{v} {k}" for k, v in kinds.items() if v)
    return f"{total} fusion region{'' if total == 1 else 's'}" + (f" ({by_kind})" if by_kind else "")


def findings(configurations: list[dict], seed_counter: dict[str, int]) -> list[str]:
    """The notebook's findings: fusion regions, unfused ops and top-level symbols of each
    configuration's final trace, beside the seed's counter."""
    seed_kinds = {
        kind: sum(v for k, v in seed_counter.items() if k.startswith(kind)) for kind in ("nvFusion", "TorchCompile")
    }
    seed = f"The seed's thunder trace had {_regions(seed_kinds)} in {sum(seed_counter.values())} top-level symbols."
    ran = [r for r in configurations if r["status"] == "ok"]
    if not ran:
        return ["No Thunder configuration produced a trace here.", seed]
    parts = []
    for r in ran:
        kinds = {k.removesuffix(" regions"): v for k, v in r["composition"].items() if k.endswith(" regions")}
        parts.append(
            f"{r['executor']}: {_regions(kinds)}, {r['composition'].get('unfused ops', 0)} unfused ops, "
            f"{r['bound_symbols']} top-level symbols"
        )
    text = "Final trace per step, " + "; ".join(parts) + "."
    if skipped := [r["executor"] for r in configurations if r["status"] != "ok"]:
        text += f" Not traced here: {', '.join(skipped)}."
    return [text, seed] + ([phases] if (phases := first_call_finding(configurations)) else [])


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


def stats_table(rows: list[dict]) -> list[dict]:
    """Compile statistics per configuration and call (first: compile; second: cache hit)."""
    return [
        {
            "executor": r["executor"],
            "call": call,
            **{k: v for k, v in s.items() if k != "notes"},
            "notes": "; ".join(s["notes"]) or None,
        }
        for r in ok_rows(rows)
        for call, s in r["compile_stats"].items()
    ]


def composition_long(rows: list[dict]) -> list[dict]:
    """(configuration, category, count) lines for a stacked bar chart; a configuration without a
    trace is one line of count 0 with its status in the label, so it still shows on the axis."""
    out = []
    for r in rows:
        if r["status"] != "ok":
            out.append({"configuration": f"{r['executor']} ({r['status']})", "category": "bookkeeping", "count": 0})
            continue
        for cat, count in r["composition"].items():
            out.append({"configuration": r["executor"], "category": cat, "count": count})
    return out


def composition_figure(rows: list[dict]):
    """Stacked bars (a ``pages.charts.Chart``): the final trace's top-level symbols per configuration, by
    category."""
    from ..pages.charts import Chart

    return Chart(
        kind="bar",
        rows=composition_long(rows),
        x="configuration",
        y="count",
        color="category",
        title="Top-level bound symbols of the final trace (what thunder's Python runs per call)",
        labels={"count": "bound symbols"},
    )


def details_html(summary_text: str, body: str) -> str:
    """A collapsed HTML <details> block with ``body`` as escaped preformatted text."""
    return (
        f"<details><summary>{html.escape(summary_text)}</summary>"
        f"<pre style='font-size:11px;max-height:40em;overflow:auto'>{html.escape(body)}</pre></details>"
    )


SEED_LABEL = "seed: thunder, L40S (reference)"
KEY_COLUMNS = [
    "executor",
    "status",
    "bound_symbols",
    "fusion_regions",
    "unfused_ops",
    "bookkeeping",
    "prologue_bound_symbols",
    "reason",
]


@dataclass
class Result(Study):
    """What notebook 03 shows and saves."""

    NOTEBOOK = results.TRACE_COUNTERS
    TITLE = "Final trace composition per Thunder configuration"
    COLUMNS = KEY_COLUMNS

    configurations: list[dict]  # one row per Thunder configuration (``trace_row``)
    traces_from: str  # notebook 02's builds in this run, or built here
    summary_rows: list[dict]  # final trace per configuration (``summary``)
    counter_rows: list[dict]  # the seed's counter beside each configuration's
    region_rows: list[dict]
    placement_rows: list[dict]  # where the seed's ops ended up
    unfused_rows: list[dict]
    stats_rows: list[dict]  # thunder's compile statistics
    first_call_rows: list[dict]  # first call by phase
    traces: list[dict]  # per configuration with a trace: its summary line and the trace's text
    findings: list[str]

    def key_table_rows(self) -> list[dict]:
        return self.summary_rows

    def sections(self) -> dict:
        return {
            "configurations": self.configurations,
            "traces_from": self.traces_from,
            "seed_counter": {"label": SEED_LABEL, "counter": seed_numbers.SEED_TRACE_COUNTER},
            "findings": self.findings,
        }


def run(params: Params) -> Result:
    """The rows of the selected Thunder configurations: the ones notebook 02 took in this runner run
    (``from_run``), else one jit per configuration built here; then the tables over them."""
    env = begin(params)
    configs = [ex for ex in registry.selected(params.executors) if ex.name in registry.THUNDER_NAMES]
    rows = from_run(params, [ex.name for ex in configs])
    source = "notebook 02's builds in this run" if rows is not None else "built here"
    if rows is None:
        setup = model.build(params)
        rows = [build_row(ex, setup.model, setup.kwargs, params.device) for ex in configs]
    return Result(
        params=params,
        env=env,
        configurations=rows,
        traces_from=source,
        summary_rows=summary(rows),
        counter_rows=counter_table(rows, seed_numbers.SEED_TRACE_COUNTER, SEED_LABEL),
        region_rows=region_table(rows),
        placement_rows=placement(rows),
        unfused_rows=unfused_table(rows),
        stats_rows=stats_table(rows),
        first_call_rows=first_call_table(rows),
        traces=[
            {
                "summary": f"{r['executor']}: {r['bound_symbols']} bound symbols, {r['trace_lines']} lines; "
                f"prologue {r['prologue_bound_symbols']} bound symbols, {r['prologue_lines']} lines",
                "trace": r["trace"],
            }
            for r in ok_rows(rows)
        ],
        findings=findings(rows, seed_numbers.SEED_TRACE_COUNTER),
    )
