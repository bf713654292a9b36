"""latency_lab.pages.charts: a ``Chart`` is data, ``draw`` makes the plotly figure it declares (log axes,
bars, panels, dashed series, heat maps), rows may leave values None, and plotly is imported only to draw."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from latency_lab.pages import charts
from latency_lab.pages.charts import Chart

ROWS = [
    {"executor": "eager", "layers": 1, "ms": 1.0, "kind": "measured"},
    {"executor": "eager", "layers": 2, "ms": 2.0, "kind": "measured"},
    {"executor": "thunder", "layers": 1, "ms": 3.0, "kind": "measured"},
    {"executor": "thunder", "layers": 2, "ms": None, "kind": "measured"},  # not measured
]


def test_a_log_y_line_chart_draws_a_log_y_axis_with_one_line_per_series():
    fig = charts.draw(Chart(kind="line", rows=ROWS, x="layers", y="ms", color="executor", log_y=True, title="t"))
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.type is None and fig.layout.title.text == "t"
    assert [t.name for t in fig.data] == ["eager", "thunder"] and {t.mode for t in fig.data} == {"lines+markers"}


def test_a_bar_chart_draws_bars_grouped_or_stacked_with_its_error_bars():
    rows = [{**r, "above": 0.1, "below": 0.2} for r in ROWS]
    stacked = charts.draw(Chart(kind="bar", rows=rows, x="layers", y="ms", color="executor", title="t"))
    assert {t.type for t in stacked.data} == {"bar"} and stacked.layout.barmode == "relative"
    grouped = charts.draw(
        Chart(kind="bar", rows=rows, x="layers", y="ms", barmode="group", error_y=("above", "below"), title="t")
    )
    assert grouped.layout.barmode == "group" and list(grouped.data[0].error_y.arrayminus) == [0.2] * 4


def test_rows_with_none_values_do_not_crash():
    sparse = [{"executor": "eager", "layers": 1, "ms": None}, {"executor": "eager", "layers": 2}]
    for kind in ("line", "bar", "heatmap"):
        assert charts.draw(
            Chart(
                kind=kind,
                rows=sparse,
                x="layers",
                y="executor" if kind == "heatmap" else "ms",
                color="ms" if kind == "heatmap" else "executor",
                log_y=kind == "line",
                title=kind,
            )
        )
    empty = charts.draw(Chart(kind="line", rows=[], x="layers", y="ms", title="nothing"))
    assert not empty.data and empty.layout.title.text == "nothing"


def test_panels_dashed_series_and_sizes_as_declared():
    chart = Chart(
        kind="line",
        rows=ROWS,
        x="layers",
        y="ms",
        color="executor",
        dashed=("thunder",),
        facet="kind",
        facet_title="{value}",
        width=900,
        height=400,
        title="t",
    )
    fig = charts.draw(chart)
    assert {t.name: t.line.dash for t in fig.data} == {"eager": "solid", "thunder": "dash"}
    assert [a.text for a in fig.layout.annotations] == ["measured"] and (fig.layout.width, fig.layout.height) == (
        900,
        400,
    )
    plain = charts.draw(dataclasses.replace(chart, facet_title=charts.PX_FACET_TITLE, dashed=()))
    assert [a.text for a in plain.layout.annotations] == ["kind=measured"]


def test_a_heatmap_has_one_panel_per_facet_value_and_its_rows_order():
    rows = [
        {"size": s, "op": op, "label": lab, "us": v}
        for s, k in (("seed", 1), ("2x", 2))
        for op, lab, v in (("add", "eager", 0.0), ("add", "thunder", 4.0 * k), ("mul", "eager", 0.0))
    ]
    chart = Chart(
        kind="heatmap",
        rows=rows,
        x="label",
        y="op",
        color="us",
        labels={"us": "µs"},
        facet="size",
        facet_title="size {value}",
        title="t",
    )
    fig = charts.draw(chart)
    assert [a.text for a in fig.layout.annotations] == ["size seed", "size 2x"]
    assert [list(map(list, t.z)) for t in fig.data] == [[[0.0, 4.0], [0.0, None]], [[0.0, 8.0], [0.0, None]]]
    assert fig.layout.coloraxis.cmid == 0 and fig.layout.coloraxis.colorbar.title.text == "µs"
    assert charts.heatmap_grid(rows[:3], "label", "op", "us") == (
        ["eager", "thunder"],
        ["add", "mul"],
        [[0.0, 4.0], [0.0, None]],
    )


def test_a_chart_is_frozen_data():
    chart = Chart(kind="line", rows=iter(ROWS), x="layers", y="ms", title="t")
    assert isinstance(chart.rows, tuple) and len(chart.rows) == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        chart.title = "u"


def test_studies_and_charts_import_without_plotly():
    code = (
        "import sys\n"
        "from latency_lab.pages import charts\n"
        "from latency_lab.studies import scaling, microbench, host_overhead, thunder_traces\n"
        "assert not [m for m in sys.modules if m.startswith('plotly')], 'plotly imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
