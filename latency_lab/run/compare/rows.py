"""The rows of a notebook's results as ``compare`` reads them: each section the catalog names for the
notebook (``catalog.Entry.compared``) read back into its row type (``Record.from_dict``), every metric
column then read as a ``metrics.Stat`` (``Record.stat``: median, q1-q3 spread, 95% interval, ``fast_only``).
"""

from __future__ import annotations

from ...core import catalog, metrics
from ...core.rows import Record

KEY_COLUMNS = catalog.KEY_COLUMNS  # a row's identity, whichever study it is of: every study's key columns
ROUND_STATS = {"wall_ms": "wall", "host_ms": "host", "host_per_ref_x": "host_per_ref"}  # a rounds record's statistics
NOTHING = metrics.Stat(*[None] * 8)  # a metric a row does not hold


def key(row: Record) -> str:
    """The row's identity: its ``KEY_COLUMNS`` values joined by `` · ``, else its first value."""
    keys = [str(row[c]) for c in KEY_COLUMNS if row.get(c) is not None]
    return " · ".join(keys) if keys else str(next(iter(row.values()), ""))


def stat(row: Record, metric: str) -> metrics.Stat:
    """What the row holds of ``metric`` (``NOTHING`` where it has no such column)."""
    return row.stat(metric) or NOTHING


def is_compared(column: str) -> bool:
    """Whether ``column`` is a measured quantity compare reads (the vocabulary's metric with a unit, or a
    count), not a row's identity nor a part of another metric (``_q1``, ``_lo``, ...)."""
    return column not in KEY_COLUMNS and (metrics.spread_names(column) is not None or column.endswith(metrics.COUNTS))


def read_rows(notebook: str, data: dict) -> list[Record]:
    """The rows of a notebook's results ``data``: each section its catalog entry names (``Entry.compared``;
    the notebook ``data`` says it is of, else ``notebook``), in that order, each row read into the section's
    type. A key table's rows take its ``intervals``; a headline without a ``_fast_only`` column takes that
    flag from its executor's record in the ``rounds`` section."""
    rounds = data.get("rounds") if isinstance(data.get("rounds"), dict) else {}
    out = []
    for section, row_type in catalog.entry(data.get("notebook") or notebook).compared.items():
        found = data.get(section)
        dicts = key_table_dicts(found) if section == "key_table" and isinstance(found, dict) else found
        if isinstance(dicts, list):
            out += [row_type.from_dict(_with_fast_only(d, rounds)) for d in dicts if isinstance(d, dict)]
    return out


def key_table_dicts(table: dict) -> list[dict]:
    """The rows of a key table (``results.key_table``) as dicts, each metric with its interval from the
    table's ``intervals`` section (``[lo, hi]`` per metric and row; none where the pair is not two numbers)."""
    intervals = table.get("intervals") if isinstance(table.get("intervals"), dict) else {}
    out = []
    for i, values in enumerate(table["rows"]):
        row = dict(zip(table["columns"], values))
        for metric, pairs in intervals.items():
            names = metrics.interval_names(metric)
            if names and isinstance(pairs, list) and i < len(pairs):
                pair = pairs[i] if isinstance(pairs[i], list) and len(pairs[i]) == 2 else (None, None)
                row.update(zip(names, pair))
        out.append(row)
    return out


def _with_fast_only(row: dict, rounds: dict) -> dict:
    """``row`` with each headline's ``fast_only`` flag from its executor's ``rounds`` record where the row
    has none."""
    record = rounds.get(row.get("executor"))
    if not isinstance(record, dict):
        return row
    flags = {}
    for column, name in ROUND_STATS.items():
        flag = metrics.fast_only_name(column)
        if column in row and row.get(flag) is None and isinstance(record.get(name), dict):
            flags[flag] = record[name].get("fast_only")
    return {**row, **flags}


def metric_names(rows: list[Record]) -> list[str]:
    """The measured quantities of the rows (``is_compared``) that some row holds a number of."""
    names = dict.fromkeys(c for r in rows for c in r if is_compared(c))
    return [m for m in names if any(stat(r, m).median is not None for r in rows)]


def by_key(rows: list[Record]) -> tuple[dict[str, Record], list[str]]:
    """Rows by ``key``, and the keys that more than one row has (those cannot be paired)."""
    keys = [key(r) for r in rows]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    return {k: r for k, r in zip(keys, rows) if k not in twice}, twice
