"""Notebook 08's rounds, when they stop: the changes the rounds are for (``primary``), the widest of them
(``widest``), why a run stops adding rounds (``stop_reason``) and what it resolved then (``Stopping``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core import paired
from ...core.harness import Rounds
from ...core.parameters import Params
from .remote import TWIN
from .tables import held, is_build


@dataclass
class Stopping:
    """Why the rounds stopped: what was resolved (the widest primary interval's half-width, %), in how
    long, and why."""

    target_pct: float
    half_width_pct: float | None
    resolved: bool
    reason: str
    rounds: int
    build_s: float
    seconds: float
    workers_needed: int | None = None  # per arm, for the target at the spread measured (when rounds cannot help)
    trace: list = field(default_factory=list)  # after each batch: [rounds, seconds since the start, half-width %]
    builds: dict = field(default_factory=dict)  # where ``build_s`` went (``Session.build_split``)
    slots: int | None = None  # the slots the run had (``workers``)

    def text(self) -> str:
        got = "no interval" if self.half_width_pct is None else f"±{self.half_width_pct:.2g}%"
        return (
            f"{'Resolved' if self.resolved else 'Not resolved'}: {got} against a target of ±{self.target_pct:.2g}% "
            f"after {self.rounds} rounds in {self.seconds:.0f} s ({self.build_s:.0f} s of builds{self.builds_text()}); "
            f"stopped: {self.reason}.{self.advice()}"
        )

    def advice(self) -> str:
        """What would resolve the target where the run did not: more slots, or (where the slots it had would
        do at the spread measured between them) more rounds."""
        if self.resolved or not self.workers_needed or "slots" in self.reason:
            return ""
        if self.slots and self.workers_needed <= self.slots:
            return (
                f" At the spread between slots measured, its {self.slots} slots would resolve "
                f"±{self.target_pct:.2g}% with more rounds (a larger --budget)."
            )
        return (
            f" At the spread between slots measured, about {self.workers_needed} slots (a worker of every arm on "
            f"each) would resolve ±{self.target_pct:.2g}%."
        )

    def builds_text(self) -> str:
        """Where the builds' seconds went, in words (empty where not recorded)."""
        b = self.builds
        if not b:
            return ""
        each = ", ".join(
            f"{what} {b[key]:.2g} s"
            for what, key in (("set-up", "set_up_s"), ("model", "model_s"), ("first calls", "first_call_s"))
            if b.get(key) is not None
        )
        return (
            f": {b['workers']} workers, {b['at_once']} at once; all started after {b['started_s']:.0f} s, "
            f"built after {b['built_s']:.0f} s"
            + (f"; a worker's median {each}" if each else "")
            + f"; {b['sized_s']:.0f} s sizing the plants"
        )


def primary(found: dict[str, paired.Change], p: Params) -> list[paired.Change]:
    """The changes the rounds are for: every build's against A (B's, a bisection's midpoint's); without a
    build, the A/A control's."""
    of_builds = [c for arm, c in found.items() if is_build(arm, p)]
    return of_builds or [c for arm, c in found.items() if arm == TWIN]


def half_width_pct(c: paired.Change | None) -> float | None:
    """The half-width of ``c``'s interval in %; None without a judged interval."""
    return None if c is None or not c.judged else 100 * c.half_width


def widest(timed: Rounds, p: Params) -> paired.Change | None:
    """The widest primary host-time interval over the executors (``primary``), as the verdicts read it (``held``)."""
    every = held(timed, p)
    found = [c for name in p.executors for c in primary(every[name, "host_ms"], p)]
    if not found or any(not c.judged for c in found):
        return next((c for c in found if not c.judged), None)
    return max(found, key=lambda c: c.half_width)


def stop_reason(c: paired.Change | None, spent: float, batch_s: float, p: Params) -> tuple[str, int | None] | None:
    """Why the rounds stop after a batch, from the widest primary change ``c`` so far, the seconds ``spent``
    since the start and what the last batch took (``batch_s``): the next batch would pass ``budget_s``, or more
    rounds cannot help (with the slots that would); None: add a batch. Never because the interval is narrow
    enough: stopping at the first narrow interval stops where the slots' spread happens to read small, and
    called an identical B in 7-9% of simulated runs at 95% (tests/test_ab_stopping.py); ``resolve_pct`` is what
    the run is read against."""
    if spent + batch_s > p.budget_s:
        return (
            f"the next {2 * p.repeats} rounds (about {batch_s:.0f} s) would pass the budget of {p.budget_s:g} s",
            None,
        )
    if c is not None and c.judged and not c.rounds_can_help():
        needed = None if c.half_width * 100 <= p.resolve_pct else c.workers_for(p.resolve_pct / 100)
        more = f"; about {needed} slots would resolve ±{p.resolve_pct:g}%" if needed else ""
        return (
            f"more rounds cannot help: the slots' paired changes spread ±{100 * c.between_sd:.2g}% (SD), far more "
            f"than their rounds' noise (±{100 * c.within_se:.2g}%){more}"
        ), needed
    return None
