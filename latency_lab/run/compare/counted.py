"""The step's counts of two runs side by side (``instruments.counts``: the ``counts`` section of a notebook
whose catalog entry is ``counted``, 02 and 05): per executor both runs counted and per judged counter
(``counts.JUDGED``) either run holds, both runs' counts, or why they cannot be judged (unavailable or not
counted in a run, or its steps n and n + 1 differed), and for Python function starts the functions whose
starts changed, largest first (``counts.difference``). ``pair`` judges them exactly, across machines too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core import catalog
from ...instruments import counts

STARTS = "python_function_starts"  # the counter whose change is told apart by function


@dataclass(frozen=True)
class CountPair:
    """One counter of one executor's step in both runs: its metric (``<counter>_per_step``, as 02's and 05's
    count tables name it), A's and B's count (None where not counted), why it cannot be judged (None: both
    runs counted it steadily), and where the count of function starts differs, the functions whose starts
    changed (``file:qualname`` -> B - A per step, largest first; where both runs kept every function's) and
    how many did."""

    executor: str
    metric: str
    a: float | None
    b: float | None
    unjudged: str | None = None
    functions: dict[str, int] = field(default_factory=dict)
    functions_changed: int = 0


def counted(notebook: str, data: dict) -> dict[str, counts.Counts]:
    """A notebook's counted steps per executor (its ``counts`` section read back, ``Counts.from_dict``);
    none where its catalog entry saves none, or its run was saved before counts were."""
    found = data.get(catalog.COUNTED) if catalog.entry(data.get("notebook") or notebook).counted else None
    if not isinstance(found, dict):
        return {}
    return {n: counts.Counts.from_dict(r) for n, r in found.items() if isinstance(r, dict)}


def pairs(notebook: str, data_a: dict, data_b: dict) -> tuple[list[CountPair], list[str]]:
    """The judged counters of each executor both runs counted (``CountPair``), and what was skipped: the
    counts of one run only (a run saved before counts were, an executor counted in one run)."""
    ca, cb = counted(notebook, data_a), counted(notebook, data_b)
    if bool(ca) != bool(cb):
        return [], [f"{notebook}: the step's counts only in {'A' if ca else 'B'}"]
    skipped = [
        f"{notebook}: the step's counts of {n!r} only in {side}"
        for side, mine, other in (("A", ca, cb), ("B", cb, ca))
        for n in mine
        if n not in other
    ]
    return [p for n in ca if n in cb for p in executor_pairs(n, ca[n], cb[n])], skipped


def executor_pairs(executor: str, a: counts.Counts, b: counts.Counts) -> list[CountPair]:
    """One executor's judged counters that either run counted or found unavailable, in ``counts.JUDGED``'s
    order."""
    diff = counts.difference(a, b)
    kept = bool(a.all_functions and b.all_functions)  # a run saved before every function was kept tells none
    out = []
    for counter in (k for k in counts.JUDGED if any(k in c.counters or k in c.unavailable for c in (a, b))):
        ca, cb = a.counters.get(counter), b.counters.get(counter)
        moved = counter == STARTS and kept and ca != cb
        out.append(
            CountPair(
                executor,
                f"{counter}_per_step",
                ca,
                cb,
                why_not(counter, a, b),
                diff["functions"] if moved else {},
                diff["functions_changed"] if moved else 0,
            )
        )
    return out


def missing(c: counts.Counts, counter: str) -> str | None:
    """Why ``c`` holds no count of ``counter`` (its reason, the instrument's own failure, or not counted);
    None where it holds one."""
    if counter in c.counters:
        return None
    return c.unavailable.get(counter) or c.unavailable.get("counts") or "not counted"


def why_not(counter: str, a: counts.Counts, b: counts.Counts) -> str | None:
    """Why ``counter`` cannot be judged: unavailable in a run (with its reason), or its steps n and n + 1
    differed in a run (``unavailable in B: no CUDA device ...``, ``steps n and n + 1 differed in B (A 215,
    B 215 -> 216)``); None where both runs counted it steadily."""
    runs = {"A": a, "B": b}
    lacking = {side: why for side, c in runs.items() if (why := missing(c, counter))}
    if lacking:
        if len(set(lacking.values())) == 1:
            return f"unavailable in {' and '.join(lacking)}: {next(iter(lacking.values()))}"
        return "; ".join(f"unavailable in {side}: {why}" for side, why in lacking.items())
    unsteady = [side for side, c in runs.items() if counter in c.unsteady]
    if not unsteady:
        return None
    steps = ", ".join(
        f"{side} {' -> '.join(map(str, c.unsteady.get(counter) or [c.counters[counter]]))}" for side, c in runs.items()
    )
    return f"steps n and n + 1 differed in {' and '.join(unsteady)} ({steps})"
