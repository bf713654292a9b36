"""Notebook presentation: plotly charts kept as plotly JSON (JupyterLab draws them; the run's HTML
pages share one plotly.js) and tables formatted as a paper prints them (``tables.number``)."""

from __future__ import annotations

import warnings

import pandas as pd

from . import tables

PLOTLY_RENDERER = "plotly_mimetype"  # figure JSON only: no plotly.js copy in every notebook


def setup_notebook() -> None:
    """Keep figures as plotly JSON in outputs, filter the known harmless noise out of the rendered pages
    (``environment.quiet_known_noise``, which the environment record lists) and silence import-time
    warnings of optional thunder executors that are not installed."""
    import plotly.io as pio

    from . import environment

    pio.renderers.default = PLOTLY_RENDERER
    environment.quiet_known_noise()
    warnings.filterwarnings("ignore", message=".*module not found.*")
    warnings.filterwarnings("ignore", category=FutureWarning)


class Table(pd.DataFrame):
    """A DataFrame that keeps raw numbers and column names, and shows itself as a paper's table:
    headers with units from the vocabulary (``first_call_s`` reads ``first call (s)``), numbers to 3
    significant figures (``tables.number``), blanks for missing, no index."""

    _metadata = ["caption"]

    @property
    def _constructor(self):
        return Table

    def styled(self):
        """The table as a pandas ``Styler``, formatted for display."""
        plain = pd.DataFrame(self).set_axis([tables.header(str(c)) for c in self.columns], axis=1)
        numeric = [
            h for h, c in zip(plain.columns, self.columns) if any(tables.is_number(v) and v == v for v in self[c])
        ]
        styler = plain.style.format(tables.number).hide(axis="index")
        styler = styler.set_table_styles(
            [
                {"selector": "td, th", "props": "text-align: left; vertical-align: top;"},
                {"selector": "caption", "props": "text-align: left; font-weight: bold;"},
            ]
        )
        styler = styler.set_properties(subset=numeric, **{"text-align": "right", "white-space": "nowrap"})
        caption = getattr(self, "caption", None)
        return styler.set_caption(caption) if caption else styler

    def _repr_html_(self):
        return self.styled().to_html()


def frame(rows: list[dict], columns: list[str] | None = None, caption: str | None = None, only: bool = False) -> Table:
    """``rows`` as a ``Table``: ``columns`` first, in order (``only``: no others), values as given (no
    NaN casting); columns without a single value are dropped."""
    table = Table(pd.DataFrame(rows, dtype=object))
    table = table[[c for c in table.columns if table[c].notna().any()]]
    if columns:
        rest = [] if only else [c for c in table.columns if c not in columns]
        table = table[[c for c in columns if c in table.columns] + rest]
    table.caption = caption
    return table


def show(obj) -> None:
    """Display ``obj`` in the notebook's output now (inside a loop, where a bare expression shows nothing)."""
    from IPython.display import display

    display(obj)
