"""``runner.py bisect``: the first build between a good and a bad one whose step's host time moved.

Step 0 times bad against good alone (no midpoint), with 08's workers, A/A control (a second instance of good:
a copy of its worktree or release folder) and stopping rule (``studies.ab.study.Session``): the range is
bisected only when bad is told from good there and the interval's half-width is at most a third of the
change, or at all where the ends' counts, taken first, tell them apart (``ends``, ``bisect_counts``). Each
next step times the midpoint (arm M) against the current good (A) and bad (B) builds in the same rounds (or
counts it, ``bisect_counts``); the change itself, bad against good in the same rounds, is the step's positive
control. M is good or bad by the side of the middle of good and bad its interval lies on (``paired.side_of``);
a step where bad is not told from good, M is not told from the middle, or the A/A is called ends the bisection
with what it found: it never guesses. A midpoint that cannot run is skipped with its reason (``git bisect
skip``). When the bracket closes on two adjacent builds, the culprit is timed against its parent once more
in fresh workers (``culprit``). The outcome (``conclusion``): culprit confirmed, regression confirmed with no
culprit found (and why), or not confirmed. Steps are kept in the cache as they end, so the same command run
again resumes (``bisect_state.State``).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from ..core import builds, paired, parameters, results
from ..core.parameters import Params
from ..core.progress import say
from ..studies.ab import study as ab_builds
from ..studies.ab import tables as ab_tables
from ..studies.ab.remote import A, B
from .bisect_builds import Candidate, imported, why_not
from .bisect_counts import by_count, count_ends
from .bisect_state import State
from .run_folder import SetupError

MID = "M"
METRIC = "host_ms"
# a step that stops the bisection before its interval reached the target, or whose A/A control was called,
# is timed once more, with fresh workers (the process is the level that varies; only the second timing is
# read): on the CPU machine 1 of 3 bisections stopped at step 1 with the workers' levels 11% apart after 20
# rounds (benchmarks/bisect/), and an A/A is called in about 1 step of 20 at 95% (two of three CI runs on
# 2026-12-07 lost a 4-step bisection to one)
ATTEMPTS = 2
# step 0 bisects the range only where it tells bad from good with a half-width at most this share of the change
# (Chromium's Pinpoint verifies the regression between the ends before it bisects)
ENDS_SHARE = 1 / 3
# the culprit is confirmed where its change against its parent, timed again in fresh workers, can be at least
# this share of the ends' change (its interval reaches it); below, more than one change lies between the ends
CULPRIT_SHARE = 1 / 2
ENDS, MIDPOINT, CULPRIT = "ends", "midpoint", "culprit"  # a step's role (and ``bisect_counts.COUNTED``)
# how a bisection ended (``conclusion``)
CONFIRMED, NO_CULPRIT = "culprit confirmed", "regression confirmed, no culprit found"
NOT_CONFIRMED, INTERRUPTED = "not confirmed", "interrupted"


def step_params(values: dict, good: dict, bad: dict) -> Params:
    """08's parameters for a step with build A ``good``, build B ``bad`` and a midpoint, without a planted arm
    (the change is a step's positive control): its 4 arms' workers fit the memory. ``SetupError`` for a
    planted control asked for, or unless the values name exactly one executor."""
    for name in ("planted_pct", "planted_ops"):
        if name in values:
            raise SetupError(
                f"invalid -p {name}: a bisection plants nothing, its positive control is the change itself"
            )
    # the default single planted arm counts in the memory check where M will be: A, A', B and M
    p = parameters.for_notebook(results.AB_BUILDS, {**values, "build_a": good, "build_b": bad})
    if len(p.executors) != 1:
        raise SetupError(
            f"invalid -p executors={','.join(p.executors)}: a bisection follows one executor, e.g. -p executors=thunder"
        )
    return replace(p, planted_pct=(), planted_ops=0)


def side(c: paired.Change | None, who: str, controls: str) -> dict | None:
    """One comparison of a step as data: the change (%), its interval, whether called, and its verdict
    (withheld, as 08's, when the controls failed)."""
    if c is None:
        return None
    row = {
        "change_pct": c.change_pct,
        "lo_pct": None if c.lo is None else 100 * (c.lo - 1),
        "hi_pct": None if c.hi is None else 100 * (c.hi - 1),
        "half_width_pct": None if c.half_width is None else 100 * c.half_width,
        "called": c.called and controls == "passed",
        "verdict": c.text(who),
    }
    if controls != "passed":
        row["verdict"] = f"not judged: the controls failed ({controls}); {who} {c.change_pct:+.2g}%"
    return row


def time_step(p: Params, mid: dict | None, seed: int) -> dict:
    """Build M (``mid``; None: no midpoint, A against B alone) against A and B in the same rounds until
    resolved, with the A/A control and no planted arm (the change itself is the step's positive control):
    B against A, M against each and where M lies between them (``paired.side_of``), the A/A's outcome,
    the stopping, the seconds."""
    t0 = time.perf_counter()
    more = () if mid is None else ((MID, builds.parse("build_mid", mid)),)
    with ab_builds.Session(p, more=more) as session:
        r = session.trial(seed, extras=False)
    name = p.executors[0]
    failed = {
        row["comparison"].removesuffix(" build"): row["reason"]
        for row in r.table
        if row["executor"] == name and row["comparison"].endswith(" build")
    }
    rows = {row["comparison"]: row for row in r.table if row["executor"] == name and row["metric"] == METRIC}
    found = ab_tables.held(r.timed, p)[name, METRIC] if r.timed else {}
    controls = rows.get("B vs A", {}).get("controls") or "no rounds"
    mb = where = None
    if r.timed and mid is not None:
        arms = ab_tables.arm_series(r.timed, name, METRIC)
        steady = ab_tables.steady_groups(r.timed, name)
        if all(x in arms for x in (A, B, MID)):
            mb = paired.change(METRIC, arms[B], arms[MID], steady, p.confidence)
            where = paired.side_of(METRIC, arms[A], arms[B], arms[MID], steady, p.confidence)
    return {
        "failed": failed,
        "controls": controls,
        "bad_vs_good": side(found.get(B), "bad", controls),
        "mid_vs_good": side(found.get(MID), "M", controls),
        "mid_vs_bad": side(mb, "M", controls),
        "side": where,
        "aa": rows.get("A' vs A (A/A control)", {}).get("verdict"),
        "stopping": r.stopping.text() if r.stopping else None,
        "resolved": bool(r.stopping and r.stopping.resolved),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def checked(step: dict) -> tuple[str, str] | None:
    """Why a step cannot be read: a build that could not run it (``skip`` for M, else ``stop``), the A/A
    control called, or bad not told from good here (the change is the step's positive control); None: read on."""
    if MID in step["failed"]:
        return "skip", f"its workers could not run the step: {step['failed'][MID]}"
    if step["failed"]:
        arm, why = next(iter(step["failed"].items()))
        return "stop", f"build {arm} could not run the step: {why}"
    if step["controls"] != "passed":
        return "stop", f"the controls failed ({step['controls']})"
    bg = step["bad_vs_good"]
    if bg is None or bg["lo_pct"] is None:
        return "stop", "bad against good has no interval (fewer than 2 workers measured)"
    if not bg["called"]:
        return "stop", (
            f"bad reads the same as good: the change between them is smaller than this run resolves "
            f"(±{bg['half_width_pct']:.2g}%)"
        )
    return None


def call(step: dict) -> tuple[str, str]:
    """What a timed step says of its midpoint: ``good`` or ``bad`` (the interval of M against the middle of
    good and bad lies on that side), ``skip`` (M's workers could not run it) or ``stop``, with the reason."""
    if (cannot := checked(step)) is not None:
        return cannot
    where, bg = step["side"], step["bad_vs_good"]
    if where is None:
        return "stop", "M has no interval (fewer than 2 workers measured)"
    span = f"{where['lo_pct']:+.2g} to {where['hi_pct']:+.2g}%"
    at = f"{where['vs_middle_pct']:+.2g}% against the middle of good and bad ({span})"
    share = f"{100 * where['share']:.0f}% of the change at M" if where["share"] is not None else "no change"
    if not where["called"]:
        return (
            "stop",
            f"M is not told from the middle ({at}; {share}): more than one change between them, or too few rounds",
        )
    bad = (where["vs_middle_pct"] > 0) == (bg["change_pct"] > 0)
    other = step["mid_vs_bad" if bad else "mid_vs_good"]
    also = f"; M also differs from {'bad' if bad else 'good'} ({other['verdict']})" if other and other["called"] else ""
    return ("bad" if bad else "good"), f"{share}, {at}{also}"


def spanned(c: dict) -> str:
    """A change with its interval: ``+20% (+15 to +25%)``."""
    return f"{c['change_pct']:+.2g}% ({c['lo_pct']:+.2g} to {c['hi_pct']:+.2g}%)"


def too_wide(c: dict) -> bool:
    """Whether a change's interval reaches further than ``ENDS_SHARE`` of the change on either side."""
    return c["half_width_pct"] > ENDS_SHARE * abs(c["change_pct"])


def ends(step: dict, counted_apart: bool = False) -> tuple[str, str]:
    """Step 0, bad against good alone: ``confirmed`` where bad is told from good with a half-width at most
    ``ENDS_SHARE`` of the change, or at all where the ends' counts tell them apart (``counted_apart``: the counts
    decide the midpoints), else ``stop``, saying which of the two failed, with the numbers."""
    bg = step["bad_vs_good"]
    if (cannot := checked(step)) is not None:
        at = f" (bad {spanned(bg)} against good)" if bg and bg["lo_pct"] is not None else ""
        return "stop", f"change not confirmed between the ends{at}: {cannot[1]}"
    third = ENDS_SHARE * abs(bg["change_pct"])
    if too_wide(bg) and counted_apart:
        return "confirmed", (
            f"bad {spanned(bg)} against good, ±{bg['half_width_pct']:.2g}% (wider than a third, {third:.2g}%, "
            "but the counts tell the ends apart and decide the midpoints)"
        )
    if too_wide(bg):
        return "stop", (
            f"change confirmed but not resolved to a third of its size: bad {spanned(bg)} against good, "
            f"±{bg['half_width_pct']:.2g}% where a third of the change is {third:.2g}%"
        )
    return "confirmed", f"bad {spanned(bg)} against good, ±{bg['half_width_pct']:.2g}% within a third ({third:.2g}%)"


def culprit(step: dict, change: dict) -> tuple[str, str]:
    """The culprit (bad) against its parent (good) in fresh workers: ``confirmed`` where told apart and its
    interval reaches ``CULPRIT_SHARE`` of step 0's ``change`` in its direction, else ``stop`` and why."""
    if (cannot := checked(step)) is not None:
        return "stop", f"the culprit (bad) against its parent (good) in fresh workers: {cannot[1]}"
    c, way = step["bad_vs_good"], 1 if change["change_pct"] > 0 else -1
    least = CULPRIT_SHARE * abs(change["change_pct"])
    if max(way * c["lo_pct"], way * c["hi_pct"]) < least:
        return "stop", (
            f"the culprit moves the step {spanned(c)} against its parent, short of half the ends' change "
            f"({change['change_pct']:+.2g}%, half {least:.2g}%): more than one change between the ends"
        )
    return "confirmed", f"the culprit {spanned(c)} against its parent; the ends {spanned(change)}"


def again(step: dict, role: str) -> str | None:
    """Why a step that would stop the bisection is timed once more with fresh workers: its controls failed,
    its interval did not reach the target, or (step 0, ends not told apart by counts) the change it told apart
    is not resolved to a third; None where its timing stands (a build could not run it, or it was read as far
    as the target asks)."""
    bg = step["bad_vs_good"]
    if step["failed"]:
        return None
    if step["controls"] != "passed":
        return "its controls failed"
    if not step["resolved"]:
        return "its interval did not reach the target"
    if role == ENDS and bg["called"] and too_wide(bg):
        return "its interval did not reach a third of the change"
    return None


def read(role: str, step: dict, steps: list, counted_apart: bool = False) -> tuple[str, str]:
    """A timing's call by its step's role: the ends (``ends``, ``counted_apart`` where counts tell them apart),
    a midpoint (``call``) or the culprit (``culprit``, against the last timing of the ends in ``steps``)."""
    if role == ENDS:
        return ends(step, counted_apart)
    if role == CULPRIT:
        return culprit(step, [s for s in steps if s["role"] == ENDS][-1]["bad_vs_good"])
    return call(step)


def pick(lo: int, hi: int, skipped: dict) -> int | None:
    """The untried build nearest the middle of ``lo``..``hi`` (the lower one on a tie), or None."""
    left = [i for i in range(lo + 1, hi) if i not in skipped]
    return min(left, key=lambda i: (abs(2 * i - lo - hi), i)) if left else None


def bracket(steps: list, last: int) -> tuple[int, int]:
    """The last good and the first bad build the midpoint steps found (before any, the ends: 0 and ``last``)."""
    good = [s["mid"] for s in steps if s["call"] == "good"]
    bad = [s["mid"] for s in steps if s["call"] == "bad"]
    return max(good, default=0), min(bad, default=last)


def run(cands, p: Params, by_counts: bool = True) -> dict:
    """The bisection of ``cands`` (``bisect_builds.Commits`` or ``Releases``, their ends checked) with 08's
    parameters ``p`` (``step_params``): step 0 (the ends), the midpoints while the change is confirmed (by their
    counts where the ends' counts differ and ``by_counts``, ``bisect_counts``; else timed), and the culprit
    against its parent once the bracket closes; its steps and skipped builds, where it ended, why, its
    ``outcome`` (``conclusion``) and what the ends' counts said, as data (``bisect_page``)."""
    items, last = cands.items, len(cands.items) - 1
    need = imported(p.build_a)  # what the good build imports, every midpoint must import too
    state = State(cands.identity(), p)
    skipped, steps, t0 = {}, [], time.perf_counter()
    say(
        f"bisect: {last - 1} {cands.kind}s between good {items[0].name} and bad {items[-1].name}, about "
        f"{math.ceil(math.log2(last)) + 1 + (last > 1)} steps (the ends, the midpoints, the culprit) · "
        f"{p.executors[0]} · {p.device} · state {state.path}"
    )
    counted = {"ends": None, "text": "not counted (--no-counts)"}
    try:
        if by_counts:  # before step 0: where they differ, step 0 need only call the change (docs/method.md)
            counted = count_ends(state, cands, p)
        if (
            attempts(state, cands, p, (0, last, None), steps, ENDS, counted_apart=bool(counted["ends"]))[0]
            == "confirmed"
        ):
            narrow(state, cands, p, need, steps, skipped, counted["ends"])
            lo, hi = bracket(steps, last)
            if hi - lo == 1 < last:  # adjacent ends: step 0 timed the culprit against its parent already
                attempts(state, cands, p, (lo, hi, None), steps, CULPRIT)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
    lo, hi = bracket(steps, last)
    ended = {
        "skipped": {str(k): v for k, v in sorted(skipped.items())},
        "steps": steps,
        "good": lo,
        "bad": hi,
        "stop": next((s["why"] for s in steps if s["call"] == "stop"), None),
        "status": status,
        "state": str(state.path),
        "outcome": conclusion(steps, [c.name for c in items], status),
        "counts": counted,
    }
    return as_data(cands, p, ended, t0)


def narrow(
    state: State, cands, p: Params, need: tuple[str, ...], steps: list, skipped: dict, ends: dict | None
) -> None:
    """Midpoint steps, appended to ``steps``, until the bracket closes, every build inside it is in ``skipped``
    (with why it cannot run), or a step stops; each decided by its counts where the counters ``ends`` tell
    good from bad and its counts equal one end's, else timed."""
    last = len(cands.items) - 1
    while (i := pick(*bracket(steps, last), skipped)) is not None:
        mid_build, reason = midpoint(cands, cands.items[i], p.cache_mode, need)
        if reason is not None:
            skipped[i] = reason
            say(f"skip {cands.items[i].name}: {reason}")
            continue
        if ends and by_count(state, cands, p, (*bracket(steps, last), i), steps, ends)[0] is not None:
            continue
        verdict, why = attempts(state, cands, p, (*bracket(steps, last), i), steps, MIDPOINT, mid_build)
        if verdict == "skip":
            skipped[i] = why
        elif verdict == "stop":
            return


def midpoint(cands, mid: Candidate, cache_mode: str, need: tuple[str, ...]) -> tuple[dict | None, str | None]:
    """The midpoint's build and None, or None and why it is skipped: it could not be built, or it cannot run
    the step (``why_not``)."""
    try:
        build = cands.build(mid)
    except RuntimeError as e:
        return None, str(e)
    return build, why_not(build, cache_mode, need) or None


def doing(role: str, good: Candidate, bad: Candidate, mid: Candidate | None) -> str:
    """What a step times, in words."""
    if role == ENDS:
        return f"bad {bad.name} against good {good.name}, no midpoint (the ends)"
    if role == CULPRIT:
        return f"the culprit {bad.name} against its parent {good.name}, in fresh workers"
    return f"{mid.name} (M) against good {good.name} and bad {bad.name} in the same rounds"


def attempts(
    state: State,
    cands,
    p: Params,
    at: tuple,
    steps: list,
    role: str,
    mid_build: dict | None = None,
    counted_apart: bool = False,
) -> tuple[str, str]:
    """One step of ``role``: the midpoint ``items[i]`` (``mid_build``; with ``i`` None, none) against good
    ``items[lo]`` and bad ``items[hi]`` (``at``: lo, hi, i), timed again with fresh workers (up to
    ``ATTEMPTS``) where it would stop for a reason more rounds may cure (``again``); each timing taken from
    ``state`` or kept there, and appended to ``steps`` with its call (``read``; ``counted_apart``: the ends'
    counts differ). Returns the last call and why."""
    lo, hi, i = at
    good, bad, mid = cands.items[lo], cands.items[hi], None if i is None else cands.items[i]
    step_p = replace(p, build_a=cands.build(good), build_b=cands.build(bad))
    for attempt in range(1, ATTEMPTS + 1):
        n = len(steps)
        say(f"step {n}: {doing(role, good, bad, mid)}")
        key = State.key(good, bad, mid, attempt)
        step = state.get(key)
        replayed = step is not None
        if not replayed:
            step = time_step(step_p, mid_build, p.seed + n)
            state.put(key, step)
        else:
            say(f"step {n}: taken from an earlier run of the same bisection ({state.path})")
        verdict, why = read(role, step, steps, counted_apart)
        if verdict == "stop" and attempt < ATTEMPTS and (short := again(step, role)):
            verdict, why = "again", f"{why}; {short}: again with fresh workers"
        steps.append({"step": n, "role": role, "good": lo, "bad": hi, "mid": i, "call": verdict, "why": why, **step})
        steps[-1]["replayed"] = replayed
        say(f"step {n}: {verdict}: {why} ({step['seconds']:.0f} s)")
        if verdict != "again":
            break
    return verdict, why


def conclusion(steps: list, names: list[str], status: str) -> dict:
    """How the bisection of the builds ``names`` ended, read from its ``steps``: ``call`` (``CONFIRMED``,
    ``NO_CULPRIT``, ``NOT_CONFIRMED``, or ``INTERRUPTED``) and ``why``, the culprit ``found`` (only where
    confirmed), ``ends`` (step 0's bad against good) and ``verified`` (the culprit against its parent in fresh
    workers: step 0 itself where the ends are adjacent)."""
    lo, hi = bracket(steps, len(names) - 1)
    timed = [s for s in steps if s["role"] == ENDS]
    first = timed[-1]["bad_vs_good"] if timed else None
    out = {"call": INTERRUPTED, "why": "", "found": None, "ends": first, "verified": None}
    if status != "complete":
        return out | {"why": f"after {len(steps)} steps; the first bad build is between {names[lo]} and {names[hi]}"}
    if timed[-1]["call"] != "confirmed":
        return out | {"call": NOT_CONFIRMED, "why": timed[-1]["why"]}
    check = timed[-1] if len(names) == 2 else next((s for s in steps[::-1] if s["role"] == CULPRIT), None)
    if check is None:
        return out | {"call": NO_CULPRIT, "why": unchecked(steps, names, lo, hi)}
    out["verified"] = check["bad_vs_good"]
    if check["call"] != "confirmed":
        return out | {"call": NO_CULPRIT, "why": check["why"]}
    return out | {"call": CONFIRMED, "why": check["why"], "found": names[hi]}


def unchecked(steps: list, names: list[str], lo: int, hi: int) -> str:
    """Why a confirmed change found no culprit to check: the midpoint step that stopped, or the builds between
    the bracket's ends that could not run."""
    stopped = next((s for s in steps if s["call"] == "stop"), None)
    if stopped is not None:
        return f"step {stopped['step']} ({names[stopped['mid']]} between {names[lo]} and {names[hi]}): {stopped['why']}"
    return (
        f"the first bad build is one of {', '.join(names[lo + 1 : hi + 1])}: the builds between {names[lo]} (good) "
        f"and {names[hi]} (bad) could not run (skipped)"
    )


def as_data(cands, p: Params, ended: dict, t0: float) -> dict:
    """A bisection as data: its range, executor, metric, parameters and builds, then how it ``ended``
    (skipped builds, steps, good and bad, why it stopped, its status, state file and outcome), its time since
    ``t0``."""
    return {
        "kind": cands.kind,
        "range": cands.identity(),
        "executor": p.executors[0],
        "metric": METRIC,
        "params": {k: v for k, v in p.to_dict().items() if k not in ("build_a", "build_b")},
        "builds": [{"index": n, "name": c.name, "title": c.title, "ref": c.ref} for n, c in enumerate(cands.items)],
        **ended,
        "seconds": round(time.perf_counter() - t0, 1),
        "confidence": p.confidence,
    }
