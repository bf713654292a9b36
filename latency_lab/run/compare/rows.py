"""The rows of a notebook's results as ``compare`` reads them: each row's identity, its status and
grade, and every metric column read once as a ``metrics.Stat`` (``Stat.from_flat``: median, q1-q3 spread, 95% interval,
``fast_only``), so that the comparison reads attributes rather than composing column names.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...core import catalog, metrics

KEY_COLUMNS = catalog.KEY_COLUMNS  # a row's identity, whichever study it is of: every study's key columns
WITHIN_ROUNDS = ("combination", "graphs")  # 07's and 05's rows of within-round ratios, beside the main rows
GRADED = ("grades",)  # 05's grades of the seed's claims: a word per claim and executor, compared as it stands
ROUND_STATS = {"wall_ms": "wall", "host_ms": "host", "host_per_ref_x": "host_per_ref"}  # a rounds record's statistics
NOTHING = metrics.Stat(*[None] * 8)  # a metric a row does not hold


@dataclass(frozen=True)
class ComparedRow:
    """One results row: the row as written (its identity columns, ``status``, ``grade``, ...) and each
    of its metric columns (``is_compared``) read as a ``metrics.Stat``."""

    fields: dict
    numbers: dict[str, metrics.Stat]

    @property
    def key(self) -> str:
        """The row's identity: its ``KEY_COLUMNS`` values joined by `` · ``, else its first value."""
        keys = [str(self.fields[c]) for c in KEY_COLUMNS if self.fields.get(c) is not None]
        return " · ".join(keys) if keys else str(next(iter(self.fields.values()), ""))

    def stat(self, metric: str) -> metrics.Stat:
        """What the row holds of ``metric`` (``NOTHING`` where it has no such column)."""
        return self.numbers.get(metric, NOTHING)


def is_compared(column: str) -> bool:
    """Whether ``column`` is a measured quantity compare reads (the vocabulary's metric with a unit, or a
    count), not a row's identity nor a part of another metric (``_q1``, ``_lo``, ...)."""
    return column not in KEY_COLUMNS and (metrics.spread_names(column) is not None or column.endswith(metrics.COUNTS))


def read_row(fields: dict, rounds: dict | None = None) -> ComparedRow:
    """A results row with each metric column read once (``metrics.Stat.from_flat``). A headline
    without a ``_fast_only`` column takes that flag from its executor's record in the notebook's
    ``rounds`` section, where there is one."""
    record = rounds.get(fields.get("executor")) if isinstance(rounds, dict) else None
    record = record if isinstance(record, dict) else {}
    numbers = {}
    for column in fields:
        if not is_compared(column):
            continue
        measured = metrics.Stat.from_flat(fields, column)
        stat = record.get(ROUND_STATS.get(column, ""))
        if measured.fast_only is None and isinstance(stat, dict):
            measured = replace(measured, fast_only=stat.get("fast_only"))
        numbers[column] = measured
    return ComparedRow(fields, numbers)


def read_rows(data: dict) -> list[ComparedRow]:
    """The notebook's rows: its ``rows`` section (06: ``points``) when it is a list of executor rows (it
    holds more than the key table, intervals included), else the key table's rows with the intervals its
    ``intervals`` section holds; then its rows of within-round ratios (``WITHIN_ROUNDS``), its fit rows
    (06: fixed and per-layer costs per executor and metric) and its grades where it has them."""
    rounds = data.get("rounds")
    extra = [data.get(name) for name in (*WITHIN_ROUNDS, "fit_rows", *GRADED)]
    extra = [
        read_row(r, rounds) for section in extra if isinstance(section, list) for r in section if isinstance(r, dict)
    ]
    for section in (data.get("rows"), data.get("points")):
        if isinstance(section, list) and section and all(isinstance(r, dict) and "executor" in r for r in section):
            return [read_row(r, rounds) for r in section] + extra
    return key_table_rows(data["key_table"], rounds) + extra


def key_table_rows(table: dict, rounds: dict | None = None) -> list[ComparedRow]:
    """The rows of a key table (``results.key_table``), each metric with its interval from the table's
    ``intervals`` section (``[lo, hi]`` per metric and row) where it has one."""
    intervals = table.get("intervals") if isinstance(table.get("intervals"), dict) else {}
    rows = []
    for i, values in enumerate(table["rows"]):
        row = read_row(dict(zip(table["columns"], values)), rounds)
        numbers = {m: _with_interval(measured, intervals.get(m), i) for m, measured in row.numbers.items()}
        rows.append(ComparedRow(row.fields, numbers))
    return rows


def _with_interval(measured: metrics.Stat, pairs, i: int) -> metrics.Stat:
    """``measured`` with the ``i``-th ``[lo, hi]`` of ``pairs`` (a key table's intervals of its metric);
    as it is where ``pairs`` has no ``i``-th entry."""
    if not isinstance(pairs, list) or i >= len(pairs):
        return measured
    pair = pairs[i]
    return (
        measured.with_interval(*pair)
        if isinstance(pair, list) and len(pair) == 2
        else measured.with_interval(None, None)
    )


def metric_names(rows: list[ComparedRow]) -> list[str]:
    """The measured quantities of the rows (``is_compared``) that some row holds a number of."""
    names = dict.fromkeys(m for r in rows for m in r.numbers)
    return [m for m in names if any(r.stat(m).median is not None for r in rows)]


def by_key(rows: list[ComparedRow]) -> tuple[dict[str, ComparedRow], list[str]]:
    """Rows by ``ComparedRow.key``, and the keys that more than one row has (those cannot be paired)."""
    keys = [r.key for r in rows]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    return {k: r for k, r in zip(keys, rows) if k not in twice}, twice
