"""The one verdict vocabulary (docs/method.md): every judgement the suite prints (``compare``'s numbers,
05's grades of the seed's claims, 07's levers, 08's builds) is one of four words, then a colon and its
reason: ``changed: B higher by 4.1% (p 0.001, ...)``, ``same: holds``."""

from __future__ import annotations

CHANGED, SAME, NOT_COMPARABLE, NOT_JUDGED = "changed", "same", "not comparable", "not judged"
WORDS = (CHANGED, SAME, NOT_COMPARABLE, NOT_JUDGED)
TOO_NOISY = "too noisy to judge"  # a ``not judged`` whose sentence starts with its reason


def phrase(word: str, reason: str | None = None) -> str:
    """A verdict as printed: its word, then its reason after a colon."""
    if word not in WORDS:
        raise ValueError(f"invalid verdict {word!r}: allowed {', '.join(WORDS)}")
    return f"{word}: {reason}" if reason else word


def read_word(text: str) -> str:
    """The word of a printed verdict (``too noisy to judge: ...`` is ``not judged``)."""
    if text.startswith(TOO_NOISY):
        return NOT_JUDGED
    word = text.split(":", 1)[0]
    if word not in WORDS:
        raise ValueError(f"not a verdict: {text!r} (allowed words {', '.join(WORDS)})")
    return word
