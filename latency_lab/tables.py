"""Tables as a paper prints them: 3 significant figures, units in the headers (from the metric
vocabulary, ``metrics.header``), blanks for missing values. Results files keep the raw numbers; only
what is shown goes through here."""

from __future__ import annotations

import math
import numbers

from . import metrics


def number(value) -> str:
    """A cell's text: floats to 3 significant figures, integers exact, booleans yes/no, missing
    (None, NaN, inf) blank, anything else as its str()."""
    if value is None:
        return ""
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
