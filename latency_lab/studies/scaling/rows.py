"""Notebook 06's row types (``rows.Record``) besides ``row_types.ScalingRow``: an executor's depth fits."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ...core.rows import Record


@dataclass
class FitRow(Record):
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

    def as_dict(self) -> dict:
        """The row as a results file holds it: each line as a dict under its metric (``Record.as_dict``
        would splice a dict in)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
