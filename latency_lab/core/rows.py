"""Rows as types: one dataclass per kind of results row, its fields named in the suite's vocabulary
(``metrics``: snake_case with a unit suffix).

``as_dict`` is the row as results files and tables hold it: a field holding a ``Stat`` becomes its
median and quartiles, and its interval where it has one, under the field's name (``wall_ms``,
``wall_q1_ms``, ..., ``Stat.flat``); a field holding a dict (a sweep point's axes, declared as data
by each sweep) is spliced in. ``from_dict`` reads that form back into the type. ``columns`` names what a
row of the type can hold besides those, so the notebooks' column lists are checked against their row
types. Columns a type derives (a floor ratio, how busy the GPU is) are computed in ``__post_init__``,
once, where the type is declared.

A row also reads as its results-file form, column by column (``row["wall_ms"]``, ``row.get(...)``), for
code that takes rows as the results files hold them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields

from .metrics import INTERVAL_PARTS, SPREAD_PARTS, Stat, fast_only_name, join, split_unit


@dataclass(eq=True)
class Record(Mapping):
    """A results row of a typed table: its fields as the file holds them (``as_dict``), read back from
    that form (``from_dict``), and readable column by column as a mapping."""

    def as_dict(self) -> dict:
        """The row as a results file holds it (the module's docstring), without the columns it lacks."""
        out = {}
        lacks = self.lacks()
        for f in fields(self):
            value, name = getattr(self, f.name), column_of(f)
            if f.name in lacks:
                continue
            if _is_stat(f):
                out.update(value.flat(name) if value is not None else {name: None})
            elif _is_spliced(f):
                out.update(value)
            else:
                out[name] = value
        return out

    def lacks(self) -> set[str]:
        """The fields this row does not have as columns: its ``optional`` ones that hold None."""
        return {f.name for f in fields(self) if f.metadata.get("optional") and getattr(self, f.name) is None}

    @classmethod
    def from_dict(cls, d: dict):
        """The row of this type that ``as_dict`` made ``d`` from (a results file's row): its fields, each
        statistic rebuilt from its columns (``_stat_from``), the columns no field names spliced back into
        the type's dict field (a sweep point's axes), derived columns computed again (as ``d`` has them where
        their inputs are missing). Columns this type does not hold are left out; a field without a default
        that ``d`` lacks (an older file's row) is None."""
        values: dict = {}
        named: set[str] = set()
        spliced = None
        for f in fields(cls):
            if _is_spliced(f):
                spliced = f.name
                continue
            named.update(_columns_of(f))
            name = column_of(f)
            if not f.init or (name not in d and not _required(f)):
                continue
            values[f.name] = None if name not in d else _stat_from(d, name) if _is_stat(f) else d[name]
        if spliced:
            values[spliced] = {k: v for k, v in d.items() if k not in named}
        row = cls(**values)
        for f in fields(cls):  # a derived column its inputs are missing for (an older file): as the file has it
            if not f.init and getattr(row, f.name) is None and not _is_stat(f):
                setattr(row, f.name, d.get(column_of(f)))
        return row

    @classmethod
    def columns(cls) -> list[str]:
        """Every column a row of this type can have (a spliced dict's keys are the row's own)."""
        out = []
        for f in fields(cls):
            if _is_spliced(f):
                continue
            base, unit = split_unit(column_of(f))
            parts = SPREAD_PARTS + INTERVAL_PARTS if _is_stat(f) else ()
            out += [column_of(f), *(join(f"{base}_{part}", unit) for part in parts)]
        return out

    def stat(self, column: str) -> Stat | None:
        """Column ``column`` read as a statistic (``Stat.from_flat``: its median, spread, interval and
        ``fast_only`` where the row holds them); None where the row has no such column."""
        return Stat.from_flat(self.as_dict(), column)

    def __getitem__(self, column: str):
        return self.as_dict()[column]

    def __iter__(self):
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


@dataclass(eq=True)
class Columns(Record):
    """A row of a table without a type of its own (a draft study's key table): its columns as they are."""

    cells: dict = field(default_factory=dict)  # spliced in (``values`` would hide ``Mapping.values``)


@dataclass(eq=True)
class Row(Record):
    """Who and how it went: the executor, its label, its status (ok, unavailable, failed, partial),
    the reason when not ok, and notes."""

    executor: str
    label: str
    status: str
    reason: str | None
    notes: str | None

    @classmethod
    def of(cls, p, **values):
        """The row of a ``measurement.Measurement`` ``p`` (its identity and outcome) with ``values``."""
        return cls(p.executor.name, p.executor.label, p.status, p.reason, "; ".join(p.notes) or None, **values)

    def note(self, text: str | None) -> None:
        """Add ``text`` to the notes (nothing for None)."""
        if text:
            self.notes = "; ".join(filter(None, (self.notes, text)))


def column(name: str, **kwargs):
    """A field whose column in the file is ``name`` (a name that is no identifier: ``what it runs``);
    ``kwargs`` as ``dataclasses.field`` takes them."""
    return field(metadata={"column": name}, **kwargs)


def optional(**kwargs):
    """A column a row has only while it holds a value (None leaves it out of the file form, as rows built
    key by key did); ``kwargs`` as ``dataclasses.field`` takes them."""
    return field(default=None, metadata={"optional": True}, **kwargs)


def column_of(f) -> str:
    """Field ``f``'s column in the file: its ``column`` name, else its own."""
    return f.metadata.get("column", f.name)


def _is_spliced(f) -> bool:
    """Whether field ``f`` is a dict spliced into the row (declared ``dict``: a sweep point's axes)."""
    return f.type == "dict"


def _required(f) -> bool:
    """Whether field ``f`` has no default."""
    return f.default is MISSING and f.default_factory is MISSING


def _is_stat(f) -> bool:
    return "Stat" in str(f.type)


def _columns_of(f) -> list[str]:
    """The columns field ``f`` becomes in ``as_dict``: its name, and a statistic's parts and flag."""
    name = column_of(f)
    if not _is_stat(f):
        return [name]
    base, unit = split_unit(name)
    parts = [join(f"{base}_{part}", unit) for part in SPREAD_PARTS + INTERVAL_PARTS]
    return [name, *parts, fast_only_name(name)]


def _stat_from(d: dict, name: str) -> Stat | None:
    """The statistic ``Stat.flat(name)`` wrote into ``d`` (``Stat.from_flat``); None where ``d`` has no median."""
    return Stat.from_flat(d, name) if d.get(name) is not None else None


def plain_row(p, **values) -> dict:
    """A results row without a type of its own (a Thunder trace row, a build's first call): the identity
    and outcome of ``measurement.Measurement`` ``p`` (``Row.of``), then ``values``, which may replace them."""
    return {**Row.of(p).as_dict(), **values}


@dataclass
class StepRow(Row):
    """An executor's steady-state step: its first call, wall, host and host-per-reference time over
    the blocks (``harness.rounds``), the kernels per step and their time (the profiler)."""

    first_call_s: float | None = None
    wall_ms: Stat | None = None
    host_ms: Stat | None = None
    host_per_ref_x: Stat | None = None  # host time in units of the adjacent host reference
    kernel_ms: float | None = None
    kernels_per_step: int | None = None

    @classmethod
    def of(cls, p, **values):
        """The row of a ``measurement.Measurement`` ``p``: its identity and outcome, its first call and its
        blocks' statistics (``timed``), then ``values``, which may replace them."""
        return super().of(p, **{"first_call_s": p.first_call_s, **cls.timed(p.timed), **values})

    @staticmethod
    def timed(t) -> dict:
        """The three statistics of a ``rounds.Timed`` (None for each without one), as fields."""
        return {"wall_ms": t and t.wall, "host_ms": t and t.host, "host_per_ref_x": t and t.host_per_ref}

    @property
    def wall(self) -> float | None:
        return self.wall_ms and self.wall_ms.median

    @property
    def host(self) -> float | None:
        return self.host_ms and self.host_ms.median

    @property
    def busy_pct(self) -> float | None:
        """How busy the GPU is: kernel time over the wall, in % (None without either)."""
        return 100 * self.kernel_ms / self.wall if self.wall and self.kernel_ms is not None else None

    def per_floor(self, floor_ms: float | None) -> float | None:
        """The wall over the bandwidth floor (None without either)."""
        return self.wall / floor_ms if self.wall and floor_ms else None


@dataclass
class PointRow(StepRow):
    """04 and 06: one (point, executor) of a sweep (``sweep.row``): the compile caches its first call
    hit, its output's error against eager, the floor and its ratio, the GPU memory the build holds,
    and the point's axes (the sweep's own names: layers, tokens, op, size, ...)."""

    axes: dict = field(default_factory=dict)
    first_call_cache_hits: int | None = None
    rel_err: float | None = None
    floor_ms: float | None = None
    held_allocated_mib: float | None = None
    held_reserved_mib: float | None = None
    floor_ratio_x: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.floor_ratio_x = self.per_floor(self.floor_ms)
