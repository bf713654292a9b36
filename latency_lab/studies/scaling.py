"""Notebook 06, scaling: ``run(params) -> Result`` (rows, one per point and executor, fits, key table,
findings), the notebook's charts, and ``Result.save``.

Three sweeps, declared as data (``sweeps``): depth (``depths`` layers at ``seq_len`` tokens), prompt
length (``prompt_lengths`` tokens at ``layers`` layers) and the decode step (one token against a
``StaticCache`` pre-filled with ``seq_len`` prompt tokens, at ``layers`` layers). Every (point,
executor) is built and measured right after its first call (``sweep.build``; the point the depth and
prompt sweeps share is built once), then all of them are timed in the same
interleaved rounds with the host reference, each decode build's greedy loop as a probe after its block
(``probes``). From the rows: time against depth as least-squares lines with the slope's standard
error, the first call against depth over cold compiles only, prefill against prompt length, decode,
and findings that compare rows within rounds.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ..core import environment, harness, host_state, model, registry, results, sweep, timing
from ..core.harness import Rounds
from ..core.metrics import Stat
from ..core.parameters import Params
from ..core.rows import ScalingRow
from ..pages.tables import number

METRICS = ("wall_ms", "host_ms", "kernel_ms")  # fitted against depth
PER_REF = "host_per_ref_x"  # host time per host reference, fitted too
FIRST_CALL_FIT_DEPTHS = 3  # cold first calls at this many depths or more get a line
# Compared within rounds at every depth and in decode: (a, b) reads "a / b".
PAIRS = (
    ("thunder", "torch.compile"),
    ("thunder:cudagraphs", "torch.compile:reduce-overhead"),
    ("thunder.compile:reduce-overhead", "torch.compile:reduce-overhead"),
)


@dataclass
class DecodeCase(sweep.Case):
    """A decode point's case: its pre-filled cache and step (``model.build_decode``) and the greedy loop's
    length."""

    decode: model.DecodeSetup | None = None
    new_tokens: int = 0


def decode_case(params, prompt_tokens: int, bandwidth: float | None) -> DecodeCase:
    """One token at ``cache_position=[prompt_tokens]`` against a ``StaticCache`` pre-filled by an eager
    prefill, at ``params.layers`` layers; the executors share the cache (each call writes its own
    position before it attends to it, so no call reads what another executor wrote). Its output check
    is the step's logits against eager's; its extra step runs the greedy loop once and counts the
    tokens that equal eager's. The floor counts one token's weights, logits and K/V written."""
    setup, new = model.build(params), params.decode_tokens
    decode = model.build_decode(setup, prompt_tokens, new)
    reference = model.logits_of(setup.model(**decode.kwargs)).detach().clone()  # re-writes the same slot
    eager_logits: list = []
    eager_tokens = generated_tokens(model.greedy_decode(setup.model, decode, new, eager_logits))
    step = replace(params, seq_len=1, cache_mode="static")
    floor = model.bandwidth_floor(model.Setup(step, setup.config, setup.model, {}), bandwidth)["floor_ms_measured"]

    def check(p) -> dict:
        return harness.check_output(p, reference, params.dtype, params.layers)

    def greedy_tokens(p) -> dict:
        got = generated_tokens(model.greedy_decode(p.fn, decode, new))
        return {"match": (n := agreement(got, eager_tokens)), **divergence(eager_logits, got, eager_tokens, n)}

    return DecodeCase(
        setup.model, decode.kwargs, check, floor, extra={"tokens": greedy_tokens}, decode=decode, new_tokens=new
    )


def sweeps(params, executors, bandwidth: float | None) -> dict[str, sweep.Sweep]:
    """The run's three sweeps: prefill points are ``sweep.model_case`` at their layers and tokens, the
    decode point a ``decode_case``. The depth and prompt sweeps share the point at ``layers`` layers
    and ``seq_len`` tokens (built once)."""

    def prefill(point: dict) -> sweep.Case:
        return sweep.model_case(replace(params, layers=point["layers"], seq_len=point["tokens"]), bandwidth)

    def decode(point: dict) -> DecodeCase:
        return decode_case(replace(params, layers=point["layers"]), point["prompt_tokens"], bandwidth)

    return {
        "depth": sweep.Sweep("depth", {"layers": params.depths, "tokens": (params.seq_len,)}, executors, prefill),
        "prompt": sweep.Sweep(
            "prompt", {"layers": (params.layers,), "tokens": params.prompt_lengths}, executors, prefill
        ),
        "decode": sweep.Sweep(
            "decode",
            {"layers": (params.layers,), "tokens": (1,), "prompt_tokens": (params.seq_len,)},
            executors,
            decode,
        ),
    }


def probes(built: list[sweep.Built], params) -> dict[str, dict]:
    """Per decode build: its greedy loop of ``decode_tokens`` tokens, timed once after its block in
    every round (``timing.block`` of one loop: CUDA events on a GPU, one sync at its end)."""

    def loop(b: sweep.Built):
        d, new, fn = b.case.decode, b.case.new_tokens, b.prepared.fn
        return lambda: timing.block(lambda: model.greedy_decode(fn, d, new), {}, params.device, 1)

    return {b.key: {"loop": loop(b)} for b in built if isinstance(b.case, DecodeCase) and b.prepared.ok}


def generated_tokens(generated: list[torch.Tensor]) -> list[list[int]]:
    return torch.cat(generated, dim=1).tolist()


def agreement(generated: list[list[int]], reference: list[list[int]]) -> int:
    """How many generated tokens, from the first on, equal eager's (all sequences of the batch)."""
    agree = 0
    for got, ref in zip(zip(*generated), zip(*reference)):
        if got != ref:
            break
        agree += 1
    return agree


NEAR_TIE_ULPS = 4  # eager's margin between the two tokens, in its dtype's ulps at the logits' size


def divergence(logits: list, got: list[list[int]], reference: list[list[int]], agree: int) -> dict:
    """Where an executor's greedy tokens first differ from eager's (step ``agree``): eager's logit
    margin there between its token and the executor's (largest over the batch), in units of the
    logits' dtype resolution at their size (ulps), and whether that is a near-tie (at most
    ``NEAR_TIE_ULPS``: a reordered reduction can flip it) rather than a wrong result. Empty when
    every token agrees."""
    if agree >= len(logits):
        return {}
    step = logits[agree]
    margins, ulps = [], []
    for b, (mine, ref) in enumerate(zip(got, reference)):
        if mine[agree] != ref[agree]:
            row = step[b].float()
            margin = (row[ref[agree]] - row[mine[agree]]).item()
            size = max(abs(row[ref[agree]].item()), torch.finfo(step.dtype).tiny)
            ulp = torch.finfo(step.dtype).eps * 2 ** math.floor(math.log2(size))
            margins.append(margin)
            ulps.append(margin / ulp)
    worst = max(range(len(ulps)), key=ulps.__getitem__)
    return {
        "divergence_margin": margins[worst],
        "divergence_ulps": ulps[worst],
        "near_tie": ulps[worst] <= NEAR_TIE_ULPS,
    }


def decode_numbers(loops: list | None, tokens: int, batch_size: int) -> dict:
    """From the greedy loop's blocks (one loop each): the loop's wall and the time per output token (loop /
    tokens) as statistics, and tokens per second (batch x tokens / loop median): ``rows.ScalingRow``'s fields."""
    if not loops:
        return {"decode_tokens": tokens, "loop_ms": None, "tpot_ms": None, "tokens_per_s": None}
    loop = Stat.of(b.wall_ms for b in loops)
    return {
        "decode_tokens": tokens,
        "loop_ms": loop,
        "tpot_ms": loop.scaled(1 / tokens),
        "tokens_per_s": batch_size * tokens / (loop.median / 1e3),
    }


def rows(sweeps_: dict[str, sweep.Sweep], built: list[sweep.Built], timed: Rounds, params) -> list[dict]:
    """One row per build (``rows.ScalingRow``): ``sweep.row``'s columns, its key in the rounds,
    ``sweep`` (the sweeps its point belongs to: ``depth, prompt`` for the shared one), and for a decode
    build its loop's numbers and how many of its greedy tokens equal eager's."""
    out = []
    for b in built:
        names = [name for name, s in sweeps_.items() if sweep.label(b.point) in map(sweep.label, s.points())]
        decode, tokens = {}, b.measured.get("tokens") or {}
        if isinstance(b.case, DecodeCase):
            t = timed.timed.get(b.key)
            decode = decode_numbers(t.probes.get("loop") if t else None, b.case.new_tokens, params.batch_size)
        row = sweep.row(
            b,
            timed,
            ScalingRow,
            sweep=", ".join(names),
            step="decode" if decode else "prefill",
            key=b.key,
            **decode,
            tokens_match_eager=tokens.get("match"),
            divergence_ulps=tokens.get("divergence_ulps"),
            near_tie=tokens.get("near_tie"),
        )
        out.append(row.as_dict())
    return out


def of(table: list[dict], name: str) -> list[dict]:
    """The rows of sweep ``name``."""
    return [r for r in table if name in r["sweep"].split(", ")]


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
    if timed is None or metric == "kernel_ms" or any(r.get("key") not in timed.timed for r in rows):
        return None
    return [(r["layers"], getattr(timed.timed[r["key"]], metric), timed.timed[r["key"]].keep()) for r in rows]


def with_interval(line: dict, blocks: list | None) -> dict:
    """The fitted line with its slope's interval (``slope_lo``, ``slope_hi``) from the blocks, when given."""
    if not blocks or len({x for x, *_ in blocks}) < 2:
        return line
    _, lo, hi = host_state.slope_interval([(1, blocks)])
    return {**line, "slope_lo": lo, "slope_hi": hi, "blocks": blocks}


def depth_fits(depth_rows: list[dict], timed: Rounds | None = None) -> list[dict]:
    """Per executor of the depth sweep and per metric (``METRICS``): fixed cost per call (at 0 layers)
    and cost per layer, fitted over its ok points (with the slope's interval from the blocks in
    ``timed``); a metric with fewer than two depths gets no fit, and the executor's ``reason`` says why."""
    fits = []
    for name in dict.fromkeys(r["executor"] for r in depth_rows):
        mine = [r for r in depth_rows if r["executor"] == name]
        ok = [r for r in mine if r["status"] == "ok"]
        fit = {"executor": name, "label": mine[0]["label"], "reason": None}
        for metric in (*METRICS, PER_REF):
            used = [r for r in ok if r.get(metric) is not None]
            points = [(r["layers"], r[metric]) for r in used]
            line = fit_line(*zip(*points)) if len({x for x, _ in points}) >= 2 else None
            fit[metric] = line and with_interval(
                {**line, "layers": [x for x, _ in points]}, blocks_of(timed, used, metric)
            )
        if not ok:
            fit["reason"] = next((r["reason"] for r in mine if r["reason"]), "no ok point")
        elif fit["wall_ms"] is None:
            fit["reason"] = "fewer than two depths measured"
        fits.append(fit)
    return fits


def negative_flag(what: str, line: dict, unit: str) -> str | None:
    """The flag of a line whose cost per layer or fixed cost came out negative: not a result (a cost
    cannot be negative; noise, drift or a cache made the points fall); None for a line without one."""
    parts = [
        f"{name} {_pm(line[key], line[f'{key}_se'], unit)}"
        for name, key in (("per layer", "slope"), ("fixed", "intercept"))
        if line[key] < 0
    ]
    return f"{what} came out negative ({', '.join(parts)}): flagged, not a result" if parts else None


def fit_rows(fits: list[dict]) -> list[dict]:
    """The fits as rows, one per executor and metric: fixed and per-layer cost with standard errors, RMS
    residual and depths; a negative cost is left out and flagged."""
    out = []
    for f in fits:
        for metric in METRICS:
            line = f[metric]
            row = {"executor": f["executor"], "metric": metric.removesuffix("_ms")}
            if line is None:
                out.append({**row, "reason": f["reason"] or "fewer than two depths measured"})
                continue
            flag = negative_flag(row["metric"], line, "ms")
            out.append(
                {
                    **row,
                    "fixed_ms": line["intercept"] if line["intercept"] >= 0 else None,
                    "fixed_se_ms": line["intercept_se"],
                    "per_layer_ms": line["slope"] if line["slope"] >= 0 else None,
                    "per_layer_se_ms": line["slope_se"],
                    "per_layer_lo_ms": line.get("slope_lo"),
                    "per_layer_hi_ms": line.get("slope_hi"),
                    "rms_residual_ms": line["rms_residual"],
                    **(per_ref_columns(f[PER_REF]) if metric == "host_ms" and f.get(PER_REF) else {}),
                    "depths": ", ".join(map(str, line["layers"])),
                    "flag": flag,
                }
            )
    return out


def per_ref_columns(line: dict) -> dict:
    """The host fit's per-layer cost in units of the host reference, with its interval."""
    return {
        "per_layer_per_ref_x": line["slope"],
        "per_layer_per_ref_lo_x": line.get("slope_lo"),
        "per_layer_per_ref_hi_x": line.get("slope_hi"),
    }


def fitted_curve(fits: list[dict], metric: str = "wall_ms") -> list[dict]:
    """Points of each executor's fitted line at its measured depths (for charts beside the data)."""
    return [
        {"executor": f["executor"], "layers": x, "ms": f[metric]["intercept"] + f[metric]["slope"] * x}
        for f in fits
        if f[metric]
        for x in f[metric]["layers"]
    ]


def _ms(value) -> str:
    return f"{number(value)} ms"


def _pm(value: float, se: float | None, unit: str) -> str:
    """``1.23 ± 0.04 ms``, or ``1.23 ms`` without a standard error."""
    return f"{number(value)} ± {number(se)} {unit}" if se is not None else f"{number(value)} {unit}"


def _layers(n: int) -> str:
    return f"{n} layer{'s' if n != 1 else ''}"


def _line(line: dict, unit: str = "ms") -> str:
    """``fixed + per layer``: the slope with its interval from the blocks where measured, else ± SE."""
    if line.get("slope_lo") is not None:
        per_layer = (
            f"{number(line['slope'])} {unit} (interval {number(line['slope_lo'])} to {number(line['slope_hi'])})"
        )
    else:
        per_layer = _pm(line["slope"], line["slope_se"], unit)
    return f"{_pm(line['intercept'], line['intercept_se'], unit)} + {per_layer} per layer"


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


def versus_text(a: str, fa: dict, b: str, fb: dict, depths: list[int]) -> str:
    """``a`` against ``b`` by their depth fits: the per-layer difference with its standard error, and
    whether the difference grows or shrinks with depth, said only when it exceeds twice its error."""
    d = slope_difference(fa, fb)
    at_first = d["intercept"] + d["slope"] * min(depths)
    if "lo" in d:
        text = f"{a} − {b}: {number(d['slope'])} ms per layer (interval {number(d['lo'])} to {number(d['hi'])})"
        if not d["resolved"]:
            return text + " (not resolved: the interval includes zero)."
        trend = "grows" if d["slope"] * at_first > 0 else "shrinks"
        return text + f": the difference {trend} with depth (the interval excludes zero)."
    text = f"{a} − {b}: {'+' if d['slope'] >= 0 else '−'}{_pm(abs(d['slope']), d['se'], 'ms')} per layer"
    if d["resolved"] is None:
        return text + " (not resolved: two depths give no standard error)."
    if not d["resolved"]:
        return text + " (not resolved: within twice its standard error)."
    trend = "grows" if d["slope"] * at_first > 0 else "shrinks"
    return text + f": the difference {trend} with depth (more than twice its standard error)."


def cost_text(fits: list[dict], seq_len: int) -> str:
    """Wall time = fixed + per layer x layers per executor, with standard errors and RMS residual; a
    negative per-layer cost flagged; Thunder against torch.compile (``PAIRS``) by the fits."""
    fitted = [f for f in fits if f["wall_ms"]]
    if not fitted:
        return (
            f"No depth fit of the prefill ({seq_len} tokens): fewer than two depths measured per executor "
            "(the measured points are in the key table and the sentences above)."
        )
    depths = sorted({x for f in fitted for x in f["wall_ms"]["layers"]})
    parts = []
    for f in fitted:
        line = f["wall_ms"]
        flag = negative_flag("wall", line, "ms")
        fit = (
            f"RMS residual {_ms(line['rms_residual'])}"
            if line["slope_se"] is not None
            else "two depths: an exact line, no standard error"
        )
        parts.append(f"{f['executor']}: {flag}" if flag else f"{f['executor']} {_line(line)} ({fit})")
    text = (
        f"Wall time of the prefill ({seq_len} tokens) = fixed + per layer × layers, least squares over "
        f"{', '.join(map(str, depths))} layers: {'; '.join(parts)}."
    )
    by = {f["executor"]: f["wall_ms"] for f in fitted}
    text += "".join(f" {versus_text(a, by[a], b, by[b], depths)}" for a, b in PAIRS if a in by and b in by)
    missing = [f"{f['executor']} ({f['reason']})" for f in fits if not f["wall_ms"]]
    return text + (f" No fit: {'; '.join(missing)}." if missing else "")


def host_kernel_text(fits: list[dict], seq_len: int) -> str | None:
    """Per-layer host and kernel costs where both were fitted (kernel time needs a GPU); negatives flagged."""
    both = [f for f in fits if f["host_ms"] and f["kernel_ms"]]
    if not both:
        return None
    parts = []
    for f in both:
        flags = [
            flag
            for flag in (negative_flag("host", f["host_ms"], "ms"), negative_flag("kernel", f["kernel_ms"], "ms"))
            if flag
        ]
        parts.append(
            f"{f['executor']} "
            + (
                "; ".join(flags)
                if flags
                else f"{_pm(f['host_ms']['slope'], f['host_ms']['slope_se'], 'ms')} host, "
                f"{_pm(f['kernel_ms']['slope'], f['kernel_ms']['slope_se'], 'ms')} kernel"
            )
        )
    return f"Per layer of the prefill ({seq_len} tokens), host vs kernel time: {'; '.join(parts)}."


def _ratio(timed: Rounds, a: dict, b: dict) -> tuple[str, Stat] | None:
    """``x1.23 within rounds, q1–q3 x1.20–x1.26``: row ``a`` over row ``b``, both timed in the same
    rounds, and the ratio; None when the rounds hold no ratio."""
    r = timed.ratio(a["key"], b["key"])
    if r is None:
        return None
    return f"x{number(r.median)} within rounds, q1–q3 x{number(r.q1)}–x{number(r.q3)}", r


def _moved(timed: Rounds, ratios: list[Stat]) -> str:
    """``harness.host_moved_note`` for the smallest difference a sentence reports (said once)."""
    return harness.host_moved_note(timed, min(abs(r.median - 1) for r in ratios)) if ratios else ""


def _point_part(r: dict) -> str:
    """An executor's point: wall, then host time (where it differs: on a CPU it is the wall), kernel time
    and first call."""
    extra = [
        f"host {_ms(r['host_ms'])}" if r["host_ms"] not in (None, r["wall_ms"]) else None,
        f"kernel {_ms(r['kernel_ms'])}" if r["kernel_ms"] is not None else None,
        f"first call {number(r['first_call_s'])} s" if r["first_call_s"] is not None else None,
    ]
    extra = [e for e in extra if e]
    return f"{r['executor']} {_ms(r['wall_ms'])} wall" + (f" ({', '.join(extra)})" if extra else "")


def pairs_text(at: list[dict], timed: Rounds) -> str:
    """The ``PAIRS`` among ``at`` (rows of one point), as within-round ratios."""
    by = {r["executor"]: r for r in at if r["wall_ms"] is not None}
    found = [
        (f"{a} / {b} ({x[0]})", x[1]) for a, b in PAIRS if a in by and b in by if (x := _ratio(timed, by[a], by[b]))
    ]
    return f" {'; '.join(t for t, _ in found)}{_moved(timed, [r for _, r in found])}." if found else ""


def depth_text(depth_rows: list[dict], layers: int, timed: Rounds) -> str:
    """Every executor at one depth of the prefill: wall, host, kernel time and first call, and the
    ``PAIRS`` within rounds; the points that did not run, with their status."""
    at = [r for r in depth_rows if r["layers"] == layers]
    ran = sorted((r for r in at if r["wall_ms"] is not None), key=lambda r: r["wall_ms"])
    head = f"At {_layers(layers)} (prefill, {at[0]['tokens']} tokens)" if at else f"At {_layers(layers)}"
    if not ran:
        return f"{head}: no executor measured."
    missing = [f"{r['executor']} {r['status']}" for r in at if r["wall_ms"] is None]
    return (
        f"{head}: {'; '.join(_point_part(r) for r in ran)}."
        + (f" Not measured: {', '.join(missing)}." if missing else "")
        + pairs_text(at, timed)
    )


def prefill_text(prompt_rows: list[dict], timed: Rounds) -> str:
    """Per executor: prefill wall at the shortest and the longest prompt, and their ratio within rounds."""
    layers = prompt_rows[0]["layers"] if prompt_rows else 0
    parts, ratios = [], []
    for name in dict.fromkeys(r["executor"] for r in prompt_rows):
        ok = sorted(
            (r for r in prompt_rows if r["executor"] == name and r["wall_ms"] is not None), key=lambda r: r["tokens"]
        )
        if len(ok) >= 2 and (found := _ratio(timed, ok[-1], ok[0])):
            ratios.append(found[1])
            parts.append(
                f"{name} {_ms(ok[0]['wall_ms'])} at {ok[0]['tokens']} → {_ms(ok[-1]['wall_ms'])} at "
                f"{ok[-1]['tokens']} tokens ({found[0]})"
            )
    text = "; ".join(parts) if parts else "fewer than two lengths measured per executor"
    return f"Prefill wall by prompt length at {_layers(layers)}: {text}{_moved(timed, ratios)}."


def decode_text(decode_rows: list[dict], timed: Rounds) -> str:
    """Decode step, time per output token and tokens per second per executor; ``PAIRS`` within rounds."""
    ok = [r for r in decode_rows if r["wall_ms"] is not None]
    if not ok:
        return "No executor completed the decode step here."
    r0 = ok[0]
    parts = [
        f"{r['executor']} {_ms(r['wall_ms'])} per step"
        + (
            f"; the loop {_ms(r['tpot_ms'])} per output token, {number(r['tokens_per_s'])} tokens/s"
            if r["tpot_ms"]
            else ""
        )
        for r in ok
    ]
    return (
        f"Decode at {_layers(r0['layers'])} (prompt {r0['prompt_tokens']} tokens, StaticCache; the step timed "
        f"in rounds, and a greedy loop of {r0['decode_tokens']} tokens): {'; '.join(parts)}."
        + pairs_text(decode_rows, timed)
        + tokens_text(ok)
    )


def tokens_text(decode_rows: list[dict]) -> str:
    """How many greedy tokens of each executor equal eager's, from the first, and what the first
    difference is: a near-tie of eager's own logits (bf16 reorderings flip those) or a real gap."""
    judged = [r for r in decode_rows if r.get("tokens_match_eager") is not None and r["executor"] != "eager"]
    if not judged:
        return ""
    parts = []
    for r in judged:
        part = f"{r['executor']} {r['tokens_match_eager']} of {r['decode_tokens']}"
        if r.get("divergence_ulps") is not None:
            kind = (
                "an exact tie in eager's own logits"
                if r["divergence_ulps"] == 0
                else "a near-tie"
                if r["near_tie"]
                else "not a near-tie: check this executor's output"
            )
            margin = number(r["divergence_ulps"])
            part += f" (where they first differ, eager's margin between the two tokens is {margin} ulps: {kind})"
        parts.append(part)
    return f" Greedy tokens equal to eager's, from the first: {'; '.join(parts)}."


def first_call_text(depth_rows: list[dict]) -> str:
    """First call against depth per executor, each marked when a compile cache was hit during it, with a
    least-squares line over the cold ones where ``FIRST_CALL_FIT_DEPTHS`` or more depths were cold; a
    negative slope is flagged, never printed as a result."""
    parts = []
    for name in dict.fromkeys(r["executor"] for r in depth_rows):
        ran = [r for r in depth_rows if r["executor"] == name and r["first_call_s"] is not None]
        if not ran:
            continue
        cold = [r for r in ran if r["first_call_cache_hits"] == 0]
        text = f"{name} " + ", ".join(
            f"{number(r['first_call_s'])} s at {r['layers']}" + ("" if r in cold else " (compile cache hit)")
            for r in ran
        )
        if len({r["layers"] for r in cold}) >= FIRST_CALL_FIT_DEPTHS:
            line = fit_line([r["layers"] for r in cold], [r["first_call_s"] for r in cold])
            flag = negative_flag("the first call", line, "s")
            text += (
                f" ({flag})"
                if flag
                else (f" (cold compiles: {_line(line, 's')}, RMS residual {number(line['rms_residual'])} s)")
            )
        elif len(cold) < len(ran):
            text += (
                f" (no line: compile caches were hit, {len(cold)} cold of {len(ran)}, so a fit would be meaningless)"
            )
        parts.append(text)
    tokens = depth_rows[0]["tokens"] if depth_rows else "?"
    return (
        f"First call (trace + compile + run) of the prefill ({tokens} tokens) by layers: "
        + ("; ".join(parts) if parts else "none ran")
        + "."
    )


def not_ok_text(table: list[dict]) -> str | None:
    """The points that did not run fully, with their reasons (each reason once)."""
    bad = [r for r in table if r["status"] != "ok"]
    if not bad:
        return None
    reasons = dict.fromkeys(f"{r['executor']} at {_layers(r['layers'])}: {r['status']} ({r['reason']})" for r in bad)
    return f"{len(bad)} of {len(table)} points did not run fully: " + "; ".join(reasons) + "."


def findings(table: list[dict], fits: list[dict], timed: Rounds, params) -> list[str]:
    """Every depth's measured points, the depth fits, host vs kernel per layer, prefill by prompt
    length, decode, first calls, the host's drift and the points that did not run."""
    depth_rows = of(table, "depth")
    texts = [depth_text(depth_rows, n, timed) for n in params.depths]
    texts += [
        cost_text(fits, params.seq_len),
        host_kernel_text(fits, params.seq_len),
        prefill_text(of(table, "prompt"), timed),
        decode_text(of(table, "decode"), timed),
        first_call_text(depth_rows),
        harness.state_text(timed),
        not_ok_text(table),
    ]
    return [t for t in texts if t]


KEY_COLUMNS = [
    "executor",
    "step",
    "layers",
    "tokens",
    "prompt_tokens",
    "wall_ms",
    "host_ms",
    "host_per_ref_x",
    "kernel_ms",
    "kernels_per_step",
    "first_call_s",
    "tpot_ms",
    "tokens_per_s",
    "status",
    "reason",
]
POINT_COLUMNS = [
    "executor",
    "layers",
    "tokens",
    "status",
    "first_call_s",
    "first_call_cache_hits",
    "rel_err",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "host_ms",
    "kernel_ms",
    "kernels_per_step",
    "floor_ms",
    "floor_ratio_x",
    "held_allocated_mib",
    "held_reserved_mib",
    "reason",
    "notes",
]
DECODE_COLUMNS = [  # at one depth, which the table's caption names
    "executor",
    "prompt_tokens",
    "status",
    "first_call_s",
    "rel_err",
    "wall_ms",
    "wall_q1_ms",
    "wall_q3_ms",
    "host_ms",
    "kernel_ms",
    "kernels_per_step",
    "floor_ratio_x",
    "loop_ms",
    "tpot_ms",
    "tpot_q1_ms",
    "tpot_q3_ms",
    "tokens_per_s",
    "tokens_match_eager",
    "divergence_ulps",
    "near_tie",
    "held_reserved_mib",
    "reason",
    "notes",
]
FIT_COLUMNS = [
    "executor",
    "metric",
    "fixed_ms",
    "fixed_se_ms",
    "per_layer_ms",
    "per_layer_se_ms",
    "per_layer_lo_ms",
    "per_layer_hi_ms",
    "rms_residual_ms",
    "per_layer_per_ref_x",
    "per_layer_per_ref_lo_x",
    "per_layer_per_ref_hi_x",
    "depths",
    "flag",
    "reason",
]


def key_rows(table: list[dict]) -> list[dict]:
    """The run index's table: every measured point (prefill at every depth and prompt length, decode),
    per executor."""
    return [{c: r.get(c) for c in KEY_COLUMNS} for r in table]


def key_title(params) -> str:
    return (
        f"Prefill at {', '.join(map(str, params.depths))} layers ({params.seq_len} tokens) and at "
        f"{', '.join(map(str, params.prompt_lengths))} tokens ({_layers(params.layers)}); decode at "
        f"{_layers(params.layers)}: all timed in the same rounds"
    )


def depth_chart(depth_rows: list[dict], fits: list[dict]):
    """Time per call against depth per metric: the measured ok points (solid) beside the least-squares
    lines (dashed); None when no executor ran in the depth sweep."""
    import plotly.express as px

    lines = [
        {"executor": r["executor"], "layers": r["layers"], "ms": r[metric], "metric": metric, "kind": "measured"}
        for r in depth_rows
        if r["status"] == "ok"
        for metric in METRICS
        if r[metric] is not None
    ]
    lines += [{**p, "metric": metric, "kind": "fit"} for metric in METRICS for p in fitted_curve(fits, metric)]
    if not lines:
        return None
    return px.line(
        lines,
        x="layers",
        y="ms",
        color="executor",
        line_dash="kind",
        facet_col="metric",
        markers=True,
        log_x=True,
        log_y=True,
        title="Time per call against depth: measured and least-squares fit",
    )


def first_call_chart(depth_rows: list[dict]):
    """First call against depth, each point marked cold compile or compile cache hit; None when none ran."""
    import plotly.express as px

    ran = [
        {**r, "first call": "cold compile" if r["first_call_cache_hits"] == 0 else "compile cache hit"}
        for r in depth_rows
        if r["first_call_s"] is not None
    ]
    if not ran:
        return None
    return px.line(
        ran,
        x="layers",
        y="first_call_s",
        color="executor",
        symbol="first call",
        markers=True,
        log_x=True,
        log_y=True,
        labels={"first_call_s": "first call (s)"},
        title="First call (trace + compile + run) against depth",
    )


def floor_chart(depth_rows: list[dict]):
    """Wall over the memory-bandwidth floor against depth; None without a floor (it needs a GPU)."""
    import plotly.express as px

    floored = [r for r in depth_rows if r["floor_ratio_x"] is not None]
    if not floored:
        return None
    return px.line(
        floored,
        x="layers",
        y="floor_ratio_x",
        color="executor",
        markers=True,
        log_x=True,
        labels={"floor_ratio_x": "wall / bandwidth floor"},
        title="Wall time against the memory-bandwidth floor",
    )


def prefill_chart(prompt_rows: list[dict]):
    """Prefill wall against prompt length; None with fewer than two lengths measured."""
    import plotly.express as px

    ran = [r for r in prompt_rows if r["wall_ms"] is not None]
    if len({r["tokens"] for r in ran}) < 2:
        return None
    return px.line(
        ran,
        x="tokens",
        y="wall_ms",
        color="executor",
        markers=True,
        log_x=True,
        log_y=True,
        labels={"wall_ms": "wall (ms)", "tokens": "prompt tokens"},
        title="Prefill wall time against prompt length",
    )


def decode_chart(decode_rows: list[dict]):
    """Per executor the decode step beside the loop's time per output token; None when no loop ran."""
    import plotly.express as px

    ran = [r for r in decode_rows if r["tpot_ms"] is not None]
    if not ran:
        return None
    bars = [
        {"executor": r["executor"], "ms": r[key], "what": what}
        for r in ran
        for key, what in (("wall_ms", "decode step (same slot)"), ("tpot_ms", "per output token (loop)"))
    ]
    return px.bar(
        bars, x="executor", y="ms", color="what", barmode="group", title="Decode: one step and time per output token"
    )


@dataclass
class Result:
    """What notebook 06 shows and saves: every point and each sweep's rows, the depth fits, the key
    table, the findings, the elapsed times and the rounds."""

    params: Params
    env: dict
    bandwidth: float | None  # measured copy bandwidth (bytes/s) the floors use; None on a CPU
    points: list[dict]  # ``rows``: one per build
    depth_rows: list[dict]
    prompt_rows: list[dict]
    decode_rows: list[dict]
    fits: list[dict]  # ``depth_fits``
    fit_rows: list[dict]
    key_rows: list[dict]
    findings: list[str]
    elapsed: dict  # seconds: builds, rounds, total
    memory_after_release: dict
    timed: Rounds

    def save(self) -> Path:
        """The results file of notebook 06."""
        return results.save(
            self.params.output_dir,
            results.SCALING,
            self.params,
            self.env,
            results.key_table(key_title(self.params), self.key_rows, KEY_COLUMNS),
            findings=self.findings,
            points=self.points,
            fits=self.fits,
            fit_rows=self.fit_rows,
            elapsed_s=self.elapsed,
            memory_after_release=self.memory_after_release,
            **self.timed.sections(),
            bandwidth_measured_GBps=self.bandwidth / 1e9 if self.bandwidth else None,
        )


def run(params: Params) -> Result:
    """Notebook 06's study: the bandwidth measured once, every point of the three sweeps built, all timed
    in the same rounds, the builds released; the rows per sweep, the depth fits and the findings, the
    last of which says how long the builds, the rounds and the whole took."""
    harness.set_up(params)
    env = environment.collect(params.device)
    bandwidth = environment.measured_bandwidth(params.device)  # once; every point's floor uses it
    print(
        f"device {params.device} · executors {', '.join(params.executors)} · depths {list(params.depths)} · "
        f"prompt lengths {list(params.prompt_lengths)} · decode {params.decode_tokens} tokens · "
        f"warm-up {params.warmup}, {params.iters} calls per block, {2 * params.repeats} rounds · bandwidth for "
        "floors: " + (f"{bandwidth / 1e9:,.0f} GB/s (measured copy)" if bandwidth else "none (CPU)")
    )
    started = time.perf_counter()
    grid = sweeps(params, registry.selected(params.executors), bandwidth)
    built = sweep.build(list(grid.values()), params)
    elapsed = {"builds": time.perf_counter() - started}
    t0 = time.perf_counter()
    timed = sweep.time_all(built, params, probes(built, params))
    elapsed["rounds"] = time.perf_counter() - t0
    points = rows(grid, built, timed, params)
    memory_left = sweep.release(built, params.device)
    depth_rows = of(points, "depth")
    fits = depth_fits(depth_rows, timed)
    elapsed["total"] = time.perf_counter() - started
    said = findings(points, fits, timed, params)
    said.append(
        f"Sweeps took {elapsed['total']:.0f} s (builds {elapsed['builds']:.0f} s, rounds {elapsed['rounds']:.0f} s)."
    )
    return Result(
        params=params,
        env=env,
        bandwidth=bandwidth,
        points=points,
        depth_rows=depth_rows,
        prompt_rows=of(points, "prompt"),
        decode_rows=of(points, "decode"),
        fits=fits,
        fit_rows=fit_rows(fits),
        key_rows=key_rows(points),
        findings=said,
        elapsed=elapsed,
        memory_after_release=memory_left,
        timed=timed,
    )
