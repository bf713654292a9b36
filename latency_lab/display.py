"""Notebook presentation: plotly charts that survive nbconvert's HTML, and pandas tables."""

from __future__ import annotations

import warnings

PLOTLY_RENDERER = "plotly_mimetype+notebook"  # JupyterLab's mimetype + inline plotly.js for the HTML


def setup_notebook() -> None:
    """Embed plotly.js in outputs (offline HTML) and silence import-time warnings of optional
    thunder executors that are not installed."""
    import plotly.io as pio

    pio.renderers.default = PLOTLY_RENDERER
    warnings.filterwarnings("ignore", message=".*module not found.*")
    warnings.filterwarnings("ignore", category=FutureWarning)


def frame(rows: list[dict], columns: list[str] | None = None):
    """A DataFrame of ``rows`` with ``columns`` first, in order."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if columns:
        df = df[[c for c in columns if c in df.columns] + [c for c in df.columns if c not in columns]]
    return df
