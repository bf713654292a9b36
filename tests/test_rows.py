"""Rows as types (``core/rows.py``): the JSON a row becomes, the columns it derives, and every
notebook's column list checked against the row type it shows."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

import pytest

from latency_lab.core import row_types as T
from latency_lab.core import rows as R
from latency_lab.core.metrics import Stat
from latency_lab.explorer import session
from latency_lab.studies import executor_timing
from latency_lab.studies.ab import rows as AB
from latency_lab.studies.ab import study as ab_builds
from latency_lab.studies.host_overhead import study as host_overhead
from latency_lab.studies.levers import study as levers
from latency_lab.studies.microbench import study as microbench
from latency_lab.studies.scaling import study as scaling

SCALING_AXES = ("layers", "tokens", "prompt_tokens")


@pytest.mark.parametrize(
    "columns, kind, axes",
    [
        (executor_timing.TABLE_COLUMNS, T.ExecutorRow, ()),
        (executor_timing.NOISE_COLUMNS, T.ExecutorRow, ()),
        (executor_timing.KEY_COLUMNS, T.ExecutorRow, ()),
        (host_overhead.STEP_COLUMNS, T.HostStepRow, ()),
        (scaling.KEY_COLUMNS, T.ScalingRow, SCALING_AXES),
        (scaling.POINT_COLUMNS, T.ScalingRow, SCALING_AXES),
        (scaling.DECODE_COLUMNS, T.ScalingRow, SCALING_AXES),
        (microbench.ROW_COLUMNS, T.OpRow, ("op", "size")),
        (microbench.KEY_COLUMNS, T.OpRow, ("op", "size")),
        (levers.KEY_COLUMNS, T.LeverRow, ()),
        ([c for c in session.COLUMNS if c != "run"], T.ExplorerRow, ()),
        (ab_builds.KEY_COLUMNS, T.ComparisonRow, ()),
        (ab_builds.PAGE_COLUMNS, T.ComparisonRow, ()),
    ],
)
def test_every_column_a_notebook_shows_is_a_column_of_its_row_type(columns, kind, axes):
    assert [c for c in columns if c not in kind.columns() and c not in axes] == []


def test_a_row_is_its_fields_with_statistics_flattened_and_the_axes_spliced_in():
    wall = Stat(2.0, 1.9, 2.1, 1.8, 2.2, 2.0, 0.1, 8, lo=1.8, hi=2.2)
    host = Stat(1.5, 1.4, 1.6, 1.3, 1.7, 1.5, 0.1, 8)  # no interval: no lo/hi columns
    row = R.PointRow("eager", "torch-eager", "ok", None, None, wall_ms=wall, host_ms=host, axes={"layers": 2})
    d = row.as_dict()
    assert (d["wall_ms"], d["wall_q1_ms"], d["wall_lo_ms"], d["wall_hi_ms"]) == (2.0, 1.9, 1.8, 2.2)
    assert d["host_q3_ms"] == 1.6 and "host_lo_ms" not in d and d["host_per_ref_x"] is None
    assert d["layers"] == 2 and "axes" not in d and "host_per_ref_q1_x" not in d
    assert set(d) <= set(R.PointRow.columns()) | {"layers"}


def test_derived_columns_are_computed_where_the_type_is_declared():
    timed = {"wall_ms": Stat.of([1.0] * 3), "host_ms": Stat.of([0.9] * 3)}
    d = T.ExecutorRow("x", "x", "ok", None, None, **timed, kernel_ms=0.25, kernels_per_step=5, floor_ms=0.1).as_dict()
    assert d["cpu_overhead_ms"] == pytest.approx(0.75) and d["overhead_per_kernel_us"] == pytest.approx(150)
    assert d["gpu_busy_pct"] == pytest.approx(25) and d["host_bound"] is True
    assert d["floor_ratio_x"] == pytest.approx(10)
    untimed = T.ExecutorRow("y", "y", "unavailable", "needs CUDA", None).as_dict()
    assert untimed["cpu_overhead_ms"] is None and untimed["host_bound"] is None and untimed["floor_ratio_x"] is None
    noted = R.StepRow("z", "z", "ok", None, "first")
    noted.note(None)
    noted.note("second")
    assert noted.notes == "first; second"


WALL = Stat(2.0, 1.9, 2.1, 1.8, 2.2, 2.0, 0.1, 8, lo=1.8, hi=2.2, fast_only=True)
HOST = Stat(1.5, 1.4, 1.6, 1.3, 1.7, 1.5, 0.1, 8)  # no interval, no fast-only flag
CONTROL = AB.ControlRow(
    *("x", "A + 2% planted vs A", "busy wait", 2.0, 40.0, 41.0, None, 2.1, 0.1, None, None),
    *(2.5, 1.0, 4.0, True, True, "changed"),  # found, its interval, covered, detected, the verdict
)


@pytest.mark.parametrize(
    "row",
    [
        T.ExecutorRow("x", "X", "ok", None, "a note", wall_ms=WALL, host_ms=HOST, kernel_ms=0.5, kernels_per_step=4),
        T.ExecutorRow("y", "Y", "unavailable", "needs CUDA", None),
        R.PointRow("eager", "torch-eager", "ok", None, None, wall_ms=WALL, axes={"layers": 2, "tokens": 6}),
        T.LeverRow("thunder:nv-linear", "L", "ok", None, None, host_saved_us=WALL, saving="same", floor_ms=0.1),
        T.CombinationRow(
            "c", "C", "partial", "rounds: boom", None, key="c @ layers=1", combined=True, vs_baseline_x=HOST
        ),
        T.ScalingRow("eager", "E", "ok", None, None, axes={"layers": 1}, sweep="depth", loop_ms=WALL, near_tie=False),
        T.ComparisonRow("thunder", "B vs A", None, "host_ms", "ok", ratio_x=1.1, ratio_lo_x=1.0, controls="passed"),
        T.ComparisonRow("thunder", "B build", None, None, "failed", "2 of 4 workers: boom"),
        AB.BuildRow("A", "this Python", 4, "0, 1", "3.12", None, {"torch": "2.9"}, [{"folder": "/x", "git": None}]),
        CONTROL,
        AB.PartRow("thunder", "B", "prologue", a_us=1.0, b_us=2.0, p=None, moved=False, control_lo_us=-1.0),
        AB.PartRow("thunder", "A'", None, reason="no parts"),
        AB.LogitsRow("x", "B vs A", None, None, 1e-4, False, mismatch="shape (1,) != (2,)"),
        AB.KernelRow("x", A_reason="gone", reason="no device kernels on CPU"),
        AB.KernelRow("x", a_kernels_per_step=3.0, a_kernel_ms=0.5, b_kernels_per_step=4.0, b_kernel_ms=0.25),
        AB.CostRow("x · A #1", 2.0, 1.5),
    ],
    ids=lambda row: type(row).__name__,
)
def test_a_row_reads_back_into_its_type_from_what_it_wrote(row):
    d = row.as_dict()
    back = type(row).from_dict(json.loads(json.dumps(d)))  # as a results file holds it
    assert type(back) is type(row) and back.as_dict() == d
    for f in fields(row):  # statistics come back with what a row holds of them: median, quartiles, interval, flag
        mine, theirs = getattr(row, f.name), getattr(back, f.name)
        if isinstance(mine, Stat):
            assert (theirs.median, theirs.q1, theirs.q3, theirs.lo, theirs.hi, theirs.fast_only) == (
                mine.median,
                mine.q1,
                mine.q3,
                mine.lo,
                mine.hi,
                mine.fast_only,
            )
        else:
            assert theirs == mine, f.name


def test_a_row_reads_back_from_its_results_file_form_ignoring_columns_of_other_types():
    row = T.ExecutorRow("x", "X", "ok", None, None, wall_ms=WALL, kernel_ms=0.5)
    flat = row.as_dict()
    assert flat["wall_ms"] == 2.0 and flat["wall_lo_ms"] == 1.8 and flat["wall_fast_only"] is True
    assert flat["cpu_overhead_ms"] == pytest.approx(1.5) and "host_lo_ms" not in flat  # no interval, no lo column
    assert (
        R.StepRow.from_dict({**row.as_dict(), "source": "measured here"}).as_dict()
        == R.StepRow("x", "X", "ok", None, None, wall_ms=WALL, kernel_ms=0.5).as_dict()
    )


def test_an_ab_row_holds_the_columns_its_section_held_in_their_order():
    """08's sections keep the file's shape: a row lacks the columns it has no value for (a CPU's kernel row,
    a part without numbers), keeps a None it measured (a sign test without differences), and its derived
    columns sit where the built dicts had them."""
    assert list(AB.KernelRow("x", reason="no device kernels on CPU")) == ["executor", "reason"]
    assert list(AB.KernelRow("x", reason="cpu", B_reason="gone")) == ["executor", "reason", "B_reason"]
    both = AB.KernelRow("x", a_kernels_per_step=3.0, a_kernel_ms=0.5, b_kernels_per_step=4.0, b_kernel_ms=0.25)
    assert list(both)[-2:] == ["diff_kernels_per_step", "diff_kernel_us"] and both["diff_kernel_us"] == -250.0
    assert list(AB.PartRow("t", "A'", None, reason="no parts")) == ["executor", "against", "part", "reason"]
    twin = AB.PartRow("t", "A'", "prologue", a_us=1.0, b_us=1.0, diff_us=0.0, p=None, moved=False, rounds=8)
    assert "reason" not in twin and "control_lo_us" not in twin and twin["p"] is None
    b = AB.PartRow("t", "B", "prologue", control_lo_us=0.0, control_hi_us=1.0)
    assert list(b)[-3:] == ["rounds", "control_lo_us", "control_hi_us"]
    assert (
        " ".join(AB.LogitsRow("x", "B vs A", 0.0, 0.0, 1e-4, True))
        == "executor against max_abs_diff rel_err tolerance passed"
    )
    build = AB.BuildRow("A", "this Python", 4, "0", "3.12", None, {"torch": "2.9"}, [], None)
    assert list(build) == ["arm", "build", "workers", "cores", "python", "error", "torch", "folders", "git"]
    assert list(CONTROL)[-5:] == ["found_hi_pct", "error_pp", "covered", "detected", "verdict"]
    assert CONTROL.error_pp == pytest.approx(0.4) and AB.CostRow("e", 2.0, 1.5)["channel_ms"] == 0.5


def _row_types(cls=R.Record) -> set[type]:
    """Every row type of the package (its modules imported above and in the studies' packages)."""
    return {cls, *(t for sub in cls.__subclasses__() for t in _row_types(sub))}


def test_no_row_type_hides_what_a_row_reads_as():
    """A field named like a method of the row (``values``, ``get``, ``stat``, ...) would hide it: compare
    reads a row's first value with ``row.values()``, tables with ``row.get``. No row type has one; a
    planted one does."""
    import latency_lab.instruments.trace_row  # noqa: F401  (its TraceRow)
    import latency_lab.studies.thunder_traces.study  # noqa: F401

    methods = {name for name in dir(R.Record) if not name.startswith("_")}
    types = _row_types()
    assert len(types) > 30
    assert {(t.__name__, f.name) for t in types for f in fields(t) if f.name in methods} == set()

    @dataclass
    class Planted(R.Record):
        values: dict

    assert [f.name for f in fields(Planted) if f.name in methods] == ["values"]
