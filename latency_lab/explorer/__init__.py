"""The explorer notebook (00): its measurement (``measure``: one setting, executor by executor, with Stop),
its session (``session``: keep the runs, findings, the comparison with the reference), its view (``view``:
plotly chart and HTML) and its widgets (``widgets``: the ipywidgets front end)."""

from .measure import Progress, Stopped, StopSwitch, first_call_phase, step_setup
from .session import COLUMNS, Explorer, beside_reference, findings, settings_from, summary_line
from .view import PLOTLY_MIME, comparison_html, details_html, figure, legend_html, table_html
from .widgets import ExplorerUI

__all__ = [
    "COLUMNS",
    "PLOTLY_MIME",
    "Explorer",
    "ExplorerUI",
    "Progress",
    "StopSwitch",
    "Stopped",
    "beside_reference",
    "comparison_html",
    "details_html",
    "figure",
    "findings",
    "first_call_phase",
    "legend_html",
    "settings_from",
    "step_setup",
    "summary_line",
    "table_html",
]
