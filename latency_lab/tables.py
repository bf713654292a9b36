"""Tables as a paper prints them: 3 significant figures, units in the headers, blanks for missing
values; and the timing notebook's seed-vs-here tables, one per metric. Results files keep the raw
numbers; only what is shown goes through here."""

from __future__ import annotations

import math
import numbers

from . import reference

UNIT_SUFFIXES = {"ms": "ms", "s": "s", "us": "µs", "GBps": "GB/s", "pct": "%"}  # name_<suffix> -> "name (unit)"


def number(value) -> str:
    """A cell's text: floats to 3 significant figures, integers exact, booleans yes/no, missing
    (None, NaN, inf) blank, anything else as its str()."""
    if value is None:
        return ""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            return ""
        if value == 0:
            return "0"
        value = float(f"{value:.2e}")  # rounded first, so 9.996 counts as 10.0
        exp = math.floor(math.log10(abs(value)))
        if exp < -3 or exp >= 6:
            mantissa, e = f"{value:.2e}".split("e")
            return f"{mantissa}e{int(e)}"
        if exp >= 2:
            return f"{value:,.0f}"
        return f"{value:.{2 - exp}f}"
    return str(value)


def is_number(value) -> bool:
    """Whether ``number`` prints ``value`` as a number (right-aligned in a table)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def header(name: str, unit: str | None = None) -> str:
    """A column header with its unit: ``first_call_s`` -> ``first call (s)``; ``unit`` given: ``name (unit)``;
    a name that already carries a unit in parentheses stays as it is."""
    if unit:
        return f"{name} ({unit})"
    tokens = name.split("_")
    if "(" in name or len(tokens) < 2:
        return name.replace("_", " ").replace("(us)", "(µs)")
    found = [t for t in tokens if t in UNIT_SUFFIXES]
    if not found:
        return " ".join(tokens)
    return f"{' '.join(t for t in tokens if t != found[-1])} ({UNIT_SUFFIXES[found[-1]]})"


# (title, unit, column of a measured row in executor_timing.measured_row, seed source, seed column)
_NSIGHT = reference.SEED_NSIGHT_DGX_H100
SEED_METRICS = [
    ("Wall time per step", "ms", "Wall Clock Time (ms)", "nsight", "wall_ms"),
    ("CPU overhead per step (wall - kernel time)", "ms", "CPU Overhead (ms)", "nsight", "cpu_overhead_ms"),
    ("Kernel time per step", "ms", "Kernel Time (ms)", "nsight", "kernel_ms"),
    ("Kernels per step", None, "Kernels", "nsight", "kernels"),
    ("CPU overhead per kernel", "µs", "Overhead / Kernel (us)", "nsight", "overhead_per_kernel_us"),
    ("Wall time per step, the seed's cuda_timer", "ms", "Wall Clock Time (ms)", "cuda_timer", None),
    ("%timeit per step", "ms", "timeit", "timeit", None),
]


def _seed_values(source: str, column: str | None) -> tuple[str, dict]:
    """The seed's GPU and method, and its value per executor, for one metric."""
    if source == "nsight":
        i = _NSIGHT["columns"].index(column)
        return f"{_NSIGHT['gpu']}, {_NSIGHT['method']}", {n: v[i] for n, v in _NSIGHT["rows"].items()}
    if source == "cuda_timer":
        t = reference.SEED_CUDA_TIMER_DGX_H100
        return f"{t['gpu']}, CUDA events", dict(t["rows"])
    t = reference.SEED_TIMEIT_L40S
    return f"{t['gpu']}, %timeit", {n: r["mean_ms"] for n, r in t["rows"].items()}


def seed_tables(rows: list[dict], measured: dict[str, dict]) -> list[dict]:
    """One table per metric of the seed's tables: executor | seed (unit) | here (unit) | here / seed.
    ``rows`` are ``executor_timing.measured_row`` rows, ``measured`` the per-executor measurements
    (for ``%timeit``'s mean). Executors measured here come first, then the seed's others; a line
    with neither number is left out. Each table is shaped like ``results.key_table`` plus its ``gpu``."""
    from .executors import REGISTRY

    here_rows = {r["executor"]: r for r in rows}
    tables = []
    for title, unit, column, source, seed_column in SEED_METRICS:
        where, seed = _seed_values(source, seed_column)
        gpu = where.split(",")[0]
        suffix = f" ({unit})" if unit else ""
        lines = []
        for name in dict.fromkeys([*here_rows, *seed]):
            if column == "timeit":
                here = ((measured.get(name) or {}).get("timeit") or {}).get("mean_ms")
            else:
                here = here_rows.get(name, {}).get(column)
            base = seed.get(name)
            if here is None and base is None:
                continue
            label = here_rows[name]["Execution Type"] if name in here_rows else REGISTRY[name].label
            lines.append([label, base, here, here / base if here is not None and base else None])
        tables.append({"title": f"{title}: seed ({where}) and here", "gpu": gpu,
                       "columns": ["executor", f"seed {gpu}{suffix}", f"here{suffix}", "here / seed"], "rows": lines})
    return tables


def has_here(table: dict) -> bool:
    """Whether a seed table holds any number measured here."""
    return any(line[2] is not None for line in table["rows"])
