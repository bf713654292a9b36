"""What two runs of the same tree differ by, per kind of number, and ``compare``'s one rule.

A run's interval is its statistic's own (``host_state``): it does not see what moves between two runs
(the host's state mix over minutes, another machine of the same kind). That is measured apart, per
**kind** of number (``KINDS``), from same-tree run pairs kept in the repository
(``tools/run_pairs.py estimate``): ``sigma``, the spread of the relative move beyond what both runs'
intervals explain, and ``min_effect``, the 95th percentile of the moves' size. ``judge`` calls a number
**changed** when B's move against A is beyond chance (a two-sided z test on the move, with both
intervals and ``sigma``: p < ``P``) **and** beyond ``min_effect``; **same** otherwise, unless an
interval is wider than ``NOISY`` of its value: then it is **too noisy to judge** (not judged). A count
(kernels per step, the step's counted work: ``instruments.counts``) is exact: any difference is changed, by
how much per step (``count_move``). Where a notebook's host reference moved further between the runs than
host time's minimum effect (``hosts_apart``), its host-bound numbers are not judged: the effects were not
measured on such a move.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from . import catalog, host_state
from .catalog import COUNT, DIFFERENCE, FIRST_CALL, KERNEL, PER_REF, TIME
from .catalog import FIT as FIT  # every kind by its name here too, as callers of judge give it
from .catalog import WITHIN as WITHIN
from .verdicts import CHANGED, NOT_JUDGED, SAME, TOO_NOISY, phrase

PATH = Path(__file__).with_name("run_to_run.json")
P = 0.05
NOISY = 0.5  # an interval wider than this share of its value cannot tell "same": too noisy to judge
Z95 = 1.959964  # half-width of a 95% interval in standard errors
KINDS = catalog.KINDS  # the kinds of number the catalog's studies hold
ONE_SAMPLE = (KERNEL, FIRST_CALL)  # one measurement per run, no interval: judged by the run-to-run sigma alone


def kind(metric: str) -> str | None:
    """The kind of number ``metric`` is, as the catalog's studies declare it (``catalog.Entry.kinds``), or
    None for one compare does not judge (memory, shares, %timeit)."""
    return catalog.METRIC_KINDS.get(metric)


@dataclass(frozen=True)
class Judged:
    """One number's verdict: ``changed``, ``same`` or ``not judged``, with what it was decided on."""

    verdict: str
    decided: str
    p: float | None = None
    min_effect: float | None = None


def standard_error(interval, scale: float) -> float:
    """A 95% interval's standard error, relative to ``scale``."""
    return (interval[1] - interval[0]) / (2 * Z95 * abs(scale))


def judge(kind_: str | None, a, b, interval_a, interval_b, effect: dict | None) -> Judged:
    """B against A (the module docstring's rule); ``effect``: this kind's measured ``sigma`` and
    ``min_effect`` on this device (None: not measured, so not judged)."""
    if kind_ == COUNT:
        return (
            Judged(CHANGED, phrase(CHANGED, count_move(a, b))) if a != b else Judged(SAME, phrase(SAME, "equal counts"))
        )
    if kind_ is None:
        return Judged(NOT_JUDGED, phrase(NOT_JUDGED, "not a kind compare judges"))
    if effect is None:
        return Judged(NOT_JUDGED, phrase(NOT_JUDGED, f"no same-tree pairs measured {kind_} on this device"))
    if not a:
        return Judged(NOT_JUDGED, phrase(NOT_JUDGED, "A is zero"))
    if kind_ not in ONE_SAMPLE and not (interval_a and interval_b):
        return Judged(NOT_JUDGED, phrase(NOT_JUDGED, "no interval in both runs"))
    if kind_ == DIFFERENCE and interval_a[0] <= 0 <= interval_a[1]:
        return Judged(NOT_JUDGED, phrase(NOT_JUDGED, "A's interval includes zero (no scale to move against)"))
    move = (b - a) / abs(a)  # relative to A's size: positive when B is higher, a negative A too
    ses = [standard_error(i, a) for i in (interval_a, interval_b) if i]
    sigma = math.sqrt(sum(s * s for s in ses) + effect["sigma"] ** 2)
    p = math.erfc(abs(move) / sigma / math.sqrt(2)) if sigma else float(move == 0)
    floor = effect["min_effect"]
    way = f"B {'higher' if move > 0 else 'lower'} by {100 * abs(move):.3g}%"
    if p < P and abs(move) > floor:
        return Judged(
            CHANGED, phrase(CHANGED, f"{way} (p {p:.2g}, beyond the {100 * floor:.2g}% minimum effect)"), p, floor
        )
    noisy = too_noisy(a, b, interval_a, interval_b)
    if noisy:
        return Judged(NOT_JUDGED, f"{TOO_NOISY}: {way}, p {p:.2g}, but {noisy}", p, floor)
    why = f"p {p:.2g}" if p >= P else f"within the {100 * floor:.2g}% minimum effect"
    return Judged(SAME, phrase(SAME, f"{way}, {why}"), p, floor)


def per_step(change) -> str:
    """A count's change as ``+1 per step``, exact (a whole number printed whole)."""
    return (f"{int(change):+d}" if float(change).is_integer() else f"{change:+g}") + " per step"


def count_move(a, b) -> str:
    """A count's change, B - A, with its share of A: ``+1 per step (+0.23% of A)``."""
    return per_step(b - a) + (f" ({100 * (b - a) / a:+.3g}% of A)" if a else "")


def too_noisy(a, b, interval_a, interval_b) -> str | None:
    """Why a number that is not called changed cannot be called the same either, or None: an interval
    wider than ``NOISY`` of its value (a move of that size would read "same" too)."""
    for side, value, i in (("A", a, interval_a), ("B", b, interval_b)):
        if i and value and (i[1] - i[0]) / abs(value) > NOISY:
            share = 100 * (i[1] - i[0]) / abs(value)
            return f"{side}'s interval spans {share:.3g}% of its value (more than {100 * NOISY:.3g}%)"
    return None


PER_EXECUTOR_MIN = 40  # numbers of one kind and executor that earn it effects of its own (else the kind's)


def executor_of(row: dict) -> str:
    """The executor a compare row is of: its row key's last part (``add · seed · eager``: eager)."""
    return str(row.get("row", "")).split(" · ")[-1]


def effect_of(effects: dict, kind_: str | None, executor: str) -> dict | None:
    """The effects of ``kind_`` for ``executor``: its own where measured (``<kind> · <executor>``),
    else the kind's, pooled over executors."""
    return effects.get(f"{kind_} · {executor}") or effects.get(kind_)


def estimate(rows: list[dict]) -> dict:
    """Per kind, from compare's rows of same-tree pairs: ``sigma`` (the moves' root mean square beyond
    what their intervals explain) and ``min_effect`` (the 95th percentile of the moves' size), with how
    many numbers gave them; and per kind and executor (``<kind> · <executor>``) where that executor
    gave at least ``PER_EXECUTOR_MIN`` numbers (their spreads differ: torch.compile's host time moves
    more between runs than Thunder's)."""
    out = {}
    for k in KINDS:
        if k == COUNT:
            continue
        found = [r for r in rows if r.get("kind") == k and r.get("ratio") is not None and r["a"]]
        if k not in ONE_SAMPLE:
            found = [r for r in found if r.get("a_interval") and r.get("b_interval")]
        if k == DIFFERENCE:
            found = [r for r in found if not r["a_interval"][0] <= 0 <= r["a_interval"][1]]
        if len(found) < 2:
            continue
        out[k] = _effect(found)
        for executor in sorted({executor_of(r) for r in found} - {""}):
            mine = [r for r in found if executor_of(r) == executor]
            if len(mine) >= PER_EXECUTOR_MIN:
                out[f"{k} · {executor}"] = _effect(mine)
    return out


def _effect(found: list[dict]) -> dict:
    """``sigma``, ``min_effect`` and ``numbers`` of a set of compare rows (``estimate``)."""
    moves = [(r["b"] - r["a"]) / abs(r["a"]) for r in found]
    explained = [
        sum(standard_error(r[side], r["a"]) ** 2 for side in ("a_interval", "b_interval") if r.get(side)) for r in found
    ]
    excess = sum(m * m for m in moves) / len(moves) - sum(explained) / len(explained)
    return {
        "sigma": math.sqrt(max(0.0, excess)),
        "min_effect": host_state.quantile([abs(m) for m in moves], 0.95),
        "numbers": len(found),
    }


HOST_BOUND = (TIME, PER_REF, DIFFERENCE)  # kinds that move with the host's speed (a ratio of two entries less so)


def host_level(data: dict) -> float | None:
    """A notebook's fast-state host level: its host reference's 10th percentile (ms; ``cutoff_ms`` /
    ``FAST_FACTOR``); None without one."""
    r = data.get("host_reference")
    cut = r.get("cutoff_ms") if isinstance(r, dict) else None
    return cut / host_state.FAST_FACTOR if isinstance(cut, (int, float)) else None


def hosts_apart(data_a: dict, data_b: dict, effects: dict) -> str | None:
    """Why a notebook's host-bound numbers are not judged, or None: its host reference's fast state moved
    further between the runs than the minimum effect of host time (the reference loop is host time
    itself: a host that moved further than same-tree runs' host times did is outside what the
    minimum effects were measured on)."""
    la, lb = host_level(data_a), host_level(data_b)
    limit = (effects.get(TIME) or {}).get("min_effect")
    if not la or not lb or limit is None or abs(lb / la - 1) <= limit:
        return None
    return (
        f"the host's fast-state reference moved {100 * (lb / la - 1):+.3g}% ({la:.3g} -> {lb:.3g} ms), beyond "
        f"the {100 * limit:.2g}% minimum effect of host time"
    )


def _measured() -> dict:
    return json.loads(PATH.read_text()) if PATH.is_file() else {}


def device_key(device: str | None) -> str:
    """``cuda:1`` -> ``cuda``; ``cpu`` as it is."""
    return (device or "cpu").split(":")[0]


ACROSS = "-across"  # run_to_run.json's key for a device's effects measured between machines: ``cuda-across``


def effects(device: str | None, across: bool = False) -> dict:
    """The measured run-to-run effects per kind for ``device`` (``{}``: none measured there): between
    runs on one machine, or with ``across`` between machines of that device."""
    return (_measured().get(device_key(device) + (ACROSS if across else "")) or {}).get("kinds", {})


def source(device: str | None, across: bool = False) -> dict:
    """Where the effects of ``device`` were measured (pairs, folder), without the effects."""
    found = _measured().get(device_key(device) + (ACROSS if across else "")) or {}
    return {k: v for k, v in found.items() if k != "kinds"}


FDR = 0.05  # the false discovery rate compare holds its changed numbers to, together (Benjamini-Hochberg)


def hold_false_discoveries(rows: list[dict]) -> dict:
    """Many numbers at once: of the judged numbers with a p (changed or same; counts are exact), a
    changed one whose p is not under its Benjamini-Hochberg threshold at ``FDR`` becomes same, saying
    so. Returns what was done: the method, the rate, how many numbers were judged and how many held."""
    judged = [r for r in rows if r.get("verdict") in (CHANGED, SAME) and r.get("p") is not None]
    ps = sorted(r["p"] for r in judged)
    cut = max((p for k, p in enumerate(ps, 1) if p <= k / len(ps) * FDR), default=-1.0)
    held = 0
    for r in judged:
        if r["verdict"] == CHANGED and r["p"] > cut:
            move = (r["b"] - r["a"]) / abs(r["a"])
            chance = (
                f"among {len(judged)} numbers judged at once (Benjamini-Hochberg, {100 * FDR:.0f}% false discoveries)"
            )
            way = f"B {'higher' if move > 0 else 'lower'} by {100 * abs(move):.3g}%"
            r["verdict"], r["decided"] = SAME, phrase(SAME, f"{way}, p {r['p']:.2g}: within chance {chance}")
            held += 1
    return {"method": "Benjamini-Hochberg", "false_discovery_rate": FDR, "judged": len(judged), "held": held}


def write(device: str, found: dict) -> None:
    """Keep ``found`` (``estimate``'s effects with ``pairs`` and ``source``) for ``device``."""
    data = _measured()
    data[device_key(device)] = {
        "pairs": found.pop("pairs"),
        "source": found.pop("source"),
        "kinds": found,
    }
    PATH.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def tally_same(rows: list[dict]) -> dict[str, tuple[int, int]]:
    """Per kind, of the judged numbers (changed or same), how many are same."""
    out: dict[str, tuple[int, int]] = {}
    for r in rows:
        if r.get("verdict") in (CHANGED, SAME) and r.get("kind"):
            same, n = out.get(r["kind"], (0, 0))
            out[r["kind"]] = (same + (r["verdict"] == SAME), n + 1)
    return out


def planted_row(row: dict, executor: str) -> bool:
    """Whether a compare row is the host time of ``executor`` (``row`` ends with its name), the number a
    planted delay in it moves."""
    return row["row"].split(" · ")[-1] == executor and row["metric"] in ("host_ms", "host_per_ref_x")
