"""The explorer notebook (00): its session (``session``: measure a setting, keep the runs, findings), its
view (``view``: plotly chart and HTML) and its widgets (``widgets``: the ipywidgets front end)."""

from .session import (
    COLUMNS,
    Explorer,
    Progress,
    Stopped,
    StopSwitch,
    beside_reference,
    findings,
    first_call_phase,
    settings_from,
    step_setup,
    summary_line,
)
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
