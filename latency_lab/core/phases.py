"""Where a notebook's time goes: wall seconds per phase (``PHASES``), summed over this process, each
second counted once, in the innermost phase open at the time. The harness opens them (a build and
its first call, warm-up calls, timed rounds, profiling, writing results, ending worker processes);
``results.save`` writes the totals beside the results (``<notebook>.phases.json``), and
``tools/time_split.py`` reads them with the runner's seconds per notebook."""

from __future__ import annotations

import time
from contextlib import contextmanager

PHASES = ("build", "warm-up", "rounds", "profile", "write", "close")

_seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
_open: list[list] = []  # [name, perf_counter() since which its time is counted], innermost last


@contextmanager
def phase(name: str):
    """Count the wall time inside the block to phase ``name`` (one of ``PHASES``), less the time of
    phases opened inside it."""
    if name not in _seconds:
        raise ValueError(f"phase {name!r}: allowed {', '.join(PHASES)}")
    now = time.perf_counter()
    if _open:
        outer = _open[-1]
        _seconds[outer[0]] += now - outer[1]
    _open.append([name, now])
    try:
        yield
    finally:
        now = time.perf_counter()
        _seconds[name] += now - _open.pop()[1]
        if _open:
            _open[-1][1] = now


def totals() -> dict[str, float]:
    """Seconds per phase so far in this process (phases still open count up to now)."""
    seconds, now = dict(_seconds), time.perf_counter()
    if _open:
        seconds[_open[-1][0]] += now - _open[-1][1]
    return {name: round(s, 3) for name, s in seconds.items()}
