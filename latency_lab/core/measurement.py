"""One executor measured on one model, from its build to its results row: ``Measurement``.

``harness.prepare`` makes it (the executor built and called once, or why not), the plan's steps add their
records to it right after that first call (``harness.build_and_measure``), and the rounds add its blocks
(``harness.settled``). A study's rows are built from it (``rows.StepRow.of``); a results file holds its
steps' records (``step_records``) and its blocks (``rounds.Rounds.sections``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .failures import describe
from .metrics import Stat
from .registry import Executor
from .rounds import Timed


@dataclass
class Measurement:
    """An executor on one model: its status (``ok``, ``unavailable``, ``failed``, ``partial``, or why it
    did not run) and reason, its callable and first call, the records of the steps measured right after
    that call (by step name, in order), and its blocks in the rounds (``timed``; None until timed or
    where it has none)."""

    executor: Executor
    status: str
    fn: Callable | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    first_call_s: float | None = None
    output: object = None
    steps: dict[str, object] = field(default_factory=dict)
    timed: Timed | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def built(self) -> bool:
        """Whether its first call ran (its steps were measured, even where one of them failed)."""
        return self.first_call_s is not None

    @property
    def name(self) -> str:
        return self.executor.name

    def record(self, step: str) -> dict:
        """The record of plan step ``step``; empty where the step did not run or recorded nothing."""
        return self.steps.get(step) or {}

    def fail(self, error: BaseException, during: str) -> None:
        """Mark a measurement failure: the row keeps its error instead of crashing the notebook."""
        self.status, self.reason = "failed", f"{during}: {describe(error)}"

    @property
    def wall(self) -> Stat | None:
        return self.timed.wall if self.timed else None

    @property
    def host(self) -> Stat | None:
        return self.timed.host if self.timed else None

    @property
    def host_per_ref(self) -> Stat | None:
        return self.timed.host_per_ref if self.timed else None


def step_records(measurements: dict[str, Measurement], leave_out: tuple[str, ...] = ()) -> dict[str, dict]:
    """A results file's ``measured`` section: per executor whose first call ran, its steps' records
    (without the steps ``leave_out`` names), in order."""
    return {
        n: {step: r for step, r in m.steps.items() if step not in leave_out} for n, m in measurements.items() if m.built
    }
