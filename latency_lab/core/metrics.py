"""The suite's metric vocabulary: snake_case names with a unit suffix (``wall_ms``, ``host_us``,
``first_call_s``, ``kernels_per_step``), a statistic with its spread (``Stat``), and the one place that
turns a name into a table header (``header``). Results files, tables, the index and ``compare`` all
speak these names; nothing else guesses which column is a number.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

SCHEMA_VERSION = 2  # results files: 2 = this vocabulary; files without a version are the first layout

NOISY_REL_SPREAD = 0.10  # a statistic whose IQR exceeds 10% of its median is flagged as noisy

# unit suffix -> how a header prints it
UNITS = {"ms": "ms", "us": "µs", "s": "s", "mib": "MiB", "mb": "MB", "gbps": "GB/s", "pct": "%", "x": "×"}
# count-like suffixes: numbers without a unit
COUNTS = ("per_step", "per_call", "count", "calls", "blocks", "rounds", "kernels", "n")
# spread parts of a statistic: ``wall_ms`` -> ``wall_q1_ms``, ``wall_q3_ms``
SPREAD_PARTS = ("q1", "q3")
# the statistic's own 95% interval (bootstrap): ``wall_ms`` -> ``wall_lo_ms``, ``wall_hi_ms``
INTERVAL_PARTS = ("lo", "hi")
# words a header spells out differently from its name
WORDS = {
    "gpu": "GPU",
    "cpu": "CPU",
    "iqr": "IQR",
    "rel": "relative",
    "err": "error",
    "tpot": "time per output token",
    "nvfusion": "nvFusion",
    "vs": "vs.",
    "rms": "RMS",
    "se": "SE",
    "ref": "reference",
}


@dataclass(frozen=True)
class Stat:
    """A statistic over samples: median, quartiles, extremes, mean, std and their number. Read back from a
    results row (``from_flat``) it holds what the row does: its median (a count: the number alone), q1 and
    q3, its interval and ``fast_only``, each None where the row does not say."""

    median: float | None
    q1: float | None
    q3: float | None
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    n: int | None
    lo: float | None = None  # the statistic's own 95% interval (host_state.interval)
    hi: float | None = None
    fast_only: bool | None = None  # the samples were the host's fast-state ones (host_state.select)

    @classmethod
    def of(cls, samples) -> Stat:
        xs = sorted(float(x) for x in samples)
        if not xs:
            raise ValueError("Stat.of() needs at least one sample")
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else (xs[0],) * 3
        return cls(
            statistics.median(xs),
            q1,
            q3,
            xs[0],
            xs[-1],
            statistics.fmean(xs),
            statistics.stdev(xs) if len(xs) > 1 else 0.0,
            len(xs),
        )

    @classmethod
    def headline(cls, samples, keep=None) -> Stat:
        """The statistic of the samples (in time order) the host ran fast for (``keep``, one flag each;
        all when None or too few), with its own 95% interval (``host_state.interval``)."""
        from . import host_state

        xs, fast_only = host_state.select(samples, keep) if keep is not None else (list(samples), None)
        lo, hi = host_state.interval(xs)
        return replace(cls.of(xs), lo=lo, hi=hi, fast_only=fast_only)

    @classmethod
    def from_flat(cls, row: dict, name: str) -> Stat | None:
        """Metric ``name`` of a results ``row``, the inverse of ``flat``: the median under ``name`` (None
        where it is not a number), ``name_q1``/``name_q3`` and ``name_lo``/``name_hi`` with the unit suffix
        kept last (each pair only where both are numbers), and ``fast_only_name(name)``. The row holds no
        more: min, max, mean, std and n are None. None where the row has no column ``name``."""
        if name not in row:
            return None
        base, unit = split_unit(name)
        q1, q3, lo, hi = (row.get(join(f"{base}_{part}", unit)) for part in SPREAD_PARTS + INTERVAL_PARTS)
        value = row[name] if is_number(row[name]) else None
        return cls(value, *_both(q1, q3), None, None, None, None, None, *_both(lo, hi), row.get(fast_only_name(name)))

    def with_interval(self, lo, hi) -> Stat:
        """The same statistic with the 95% interval ``[lo, hi]`` (none unless both are numbers)."""
        lo, hi = _both(lo, hi)
        return replace(self, lo=lo, hi=hi)

    @property
    def spread(self) -> tuple[float, float] | None:
        """``(q1, q3)``; None where it has none (a count, a first call read back from a row)."""
        return None if self.q1 is None else (self.q1, self.q3)

    @property
    def interval(self) -> tuple[float, float] | None:
        """``(lo, hi)``, the statistic's own 95% interval; None where it has none."""
        return None if self.lo is None else (self.lo, self.hi)

    @classmethod
    def from_dict(cls, d: dict) -> Stat:
        """The statistic back from its ``to_dict`` (derived keys ignored)."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_spread(self) -> float:
        """IQR over the median (0 for a zero median)."""
        return self.iqr / self.median if self.median else 0.0

    @property
    def noisy(self) -> bool:
        return bool(self.median and self.rel_spread > NOISY_REL_SPREAD)

    def scaled(self, factor: float) -> Stat:
        """The same statistic in another unit (``factor`` > 0), or per item (1 / items)."""
        lo, hi = (None, None) if self.lo is None else sorted((self.lo * factor, self.hi * factor))
        return Stat(
            *(v * factor for v in (self.median, self.q1, self.q3, self.min, self.max, self.mean, self.std)),
            self.n,
            lo,
            hi,
            self.fast_only,
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "iqr": self.iqr, "rel_spread": self.rel_spread, "noisy": self.noisy}

    def flat(self, name: str) -> dict:
        """``{name: median, name_q1: q1, name_q3: q3}`` with the unit suffix kept last: ``wall_ms`` ->
        ``wall_ms``, ``wall_q1_ms``, ``wall_q3_ms``; with an interval its ``_lo``/``_hi`` too, and
        ``wall_fast_only`` where the headline chose its samples (``fast_only``)."""
        base, unit = split_unit(name)
        parts = SPREAD_PARTS + (INTERVAL_PARTS if self.lo is not None else ())
        fast = {} if self.fast_only is None else {fast_only_name(name): self.fast_only}
        return {name: self.median, **{join(f"{base}_{part}", unit): getattr(self, part) for part in parts}, **fast}


def is_number(value) -> bool:
    """Whether ``value`` is a number (an int or a float, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _both(first, second) -> tuple:
    """``(first, second)`` where both are numbers, else ``(None, None)``."""
    return (first, second) if is_number(first) and is_number(second) else (None, None)


def split_unit(name: str) -> tuple[str, str | None]:
    """``wall_q1_ms`` -> (``wall_q1``, ``ms``); a name without a unit suffix -> (name, None)."""
    base, _, suffix = name.rpartition("_")
    return (base, suffix) if base and suffix in UNITS else (name, None)


FLAG = "_fast_only"  # a headline's flag: over the host's fast-state blocks (True) or all blocks (False)


def fast_only_name(name: str) -> str:
    """``wall_ms`` -> ``wall_fast_only``: whether that headline is over the host's fast-state blocks."""
    return f"{split_unit(name)[0]}{FLAG}"


def is_flag(name: str) -> bool:
    """Whether a column is a headline's ``fast_only`` flag (kept for ``compare``, not a number to show)."""
    return name.endswith(FLAG)


def join(base: str, unit: str | None) -> str:
    return f"{base}_{unit}" if unit else base


def is_metric(name: str) -> bool:
    """Whether a column name is a measured quantity (a unit suffix or a count), not an identity."""
    return split_unit(name)[1] is not None or name.endswith(COUNTS)


def spread_names(name: str) -> tuple[str, str] | None:
    """The q1/q3 column names of metric ``name``; None for a name that is itself a spread part."""
    base, unit = split_unit(name)
    if unit is None or base.endswith(tuple(f"_{p}" for p in SPREAD_PARTS + INTERVAL_PARTS)):
        return None
    q1, q3 = (join(f"{base}_{p}", unit) for p in SPREAD_PARTS)
    return q1, q3


def interval_names(name: str) -> tuple[str, str] | None:
    """The lo/hi column names of metric ``name``; None for a name that is itself a spread part."""
    if spread_names(name) is None:
        return None
    base, unit = split_unit(name)
    lo, hi = (join(f"{base}_{p}", unit) for p in INTERVAL_PARTS)
    return lo, hi


def header(name: str) -> str:
    """A table header from a vocabulary name: ``wall_q1_ms`` -> ``wall q1 (ms)``, ``gpu_busy_pct`` ->
    ``GPU busy (%)``, ``kernels_per_step`` -> ``kernels per step``. Other names print as they are,
    underscores as spaces."""
    if name.endswith("_per_s"):  # a rate: tokens_per_s -> tokens/s
        return header(name.removesuffix("_per_s")) + "/s"
    base, unit = split_unit(name)
    words = " ".join(WORDS.get(w, w) for w in base.split("_"))
    return f"{words} ({UNITS[unit]})" if unit else words


def finite(value) -> float | None:
    """``value`` as a float when it is a finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def host_bound(host_ms: float | None, kernel_ms: float | None) -> bool | None:
    """Whether a steady-state step is host-bound: the host takes at least as long to issue a step as
    its kernels take to run (host time per step >= kernel time per step), so the GPU waits for the
    host. None where either is unknown (no kernels on a CPU)."""
    return None if host_ms is None or kernel_ms is None else host_ms >= kernel_ms
