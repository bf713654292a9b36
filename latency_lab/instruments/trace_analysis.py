"""Thunder's final execution trace, taken apart: the seed's symbol counter, fusion regions and the ops
inside them, ops left unfused, the prologue's size and thunder's compile statistics.

A fusion region is a top-level bound symbol whose symbol is a fusion (``sym.is_fusion``): nvFuser's
``nvFusionN``, torch.compile's ``TorchCompileN`` and the CUDA-graph transform's ``CUDAGraphN``. Its
``subsymbols`` are the ops it runs (nvFuser: flattened prims; TorchCompile: the torch-level ops of
the region; CUDAGraph: the trace's bound symbols it captured, nvFusion regions included).
"""

from __future__ import annotations

import re
from collections import Counter

from ..core.harness import describe

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


# thunder.compile_stats(jm) methods, each returning nanoseconds or raising.
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
