"""Bad input, said early: ``ParameterError`` names the parameter, the value and what is allowed, and
``clip``/``short`` keep any value, however long or deep, to a readable message; ``integer`` and
``is_number`` check the numbers parameters take."""

from __future__ import annotations

import math
import reprlib


class ParameterError(ValueError):
    """A parameter value the suite cannot use; the message names it and the allowed values."""

    def __init__(self, name: str, value, allowed: str, cause: str | None = None):
        """``cause``: what is wrong in the user's words, said first, the parameter and what it allows after it."""
        self.name, self.value, self.allowed, self.cause = name, value, allowed, cause
        if cause:  # the cause names what is wrong: the value's repr would only repeat it, at length
            super().__init__(f"{cause} (invalid parameter {clip(str(name), 60)}: allowed {allowed})")
        else:
            super().__init__(f"invalid parameter {clip(str(name), 60)}={short(value)}: allowed {allowed}")


def clip(text: str, limit: int = 80, length: int | None = None) -> str:
    """``text``, or for a longer one its start and end around an ellipsis, with its length (``length``:
    of the value ``text`` shows, where that is not ``text`` itself)."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}…{text[-8:]} ({len(text) if length is None else length:,} characters)"


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxstring, _REPR.maxlong = 4, 12, 12, 10**6, 10**6


def short(value, limit: int = 80) -> str:
    """``repr(value)`` for an error message, shortened: nesting and long lists cut by ``reprlib``
    (so no value, however deep, can break the message), long text by ``clip``, which counts a
    string's own characters (not its quotes)."""
    return clip(_REPR.repr(value), limit, len(value) if isinstance(value, str) else None)


def integer(name: str, value, minimum: int, maximum: int | None = None) -> int:
    """``value`` when it is an integer (not a bool) in ``minimum``..``maximum``, else ParameterError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        raise ParameterError(
            name, value, f"an integer >= {minimum}" if maximum is None else f"an integer {minimum}..{maximum}"
        )
    return value


def is_number(value) -> bool:
    """Whether ``value`` is a finite int or float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
