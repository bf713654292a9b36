"""Notebook 06's fits: least-squares lines with standard errors (``fit_line``), each executor's time
against depth per metric with the slope's interval from the rounds' blocks (``depth_fits``), the fits as
table rows with negative costs flagged (``fit_rows``), the fitted points for charts, and the difference of
two executors' slopes (``slope_difference``)."""

from __future__ import annotations

import math

import numpy as np

from ...core import host_state
from ...core.harness import Rounds
from ...core.row_types import FitRow
from ...pages.tables import number
from .rows import DepthFit

METRICS = ("wall_ms", "host_ms", "kernel_ms")  # fitted against depth
PER_REF = "host_per_ref_x"  # host time per host reference, fitted too


def fit_line(xs, ys) -> dict:
    """Least-squares line ``y = intercept + slope * x``: its coefficients with their standard errors
    (from the residuals; None with fewer than three points), the residual of each point (y - fitted),
    their root mean square and the number of points."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.ndim != 1 or x.shape != y.shape or len(np.unique(x)) < 2:
        raise ValueError(
            f"fit_line needs one y per x and at least two distinct x values, got xs={list(xs)} ys={list(ys)}"
        )
    (intercept, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(x), x]), y, rcond=None)
    residuals = y - (intercept + slope * x)
    residuals[np.abs(residuals) <= 1e-12 * np.abs(y).max()] = 0.0  # rounding noise of an exact fit
    n, sxx = len(x), float(np.sum((x - x.mean()) ** 2))
    s2 = float(np.sum(residuals**2)) / (n - 2) if n > 2 else None
    return {
        "intercept": float(intercept),
        "slope": float(slope),
        "intercept_se": math.sqrt(s2 * (1 / n + x.mean() ** 2 / sxx)) if s2 is not None else None,
        "slope_se": math.sqrt(s2 / sxx) if s2 is not None else None,
        "residuals": residuals.tolist(),
        "rms_residual": float(np.sqrt(np.mean(residuals**2))),
        "n": n,
    }


def blocks_of(timed: Rounds | None, rows: list[dict], metric: str) -> list | None:
    """Per row ``(layers, blocks of metric, fast flags)`` from the rounds, for ``host_state.slope_interval``;
    None when the rounds do not hold every row's blocks (kernel time has none)."""
    if timed is None or metric == "kernel_ms" or any(r.get("key") not in timed.entries for r in rows):
        return None
    return [(r["layers"], getattr(timed.entries[r["key"]], metric), timed.entries[r["key"]].keep()) for r in rows]


def with_interval(line: dict, blocks: list | None) -> dict:
    """The fitted line with its slope's interval (``slope_lo``, ``slope_hi``) from the blocks, when given."""
    if not blocks or len({x for x, *_ in blocks}) < 2:
        return line
    _, lo, hi = host_state.slope_interval([(1, blocks)])
    return {**line, "slope_lo": lo, "slope_hi": hi, "blocks": blocks}


def depth_fits(depth_rows: list[dict], timed: Rounds | None = None) -> list[DepthFit]:
    """Per executor of the depth sweep (``DepthFit``) and per metric (``METRICS``, ``PER_REF``): fixed cost per
    call (at 0 layers) and cost per layer, fitted over its ok points (with the slope's interval from the
    blocks in ``timed``); a metric with fewer than two depths gets no fit, and the executor's ``reason`` says why."""
    fits = []
    for name in dict.fromkeys(r["executor"] for r in depth_rows):
        mine = [r for r in depth_rows if r["executor"] == name]
        ok = [r for r in mine if r["status"] == "ok"]
        lines = {}
        for metric in (*METRICS, PER_REF):
            used = [r for r in ok if r.get(metric) is not None]
            points = [(r["layers"], r[metric]) for r in used]
            line = fit_line(*zip(*points)) if len({x for x, _ in points}) >= 2 else None
            lines[metric] = line and with_interval(
                {**line, "layers": [x for x, _ in points]}, blocks_of(timed, used, metric)
            )
        fit = DepthFit(name, mine[0]["label"], None, **lines)
        if not ok:
            fit.reason = next((r["reason"] for r in mine if r["reason"]), "no ok point")
        elif fit.wall_ms is None:
            fit.reason = "fewer than two depths measured"
        fits.append(fit)
    return fits


def negative_flag(what: str, line: dict, unit: str) -> str | None:
    """The flag of a line whose cost per layer or fixed cost came out negative: not a result (a cost
    cannot be negative; noise, drift or a cache made the points fall); None for a line without one."""
    parts = [
        f"{name} {plus_minus(line[key], line[f'{key}_se'], unit)}"
        for name, key in (("per layer", "slope"), ("fixed", "intercept"))
        if line[key] < 0
    ]
    return f"{what} came out negative ({', '.join(parts)}): flagged, not a result" if parts else None


def fit_rows(fits: list[DepthFit]) -> list[FitRow]:
    """The fits as rows, one per executor and metric: fixed and per-layer cost with standard errors, RMS
    residual and depths; a negative cost is left out and flagged."""
    out = []
    for f in fits:
        for metric in METRICS:
            line, name = getattr(f, metric), metric.removesuffix("_ms")
            if line is None:
                out.append(FitRow(f.executor, name, reason=f.reason or "fewer than two depths measured"))
                continue
            per_ref = (f.host_per_ref_x if metric == "host_ms" else None) or {}
            out.append(
                FitRow(
                    f.executor,
                    name,
                    fixed_ms=line["intercept"] if line["intercept"] >= 0 else None,
                    fixed_se_ms=line["intercept_se"],
                    per_layer_ms=line["slope"] if line["slope"] >= 0 else None,
                    per_layer_se_ms=line["slope_se"],
                    per_layer_lo_ms=line.get("slope_lo"),
                    per_layer_hi_ms=line.get("slope_hi"),
                    rms_residual_ms=line["rms_residual"],
                    per_layer_per_ref_x=per_ref.get("slope"),
                    per_layer_per_ref_lo_x=per_ref.get("slope_lo"),
                    per_layer_per_ref_hi_x=per_ref.get("slope_hi"),
                    depths=", ".join(map(str, line["layers"])),
                    flag=negative_flag(name, line, "ms"),
                )
            )
    return out


def fitted_curve(fits: list[DepthFit], metric: str = "wall_ms") -> list[dict]:
    """Points of each executor's fitted line at its measured depths (for charts beside the data)."""
    return [
        {"executor": f.executor, "layers": x, "ms": line["intercept"] + line["slope"] * x}
        for f in fits
        if (line := getattr(f, metric))
        for x in line["layers"]
    ]


def plus_minus(value: float, se: float | None, unit: str) -> str:
    """``1.23 ± 0.04 ms``, or ``1.23 ms`` without a standard error."""
    return f"{number(value)} ± {number(se)} {unit}" if se is not None else f"{number(value)} {unit}"


def slope_difference(fa: dict, fb: dict) -> dict:
    """``a`` minus ``b`` per layer and whether it is resolved: with both lines' blocks, by the
    difference's interval (``host_state.slope_interval``, resolved when it excludes zero); else by its
    standard error (independent fits: the errors add in quadrature; resolved beyond twice it)."""
    if fa.get("blocks") and fb.get("blocks"):
        slope, lo, hi = host_state.slope_interval([(1, fa["blocks"]), (-1, fb["blocks"])])
        return {
            "slope": slope,
            "se": None,
            "lo": lo,
            "hi": hi,
            "intercept": fa["intercept"] - fb["intercept"],
            "resolved": lo > 0 or hi < 0,
        }
    slope = fa["slope"] - fb["slope"]
    se = (
        math.hypot(fa["slope_se"], fb["slope_se"])
        if fa["slope_se"] is not None and fb["slope_se"] is not None
        else None
    )
    return {
        "slope": slope,
        "se": se,
        "intercept": fa["intercept"] - fb["intercept"],
        "resolved": None if se is None else abs(slope) > 2 * se,
    }
