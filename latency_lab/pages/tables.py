"""Tables as a paper prints them: 3 significant figures, units in the headers (from the metric
vocabulary, ``metrics.header``), blanks for missing values. Results files keep the raw numbers; only
what is shown goes through here. Also the one HTML table (``html_table``: the run's pages, compare
pages, notebooks and the explorer) and the pages' jinja templates and stylesheet (``templates/``)."""

from __future__ import annotations

import math
import numbers
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
    """One HTML table (``markupsafe.Markup``), as every page and notebook shows one: headers from
    ``header``, cells as ``number`` prints them, everything escaped except values that are ``Markup``
    already; a number's cell has the class ``num`` (right-aligned), and so has a header whose column
    holds numbers only. ``rows``: dicts (``columns`` picks and orders them; all keys by default),
    lists in the order of ``columns``, or a key table (``results.key_table``: its columns, rows and,
    unless ``caption`` is given, its title). A cell may be a ``Cell``; ``row_classes``: a CSS class
    per row; ``css``: more classes for the table; ``style``: the stylesheet before the table, for a
    table shown outside the pages (notebooks, the explorer)."""
    if isinstance(rows, dict):
        columns, caption, rows = columns or rows["columns"], caption or rows["title"], rows["rows"]
    if columns is None:
        if not all(isinstance(r, dict) for r in rows):
            raise ValueError("html_table: rows given as lists need their columns")
        columns = list(dict.fromkeys(k for r in rows for k in r))
    grid = [[r.get(c) for c in columns] if isinstance(r, dict) else list(r) for r in rows]
    if any(len(line) != len(columns) for line in grid):
        raise ValueError(f"html_table: a row's cells do not match the {len(columns)} columns {columns}")
    body = [[_cell(v) for v in line] for line in grid]
    filled = [[line[i] for line in body if line[i]["text"]] for i in range(len(columns))]
    numeric = [bool(cells) and all("num" in c["css"].split() for c in cells) for cells in filled]
    head = [{"text": header(str(c)), "css": "num" if n else ""} for c, n in zip(columns, numeric)]
    return render(
        "table.html.j2",
        caption=caption,
        head=head,
        body=list(zip(row_classes or [""] * len(body), body, strict=True)),
        css=" ".join(["latency-lab", *css.split()]),
        style=style,
    )


def _cell(value) -> dict:
    """A cell's escaped-on-render text and CSS classes."""
    from markupsafe import Markup

    value, own = value if isinstance(value, Cell) else (value, "")
    text = value if isinstance(value, Markup) else number(value)
    return {"text": text, "css": " ".join((["num"] if is_number(value) and text else []) + own.split())}


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context):
    """``templates/<template>`` rendered with ``context``, every value escaped unless it is ``Markup``;
    the result is ``Markup`` (safe to place in another template)."""
    from markupsafe import Markup

    return Markup(_environment().get_template(template).render(**context))
