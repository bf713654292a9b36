"""Notebook 06's row types (``rows.Record``) besides ``row_types.ScalingRow`` and ``row_types.FitRow``: an
executor's depth fits."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.rows import Record


@dataclass
class DepthFit(Record):
    """One executor of the depth sweep: per metric its least-squares line against depth (``fits.fit_line``
    with the depths it used, and its slope's interval and blocks where the rounds hold them; None where
    fewer than two depths were measured), and the reason where the wall has no line."""

    executor: str
    label: str
    reason: str | None = None
    wall_ms: dict | None = None
    host_ms: dict | None = None
    kernel_ms: dict | None = None
    host_per_ref_x: dict | None = None
