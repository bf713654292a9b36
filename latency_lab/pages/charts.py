"""Charts declared as data: a study returns a ``Chart`` (its rows and which column goes where), ``draw``
turns one into a plotly figure and ``show`` draws one into a notebook's output. plotly is imported only
when a chart is drawn, so reading a study or its configuration never imports it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PX_FACET_TITLE = "{name}={value}"  # plotly express's own panel title


@dataclass(frozen=True, kw_only=True)
class Chart:
    """One chart as data. ``rows``: one dict per point, the columns below naming their keys (a row may
    leave a value None). ``line``: one line with markers per series; ``bar``: bars, stacked
    (``barmode`` "relative") or side by side ("group"); ``heatmap``: the values of column ``color``
    as colours on a diverging scale centred on zero, ``y`` down and ``x`` across, one panel per value
    of ``facet`` (``heatmap_grid``). ``labels``: a column's name on axes, legends and hovers (for a
    heat map's ``color``, the unit of its values)."""

    kind: Literal["line", "bar", "heatmap"]
    rows: tuple[dict, ...]
    x: str
    y: str
    title: str
    color: str | None = None  # the column whose values are the series (a heat map: the values shown)
    labels: dict[str, str] = field(default_factory=dict)
    log_x: bool = False
    log_y: bool = False
    dash: str | None = None  # lines: the column whose values pick the dash pattern
    dashed: tuple[str, ...] = ()  # lines: the series (values of ``color``) drawn dashed
    symbol: str | None = None  # lines: the column whose values pick the marker symbol
    pattern: str | None = None  # bars: the column whose values pick the fill pattern (the first: plain)
    error_y: tuple[str, str] | None = None  # bars: the columns of the error bar above and below the value
    barmode: Literal["relative", "group"] = "relative"
    facet: str | None = None  # one panel per value of this column, in the rows' order
    facet_wrap: int = 0  # panels per row; 0: all in one row
    facet_title: str = PX_FACET_TITLE  # a panel's title, from the facet's label (name) and its value
    width: int | None = None  # pixels; None: plotly's default
    height: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "rows", tuple(dict(r) for r in self.rows))  # typed rows (rows.Row) as dicts


def draw(chart: Chart):
    """``chart`` as a plotly figure: lines or bars through plotly express, a heat map through
    ``_heatmap``; a chart without rows is an empty figure with its title."""
    import plotly.graph_objects as go

    if not chart.rows:
        return go.Figure(layout={"title": {"text": chart.title}})
    if chart.kind == "heatmap":
        return _heatmap(chart)
    import plotly.express as px

    common = {
        "x": chart.x,
        "y": chart.y,
        "color": chart.color,
        "facet_col": chart.facet,
        "facet_col_wrap": chart.facet_wrap,
        "log_x": chart.log_x,
        "log_y": chart.log_y,
        "labels": dict(chart.labels),
        "title": chart.title,
    }
    if chart.kind == "line":
        fig = px.line(list(chart.rows), line_dash=chart.dash, symbol=chart.symbol, markers=True, **common)
        if chart.dashed:
            fig.for_each_trace(lambda t: t.update(line_dash="dash") if t.name in chart.dashed else None)
    else:
        above, below = chart.error_y or (None, None)
        fig = px.bar(
            list(chart.rows),
            pattern_shape=chart.pattern,
            error_y=above,
            error_y_minus=below,
            barmode=chart.barmode,
            **common,
        )
    if chart.facet and chart.facet_title != PX_FACET_TITLE:
        name = chart.labels.get(chart.facet, chart.facet)
        fig.for_each_annotation(
            lambda a: a.update(text=chart.facet_title.format(name=name, value=a.text.split("=")[-1]))
        )
    return _sized(fig, chart)


def heatmap_grid(rows, x: str, y: str, z: str) -> tuple[list, list, list[list]]:
    """The x values and the y values, each in the rows' order, and the matrix of ``z`` (one list per y
    value, one entry per x value; None where no row has that pair)."""
    xs = list(dict.fromkeys(r[x] for r in rows))
    ys = list(dict.fromkeys(r[y] for r in rows))
    cell = {(r[y], r[x]): r.get(z) for r in rows}
    return xs, ys, [[cell.get((b, a)) for a in xs] for b in ys]


def _heatmap(chart: Chart):
    """Heat maps side by side, one per value of ``chart.facet``, sharing their y axis (first row at the
    top) and one colour scale: blue below zero, red above, each cell's value written in it to the
    unit."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = list(dict.fromkeys(r[chart.facet] for r in chart.rows)) if chart.facet else [None]
    name = chart.labels.get(chart.facet, chart.facet)
    unit = chart.labels.get(chart.color, "")
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[chart.facet_title.format(name=name, value=p) for p in panels] if chart.facet else None,
        shared_yaxes=True,
        horizontal_spacing=0.04,
    )
    for i, panel in enumerate(panels, start=1):
        xs, ys, z = heatmap_grid(
            [r for r in chart.rows if panel is None or r[chart.facet] == panel], chart.x, chart.y, chart.color
        )
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=xs,
                y=ys,
                coloraxis="coloraxis",
                text=[[("" if v is None else f"{v:.0f}") for v in row] for row in z],
                texttemplate="%{text}",
                hovertemplate=f"%{{y}} / %{{x}}: %{{z:.1f}} {unit}<extra></extra>",
            ),
            row=1,
            col=i,
        )
    fig.update_layout(title=chart.title, coloraxis={"colorscale": "RdBu_r", "cmid": 0, "colorbar": {"title": unit}})
    fig.update_yaxes(autorange="reversed")
    return _sized(fig, chart)


def _sized(fig, chart: Chart):
    """``fig`` at the chart's width and height, where it gives them."""
    size = {k: v for k, v in (("width", chart.width), ("height", chart.height)) if v is not None}
    if size:
        fig.update_layout(**size)
    return fig


def show(chart: Chart | None, otherwise: str | None = None) -> None:
    """Draw ``chart`` (``draw``) into the notebook's output; without a chart (None), print ``otherwise``
    when given."""
    if chart is None:
        if otherwise:
            print(otherwise)
        return
    draw(chart).show()
