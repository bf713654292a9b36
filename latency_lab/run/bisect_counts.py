"""A bisection's midpoints decided by counts, where counts tell good from bad: one worker per build counts one
step of the executor (``instruments.counts``; seconds, no rounds, no statistics). The counters that tell the
ends apart (``telling``: judged, steady in both, different) decide a midpoint whose counts equal one end's on
every one of them (``side``); any other midpoint is timed as before. The time is confirmed at the end, on the
culprit against its parent (``bisect.culprit``).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from ..core import builds
from ..core.parameters import Params
from ..core.progress import say
from ..instruments import counts
from ..studies.ab import remote

COUNTED = "counted"  # the role of a midpoint step decided by its counts


def count(p: Params, build_dicts: list[dict]) -> list[dict]:
    """Each build's step of ``p``'s executor counted in a fresh worker of its own, side by side (as 08 builds
    its workers): per build ``counts.Counts.to_dict()`` with its ``seconds`` (start and build included), or
    ``{"error"}`` where it could not be counted."""
    cache = Path(tempfile.mkdtemp(prefix="latency-lab-count-"))
    name, t0 = p.executors[0], time.perf_counter()
    workers = [
        remote.Worker(f"count-{i}", builds.parse("build_a", b), cache / str(i), remote.A, i)
        for i, b in enumerate(build_dicts)
    ]
    out = []
    try:
        _, built, _ = remote.start_and_build(workers, p)
        for w in workers:
            if not remote.usable(built, w.label, name):
                record = built.get(w.label) or {}
                why = record.get("error") or (record.get(name) or {}).get("reason") or "it did not build"
                out.append({"error": f"{name} could not run in {w.build.text()}: {why}"})
                continue
            try:
                out.append(w.call("counts", executor=name))
            except remote.WorkerError as e:
                out.append({"error": str(e)})
    finally:
        for w in workers:
            w.stop()
        shutil.rmtree(cache, ignore_errors=True)
    seconds = round(time.perf_counter() - t0, 1)
    return [{**c, "seconds": seconds} for c in out]


def steady(record: dict) -> dict[str, float]:
    """A count record's judged counters that were the same in its two counted steps."""
    return {k: v for k, v in record.get("counters", {}).items() if k in counts.JUDGED and k not in record["unsteady"]}


def telling(good: dict, bad: dict) -> dict[str, list[float]]:
    """The counters that tell good from bad: judged, steady in both and different, as ``{name: [good, bad]}``
    ({} where either could not be counted)."""
    if "error" in good or "error" in bad:
        return {}
    g, b = steady(good), steady(bad)
    return {k: [g[k], b[k]] for k in g if k in b and g[k] != b[k]}


def side(mid: dict, ends: dict[str, list[float]]) -> tuple[str | None, str]:
    """A midpoint's side by its counts: ``good`` or ``bad`` where it equals that end on every telling counter
    (``ends``), else None (time it), with the counts in words."""
    if "error" in mid:
        return None, f"not counted ({mid['error']}): timed instead"
    m = steady(mid)
    said = "; ".join(
        f"{k.replace('_', ' ')} {m.get(k, 'unsteady')} (good {g:g}, bad {b:g})" for k, (g, b) in ends.items()
    )
    for which, at in (("good", 0), ("bad", 1)):
        if all(m.get(k) == v[at] for k, v in ends.items()):
            return which, f"counted like {which}: {said}"
    return None, f"counted like neither end ({said}): timed instead"


def ends_text(good: dict, bad: dict, ends: dict[str, list[float]]) -> str:
    """What the counts of the ends say, in words: the counters that tell them apart and the functions whose
    starts changed, or why the bisection times every step."""
    for who, c in (("good", good), ("bad", bad)):
        if "error" in c:
            return f"{who} could not be counted ({c['error']}): every step is timed"
    if not ends:
        return "the counts of good and bad are the same: every step is timed"
    diff = counts.difference(counts.Counts.from_dict(good), counts.Counts.from_dict(bad))
    diff["counters"] = {k: v for k, v in diff["counters"].items() if k in ends}  # not those that vary step to step
    return f"{counts.text(diff)}: a midpoint counted like one end takes its side untimed"


def count_ends(state, cands, p: Params) -> dict:
    """The ends' counts (``count``, kept in ``state``): the counters that tell them apart
    (``ends``; {}: none, every step is timed) and what they say (``text``)."""
    good, bad = counted(state, cands, p, [0, len(cands.items) - 1])  # side by side
    ends = telling(good, bad)
    said = ends_text(good, bad, ends)
    say(f"counts of the ends: {said}")
    return {"ends": ends, "text": said}


def counted(state, cands, p: Params, at: list[int]) -> list[dict]:
    """The counts of the builds ``cands.items[i]`` for ``i`` in ``at``, from ``state`` or counted and kept."""
    keys = [f"counts@{cands.items[i].ref}" for i in at]
    if any(state.get(k) is None for k in keys):
        for k, record in zip(keys, count(p, [cands.build(cands.items[i]) for i in at])):
            state.put(k, record)
    return [state.get(k) for k in keys]


def by_count(state, cands, p: Params, at: tuple, steps: list, ends: dict) -> tuple[str | None, str]:
    """A midpoint step decided by its counts (``side``), appended to ``steps`` as a step of role
    ``COUNTED``; None where its counts do not decide it (it is timed instead)."""
    lo, hi, i = at
    record = counted(state, cands, p, [i])[0]
    verdict, why = side(record, ends)
    say(f"step {len(steps)}: {cands.items[i].name} (M) {why}")
    if verdict is not None:
        steps.append(
            {"step": len(steps), "role": COUNTED, "good": lo, "bad": hi, "mid": i, "call": verdict, "why": why}
            | {"bad_vs_good": None, "mid_vs_good": None, "mid_vs_bad": None, "seconds": record["seconds"]}
        )
    return verdict, why
