"""Tables as a paper prints them: 3 significant figures, units in the headers (from the metric
vocabulary, ``metrics.header``; one time unit per column), a statistic's range in its cell, long
remarks as notes under the table, blanks for missing values. Results files keep the raw numbers; only
what is shown goes through here. Also the one HTML table (``html_table``: the run's pages, compare
pages, notebooks and the explorer) and the pages' jinja templates and stylesheet (``templates/``)."""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from ..core import metrics

TEMPLATES = Path(__file__).parent / "templates"  # package data: the pages' templates and style.css


def number(value) -> str:
    """A cell's text: floats to 3 significant figures, integers exact, booleans yes/no, missing
    (None, NaN, inf) blank, a list or tuple as its items in brackets, anything else as its str()."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(number(v) for v in value) + "]"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            return ""
        if value == 0:
            return "0"
        value = float(f"{value:.2e}")  # rounded first, so 9.996 counts as 10.0
        exp = math.floor(math.log10(abs(value)))
        if exp < -3 or exp >= 6:
            mantissa, e = f"{value:.2e}".split("e")
            return f"{mantissa}e{int(e)}"
        if exp >= 2:
            return f"{value:,.0f}"
        return f"{value:.{2 - exp}f}"
    return str(value)


def is_number(value) -> bool:
    """Whether ``number`` prints ``value`` as a number (right-aligned in a table)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def header(name: str) -> str:
    """A column header: a vocabulary name with its unit (``first_call_s`` -> ``first call (s)``,
    ``metrics.header``); a name already written for display (with a unit in parentheses) as it is."""
    return name if "(" in name else metrics.header(name)


class Cell(NamedTuple):
    """A table cell with CSS classes of its own (``num`` aligns text such as a range as a number)."""

    value: object
    css: str = ""


def html_table(rows, columns=None, caption=None, *, row_classes=None, css="", style=False):
    """One HTML table (``markupsafe.Markup``), as every page and notebook shows one, made to fit the
    page: a statistic's quartiles or interval in its median's cell (``merged``), one time unit per
    column (``time_unit``), long text (``NOTE_CHARS``, ``REMARK_CHARS``) as a numbered note under the
    table; headers from ``header``, cells as ``number`` prints them, everything escaped except
    ``Markup``; a number's cell has the class ``num`` (right-aligned), and so has a header whose column
    holds numbers only. ``rows``: dicts or typed rows (``columns`` picks and orders them; all keys by
    default), lists in the order of ``columns``, or a key table (``results.key_table``: its columns, rows
    and, unless ``caption`` is given, its title). A cell may be a ``Cell``; ``row_classes``: a CSS class per row;
    ``css``: more classes for the table; ``style``: the stylesheet before the table, for a table shown outside the
    pages (notebooks, the explorer)."""
    if isinstance(rows, dict):
        columns, caption, rows = columns or rows["columns"], caption or rows["title"], rows["rows"]
    if columns is None:
        if not all(isinstance(r, Mapping) for r in rows):
            raise ValueError("html_table: rows given as lists need their columns")
        columns = list(dict.fromkeys(k for r in rows for k in r))
    grid = [[r.get(c) for c in columns] if isinstance(r, Mapping) else list(r) for r in rows]
    if any(len(line) != len(columns) for line in grid):
        raise ValueError(f"html_table: a row's cells do not match the {len(columns)} columns {columns}")
    shown = [_scaled(c, grid) for c in merged([str(c) for c in columns])]
    notes: dict[str, int] = {}
    limits = [REMARK_CHARS.get(c.name, NOTE_CHARS) for c in shown]
    body = [[_cell([line[i] for i in c.parts], c.factor, notes, n) for c, n in zip(shown, limits)] for line in grid]
    filled = [[line[i] for line in body if line[i]["text"]] for i in range(len(shown))]
    numeric = [bool(cells) and all("num" in c["css"].split() for c in cells) for cells in filled]
    head = [{"text": _header(c), "css": "num" if n else ""} for c, n in zip(shown, numeric)]
    return render(
        "table.html.j2",
        caption=caption,
        head=head,
        body=list(zip(row_classes or [""] * len(body), body, strict=True)),
        notes=list(notes),
        css=" ".join(["latency-lab", *css.split()]),
        style=style,
    )


NOTE_CHARS = 80  # text longer than this goes to a numbered note under the table
REMARK_CHARS = {"reason": 24, "notes": 24}  # in a column of remarks, text longer than this
RANGES = {metrics.INTERVAL_PARTS: "95% CI", metrics.SPREAD_PARTS: "q1–q3"}  # what a cell's parentheses hold
RANGE_PARTS = {p for parts in RANGES for p in parts}
TIME_UNITS = {"s": 0, "ms": -3, "us": -6}  # powers of ten: a time column is shown in the one it reads best in


class Column(NamedTuple):
    """A shown column: ``name`` for its header, ``parts``: the indexes of the columns it shows (a
    value alone, a value and its range, or a range alone), ``kind``: the range's (``RANGES``),
    ``factor``: what its numbers are multiplied by for its unit."""

    name: str
    parts: tuple[int, ...]
    kind: str = ""
    factor: float = 1.0


def merged(columns: list[str]) -> list[Column]:
    """``columns`` as shown: a statistic whose ``_lo``/``_hi`` (else ``_q1``/``_q3``) columns are there
    too shows them in its own column, ``1.48 (1.33–1.63)``; a range without its statistic shows as one
    column ``1.33–1.63`` where its first part stood, named as its statistic."""
    where = {c: i for i, c in enumerate(columns)}
    ranges = [
        (stat, tuple(where[n] for n in names), kind)
        for stat in dict.fromkeys(map(_statistic, columns))
        for parts, kind in RANGES.items()
        if (names := _range_names(stat, parts)) and all(n in where for n in names)
    ]
    taken, shown = set(), []
    for stat, parts, kind in ranges:  # the first range of a statistic there (its interval) joins it
        if stat in where and where[stat] not in taken:
            taken |= {where[stat], *parts}
            shown.append((where[stat], Column(stat, (where[stat], *parts), kind)))
    for stat, parts, kind in ranges:
        if not taken & set(parts):
            taken |= set(parts)
            shown.append((parts[0], Column(stat, parts, kind)))
    shown += [(i, Column(c, (i,))) for i, c in enumerate(columns) if i not in taken]
    return [c for _, c in sorted(shown)]


def _statistic(name: str) -> str:
    """The statistic a range column belongs to (``wall_q1_ms`` -> ``wall_ms``); any other name itself."""
    base, unit = metrics.split_unit(name)
    part = base.rpartition("_")[2]
    return metrics.join(base.removesuffix(f"_{part}"), unit) if part in RANGE_PARTS and unit else name


def _range_names(name: str, parts: tuple[str, str]) -> tuple[str, str] | None:
    """The two range columns ``parts`` (q1, q3 or lo, hi) of statistic ``name``, None for a name that
    is not a statistic's."""
    if metrics.spread_names(name) is None:
        return None
    base, unit = metrics.split_unit(name)
    return tuple(metrics.join(f"{base}_{p}", unit) for p in parts)


def time_unit(name: str, values) -> tuple[str, float]:
    """Column ``name`` in the time unit (s, ms or µs) its values read best in, and the factor into it:
    the one that prints most of them between 0.01 and 10,000, then its own, then the one that prints
    most at 1 or more (``0.00313 .. 0.385`` ms -> µs; ``2.51e-5 .. 3.34`` s -> ms; ``1.48`` ms stays)."""
    base, unit = metrics.split_unit(name)
    values = [v for v in values if v is not None]
    if unit not in TIME_UNITS or name.endswith("_per_s") or not all(map(is_number, values)):
        return name, 1.0
    factor = {u: 10.0 ** (TIME_UNITS[unit] - power) for u, power in TIME_UNITS.items()}
    sizes = [abs(v) for v in map(metrics.finite, values) if v]
    best = max(
        TIME_UNITS,
        key=lambda u: (
            sum(0.01 <= s * factor[u] < 10_000 for s in sizes),
            u == unit,
            sum(s * factor[u] >= 1 for s in sizes),
        ),
    )
    return metrics.join(base, best), factor[best]


def _scaled(column: Column, grid) -> Column:
    """``column`` in its time unit (``time_unit``), chosen by the values it shows first."""
    name, factor = time_unit(column.name, [line[column.parts[0]] for line in grid])
    return column._replace(name=name, factor=factor)


def _header(column: Column):
    """A shown column's header: ``header``, and under it what its parentheses hold."""
    from markupsafe import Markup

    text = header(column.name)
    if not column.kind:
        return text
    return Markup("{} <small>({})</small>").format(text, column.kind)


def _cell(values: list, factor: float, notes: dict[str, int], limit: int) -> dict:
    """A cell's escaped-on-render text and CSS classes: its value (scaled by ``factor``), with its
    range when it has one; text over ``limit`` characters becomes a mark ``[n]`` of its note in ``notes``."""
    from markupsafe import Markup

    value, own = values[0] if isinstance(values[0], Cell) else (values[0], "")
    scale = lambda v: v * factor if factor != 1 and is_number(v) else v  # noqa: E731
    if len(values) > 1:  # a value and its range (which may wrap under it), or a range alone
        low, high = (number(scale(v)) for v in values[-2:])
        span = f"{low}–{high}" if low and high else ""
        text = span if len(values) == 2 else number(scale(value))
        css = (["num"] if text else []) + (["range"] if len(values) == 3 and text and span else [])
        if "range" in css:
            text = Markup("{} <span>({})</span>").format(text, span)
        return {"text": text, "css": " ".join(css + own.split())}
    text = value if isinstance(value, Markup) else number(scale(value))
    if not isinstance(text, Markup) and not is_number(value):
        if len(text) > limit:
            text, own = f"[{notes.setdefault(text, len(notes) + 1)}]", f"{own} fn"
        else:
            text = _breakable(text)
    return {"text": text, "css": " ".join((["num"] if is_number(value) and text else []) + own.split())}


def _breakable(text: str):
    """``text`` escaped, a word of over 20 characters (``nv_enable_embedding=True``) with places to
    break after ``_``, ``=``, ``:`` and ``+``, so that it need not set its column's width alone."""
    from markupsafe import Markup

    return Markup("").join(
        Markup("<wbr/>").join(map(Markup.escape, re.split(r"(?<=[_=:+])", word))) if len(word) > 20 else word
        for word in re.split(r"(\s+)", text)
    )


@lru_cache(maxsize=1)
def inline_markdown(text: str):
    """A finding's inline Markdown as HTML (escaped first): ``**bold**`` and ```code```, the two the
    notebooks' sentences use; the rest stays text. Template filter ``inline_md``."""
    import html
    import re

    from markupsafe import Markup

    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(str(text), quote=False))
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", out))


def _environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["inline_md"] = inline_markdown
    return env


def render(template: str, **context):
    """``templates/<template>`` rendered with ``context``, every value escaped unless it is ``Markup``;
    the result is ``Markup`` (safe to place in another template)."""
    from markupsafe import Markup

    return Markup(_environment().get_template(template).render(**context))
