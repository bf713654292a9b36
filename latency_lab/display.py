"""Notebook presentation: plotly charts kept as plotly JSON (JupyterLab draws them; the run's HTML
pages share one plotly.js) and tables formatted as a paper prints them (``tables.number``)."""

from __future__ import annotations

import warnings

import pandas as pd

from . import tables

PLOTLY_RENDERER = "plotly_mimetype"  # figure JSON only: no plotly.js copy in every notebook


def setup_notebook() -> None:
    """Keep figures as plotly JSON in outputs and silence import-time warnings of optional thunder
    executors that are not installed."""
    import plotly.io as pio

    pio.renderers.default = PLOTLY_RENDERER
    warnings.filterwarnings("ignore", message=".*module not found.*")
    warnings.filterwarnings("ignore", category=FutureWarning)


class Table(pd.DataFrame):
    """A DataFrame that keeps raw numbers and column names, and shows itself as a paper's table:
    headers with units (``units``: column -> unit; ``first_call_s`` reads ``first call (s)``), numbers
    to 3 significant figures (``tables.number``), blanks for missing, no index."""

    _metadata = ["units", "caption"]

    @property
    def _constructor(self):
        return Table

    def styled(self):
        """The table as a pandas ``Styler``, formatted for display."""
        units = getattr(self, "units", None) or {}
        plain = pd.DataFrame(self).set_axis([tables.header(str(c), units.get(c)) for c in self.columns], axis=1)
        numeric = [h for h, c in zip(plain.columns, self.columns) if any(tables.is_number(v) and v == v for v in self[c])]
        styler = plain.style.format(tables.number).hide(axis="index")
        styler = styler.set_table_styles([{"selector": "td, th", "props": "text-align: left; vertical-align: top;"},
                                          {"selector": "caption", "props": "text-align: left; font-weight: bold;"}])
        styler = styler.set_properties(subset=numeric, **{"text-align": "right", "white-space": "nowrap"})
        caption = getattr(self, "caption", None)
        return styler.set_caption(caption) if caption else styler

    def _repr_html_(self):
        return self.styled().to_html()


def frame(rows: list[dict], columns: list[str] | None = None, units: dict[str, str] | None = None,
          caption: str | None = None) -> Table:
    """``rows`` as a ``Table``: ``columns`` first, in order, values as given (no NaN casting)."""
    table = Table(pd.DataFrame(rows, dtype=object))
    if columns:
        table = table[[c for c in columns if c in table.columns] + [c for c in table.columns if c not in columns]]
    table.units, table.caption = dict(units or {}), caption
    return table


def seed_tables(rows: list[dict], measured: dict[str, dict]):
    """The timing notebook's seed-vs-here tables (``tables.seed_tables``), one per metric, as one
    HTML output; metrics without a number measured here are named below instead of shown."""
    from IPython.display import HTML

    built = tables.seed_tables(rows, measured)
    shown = [frame([dict(zip(t["columns"], line)) for line in t["rows"]], caption=t["title"])._repr_html_()
             for t in built if tables.has_here(t)]
    missing = [t["title"].split(":")[0] for t in built if not tables.has_here(t)]
    note = f"<p>No number measured here for: {'; '.join(missing)}.</p>" if missing else ""
    return HTML("".join(shown) + note)
