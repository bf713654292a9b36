"""Notebook 03's tables over the rows ``instruments.trace_row`` returns: one summary line per
configuration, the seed's symbol counter beside each configuration's, every fusion region with its ops,
the unfused ops, where the seed's ops ended up, and thunder's compile statistics per call.
"""

from __future__ import annotations

import re
from collections import Counter

from ...core.row_types import TraceSummaryRow

# The ops the seed found outside nvFuser's regions.
SEED_OPS = ("linear", "matmul", "embedding", "triu")


def ok_rows(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["status"] == "ok"]


def summary(rows: list[dict]) -> list[TraceSummaryRow]:
    """One line per configuration: status, trace size, regions, unfused ops, prologue, reason."""
    out = []
    for r in rows:
        comp = r.get("composition") or {}
        out.append(
            TraceSummaryRow(
                r["executor"],
                r["label"],
                r["status"],
                r.get("bound_symbols"),
                sum(v for k, v in comp.items() if k.endswith(" regions")) if comp else None,
                comp.get("unfused ops", 0) if comp else None,
                comp.get("bookkeeping", 0) if comp else None,
                r.get("prologue_bound_symbols"),
                r.get("first_call_s"),
                ", ".join(r.get("thunder_executors") or ()) or None,
                r["reason"],
                r["notes"],
            )
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
