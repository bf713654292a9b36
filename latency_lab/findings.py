"""The sentences each notebook saves as its ``findings`` (the run's index shows them first), generated
from what the notebook measured; a sentence claims nothing the numbers given to it do not show."""

from __future__ import annotations

from .tables import number


def _names(rows: list[dict], status: str) -> list[str]:
    return [r["executor"] for r in rows if r["status"] == status]


def model_setup(cost: dict, rows: list[dict], dtype: str) -> list[str]:
    """01: the bytes and bandwidth floor of one step, and which executors match eager."""
    mb = cost["step_bytes"]["total"] / 1e6
    if cost.get("floor_ms_measured") is not None:
        floor = (f"One step moves at least {number(mb)} MB (weights, logits, K/V): at the measured copy bandwidth "
                 f"of {number(cost['bandwidth_measured_GBps'])} GB/s that is a floor of "
                 f"{number(cost['floor_ms_measured'] * 1e3)} µs per step")
        if cost.get("floor_ms_datasheet") is not None:
            floor += f" ({number(cost['floor_ms_datasheet'] * 1e3)} µs at the datasheet's {number(cost['bandwidth_datasheet_GBps'])} GB/s)"
        floor += "."
    else:
        floor = f"One step moves at least {number(mb)} MB (weights, logits, K/V); no bandwidth floor here (measured on CUDA devices only)."
    ok = [r for r in rows if r["status"] == "ok"]
    passed = [r["executor"] for r in ok if r.get("passed")]
    mismatched = [f"{r['executor']} (rel. error {number(r.get('rel_err'))})" for r in ok if not r.get("passed")]
    tolerance = ok[0].get("tolerance") if ok else None
    check = f"{len(passed)} of {len(rows)} selected executors match eager's logits within the {dtype} tolerance ({number(tolerance)})"
    if mismatched:
        check += f"; outside it: {', '.join(mismatched)}"
    for status in ("failed", "unavailable"):
        if names := _names(rows, status):
            check += f"; {status}: {', '.join(names)}"
    return [floor, check + "."]


def _regions(kinds: dict[str, int]) -> str:
    """``9 fusion regions (7 nvFusion, 2 TorchCompile)``."""
    total = sum(kinds.values())
    by_kind = ", ".join(f"{v} {k}" for k, v in kinds.items() if v)
    return f"{total} fusion region{'' if total == 1 else 's'}" + (f" ({by_kind})" if by_kind else "")


def trace_counters(configurations: list[dict], seed_counter: dict[str, int]) -> list[str]:
    """03: fusion regions, unfused ops and top-level symbols of each Thunder configuration's final
    trace, beside the seed's counter."""
    seed_kinds = {kind: sum(v for k, v in seed_counter.items() if k.startswith(kind)) for kind in ("nvFusion", "TorchCompile")}
    seed = f"The seed's thunder trace had {_regions(seed_kinds)} in {sum(seed_counter.values())} top-level symbols."
    ran = [r for r in configurations if r["status"] == "ok"]
    if not ran:
        return ["No Thunder configuration produced a trace here.", seed]
    parts = []
    for r in ran:
        kinds = {k.removesuffix(" regions"): v for k, v in r["composition"].items() if k.endswith(" regions")}
        parts.append(f"{r['executor']}: {_regions(kinds)}, {r['composition'].get('unfused ops', 0)} unfused ops, "
                     f"{r['bound_symbols']} top-level symbols")
    text = "Final trace per step, " + "; ".join(parts) + "."
    if skipped := [r["executor"] for r in configurations if r["status"] != "ok"]:
        text += f" Not traced here: {', '.join(skipped)}."
    return [text, seed]


def op_microbenchmarks(add_rows: list[dict], seed_rows: dict[str, float], seed_gpu: str) -> list[str]:
    """04: one add per call through each executor, fastest first, beside the seed's order."""
    timed = sorted((r for r in add_rows if r.get("ms_per_call") is not None), key=lambda r: r["ms_per_call"])
    if not timed:
        return ["No executor timed the single add here."]
    here = " < ".join(f"{r['label']} {number(r['ms_per_call'] * 1e3)} µs" for r in timed)
    text = f"One add per call (size {timed[0]['size']}), medians: {here}."
    both = [r for r in timed if seed_rows.get(r["executor"]) is not None]
    if len(both) >= 2:
        seed_order = sorted(both, key=lambda r: seed_rows[r["executor"]])
        verdict = "the same order" if seed_order == both else f"another order ({' < '.join(r['label'] for r in seed_order)})"
        text += f" The seed's {seed_gpu} numbers for {', '.join(r['label'] for r in both)} give {verdict}."
    eager = next((r for r in timed if r["executor"] == "eager"), None)
    if eager and len(timed) > 1:
        extra = [r["ms_per_call"] - eager["ms_per_call"] for r in timed if r is not eager]
        text += (f" Fixed cost over eager: {number(min(extra) * 1e3)} to {number(max(extra) * 1e3)} µs per call.")
    return [text]
