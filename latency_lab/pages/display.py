"""Notebook presentation: plotly charts kept as plotly JSON (JupyterLab draws them; the run's HTML
pages share one plotly.js) and tables shown as the pages show them (``tables.html_table``)."""

from __future__ import annotations

import html
import warnings

import pandas as pd

from ..core import metrics
from . import tables

PLOTLY_RENDERER = "plotly_mimetype"  # figure JSON only: no plotly.js copy in every notebook


def setup_notebook() -> None:
    """Keep figures as plotly JSON in outputs, filter the known harmless noise out of the rendered pages
    (``environment.quiet_known_noise``, which the environment record lists) and silence import-time
    warnings of optional thunder executors that are not installed."""
    import plotly.io as pio

    from ..core import environment

    pio.renderers.default = PLOTLY_RENDERER
    environment.quiet_known_noise()
    warnings.filterwarnings("ignore", message=".*module not found.*")
    warnings.filterwarnings("ignore", category=FutureWarning)


class Table(pd.DataFrame):
    """A DataFrame that keeps raw numbers and column names, and shows itself as a paper's table
    (``tables.html_table``, the pages' table): headers with units from the vocabulary
    (``first_call_s`` reads ``first call (s)``), numbers to 3 significant figures, right-aligned,
    blanks for missing, no index."""

    _metadata = ["caption"]

    @property
    def _constructor(self):
        return Table

    def _repr_html_(self):
        if self.empty:  # no rows: a sentence, not an empty table
            caption = getattr(self, "caption", None)
            return f"<p class='note'>{html.escape(caption or 'Table')}: nothing measured here.</p>"
        rows = [[None if pd.api.types.is_scalar(v) and pd.isna(v) else v for v in row] for row in self.values.tolist()]
        return str(tables.html_table(rows, list(self.columns), getattr(self, "caption", None), style=True))


def frame(rows: list[dict], columns: list[str] | None = None, caption: str | None = None, only: bool = False) -> Table:
    """``rows`` as a ``Table``: ``columns`` first, in order (``only``: no others; a headline's
    ``_fast_only`` flag, which the results keep for ``compare``, only when asked), values as given (no
    NaN casting); columns without a single value are dropped. Typed rows (``rows.Row``) as their dicts."""
    table = Table(pd.DataFrame([dict(r) for r in rows], dtype=object))
    table = table[[c for c in table.columns if table[c].notna().any()]]
    table = table[[c for c in table.columns if not metrics.is_flag(c) or c in (columns or ())]]
    if columns:
        rest = [] if only else [c for c in table.columns if c not in columns]
        table = table[[c for c in columns if c in table.columns] + rest]
    table.caption = caption
    return table


def pairs(mapping: dict, caption: str, skip: tuple[str, ...] = ()) -> Table:
    """``mapping`` as a two-column table, one row per name (``skip``: names left out), each value as text: a
    notebook's parameters or a call's arguments read as a table, not as a repr."""
    rows = [{"name": k, "value": _text(v)} for k, v in mapping.items() if k not in skip]
    return frame(rows, ["name", "value"], caption=caption, only=True)


def _text(value) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(_text, value)) or "none"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in value.items()) or "none"
    return "none" if value is None else str(value)


def show(obj) -> None:
    """Display ``obj`` in the notebook's output now (inside a loop, where a bare expression shows nothing)."""
    from IPython.display import display

    display(obj)
