"""Notebook 04's row types (``rows.Record``) besides ``row_types.OpRow``: the table of shapes per size."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.rows import Record


@dataclass
class ShapeRow(Record):
    """One size label: its tokens per sequence and every selected op's argument shapes, by op
    (``ops.describe_shapes``; spliced in, one column per op)."""

    size: str
    tokens: int
    shapes: dict = field(default_factory=dict)
