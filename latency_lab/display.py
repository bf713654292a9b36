"""Notebook presentation: plotly charts kept as plotly JSON (JupyterLab draws them; the run's HTML
pages share one plotly.js) and tables formatted as a paper prints them (``tables.number``)."""

from __future__ import annotations

import warnings

from . import tables

PLOTLY_RENDERER = "plotly_mimetype"  # figure JSON only: no plotly.js copy in every notebook


def setup_notebook() -> None:
    """Keep figures as plotly JSON in outputs and silence import-time warnings of optional thunder
    executors that are not installed."""
    import plotly.io as pio

    pio.renderers.default = PLOTLY_RENDERER
    warnings.filterwarnings("ignore", message=".*module not found.*")
    warnings.filterwarnings("ignore", category=FutureWarning)


def frame(rows: list[dict], columns: list[str] | None = None, units: dict[str, str] | None = None,
          caption: str | None = None):
    """``rows`` as a table to show: ``columns`` first, in order; headers with their units (``units``
    names a column's unit, ``first_call_s`` reads ``first call (s)``); numbers to 3 significant
    figures, blanks for missing. Returns a pandas ``Styler``; the numbers themselves stay as they
    were (``.data`` is the DataFrame)."""
    import pandas as pd

    df = pd.DataFrame(rows, dtype=object)
    if columns:
        df = df[[c for c in columns if c in df.columns] + [c for c in df.columns if c not in columns]]
    df.columns = [tables.header(str(c), (units or {}).get(c)) for c in df.columns]
    numeric = [c for c in df.columns if any(tables.is_number(v) and v == v for v in df[c])]
    styler = df.style.format(tables.number).hide(axis="index")
    styler = styler.set_table_styles([{"selector": "td, th", "props": "text-align: left; vertical-align: top;"},
                                      {"selector": "caption", "props": "text-align: left; font-weight: bold;"}])
    styler = styler.set_properties(subset=numeric, **{"text-align": "right", "white-space": "nowrap"})
    return styler.set_caption(caption) if caption else styler


def seed_tables(rows: list[dict], measured: dict[str, dict]):
    """The timing notebook's seed-vs-here tables (``tables.seed_tables``), one per metric, as one
    HTML output; metrics without a number measured here are named below instead of shown."""
    from IPython.display import HTML

    built = tables.seed_tables(rows, measured)
    shown = [frame([dict(zip(t["columns"], line)) for line in t["rows"]], caption=t["title"]).to_html()
             for t in built if tables.has_here(t)]
    missing = [t["title"].split(":")[0] for t in built if not tables.has_here(t)]
    note = f"<p>No number measured here for: {'; '.join(missing)}.</p>" if missing else ""
    return HTML("".join(shown) + note)
