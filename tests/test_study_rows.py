"""The studies' own row types (each study's ``rows.py``, the instruments' rows): each reads back from what it
writes, and the rows of the committed H100 run read back into their types and write out the same columns, in
the same order, with the same values (the results files keep their shape)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from latency_lab.core.metrics import Stat
from latency_lab.instruments.thunder_breakdown import RECORDED_INPUTS, CallRow, PartRow
from latency_lab.studies.host_overhead.rows import PhaseRow, RegionRow, RemainderRow
from latency_lab.studies.levers.rows import ConfigurationRow, CounterfactualRow, LeverPartRow
from latency_lab.studies.microbench.rows import ShapeRow
from latency_lab.studies.scaling.fits import fit_line
from latency_lab.studies.scaling.rows import DepthFit

REFERENCE = Path(__file__).resolve().parent.parent / "outputs" / "reference-h100"
US = Stat.of([10.0, 11.0, 12.0, 14.0])
HEADLINE = Stat.headline([10.0, 11.0, 12.0, 14.0, 13.0, 12.5], [True] * 6)  # with its interval and flag


def _part_type(row: dict):
    return RemainderRow if "remainder_pct" in row else PartRow


# (results file, section, the row type of a row of it)
SECTIONS = [
    ("04_op_microbenchmarks", "shapes", lambda row: ShapeRow),
    ("05_host_overhead", "parts", _part_type),
    ("05_host_overhead", "regions", lambda row: RegionRow),
    ("06_scaling", "fits", lambda row: DepthFit),
    ("07_levers", "regions", lambda row: CallRow),
    ("07_levers", "counterfactual", lambda row: CounterfactualRow),
]


@pytest.mark.parametrize("notebook, section, type_of", SECTIONS, ids=lambda x: x if isinstance(x, str) else "")
def test_the_reference_run_s_rows_read_back_and_write_the_same_columns(notebook, section, type_of):
    rows = json.loads((REFERENCE / f"{notebook}.results.json").read_text())[section]
    assert rows
    for row in rows:
        back = type_of(row).from_dict(row).as_dict()
        assert list(back) == list(row) and back == row


@pytest.mark.parametrize(
    "row",
    [
        PartRow("thunder", "prologue", 12.5),
        RemainderRow("thunder", "remainder (plain step - instrumented call)", None, remainder_pct=None),
        PhaseRow("thunder", "prologue", HEADLINE),
        RegionRow("thunder", 3, "nvFusion0", "nvFusion", US, alone_us=40.0, execute_alone_us=30.0, kernels=4.0),
        RegionRow("thunder", 4, "linear", "op", US),
        CallRow("thunder", 0, "nvFusion0", "nvFusion", RECORDED_INPUTS, alone_us=US, kernels=4.0, kernel_us=3.5),
        CallRow("thunder", 1, "linear", "op", RECORDED_INPUTS, alone_us=US),
        CallRow("thunder", 2, "getitem", "bookkeeping", RECORDED_INPUTS, error="RuntimeError: boom"),
        DepthFit("eager", "torch-eager", wall_ms={**fit_line([1, 2, 4], [1.0, 2.1, 3.9]), "layers": [1, 2, 4]}),
        DepthFit("thunder", "Thunder", "needs a CUDA device"),
        ShapeRow("seed", 6, {"add": "a=1x6x2048, b=1x6x2048", "triu": "x=6x6"}),
        ConfigurationRow("thunder:nv-linear", "nv_enable_linear=True", "linears in nvFuser", "thunder.jit(...)"),
        ConfigurationRow("RoPE in nvFuser", status="unavailable", reason="no compile option"),
        LeverPartRow("thunder:nv-linear", "nvFusion regions", 900.0, 35.0),
        CounterfactualRow("measured", 48.0, 2.4, 2.41, 16.0),
        CounterfactualRow("1 µs per nvFuser kernel", 1.0, 1.3, 1.3),
    ],
    ids=lambda row: type(row).__name__,
)
def test_a_row_reads_back_into_its_type_from_what_it_wrote(row):
    d = row.as_dict()
    back = type(row).from_dict(json.loads(json.dumps(d)))
    assert type(back) is type(row) and back.as_dict() == d and list(back.as_dict()) == list(d)


def test_a_call_alone_holds_only_the_columns_it_has():
    base = ["executor", "index", "call", "kind", "inputs"]
    timed = ["alone_us", "alone_q1_us", "alone_q3_us"]
    ran = CallRow("thunder", 0, "nvFusion0", "nvFusion", RECORDED_INPUTS, alone_us=US)
    assert list(ran) == base + timed
    ran.kernels, ran.kernel_us = 4.0, 3.5
    assert list(ran) == base + timed + ["kernels", "kernel_us"] and ran["kernels"] == 4.0
    failed = CallRow("thunder", 1, "linear", "op", RECORDED_INPUTS, error="boom")
    assert list(failed) == base + ["error"] and failed.kernels is None and failed.get("kernels", 0) == 0


def test_a_region_s_times_per_kernel_are_derived_where_it_is_declared():
    row = RegionRow("thunder", 3, "nvFusion0", "nvFusion", US, alone_us=40.0, execute_alone_us=30.0, kernels=4.0)
    assert (row.in_place_us_per_kernel, row.alone_us_per_kernel, row.execute_alone_us_per_kernel) == (
        US.median / 4,
        10.0,
        7.5,
    )
    bare = RegionRow("thunder", 4, "linear", "op", US).as_dict()
    assert bare["in_place_us_per_kernel"] is None and bare["alone_us_per_kernel"] is None
    assert "in_place_lo_us" not in bare  # median and quartiles only


def test_a_fit_keeps_each_line_under_its_metric():
    line = {**fit_line([1, 2], [1.0, 2.0]), "layers": [1, 2]}
    d = DepthFit("eager", "torch-eager", wall_ms=line).as_dict()
    assert list(d) == ["executor", "label", "reason", "wall_ms", "host_ms", "kernel_ms", "host_per_ref_x"]
    assert d["wall_ms"] == line and d["host_ms"] is None


def test_every_column_05_shows_of_its_parts_is_a_column_of_their_type():
    assert {"executor", "part", "us", "remainder_pct"} <= set(RemainderRow.columns())
