"""``runner.py bisect``: the first build between a good and a bad one whose step's host time moved.

Each step times the midpoint (arm M) against the current good (A) and bad (B) builds in the same rounds,
with 08's workers, A/A control and stopping rule (``studies.ab.study.Session``); the change itself, bad against
good in the same rounds, is the step's positive control. M is good or bad by the side of the middle of
good and bad its interval lies on (``paired.side_of``); a step where bad is not told from good, M is not
told from the middle, or the A/A is called ends the bisection with what it found: it never guesses. A
midpoint that cannot run is skipped with its reason (``git bisect skip``). Steps are kept in the cache
as they end, so the same command run again resumes (``State``).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import replace

from ..core import builds, paired, parameters, results
from ..core.parameters import Params
from ..core.progress import say
from ..studies.ab import study as ab_builds
from ..studies.ab import tables as ab_tables
from ..studies.ab.remote import A, B
from .bisect_builds import Candidate, cache_dir, imported, why_not
from .run_folder import SetupError

MID = "M"
METRIC = "host_ms"
# a step that stops the bisection before its interval reached the target, or whose A/A control was called,
# is timed once more, with fresh workers (the process is the level that varies; only the second timing is
# read): on the CPU machine 1 of 3 bisections stopped at step 1 with the workers' levels 11% apart after 20
# rounds (benchmarks/bisect/), and an A/A is called in about 1 step of 20 at 95% (two of three CI runs on
# 2026-12-07 lost a 4-step bisection to one)
ATTEMPTS = 2


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


class State:
    """The steps of one bisection (its range, parameters, interpreter and good build's versions), kept in the
    cache as each ends."""

    def __init__(self, identity: dict, p: Params):
        given = {k: v for k, v in p.to_dict().items() if k not in ("output_dir", "build_a", "build_b")}
        here = builds.probe(builds.parse("build_a", p.build_a))  # the interpreter and the versions it runs with
        stack = {"python": here["executable"], "packages": {k: v.get("version") for k, v in here["packages"].items()}}
        text = json.dumps({"range": identity, "params": given, "stack": stack}, sort_keys=True, default=str)
        self.path = cache_dir() / "bisect" / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        self.steps: dict = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def get(self, key: str) -> dict | None:
        """The step kept under ``key``, or None."""
        return self.steps.get(key)

    def put(self, key: str, step: dict) -> None:
        """``step`` kept under ``key``, the file rewritten whole."""
        self.steps[key] = step
        self.path.parent.mkdir(parents=True, exist_ok=True)
        results.write_atomic(self.path, json.dumps(self.steps, indent=1))

    @staticmethod
    def key(good: Candidate, bad: Candidate, mid: Candidate | None, attempt: int) -> str:
        """A step's key: its bracket, its midpoint (``-``: none) and its attempt."""
        return f"{good.ref}..{bad.ref}@{mid.ref if mid else '-'}#{attempt}"


def pick(lo: int, hi: int, skipped: dict) -> int | None:
    """The untried build nearest the middle of ``lo``..``hi`` (the lower one on a tie), or None."""
    left = [i for i in range(lo + 1, hi) if i not in skipped]
    return min(left, key=lambda i: (abs(2 * i - lo - hi), i)) if left else None


def run(cands, p: Params) -> dict:
    """The bisection of ``cands`` (``bisect_builds.Commits`` or ``Releases``, their ends checked) with 08's
    parameters ``p`` (``step_params``): its steps and skipped builds, where it ended and why, as data
    (``bisect_page``)."""
    items = cands.items
    need = imported(p.build_a)  # what the good build imports, every midpoint must import too
    state = State(cands.identity(), p)
    lo, hi, skipped, steps, stop, t0 = 0, len(items) - 1, {}, [], None, time.perf_counter()
    say(
        f"bisect: {len(items) - 2} {cands.kind}s between good {items[0].name} and bad {items[-1].name}, about "
        f"{max(1, math.ceil(math.log2(len(items) - 1)))} steps · {p.executors[0]} · {p.device} · state {state.path}"
    )
    try:
        while True:
            i = pick(lo, hi, skipped)
            if i is None and steps:
                break
            mid = None if i is None else items[i]
            mid_build, reason = midpoint(cands, mid, p.cache_mode, need)
            if reason is not None:
                skipped[i] = reason
                say(f"skip {mid.name}: {reason}")
                continue
            step_p = replace(p, build_a=cands.build(items[lo]), build_b=cands.build(items[hi]))
            verdict, why = attempts(state, step_p, items, (lo, hi, i), mid_build, steps)
            if verdict == "skip":
                skipped[i] = why
            elif verdict == "good":
                lo = i
            elif verdict == "bad":
                hi = hi if i is None else i  # a direct step's bad is the bracket's bad already
            else:
                stop = why
                break
            if mid is None:
                break
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
    ended = {
        "skipped": {str(k): v for k, v in sorted(skipped.items())},
        "steps": steps,
        "good": lo,
        "bad": hi,
        "stop": stop,
        "status": status,
        "state": str(state.path),
    }
    return outcome(cands, p, ended, t0)


def midpoint(cands, mid: Candidate | None, cache_mode: str, need: tuple[str, ...]) -> tuple[dict | None, str | None]:
    """The midpoint's build (None: no midpoint) and None, or None and why it is skipped: it could not be
    built, or it cannot run the step (``why_not``)."""
    if mid is None:
        return None, None
    try:
        build = cands.build(mid)
    except RuntimeError as e:
        return None, str(e)
    return build, why_not(build, cache_mode, need) or None


def attempts(state: State, p: Params, items: list, at: tuple, mid_build: dict | None, steps: list) -> tuple[str, str]:
    """One step: the midpoint ``items[i]`` (or, with ``i`` None, bad) against good ``items[lo]`` and bad
    ``items[hi]`` (``at``: lo, hi, i), timed again with fresh workers (up to ``ATTEMPTS``) where it would stop
    unresolved or with its controls failed; each timing taken from ``state`` or kept there, and appended to
    ``steps`` with its call. Returns the last call and why."""
    lo, hi, i = at
    good, bad, mid = items[lo], items[hi], None if i is None else items[i]
    what = f"{mid.name} (M) against" if mid else "bad against"
    for attempt in range(1, ATTEMPTS + 1):
        n = len(steps) + 1
        say(f"step {n}: {what} good {good.name} and bad {bad.name} in the same rounds")
        key = State.key(good, bad, mid, attempt)
        step = state.get(key)
        if step is None:
            step = time_step(p, mid_build, p.seed + n)
            state.put(key, step)
        else:
            say(f"step {n}: taken from an earlier run of the same bisection ({state.path})")
        verdict, why = call(step) if mid else direct(step)
        retry = not step["resolved"] or step["controls"] != "passed"
        if verdict == "stop" and retry and not step["failed"] and attempt < ATTEMPTS:
            short = "its controls failed" if step["controls"] != "passed" else "its interval did not reach the target"
            verdict, why = "again", f"{why}; {short}: again with fresh workers"
        steps.append({"step": n, "good": lo, "bad": hi, "mid": i, "call": verdict, "why": why, **step})
        say(f"step {n}: {verdict}: {why} ({step['seconds']:.0f} s)")
        if verdict != "again":
            break
    return verdict, why


def outcome(cands, p: Params, ended: dict, t0: float) -> dict:
    """A bisection as data: its range, executor, metric, parameters and builds, then how it ``ended``
    (skipped builds, steps, good and bad, why it stopped, its status and state file), its time since ``t0``."""
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


def direct(step: dict) -> tuple[str, str]:
    """A step without a midpoint (good and bad adjacent, or every build between them skipped): ``bad``
    when bad differs from good, else ``stop``."""
    if (cannot := checked(step)) is not None:
        return cannot
    return "bad", f"bad differs from good ({step['bad_vs_good']['verdict']})"
